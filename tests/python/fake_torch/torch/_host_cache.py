"""PyTorch's host caching allocator in miniature (at::CachingHostAllocatorImpl, behind
pin_memory() and DataLoader(pin_memory=True)): a block is pinned once with cudaHostAlloc
(cuMemHostAlloc) and, when its tensor dies, kept for the next request of its size; nothing
goes back to the driver until empty_cache(), so what it holds at exit is its cache. The
class keeps PyTorch's name, which is what vramguard recognises in a stack (with
python_frames, the qualified name of this Python method)."""
import ctypes


class CachingHostAllocator:
    def __init__(self, cu):
        self.cu, self.cached = cu, {}

    def allocate(self, nbytes):
        if self.cached.get(nbytes):
            return self.cached[nbytes].pop()
        p = ctypes.c_void_p()
        r = self.cu.cuMemHostAlloc(ctypes.byref(p), ctypes.c_size_t(nbytes), 0)  # HOSTALLOC
        if r != 0:
            raise RuntimeError("cuMemHostAlloc failed: %d" % r)
        return p.value

    def free(self, ptr, nbytes):  # a pinned tensor died: its block is cached
        self.cached.setdefault(nbytes, []).append(ptr)
