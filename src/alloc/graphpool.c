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

#include "../../kernels/guard_abi.h"
#include "base/common.h"
#include "heap.h"
#include "hooks.h"
#include "../../include/vramguard.h"

/* ---------------------------------------------------------------------------------------
 * Guard mode: the redzones of a graph's allocations
 *
 * A graph's kernels write only the allocations its captures made (and memory from
 * outside the pool). So a byte of the pool that no allocation of any capture into it
 * ever had as its own is never written legitimately: a redzone made only of such bytes
 * is filled with the canary once no capture runs (guard.c) and checked at every check
 * point after the replays. An allocation that takes bytes of a recorded redzone as its
 * own ends that redzone's checks; a redzone that overlaps bytes some allocation had is
 * never recorded. Captures and their frees launch nothing (A7): this is how guard mode
 * still sees a captured kernel write past a tensor's end.
 * ------------------------------------------------------------------------------------- */

static bool used_overlaps(const vg_gpool_t *p, uint64_t lo, uint64_t hi) {
    size_t a = 0, b = p->nused; /* the first pair whose end is past lo */
    while (a < b) {
        size_t m = (a + b) / 2;
        if (p->used[2 * m + 1] <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a < p->nused && p->used[2 * a] < hi;
}

static bool used_add(vg_gpool_t *p, uint64_t lo, uint64_t hi) {
    size_t a = 0; /* pairs before a end before lo; from a on they may touch [lo, hi) */
    while (a < p->nused && p->used[2 * a + 1] < lo)
        a++;
    size_t b = a;
    while (b < p->nused && p->used[2 * b] <= hi) { /* merge every pair it touches */
        lo = VG_MIN(lo, p->used[2 * b]);
        hi = VG_MAX(hi, p->used[2 * b + 1]);
        b++;
    }
    if (a == b && p->nused == p->capused) {
        size_t cap = p->capused ? 2 * p->capused : 64;
        uint64_t *u = realloc(p->used, 2 * cap * sizeof *u);
        if (!u)
            return false;
        p->used = u;
        p->capused = cap;
    }
    size_t keep = p->nused - b; /* pairs after the merged ones */
    memmove(&p->used[2 * (a + 1)], &p->used[2 * b], 2 * keep * sizeof *p->used);
    p->used[2 * a] = lo;
    p->used[2 * a + 1] = hi;
    p->nused = a + 1 + keep;
    return true;
}

static void rz_add(vg_gpool_t *p, const vg_block_t *b, uint64_t lo, uint64_t hi, uint8_t side,
                   uint64_t seq) {
    if (hi <= lo || used_overlaps(p, lo, hi))
        return;
    if (p->nrz == p->caprz) {
        size_t cap = p->caprz ? 2 * p->caprz : 64;
        vg_gpool_rz_t *r = realloc(p->rz, cap * sizeof *r);
        if (!r)
            return; /* (no memory: that redzone is not checked) */
        p->rz = r;
        p->caprz = cap;
    }
    p->rz[p->nrz++] = (vg_gpool_rz_t){lo, hi, b->user, b->requested, b->id, seq,
                                      b->stream ? b->stream->handle : NULL, b->site, side,
                                      VG_RZ_NEW};
}

void vg__gpool_guard_note(const vg_block_t *b, uint64_t seq) {
    vg_gpool_t *p = b->gpool;
    uint64_t lo = b->user, hi = b->user + b->requested;
    size_t n = 0; /* end the redzones it takes as its own, and drop the ended ones */
    for (size_t i = 0; i < p->nrz; i++)
        if (p->rz[i].state != VG_RZ_DEAD && (p->rz[i].hi <= lo || p->rz[i].lo >= hi))
            p->rz[n++] = p->rz[i];
    p->nrz = n;
    if (!used_add(p, lo, hi == lo ? lo + 1 : hi)) {
        for (size_t i = 0; i < p->nrz; i++) /* (no memory to remember: stop checking) */
            p->rz[i].state = VG_RZ_DEAD;
        return;
    }
    rz_add(p, b, b->addr, b->user, VG_RANGE_LEFT, seq);
    rz_add(p, b, hi, b->addr + b->size, VG_RANGE_RIGHT, seq);
}

vg_gpool_rz_t *vg__gpool_rz_find(vg_heap_t *h, uint64_t id, uint64_t addr) {
    for (vg_gpool_t *p = h->gpools; p; p = p->next)
        for (size_t i = 0; i < p->nrz; i++)
            if (p->rz[i].id == id && p->rz[i].lo == addr)
                return &p->rz[i];
    return NULL;
}

static vg_gpool_t *find(vg_heap_t *h, const uint64_t id[2]) {
    for (vg_gpool_t *p = h->gpools; p; p = p->next)
        if (p->id[0] == id[0] && p->id[1] == id[1])
            return p;
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
    vg__guard_hook_graph_fill(h); /* (guard mode: before the first replay) */
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
    vg__tell_pool_released(h, p); /* (compute-sanitizer: no replay runs now, G12) */
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next) {
        for (vg_block_t *b = seg->first, *next; b; b = next) {
            next = b->next;
            if (b->gpool != p)
                continue;
            vg__guard_hook_unpooled(h, b); /* (memcheck: its shadow is its own again) */
            if (b->state == VG_BLOCK_POOLED) {
                next = vg__heap_unpool(h, b)->next; /* (b may be merged away) */
            } else {
                b->gpool = NULL; /* live: general memory once freed */
                vg__tell_region_added(h, b); /* (its own region again) */
                vg__tell_region_named(h, b);
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
    free(p->used);
    free(p->rz);
    free(p);
}

void vg__gpool_totals(const vg_heap_t *h, uint64_t *pooled, uint64_t *owned) {
    *pooled = *owned = 0;
    for (const vg_gpool_t *p = h->gpools; p; p = p->next) {
        *pooled += p->index->bytes;
        *owned += p->bytes;
    }
}
