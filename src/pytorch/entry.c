/* entry.c — the C entry points PyTorch's pluggable allocator calls (python/vramguard).
 *
 * torch.cuda.memory.CUDAPluggableAllocator(path, "vg_torch_alloc", "vg_torch_free") loads
 * libvramguard.so with dlopen and calls, for every tensor:
 *     void *alloc(size_t size, int device, cudaStream_t stream)
 *     void free(void *ptr, size_t size, int device, cudaStream_t stream)
 * The optional hooks have PyTorch's signatures too (set_init_fn, set_reset_fn for
 * empty_cache, set_memory_fraction_fn, set_record_stream_fn, set_begin_allocate_to_pool);
 * the Python package wires the ones PyTorch's Python API does not reach through ctypes.
 *
 * PyTorch turns a NULL from alloc into its out-of-memory error; the explanation is kept
 * (vg_torch_last_oom) so the package can raise torch.cuda.OutOfMemoryError with it.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <pthread.h>

#include "../core/common.h"
#include "../core/init.h"
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

/* PyTorch's CUDA graph capture begins (set_begin_allocate_to_pool, PyTorch 2.3+; called
 * as void(int device, MempoolId_t pool, std::function<bool(cudaStream_t)> filter): the
 * pair of ids arrives as two 64-bit integers, the function object by address, destroyed
 * by the caller). PyTorch's own allocator keeps the memory a graph uses in a private pool
 * for as long as the graph may replay; vramguard has no such pools yet, so memory freed
 * after capture could be handed to other tensors while the graph still writes it. Say so,
 * once, rather than let it pass silently. */
VG_API void vg_torch_begin_allocate_to_pool(int device, uint64_t pool_a, uint64_t pool_b,
                                            void *filter) {
    (void)pool_a, (void)pool_b, (void)filter;
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (vg__ensure_init() != VG_OK || atomic_flag_test_and_set(&said))
        return;
    vg__log("WARNING: a CUDA graph is being captured on device %d, and vramguard does not keep "
            "a graph's memory apart yet: memory the graph uses may be given to other tensors "
            "while it can still replay, and its results then overwrite them. Run this program "
            "without vramguard, or without CUDA graphs (torch.cuda.graph, torch.compile's "
            "\"reduce-overhead\" mode).",
            device);
}

VG_API size_t vg_torch_last_oom(char *out, size_t n) {
    pthread_mutex_lock(&g_oom_lock);
    size_t len = strlen(g_last_oom);
    if (out && n)
        snprintf(out, n, "%s", g_last_oom);
    pthread_mutex_unlock(&g_oom_lock);
    return len;
}
