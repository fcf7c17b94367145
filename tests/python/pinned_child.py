"""Child of test_package.Pinned, run under `python -m vramguard run --mode=guard`: pinned
host memory through a PyTorch-style host cache (tests/python/fake_torch/torch/_host_cache.py,
as pin_memory() uses PyTorch's). argv[1]:
  "cache"   a loader pins a batch per step through the cache and lets it go, and one buffer
            is pinned directly and never freed: at exit the cache's blocks are its cache,
            the buffer a leak (leaks=auto);
  "cache_c" the same, the cache's blocks pinned by its entry point in C (FAKE_HOST_CACHE:
            fake_host_cache.c, as PyTorch's is in libtorch): this script's lines do not name
            the cache, the C frames at the pinning call do;
  "leak"    the loop keeps every step's pinned batch (history.append(batch)): the cache
            grows at each optimizer step, reported as growth at the loop's line."""
import ctypes
import os
import sys

import torch  # (tests/python/fake_torch)
from torch._host_cache import CachingHostAllocator

cu = ctypes.CDLL("libcuda.so.1")  # (vgsim, through vramguard run --sim)
cu.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
if (cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or
        cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cu.cuCtxSetCurrent(ctx)):
    sys.exit("no context")


def pin_with_driver(nbytes):  # cudaHostAlloc
    p = ctypes.c_void_p()
    if cu.cuMemHostAlloc(ctypes.byref(p), nbytes, 0) != 0:  # HOSTALLOC
        sys.exit("cuMemHostAlloc failed")
    return p.value


if sys.argv[1] == "cache_c":
    c_cache = ctypes.CDLL(os.environ["FAKE_HOST_CACHE"])
    c_cache.fake_CachingHostAllocator_allocate.restype = ctypes.c_void_p
    c_cache.fake_CachingHostAllocator_allocate.argtypes = [ctypes.c_size_t]
    pin = c_cache.fake_CachingHostAllocator_allocate
    blocks = {}  # (its cached blocks, by size: reused at each step)
    take = lambda n: blocks.pop(n, None) or pin(n)  # noqa: E731
    give = blocks.__setitem__
else:
    cache = CachingHostAllocator(pin_with_driver)
    take, give = cache.allocate, lambda n, p: cache.free(p, n)
opt, kept = torch.optim.Optimizer(), []
BATCH = 1 << 20
for step in range(8):
    batch = take(BATCH)  # BATCH
    if sys.argv[1] == "leak":
        kept.append(batch)  # the bug: every batch stays alive
    else:
        give(BATCH, batch)
    opt.step()
if sys.argv[1].startswith("cache"):
    pin_with_driver(3 << 20)  # STRAY: pinned and never freed
print("steps", step + 1)
import vramguard  # noqa: E402 (python -m vramguard run enabled it)
st = vramguard.host_memory_stats()
print("pinned", st["allocated_bytes.current"], "in", st["allocations.current"], "after",
      st["num_host_alloc"], "calls, peak", st["allocated_bytes.peak"])
