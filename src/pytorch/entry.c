/* entry.c — the C entry points PyTorch's pluggable allocator calls (python/vramguard).
 *
 * torch.cuda.memory.CUDAPluggableAllocator(path, "vg_torch_alloc", "vg_torch_free") loads
 * libvramguard.so with dlopen and calls, for every tensor:
 *     void *alloc(size_t size, int device, cudaStream_t stream)
 *     void free(void *ptr, size_t size, int device, cudaStream_t stream)
 * The optional hooks have PyTorch's signatures too (set_init_fn, set_reset_fn for
 * empty_cache, set_memory_fraction_fn, set_record_stream_fn, and the CUDA graph hooks);
 * the Python package wires the ones PyTorch's Python API does not reach through ctypes.
 *
 * PyTorch turns a NULL from alloc into its out-of-memory error; the explanation is kept
 * (vg_torch_last_oom) so the package can raise torch.cuda.OutOfMemoryError with it.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <pthread.h>

#include "base/common.h"
#include "alloc/heap.h"
#include "api/init.h"
#include "vramguard.h"

static char g_last_oom[4096]; /* the last out-of-memory explanation (any thread) */
static pthread_mutex_t g_oom_lock = PTHREAD_MUTEX_INITIALIZER;

VG_API void *vg_torch_alloc(size_t size, int device, void *stream) {
    void *p = NULL;
    if (size == 0)
        size = 1; /* PyTorch asks for 0-byte tensors; they still need a unique pointer */
    vg_status_t st = vg_malloc_device(&p, size, device, stream);
    if (st != VG_OK) {
        pthread_mutex_lock(&g_oom_lock);
        snprintf(g_last_oom, sizeof g_last_oom, "%s", vg_last_error());
        pthread_mutex_unlock(&g_oom_lock);
        return NULL;
    }
    return p;
}

VG_API void vg_torch_free(void *ptr, size_t size, int device, void *stream) {
    (void)size; /* vramguard knows the size; a mismatch would be PyTorch's bug, not the user's */
    if (ptr)
        vg_free_device(ptr, device, stream);
}

VG_API void vg_torch_init(int device_count) {
    (void)device_count; /* heaps are created per device on first use */
    vg__ensure_init();
}

VG_API void vg_torch_empty_cache(void) { vg_empty_cache(); }

VG_API void vg_torch_set_memory_fraction(double fraction, int device) {
    if (!(fraction > 0.0 && fraction <= 1.0) || vg__ensure_init() != VG_OK)
        return;
    vg_stats_t s = {.size = sizeof s};
    if (vg_get_stats(device, &s) == VG_OK && s.device_total)
        vg_set_memory_limit(device, (size_t)((double)s.device_total * fraction));
}

VG_API void vg_torch_record_stream(void *ptr, void *stream) {
    if (ptr)
        vg_record_stream(ptr, stream);
}

/* PyTorch's CUDA graph hooks (PyTorch 2.3+; docs/decisions.md A7). PyTorch calls them
 * through function pointers of C++ types: begin as void(int device, MempoolId_t pool,
 * std::function<bool(cudaStream_t)> filter), the others as void(int, MempoolId_t). The
 * pool id, a pair of 64-bit integers, arrives in two registers, and the function object by
 * address (destroyed by the caller when begin returns). libvramguard_torch.so's begin
 * keeps a copy of the filter (C++); this C one, for builds without a C++ compiler, routes
 * the requests made on any stream being captured instead. */
/* The filter made C-callable (libvramguard_torch.so), or NULL. */
VG_API void vg_torch_pool_begin(int device, uint64_t pool_a, uint64_t pool_b,
                                vg_gpool_filter_fn filter, void *arg, void (*drop)(void *)) {
    const uint64_t id[2] = {pool_a, pool_b};
    if (vg__graph_pool_begin(device, id, filter, arg, drop) != VG_OK)
        vg__log("CUDA graph capture on device %d: %s; its memory is not kept apart from "
                "other tensors",
                device, vg_last_error());
}

VG_API void vg_torch_begin_allocate_to_pool(int device, uint64_t pool_a, uint64_t pool_b,
                                            void *filter) {
    (void)filter; /* (a C++ object this C function cannot keep) */
    vg_torch_pool_begin(device, pool_a, pool_b, NULL, NULL, NULL);
}

VG_API void vg_torch_end_allocate_to_pool(int device, uint64_t pool_a, uint64_t pool_b) {
    const uint64_t id[2] = {pool_a, pool_b};
    vg__graph_pool_end(device, id, false);
}

VG_API void vg_torch_release_pool(int device, uint64_t pool_a, uint64_t pool_b) {
    const uint64_t id[2] = {pool_a, pool_b};
    vg__graph_pool_end(device, id, true);
}

VG_API size_t vg_torch_last_oom(char *out, size_t n) {
    pthread_mutex_lock(&g_oom_lock);
    size_t len = strlen(g_last_oom);
    if (out && n)
        snprintf(out, n, "%s", g_last_oom);
    pthread_mutex_unlock(&g_oom_lock);
    return len;
}
