/* fake_host_cache.c — a host caching allocator's entry point in C, as PyTorch's is in
 * libtorch_cuda.so (at::CachingHostAllocatorImpl<...>::allocate, a template whose
 * instances the library exports). Its exported name holds "CachingHostAllocator" as those
 * do: with sites made of Python lines, vramguard tells a cache's pinned blocks by the C
 * frames at the pinning call (tests/python/pinned_child.py "cache_c"). It pins with the
 * driver's cuMemHostAlloc, found as the CUDA runtime finds it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int (*hostalloc_t)(void **, size_t, unsigned);

__attribute__((visibility("default"), noinline)) void *
fake_CachingHostAllocator_allocate(size_t nbytes) {
    hostalloc_t f = (hostalloc_t)dlsym(RTLD_DEFAULT, "cuMemHostAlloc");
    void *p = NULL;
    int r = f ? f(&p, nbytes, 0) : -1;
    __asm__ volatile("" ::: "memory"); /* (not a tail call: this frame must show) */
    return r == 0 ? p : NULL;
}
