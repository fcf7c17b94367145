/* graphpool.c — memory of CUDA graphs (docs/decisions.md A7).
 *
 * A graph captured from a stream replays the captured kernels with the addresses they
 * had at capture time, whenever the program launches it. So the memory a capture took
 * belongs to the graph until the graph is destroyed, even once the capture freed it: a
 * caching allocator that gave it to another tensor would have the next replay write
 * over that tensor. PyTorch's allocator keeps such memory in "private pools"; vramguard
 * does the same, through the hooks PyTorch calls around a capture (begin/end allocate to
 * pool, release pool) or the C API (vg_graph_pool_begin/end/release):
 *
 *  - between begin and end, a request on a stream the capture's filter accepts (by
 *    default: a stream being captured) is served from the pool's freed blocks, or else
 *    from general memory, which then joins the pool;
 *  - a pool's block, freed, stays in the pool (POOLED) and serves only the pool's later
 *    requests, on the same stream or once its freeing stream has completed, as any free
 *    block; captures sharing a pool (PyTorch's graph_pool_handle) reuse each other's;
 *  - release, once every capture into the pool has released it, waits for the device
 *    (a replay may still run) and returns the pool's free blocks to general memory; its
 *    live blocks join general memory when they are freed.
 *
 * Pools never own segments or pages: the page scavenger and the cache trim see only
 * general free blocks, so a pool's memory stays mapped for as long as it lives.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "heap.h"
#include "init.h"
#include "vramguard.h"

static vg_gpool_t *find(vg_heap_t *h, const uint64_t id[2]) {
    for (vg_gpool_t *p = h->gpools; p; p = p->next)
        if (p->id[0] == id[0] && p->id[1] == id[1])
            return p;
    return NULL;
}

vg_gpool_t *vg__gpool_route(vg_heap_t *h, CUstream stream) {
    for (int i = 0; i < h->nroutes; i++) {
        const vg_gpool_route_t *r = &h->routes[i];
        if (r->filter ? r->filter((void *)stream, r->arg) != 0 : vg__stream_capturing(stream))
            return r->pool;
    }
    return NULL;
}

vg_status_t vg__gpool_begin(vg_heap_t *h, const uint64_t id[2], vg_gpool_filter_fn filter,
                            void *arg, void (*drop)(void *)) {
    if (h->nroutes == VG_GPOOL_ROUTES)
        return vg__error(VG_ERR_NOT_SUPPORTED,
                         "more than %d CUDA graph captures at once on device %d",
                         VG_GPOOL_ROUTES, h->device);
    vg_gpool_t *p = find(h, id);
    if (!p) {
        p = calloc(1, sizeof *p);
        vg_tlsf_t *index = calloc(1, sizeof *index);
        if (!p || !index) {
            free(p);
            free(index);
            return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for a graph pool");
        }
        memcpy(p->id, id, sizeof p->id);
        p->index = index;
        p->next = h->gpools;
        h->gpools = p;
    }
    p->uses++;
    p->release_pending = false;
    vg__captures_seen_set();
    h->routes[h->nroutes++] = (vg_gpool_route_t){p, filter, arg, drop};
    atomic_fetch_add(&vg__gpool_routes_open, 1);
    return VG_OK;
}

static void release_now(vg_heap_t *h, vg_gpool_t *p);

void vg__gpool_end(vg_heap_t *h, const uint64_t id[2]) {
    for (int i = 0; i < h->nroutes; i++) {
        vg_gpool_route_t r = h->routes[i];
        if (r.pool->id[0] != id[0] || r.pool->id[1] != id[1])
            continue;
        memmove(&h->routes[i], &h->routes[i + 1], (size_t)(h->nroutes - i - 1) * sizeof r);
        h->nroutes--;
        atomic_fetch_sub(&vg__gpool_routes_open, 1);
        if (r.drop)
            r.drop(r.arg);
        break;
    }
    if (vg__heap_capturing(h))
        return;
    for (vg_gpool_t *p = h->gpools, *next; p; p = next) { /* releases that had to wait */
        next = p->next;
        if (p->release_pending)
            release_now(h, p);
    }
}

void vg__gpool_release(vg_heap_t *h, const uint64_t id[2]) {
    vg_gpool_t *p = find(h, id);
    if (!p || --p->uses > 0)
        return;
    if (vg__heap_capturing(h)) { /* waiting for the device now would break the capture */
        p->release_pending = true;
        return;
    }
    release_now(h, p);
}

/* The last graph using p is gone (no capture runs): after the device's work (a replay
 * launched before the graph was destroyed may still run), p's memory is general again. */
static void release_now(vg_heap_t *h, vg_gpool_t *p) {
    bool pushed = vg__heap_ctx_enter(h);
    bool synced = vg__cuCtxSynchronize() == CUDA_SUCCESS;
    vg__heap_ctx_leave(pushed);
    if (!synced) { /* the context failed: the pool keeps its memory (nothing runs now) */
        p->release_pending = false;
        return;
    }
    vg__heap_all_synced(h);
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next) {
        for (vg_block_t *b = seg->first, *next; b; b = next) {
            next = b->next;
            if (b->gpool != p)
                continue;
            if (b->state == VG_BLOCK_POOLED) {
                next = vg__heap_unpool(h, b)->next; /* (b may be merged away) */
            } else {
                b->gpool = NULL; /* live: general memory once freed */
            }
        }
    }
    for (vg_gpool_t **pp = &h->gpools; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p->index);
    free(p);
}

void vg__gpool_totals(const vg_heap_t *h, uint64_t *pooled, uint64_t *owned) {
    *pooled = *owned = 0;
    for (const vg_gpool_t *p = h->gpools; p; p = p->next) {
        *pooled += p->index->bytes;
        *owned += p->bytes;
    }
}

/* ---------------------------------------------------------------------------------------
 * The C API (vramguard.h), and PyTorch's hooks (src/pytorch)
 * ------------------------------------------------------------------------------------- */

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
