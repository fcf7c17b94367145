"""Child of test_package.Pinned, run under `python -m vramguard run --mode=guard`: pinned
host memory through a PyTorch-style host cache (tests/python/fake_torch/torch/_host_cache.py,
as pin_memory() uses PyTorch's). argv[1]:
  "cache"  a loader pins a batch per step through the cache and lets it go, and one buffer
           is pinned directly and never freed: at exit the cache's blocks are its cache, the
           buffer a leak (leaks=auto);
  "leak"   the loop keeps every step's pinned batch (history.append(batch)): the cache grows
           at each optimizer step, reported as growth at the loop's line."""
import ctypes
import sys

import torch  # (tests/python/fake_torch)
from torch._host_cache import CachingHostAllocator

cu = ctypes.CDLL("libcuda.so.1")  # (vgsim, through vramguard run --sim)
cu.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
if (cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or
        cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cu.cuCtxSetCurrent(ctx)):
    sys.exit("no context")
cache = CachingHostAllocator(cu)
opt, kept = torch.optim.Optimizer(), []
BATCH = 1 << 20
for step in range(8):
    batch = cache.allocate(BATCH)  # BATCH
    if sys.argv[1] == "leak":
        kept.append(batch)  # the bug: every batch stays alive
    else:
        cache.free(batch, BATCH)
    opt.step()
if sys.argv[1] == "cache":
    stray = ctypes.c_void_p()
    if cu.cuMemHostAlloc(ctypes.byref(stray), 3 << 20, 0) != 0:  # STRAY
        sys.exit("cuMemHostAlloc failed")
print("steps", step + 1)
import vramguard  # noqa: E402 (python -m vramguard run enabled it)
st = vramguard.host_memory_stats()
print("pinned", st["allocated_bytes.current"], "in", st["allocations.current"], "after",
      st["num_host_alloc"], "calls, peak", st["allocated_bytes.peak"])
