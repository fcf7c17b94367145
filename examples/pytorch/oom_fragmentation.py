"""S6 in PyTorch: out of memory on a 15 GB device, with memory free but in pieces.

Run it as a 15 GB cloud GPU would behave:
    python -m vramguard run --limit=15G examples/pytorch/oom_fragmentation.py
Blocks of alternating sizes fill the device; every other one is freed; then a request
larger than any hole arrives. PyTorch's allocator fails with "reserved but unallocated"
memory; vramguard's virtual-memory segments serve it from the scattered pages, and when
memory is really exhausted it explains why. With --fixed, the big tensor is allocated
first."""
import sys

import torch

big_first = "--fixed" in sys.argv
keep, drop = [], []
if big_first:
    big = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
try:
    for i in range(200):
        t = torch.empty((96 if i % 2 else 32) << 20, dtype=torch.uint8, device="cuda")
        (drop if i % 2 else keep).append(t)
except torch.cuda.OutOfMemoryError:
    pass
drop.clear()  # half the memory is free again, in 96 MiB holes
if not big_first:
    big = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")  # 3 GiB: no hole is that large
print("allocated the 3 GiB tensor; kept", len(keep), "blocks")
