"""S6 in PyTorch: out of memory on a 15 GB device, with memory free but in pieces.

Run it as a 15 GB cloud GPU would behave:
    python -m vramguard run --limit=15G examples/pytorch/oom_fragmentation.py
(without vramguard the script limits PyTorch's allocator to 15 GiB itself, with
torch.cuda.set_per_process_memory_fraction). 8 MiB tensors fill the device; every other
one is freed, so half the memory is free again, in 8 MiB holes; then a 3 GiB tensor is
asked for. PyTorch's allocator packs two 8 MiB tensors per 20 MiB segment, so no segment
can be released and the request fails with gigabytes "reserved but unallocated";
vramguard's virtual-memory segments can map the free pages into one range, and when
memory is really exhausted it explains why. With --fixed, the big tensor is allocated
first."""
import sys

import torch

try:
    import vramguard
    under_vramguard = vramguard.enabled()
except ImportError:
    under_vramguard = False

LIMIT = 15 << 30
if not under_vramguard:
    torch.cuda.set_per_process_memory_fraction(LIMIT / torch.cuda.mem_get_info()[1])
big_first = "--fixed" in sys.argv
keep, drop = [], []
if big_first:
    big = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
try:
    for i in range(LIMIT >> 23):
        t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
        (drop if i % 2 else keep).append(t)
except RuntimeError:  # torch.cuda.OutOfMemoryError (a pluggable allocator's is a RuntimeError)
    pass
drop.clear()  # half the memory is free again, in 8 MiB holes
print("filled the device with %d tensors of 8 MiB; freed every other one" % (2 * len(keep)))
if not big_first:
    big = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")  # 3 GiB: no hole is that large
print("allocated the 3 GiB tensor; kept", len(keep), "blocks")
