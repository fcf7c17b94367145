"""How long `tensor.to("cuda", non_blocking=True)` takes behind a long kernel, and whether the
copy was still in flight when the host wrote its pinned source (nonblocking_h2d_modify.py,
timed). Under a tool that makes the call wait for the device, the race the script plants
never happens. Run plain, and under `vramguard run --mode=fast|guard -- python3 THIS`
(docs/gpu-validation.md, 2026-11-24). With --warm, a first CUDA allocation is made (and
freed to PyTorch's cache) before the long kernel, so that whatever a tool does at its first
allocation is over before the timed call."""
import sys
import time

import torch

src = torch.ones(1 << 22).pin_memory()
if "--warm" in sys.argv:
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
torch.cuda._sleep(100_000_000)  # the stream is busy (about 50 ms on an H100)
t0 = time.perf_counter()
dev = src.to("cuda", non_blocking=True)
t1 = time.perf_counter()
busy = not torch.cuda.current_stream().query()
src.fill_(2.0)
t2 = time.perf_counter()
print("copy call %.3f ms, stream busy before the write: %s, fill %.3f ms, device sum %s"
      % ((t1 - t0) * 1e3, busy, (t2 - t1) * 1e3, dev.sum().item()))
