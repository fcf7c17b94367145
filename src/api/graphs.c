/* graphs.c — CUDA graphs' memory pools through the C API (vramguard.h) and PyTorch's
 * hooks (src/pytorch): the heap found and locked, then the allocator's graph pools
 * (alloc/graphpool.c, docs/decisions.md A7). */
#include <pthread.h>

#include "alloc/heap.h"
#include "base/common.h"
#include "init.h"
#include "../../include/vramguard.h"

static vg_status_t locked_heap(int device, vg_heap_t **h) {
    vg_status_t st = vg__ensure_init();
    if (st == VG_OK)
        st = device < 0 ? vg__heap_current(h) : vg__heap_for_device(device, h);
    if (st == VG_OK)
        pthread_mutex_lock(&(*h)->lock);
    return st;
}

vg_status_t vg__graph_pool_begin(int device, const uint64_t id[2], vg_graph_filter_fn filter,
                                 void *arg, void (*drop)(void *)) {
    vg_heap_t *h;
    vg_status_t st = locked_heap(device, &h);
    if (st != VG_OK) {
        if (drop)
            drop(arg);
        return st;
    }
    st = vg__gpool_begin(h, id, filter, arg, drop);
    pthread_mutex_unlock(&h->lock);
    if (st != VG_OK && drop)
        drop(arg);
    return st;
}

vg_status_t vg__graph_pool_end(int device, const uint64_t id[2], bool release) {
    vg_heap_t *h;
    vg_status_t st = locked_heap(device, &h);
    if (st != VG_OK)
        return st;
    if (release)
        vg__gpool_release(h, id);
    else
        vg__gpool_end(h, id);
    pthread_mutex_unlock(&h->lock);
    return VG_OK;
}

VG_API vg_status_t vg_graph_pool_begin(int device, uint64_t pool, vg_graph_filter_fn filter,
                                       void *arg) {
    if (pool == 0)
        return vg__error(VG_ERR_INVALID_ARGUMENT, "vg_graph_pool_begin: pool 0 is not a pool");
    const uint64_t id[2] = {0, pool};
    return vg__graph_pool_begin(device, id, filter, arg, NULL);
}

VG_API vg_status_t vg_graph_pool_end(int device, uint64_t pool) {
    const uint64_t id[2] = {0, pool};
    return vg__graph_pool_end(device, id, false);
}

VG_API vg_status_t vg_graph_pool_release(int device, uint64_t pool) {
    const uint64_t id[2] = {0, pool};
    return vg__graph_pool_end(device, id, true);
}
