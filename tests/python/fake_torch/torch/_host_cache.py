"""PyTorch's host caching allocator in miniature (at::CachingHostAllocatorImpl, behind
pin_memory() and DataLoader(pin_memory=True)): a block is pinned once (cudaHostAlloc) and,
when its tensor dies, kept for the next request of its size; nothing goes back to the
driver until empty_cache(), so what it holds at exit is its cache. The class keeps
PyTorch's name, which is what vramguard recognises in a stack (with python_frames, the
qualified name of this Python method). `pin(nbytes)` pins a block and returns its address."""


class CachingHostAllocator:
    def __init__(self, pin):
        self.pin, self.cached = pin, {}

    def allocate(self, nbytes):
        if self.cached.get(nbytes):
            return self.cached[nbytes].pop()
        return self.pin(nbytes)

    def free(self, ptr, nbytes):  # a pinned tensor died: its block is cached
        self.cached.setdefault(nbytes, []).append(ptr)
