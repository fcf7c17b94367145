"""S11 in PyTorch: pinned host memory that grows every step.

A DataLoader with pin_memory=True stages every batch in pinned memory (PyTorch's host
caching allocator: a batch's block is reused for the next batch of its size, so that is
its cache, not a leak). The bug: each step also pins a host copy of the model's output
(an offload buffer, torch.empty(..., pin_memory=True)) and keeps it in a list, so 4 MiB
of page-locked host RAM more stays pinned at every step. The script knows nothing of
vramguard: under `python -m vramguard run --mode=guard` each optimizer step marks a
training step, and after growth_steps steps of growth the Python line that pinned the
buffers is reported as pinned host memory that grows every step; `--verbose` adds the
peak pinned memory at exit. With --fixed, one offload buffer is reused."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(4096, 1024), torch.randint(0, 10, (4096,)))
loader = DataLoader(data, batch_size=256, pin_memory=True)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU()).cuda()
head = torch.nn.Linear(4096, 10).cuda()
opt = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.01)
offloaded, reused = [], None
for step, (x, y) in enumerate(loader):
    x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    h = model(x)
    loss = torch.nn.functional.cross_entropy(head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if "--fixed" in sys.argv:
        reused = reused if reused is not None else torch.empty(h.shape, pin_memory=True)
        reused.copy_(h.detach(), non_blocking=True)
    else:
        buf = torch.empty(h.shape, pin_memory=True)  # PINNED: the bug, one buffer per step
        buf.copy_(h.detach(), non_blocking=True)
        offloaded.append(buf)  # kept
torch.cuda.synchronize()
print("steps", step + 1, "pinned buffers kept", len(offloaded))
