"""S5 in PyTorch: tensors kept in a list inside a training loop.

The loss tensor (with its graph) is appended to a list every step instead of
loss.item(), so memory grows each step. The script knows nothing of vramguard: under
`python -m vramguard run --mode=guard` each optimizer step marks a training step
(vramguard.step() does it by hand), and after growth_steps steps of growth the site is
reported. With --fixed, loss.item() is kept."""
import sys

import torch

model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
for step in range(20):
    x = torch.randn(256, 1024, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    history.append(loss.item() if "--fixed" in sys.argv else loss)  # the bug: keeps the tensor
print("steps", len(history))
