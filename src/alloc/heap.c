/* heap.c — the allocator: one heap per device context (docs/decisions.md A1, A2).
 *
 * Allocation (lock held): round the size up to 512 bytes; take the tightest block the
 * stream may use from the free index; if it is fully mapped (the usual case), split it
 * and return: no driver call, O(1). Otherwise the slow path:
 *   1. if other streams have frees not yet known complete (or blocks wait on the deferred
 *      list), learn which have completed (query or record one event per such stream, no
 *      waiting) and search again: what they freed may serve the request without new
 *      memory;
 *   2. map the pages the block lacks (spare, idle or new pages: segment.c), or grow (new
 *      VMM reservation or cuMemAlloc segment) if nothing fits;
 *   3. on failure: count a retry, wait for every stream's freed blocks, release the
 *      cache, try once more; then fail with VG_ERR_OUT_OF_MEMORY and an explanation.
 * Nothing allocated is touched by a failed request.
 *
 * Free (lock held): stamp the block with the freeing stream and its epoch, merge it with
 * free neighbours whose tags allow it, and insert it in the index. Blocks that other
 * streams used (record_stream) wait on the deferred list until those streams pass the
 * free; guard mode holds blocks in quarantine first (guard.c).
 *
 * Stream epochs: a free on stream S is stamped with S.epoch. Recording an event on S
 * ends the epoch (S.epoch++); when that event completes, every free stamped before it is
 * complete (S.done). A synchronisation observed by vramguard completes S at once.
 */
#define _GNU_SOURCE
#include "heap.h"
#include "hooks.h"
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/options.h"

/* An allocation failed: the layer above explains it (diag/oom.c), or it is said plainly. */
static void explain_oom(vg_heap_t *h, uint64_t requested, uint64_t size,
                                 CUstream stream) {
    if (vg__alloc_hooks.explain_oom)
        vg__alloc_hooks.explain_oom(h, requested, size, stream);
    else
        vg__error(VG_ERR_OUT_OF_MEMORY, "out of memory: cannot allocate %llu bytes on device %d",
                  (unsigned long long)requested, h->device);
}

/* ---------------------------------------------------------------------------------------
 * Streams
 * ------------------------------------------------------------------------------------- */

static VG_TLS_FAST vg_heap_t *t_stream_heap;
static VG_TLS_FAST uintptr_t t_stream_key = ~(uintptr_t)0;
static VG_TLS_FAST vg_stream_t *t_stream;

static vg_stream_t *stream_lookup(vg_heap_t *h, uintptr_t key, bool create, CUstream handle) {
    if (h == t_stream_heap && key == t_stream_key)
        return t_stream;
    vg_stream_t *s = h->streams;
    while (s && (s->key != key || s->forgotten))
        s = s->next;
    if (!s && create) {
        s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        s->handle = handle == CU_STREAM_LEGACY || handle == VG_STREAM_SYNC ? NULL : handle;
        s->key = key;
        s->epoch = 1;
        s->next = h->streams;
        h->streams = s;
        h->streams_seen++;
    }
    if (s) {
        t_stream_heap = h;
        t_stream_key = key;
        t_stream = s;
    }
    return s;
}

vg_stream_t *vg__heap_stream(vg_heap_t *h, CUstream handle) {
    return stream_lookup(h, vg__stream_key(handle), true, handle);
}

CUstream vg__stream_handle_here(const vg_stream_t *s) {
    if (s->handle == CU_STREAM_PER_THREAD && s->key != vg__stream_key(CU_STREAM_PER_THREAD))
        return NULL; /* another thread's per-thread stream: the legacy one follows it */
    return s->handle;
}

vg_stream_t *vg__heap_stream_find(vg_heap_t *h, CUstream handle) {
    return stream_lookup(h, vg__stream_key(handle), false, handle);
}

/* Epochs up to `epoch` of s are complete. Only if frees were waiting on s is there
 * something new to merge or reuse (completion_gen: the slow path's merge pass). */
static void complete_to(vg_heap_t *h, vg_stream_t *s, uint64_t epoch) {
    if (s->done >= epoch)
        return;
    if (s->last_free_epoch > s->done)
        h->completion_gen++;
    s->done = epoch;
}

static void stream_complete(vg_heap_t *h, vg_stream_t *s) {
    complete_to(h, s, s->epoch);
    s->epoch++;
}

static void process_deferred(vg_heap_t *h);

void vg__heap_stream_synced(vg_heap_t *h, CUstream handle) {
    vg_stream_t *s = stream_lookup(h, vg__stream_key(handle), false, handle);
    if (s)
        stream_complete(h, s);
    if (h->deferred)
        process_deferred(h);
}

void vg__heap_all_synced(vg_heap_t *h) {
    for (vg_stream_t *s = h->streams; s; s = s->next)
        stream_complete(h, s);
    if (h->deferred)
        process_deferred(h);
}

struct vg_sync_marks {
    size_t n;
    struct {
        vg_stream_t *s;
        uint64_t epoch;
    } m[];
};

vg_sync_marks_t *vg__heap_sync_begin(vg_heap_t *h, bool all, CUstream handle) {
    size_t n = 0;
    vg_stream_t *one = all ? NULL : stream_lookup(h, vg__stream_key(handle), false, handle);
    for (vg_stream_t *s = h->streams; s; s = s->next)
        n += !s->forgotten && (all || s == one);
    vg_sync_marks_t *m = n ? malloc(sizeof *m + n * sizeof m->m[0]) : NULL;
    if (!m)
        return NULL;
    m->n = 0;
    for (vg_stream_t *s = h->streams; s; s = s->next) {
        if (s->forgotten || !(all || s == one))
            continue;
        m->m[m->n].s = s;
        m->m[m->n++].epoch = s->epoch++;
    }
    return m;
}

void vg__heap_sync_end(vg_heap_t *h, vg_sync_marks_t *m, bool ok) {
    if (!m)
        return;
    for (size_t i = 0; ok && i < m->n; i++)
        complete_to(h, m->m[i].s, m->m[i].epoch);
    free(m);
    if (ok && h->deferred)
        process_deferred(h);
}

void vg__heap_forget_stream(vg_heap_t *h, CUstream handle) {
    vg_stream_t *s = stream_lookup(h, vg__stream_key(handle), false, handle);
    if (!s)
        return;
    vg__guard_hook_flush(h, handle); /* guard work waiting on it goes before it is gone */
    bool pushed = vg__heap_ctx_enter(h);
    if (s->handle != CU_STREAM_PER_THREAD)
        vg__cuStreamSynchronize(s->handle);
    vg__heap_ctx_leave(pushed);
    stream_complete(h, s);
    s->forgotten = true; /* blocks still point at it; every one of them is complete */
    if (t_stream == s)
        t_stream_key = ~(uintptr_t)0;
}

/* The same for every stream. */
static bool refresh_streams(vg_heap_t *h, bool wait) {
    bool progressed = false;
    for (vg_stream_t *s = h->streams; s; s = s->next)
        progressed |= vg__stream_refresh(s, wait);
    if (wait)
        h->stats.num_sync_all_streams++;
    if (progressed)
        h->completion_gen++;
    return progressed;
}

/* ---------------------------------------------------------------------------------------
 * Blocks
 * ------------------------------------------------------------------------------------- */

/* The tag of two free neighbours merged, or false if they must stay apart. Blocks merge
 * when both are complete (the result serves any stream) or both wait on the same epoch of
 * the same stream. A waiting block never absorbs a complete one: that would hide memory
 * every stream may use behind one stream's pending work. Nor one of a later epoch: the
 * earlier free would then wait for the later one's event too, and a loop that frees on
 * one stream beside its last free, allocating on another, would never see that memory
 * complete and map new memory every iteration. The two merge once both are complete.
 * While the heap has seen one stream only (a PyTorch training loop), free neighbours
 * always merge, as in a single-stream allocator: there is no other stream to hide memory
 * from, and that stream may use both halves at once. The result waits on its later epoch.
 * (A second stream then finds that memory usable once the first one's work has completed,
 * and meanwhile the unmapped part of it (unmapped_rest); from then on the rules above
 * hold.) */
static bool merged_tag(const vg_heap_t *h, const vg_block_t *a, const vg_block_t *b,
                       vg_stream_t **s, uint64_t *e) {
    if (b->slot & VG_SLOT_START) /* a slot's end: the two stay apart (A5) */
        return false;
    bool ca = vg__block_complete(a), cb = vg__block_complete(b);
    if (ca && cb) {
        *s = NULL;
        *e = 0;
        return true;
    }
    if (!ca && !cb && a->stream == b->stream && a->epoch == b->epoch) {
        *s = a->stream;
        *e = a->epoch;
        return true;
    }
    if (h->streams_seen == 1 && (ca || cb || a->stream == b->stream)) {
        *s = ca ? b->stream : a->stream;
        *e = VG_MAX(ca ? 0 : a->epoch, cb ? 0 : b->epoch);
        return true;
    }
    return false;
}

/* Absorb b (free, not in the index) into a (its lower neighbour, same segment). */
static void absorb(vg_heap_t *h, vg_block_t *a, vg_block_t *b, vg_stream_t *s, uint64_t e) {
    /* The pattern runs on across the join only where a half is pattern all through. */
    uint64_t head = a->pat_head >= a->size ? a->size + b->pat_head : a->pat_head;
    uint64_t tail = b->pat_tail >= b->size ? b->size + a->pat_tail : b->pat_tail;
    a->pat_head = head;
    a->pat_tail = tail;
    a->size += b->size;
    a->next = b->next;
    if (b->next)
        b->next->prev = a;
    a->stream = s;
    a->epoch = e;
    a->mapped = a->mapped && b->mapped;
    vg__block_put(h, b);
}

/* The index a free or pooled block belongs in. */
static vg_tlsf_t *index_of(vg_heap_t *h, const vg_block_t *b) {
    return b->gpool ? b->gpool->index : &h->index;
}

/* May neighbours a and b, both free or both pooled, merge? Same state, same pool, tags. */
static bool mergeable(const vg_heap_t *h, const vg_block_t *a, const vg_block_t *b,
                      vg_stream_t **s, uint64_t *e) {
    return a->state == b->state && a->gpool == b->gpool && merged_tag(h, a, b, s, e);
}

vg_block_t *vg__block_coalesce(vg_heap_t *h, vg_block_t *b) {
    vg_stream_t *s;
    uint64_t e;
    vg_tlsf_t *idx = index_of(h, b);
    if (vg__block_complete(b)) { /* normalise: a complete block serves any stream */
        b->stream = NULL;
        b->epoch = 0;
    }
    /* Keep going: a neighbour that has completed since it was freed may now merge, and
     * the merged block may then reach another one. */
    for (vg_block_t *p = b->prev; p && mergeable(h, p, b, &s, &e); p = b->prev) {
        vg__tlsf_remove(idx, p);
        absorb(h, p, b, s, e);
        b = p;
    }
    for (vg_block_t *n = b->next; n && mergeable(h, b, n, &s, &e); n = b->next) {
        vg__tlsf_remove(idx, n);
        absorb(h, b, n, s, e);
    }
    return b;
}

/* After epochs complete, neighbours that had to stay apart may merge now. */
static void merge_pass(vg_heap_t *h) {
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next) {
        for (vg_block_t *b = seg->first; b; b = b->next) {
            vg_block_t *n = b->next;
            vg_stream_t *s;
            uint64_t e;
            while (b->state == VG_BLOCK_FREE && n && n->state == VG_BLOCK_FREE &&
                   merged_tag(h, b, n, &s, &e)) {
                vg__tlsf_remove(&h->index, b);
                vg__tlsf_remove(&h->index, n);
                absorb(h, b, n, s, e);
                vg__tlsf_insert(&h->index, b);
                n = b->next;
            }
        }
    }
}

/* Turn block b (out of the index, pages mapped) into an allocation. */
static vg_status_t make_allocated(vg_heap_t *h, vg_block_t *b, uint64_t requested,
                                  uint64_t user_offset, vg_stream_t *s) {
    b->state = VG_BLOCK_ALLOCATED;
    b->stream = s;
    if (VG_UNLIKELY(s->key == (uintptr_t)VG_STREAM_SYNC)) {
        vg_stream_t *legacy = vg__heap_stream(h, NULL);
        b->stream = legacy ? legacy : s; /* (NULL: no memory for its record) */
    }
    b->epoch = 0;
    b->user = b->addr + user_offset;
    b->free_site = 0;
    b->requested = requested;
    b->nuses = 0;
    b->flags = 0;
    b->id = ++h->next_id;
    if (!vg__ptrmap_put(&h->live, b->user, b)) {
        b->state = b->gpool ? VG_BLOCK_POOLED : VG_BLOCK_FREE;
        b->stream = NULL;
        b->mapped = 1;
        vg_block_t *f = vg__block_coalesce(h, b);
        vg__tlsf_insert(index_of(h, f), f);
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
    }
    if (h->index_on) /* (without memory for it: checks say "unknown") */
        vg__addrindex_add(b->seg, b->user);
    if (VG_UNLIKELY(h->plan))
        vg__plan_alloc(h->plan, b->id - 1, b->size);
    vg__tell_region_added(h, b); /* (compute-sanitizer: a region, G12) */
    int pool = vg__pool_of(b->size);
    vg__stat_pool(h->stats.allocation, pool, 1);
    vg__stat_pool(h->stats.allocated_bytes, pool, (int64_t)b->size);
    vg__stat_pool(h->stats.requested_bytes, pool, (int64_t)requested);
    vg__stat_pool(h->stats.active, pool, 1);
    vg__stat_pool(h->stats.active_bytes, pool, (int64_t)b->size);
    return VG_OK;
}

/* Do bytes [x, y) of a free block of `size` bytes with this pattern head and tail hold the
 * guard pattern? */
static bool in_pattern(uint64_t size, uint64_t head, uint64_t tail, uint64_t x, uint64_t y) {
    return y <= head || x + tail >= size || head + tail >= size;
}

/* Both redzones of an allocation (user offset uoff, `requested` bytes, ending at `end`)
 * carved at the start of a free block with this pattern. */
static bool redzones_ready(uint64_t size, uint64_t head, uint64_t tail, uint64_t uoff,
                           uint64_t requested, uint64_t end) {
    return in_pattern(size, head, tail, 0, uoff) &&
           in_pattern(size, head, tail, uoff + requested, end);
}

/* Free block b loses its first `n` bytes: what of its pattern is left. */
static void pattern_drop_front(vg_block_t *b, uint64_t n) {
    b->pat_head = b->pat_head > n ? b->pat_head - n : 0;
    if (b->pat_tail > b->size - n)
        b->pat_tail = b->size - n;
}

/* Split block b (out of its index) after its first `at` bytes: b keeps them, the rest
 * becomes a block of the same state, pool and tag, inserted in the index. Returns the
 * rest, or NULL (no struct to split with: b stays whole). */
static vg_block_t *split(vg_heap_t *h, vg_block_t *b, uint64_t at) {
    vg_block_t *r = vg__block_new(h);
    if (!r)
        return NULL;
    r->addr = b->addr + at;
    r->size = b->size - at;
    r->seg = b->seg;
    r->state = b->state; /* (free, or pooled in the same pool) */
    r->gpool = b->gpool;
    r->stream = b->stream;
    r->epoch = b->epoch;
    r->mapped = b->mapped;
    r->pat_head = b->pat_head;
    r->pat_tail = b->pat_tail;
    r->slot = b->slot & VG_SLOT_IN;
    pattern_drop_front(r, at); /* (r->size is already the remainder's) */
    r->prev = b;
    r->next = b->next;
    if (b->next)
        b->next->prev = r;
    b->next = r;
    b->size = at;
    vg__tlsf_insert(index_of(h, r), r);
    return r;
}

/* Hand out the first `size` bytes of free block b (in the index, pages mapped). */
static vg_status_t carve(vg_heap_t *h, vg_block_t *b, uint64_t size, uint64_t requested,
                         uint64_t uoff, vg_stream_t *s) {
    bool ready = redzones_ready(b->size, b->pat_head, b->pat_tail, uoff, requested, size);
    vg__tlsf_remove(index_of(h, b), b);
    if (b->size - size >= VG_ALIGN)
        split(h, b, size); /* (without a struct to split with, the whole block goes) */
    vg_status_t st = make_allocated(h, b, requested, uoff, s);
    if (st == VG_OK && ready)
        b->flags |= VG_BF_READY;
    return st;
}

/* plan=on: allocate [addr, addr + size) of the free blocks from b on, each usable by s
 * (arena.c found them, or mapped_first); *out is the allocation. */
static vg_status_t carve_at(vg_heap_t *h, vg_block_t *b, uint64_t addr, uint64_t size,
                            uint64_t requested, uint64_t uoff, vg_stream_t *s,
                            vg_block_t **out) {
    /* Its pages first: mapping changes no block, so a failure (no memory for a page)
     * leaves the free blocks as they were, joined where they were joined. */
    if (!(b->mapped && addr + size <= b->addr + b->size) &&
        !vg__segment_range_mapped(b->seg, addr, size)) {
        bool pushed = vg__heap_ctx_enter(h);
        /* Which frees completed, so their idle pages may move here (no block changes:
         * b stays as it is). */
        refresh_streams(h, false);
        vg_status_t st = vg__segment_map_range(h, b->seg, addr, size, s);
        vg__heap_ctx_leave(pushed);
        if (st != VG_OK)
            return st;
    }
    if (addr > b->addr) { /* its front stays free, with its own tag */
        vg__tlsf_remove(&h->index, b);
        vg_block_t *r = split(h, b, addr - b->addr);
        b->pat_tail = 0;
        vg__tlsf_insert(&h->index, b);
        if (!r)
            return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
        b = r;
    }
    /* The range may span free neighbours that wait on different epochs, all usable by s:
     * its pieces are joined (the ends left free keep their own tags). */
    while (b->size < size) { /* (the last piece's rest split off first) */
        vg_block_t *n = b->next;
        if (n->addr + n->size > addr + size) {
            vg__tlsf_remove(&h->index, n);
            vg_block_t *r = split(h, n, addr + size - n->addr);
            vg__tlsf_insert(&h->index, n);
            if (!r)
                return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
        }
        bool cb = vg__block_complete(b), cn = vg__block_complete(n);
        uint64_t e = VG_MAX(cb ? 0 : b->epoch, cn ? 0 : n->epoch);
        vg__tlsf_remove(&h->index, b);
        vg__tlsf_remove(&h->index, n);
        absorb(h, b, n, cb && cn ? NULL : s, e);
        vg__tlsf_insert(&h->index, b);
    }
    *out = b;
    return carve(h, b, size, requested, uoff, s);
}

/* Block b was chosen for a request on stream s. If b serves any stream and the free block
 * just below it waits on s (so s may use it at once) but is too small alone, the request
 * should start there: the freed memory is reused instead of being left as a hole. (The
 * two are not merged when freed: that would hide b from every other stream.) */
static vg_block_t *down_neighbour(const vg_block_t *b, uint64_t size, const vg_stream_t *s) {
    vg_block_t *p = b->prev;
    if (b->slot & VG_SLOT_START)
        return NULL;
    if (p && p->state == VG_BLOCK_FREE && p->stream == s && !vg__block_complete(p) &&
        vg__block_complete(b) && p->size < size)
        return p;
    return NULL;
}

/* Allocate [p->addr, p->addr + size): all of p and the front of b (its upper neighbour,
 * in the index, pages mapped). What is left of b stays complete. */
static vg_status_t carve_down(vg_heap_t *h, vg_block_t *p, vg_block_t *b, uint64_t size,
                              uint64_t requested, uint64_t uoff, vg_stream_t *s) {
    uint64_t take = size - p->size;
    uint64_t both = p->size + b->size; /* p and b as one block, for the pattern */
    uint64_t head = p->pat_head >= p->size ? p->size + b->pat_head : p->pat_head;
    uint64_t tail = b->pat_tail >= b->size ? b->size + p->pat_tail : b->pat_tail;
    bool ready = redzones_ready(both, head, tail, uoff, requested, size);
    vg__tlsf_remove(&h->index, p);
    vg__tlsf_remove(&h->index, b);
    p->size = size;
    if (take == b->size) {
        p->next = b->next;
        if (b->next)
            b->next->prev = p;
        vg__block_put(h, b);
    } else {
        pattern_drop_front(b, take);
        b->addr += take;
        b->size -= take;
        vg__tlsf_insert(&h->index, b);
    }
    vg_status_t st = make_allocated(h, p, requested, uoff, s);
    if (st == VG_OK && ready)
        p->flags |= VG_BF_READY;
    return st;
}

/* Allocation a needed new memory, is large, and its size was freed before (place): its
 * range becomes a slot (A5). Freed, it stays one block that no neighbour absorbs, so the
 * next tensor of its size finds it whole instead of mapping more; smaller requests use it
 * only when no other mapped memory fits (tlsf.c). */
static void make_slot(vg_heap_t *h, vg_block_t *a) {
    a->slot = VG_SLOT_START | VG_SLOT_IN;
    if (a->next)
        a->next->slot |= VG_SLOT_START;
    h->index.slot_min = h->slot_min;
}

/* The free block a request would take, or NULL: small requests search their own range
 * (A6), every other request the general one. */
static vg_block_t *find_block(vg_heap_t *h, uint64_t size, vg_stream_t *s) {
    if (size <= h->small_max && (h->small_seg || vg__segment_small_range(h)))
        return vg__tlsf_find_small(&h->index, size, s);
    return vg__tlsf_find(&h->index, size, s);
}

/* No free block serves stream s. A range's last block may still be one s cannot use
 * because it waits on another stream (while a heap has seen one stream, a free joins the
 * unmapped rest of its range: see merged_tag). No kernel can have touched its unmapped
 * pages: the part from above its last mapped page becomes a block of its own, usable by
 * every stream, rather than s reserving a new range. Returns that block, or NULL. */
static vg_block_t *unmapped_rest(vg_heap_t *h, uint64_t size, vg_stream_t *s) {
    bool small = size <= h->small_max && h->small_seg; /* (the range find_block searched) */
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next) {
        if (!seg->vmm || seg->cls != (small ? VG_CLASS_SMALL : VG_CLASS_GENERAL))
            continue; /* (another range, or a plan's arena: no search takes from it) */
        vg_block_t *b = seg->first;
        while (b->next)
            b = b->next;
        if (b->state != VG_BLOCK_FREE || vg__block_usable(b, s) || b->size < size)
            continue;
        uint64_t lo = (b->addr - seg->base) / h->page, end = b->addr + b->size - seg->base;
        uint64_t i = end / h->page; /* (the range's end is page-aligned) */
        while (i > lo && !seg->pages[i - 1])
            i--;
        uint64_t cut = VG_MAX(seg->base + i * h->page, b->addr);
        if (b->addr + b->size - cut < size)
            continue;
        if (cut > b->addr) {
            vg__tlsf_remove(&h->index, b);
            vg_block_t *u = split(h, b, cut - b->addr);
            b->mapped = vg__segment_range_mapped(seg, b->addr, b->size);
            b->pat_tail = 0; /* (what it knew of its end was u's) */
            vg__tlsf_insert(&h->index, b);
            if (!u)
                return NULL;
            b = u;
        }
        b->stream = NULL; /* unmapped all through: it serves any stream */
        b->epoch = 0;
        b->mapped = 0;
        b->pat_head = b->pat_tail = 0;
        return b;
    }
    return NULL;
}

/* A5: a request that maps new memory becomes a slot only if a block of its size (slot_min
 * or more) was freed before, among the last 16 such sizes: a tensor that comes back each
 * step (GPT-2's logits) keeps its range; a cache grown by concatenation, each copy a
 * little larger than the last, does not fill the heap with slots that no later copy fits
 * (each mapped anew: reserved memory grew to the whole device). */
static bool large_freed_before(const vg_heap_t *h, uint64_t size) {
    for (uint32_t i = 0; i < 16 && i < h->nlarge_freed; i++)
        if (h->large_freed[i] == size)
            return true;
    return false;
}

static void large_freed(vg_heap_t *h, uint64_t size) {
    if (!large_freed_before(h, size))
        h->large_freed[h->nlarge_freed++ % 16] = size;
}

/* Place a request on block b (or NULL: search): extend it down, map its pages, carve. */
static vg_status_t place(vg_heap_t *h, uint64_t size, uint64_t requested, uint64_t uoff,
                         vg_stream_t *s, vg_block_t *b, vg_block_t **out) {
    vg_status_t st;
    if (!b)
        b = find_block(h, size, s);
    if (!b)
        b = unmapped_rest(h, size, s);
    if (!b) {
        if ((st = vg__segment_grow(h, size, &b)) != VG_OK)
            return st;
    }
    vg_block_t *p = down_neighbour(b, size, s);
    vg_block_t *start = p ? p : b;
    bool grows = !(p ? p->mapped && b->mapped : b->mapped);
    if (grows && (st = vg__segment_map_range(h, b->seg, start->addr, size, s)) != VG_OK)
        return st;
    st = p ? carve_down(h, p, b, size, requested, uoff, s)
           : carve(h, b, size, requested, uoff, s);
    if (st != VG_OK)
        return st;
    if (grows && h->slot_min && size >= h->slot_min && large_freed_before(h, size))
        make_slot(h, start);
    *out = start;
    return VG_OK;
}

/* A small request whose range could not have a page: room in general memory will do. */
static vg_status_t place_in_general(vg_heap_t *h, uint64_t size, uint64_t requested,
                                    uint64_t uoff, vg_stream_t *s, vg_block_t **out) {
    vg_block_t *g = vg__tlsf_find(&h->index, size, s);
    return g ? place(h, size, requested, uoff, s, g, out) : VG_ERR_OUT_OF_MEMORY;
}

/* Do streams other than s have frees not yet known complete (or blocks deferred)? */
static bool others_pending(const vg_heap_t *h, const vg_stream_t *s) {
    if (h->deferred)
        return true;
    for (const vg_stream_t *o = h->streams; o; o = o->next)
        if (o != s && !o->forgotten && o->last_free_epoch > o->done)
            return true;
    return false;
}

static vg_status_t alloc_slow(vg_heap_t *h, uint64_t size, uint64_t requested, uint64_t uoff,
                              vg_stream_t *s, vg_block_t *b, vg_block_t **out) {
    bool pushed = vg__heap_ctx_enter(h);
    /* Guard mode: when memory runs short, a full quarantine would make allocation after
     * allocation move pages to make room; it shrinks instead (guard.c). Known before
     * placing under a limit, else learnt from the placement's failure to create a page. */
    if (h->guard && h->limit &&
        (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].current + size > h->limit &&
        vg__guard_hook_shrink(h))
        b = NULL; /* (blocks leaving the quarantine may have merged with it) */
    /* Before mapping memory, learn whether another stream's frees have completed (one
     * event query or record per such stream, no waiting): what they freed may serve the
     * request, and memory stays with the streams that freed it no longer than their work
     * runs. A block merely waiting on s itself needs no event: s may use it already. */
    if ((!b || !b->mapped) && others_pending(h, s)) {
        process_deferred(h); /* (also says which events the refresh must record) */
        if (refresh_streams(h, false))
            process_deferred(h);
        b = find_block(h, size, s); /* (released blocks may have merged with b) */
    }
    /* Neighbours that had to stay apart while they waited (a complete one and a waiting
     * one, or two epochs of one stream) may have completed since: join them before
     * mapping memory, once per completion. */
    if ((!b || !b->mapped) && h->merged_gen != h->completion_gen) {
        merge_pass(h);
        h->merged_gen = h->completion_gen;
        b = find_block(h, size, s);
    }
    /* plan=on: idle pages may move to this request (segment.c); learn first which frees
     * have completed, so that their pages count as idle. */
    if (VG_UNLIKELY(h->plan_moves) && (!b || !b->mapped) && refresh_streams(h, false)) {
        process_deferred(h);
        merge_pass(h);
        b = find_block(h, size, s);
    }
    h->memory_short = false;
    vg_status_t st = VG_ERR_OUT_OF_MEMORY;
    uint64_t at;
    vg_block_t *m = VG_UNLIKELY(h->plan_moves) && b && !b->mapped && vg__heap_settling(h, size)
                        ? vg__arena_mapped_first(h, size, s, b, &at)
                        : NULL;
    if (m) /* (no slot made there: A5's slots are best fit's) */
        st = carve_at(h, m, at, size, requested, uoff, s, out);
    if (st != VG_OK) /* (the attempt may have joined b's neighbours: searched again) */
        st = place(h, size, requested, uoff, s, m ? NULL : b, out);
    if (st == VG_ERR_OUT_OF_MEMORY && size <= h->small_max)
        st = place_in_general(h, size, requested, uoff, s, out);
    if (h->guard && h->memory_short && st == VG_OK)
        vg__guard_hook_shrink(h); /* (for the allocations that follow) */
    if (st == VG_ERR_OUT_OF_MEMORY) { /* wait for every stream and retry; then release
                                        * the cache (whole free segments) and retry */
        h->stats.num_alloc_retries++;
        vg__guard_hook_shrink(h); /* (its blocks then complete with the streams) */
        vg__guard_hook_flush_quarantine(h);
        refresh_streams(h, true);
        process_deferred(h);
        merge_pass(h);
        st = place(h, size, requested, uoff, s, NULL, out);
        if (st == VG_ERR_OUT_OF_MEMORY && vg__segment_trim(h) == VG_OK)
            st = place(h, size, requested, uoff, s, NULL, out);
    }
    if (st == VG_ERR_OUT_OF_MEMORY && size <= h->small_max)
        st = place_in_general(h, size, requested, uoff, s, out);
    if (st == VG_ERR_OUT_OF_MEMORY) {
        h->stats.num_ooms++;
        explain_oom(h, requested, size, s ? s->handle : NULL);
    }
    vg__heap_ctx_leave(pushed);
    return st;
}

/* Serve a request (rounded) from general memory: the fast path when a mapped block fits,
 * else alloc_slow. */
static inline __attribute__((always_inline)) vg_status_t
alloc_general(vg_heap_t *h, uint64_t size, uint64_t requested, uint64_t uoff, vg_stream_t *s,
              vg_block_t **out) {
    vg_block_t *b = find_block(h, size, s);
    if (VG_LIKELY(b && b->mapped)) {
        vg_block_t *p = down_neighbour(b, size, s);
        if (!p || p->mapped) {
            vg_status_t st = p ? carve_down(h, p, b, size, requested, uoff, s)
                               : carve(h, b, size, requested, uoff, s);
            if (st == VG_OK)
                *out = p ? p : b;
            return st;
        }
    }
    return alloc_slow(h, size, requested, uoff, s, b, out);
}

vg_status_t vg__heap_alloc(vg_heap_t *h, uint64_t size, uint64_t requested,
                           uint64_t uoff, CUstream stream, vg_block_t **out) {
    vg_stream_t *s = vg__heap_stream(h, stream);
    if (stream == VG_STREAM_SYNC)
        stream = NULL;
    uint64_t rounded = vg__align_up(size ? size : 1, VG_ALIGN);
    if (rounded < size || rounded > (1ull << 56)) {
        h->stats.num_ooms++;
        explain_oom(h, requested, rounded < size ? UINT64_MAX : rounded, stream);
        return VG_ERR_OUT_OF_MEMORY;
    }
    if (!s)
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
    if (h->limit && rounded > h->limit) { /* cannot succeed: say so without touching anything */
        h->stats.num_ooms++;
        explain_oom(h, requested, rounded, stream);
        return VG_ERR_OUT_OF_MEMORY;
    }
    if (VG_UNLIKELY(h->nroutes > 0)) { /* a CUDA graph is being captured */
        vg_gpool_t *pool = vg__gpool_route(h, stream);
        if (pool)
            return vg__heap_alloc_pool(h, pool, rounded, requested, uoff, s, out);
    }
    if (VG_UNLIKELY(h->plan_moves)) { /* plan=on: where the step's plan puts it */
        uint64_t at;
        bool missed;
        vg_block_t *b = vg__arena_find(h, rounded, s, &at, &missed);
        if (b && carve_at(h, b, at, rounded, requested, uoff, s, out) == VG_OK) {
            if (!missed)
                vg__arena_placed(h, *out);
            return VG_OK;
        }
        if (b && !missed)
            vg__arena_missed(h); /* (no memory there: general memory may have some) */
    }
    return alloc_general(h, rounded, requested, uoff, s, out);
}

/* A request of a graph being captured: from its pool's freed blocks if one fits (usable by
 * s: freed on s, or complete), else from general memory, which then joins the pool. */
vg_status_t vg__heap_alloc_pool(vg_heap_t *h, vg_gpool_t *p, uint64_t size, uint64_t requested,
                                uint64_t uoff, vg_stream_t *s, vg_block_t **out) {
    vg_block_t *b = vg__tlsf_find(p->index, size, s);
    if (!b)
        b = vg__tlsf_find_small(p->index, size, s);
    if (b) {
        vg_status_t st = carve(h, b, size, requested, uoff, s);
        if (st == VG_OK)
            *out = b;
        return st;
    }
    vg_block_t *g;
    vg_status_t st = alloc_general(h, size, requested, uoff, s, &g);
    if (st != VG_OK)
        return st;
    g->gpool = p;
    vg__tell_pool_adopted(h, g);
    p->bytes += g->size;
    *out = g;
    return VG_OK;
}

/* ---------------------------------------------------------------------------------------
 * Free
 * ------------------------------------------------------------------------------------- */

/* Put a freed block (stamped, not in any list) into the free index, or its graph pool's
 * (A7); returns the free block it became part of. */
static vg_block_t *release_free(vg_heap_t *h, vg_block_t *b, uint64_t head, uint64_t tail) {
    int pool = vg__pool_of(b->size);
    vg__stat_pool(h->stats.active, pool, -1);
    vg__stat_pool(h->stats.active_bytes, pool, -(int64_t)b->size);
    b->state = b->gpool ? VG_BLOCK_POOLED : VG_BLOCK_FREE;
    b->mapped = 1; /* it was allocated, so all its pages are mapped */
    b->nuses = 0;
    b->flags = 0;
    b->pat_head = head;
    b->pat_tail = tail;
    if (VG_UNLIKELY(h->slot_min && b->size >= h->slot_min))
        large_freed(h, b->size);
    uint32_t item = b->plan_item; /* (b may merge into the block below) */
    if (VG_UNLIKELY(item))
        b->plan_item = 0; /* (0 in every free block: arena.c sets it when carved) */
    vg_block_t *f = vg__block_coalesce(h, b);
    vg__tlsf_insert(index_of(h, f), f);
    if (VG_UNLIKELY(item))
        vg__arena_freed(h, item - 1, f);
    return f;
}

static bool deferred_ready(vg_heap_t *h, vg_block_t *b) {
    (void)h;
    for (int i = 0; i < b->nuses; i++) {
        vg_stream_t *u = b->uses[i];
        if (u != b->stream && !u->forgotten && u->done < b->use_epochs[i]) {
            if (u->last_free_epoch < b->use_epochs[i]) /* make refresh record an event */
                u->last_free_epoch = b->use_epochs[i];
            return false;
        }
    }
    return true;
}

static void process_deferred(vg_heap_t *h) {
    for (vg_block_t **pp = &h->deferred; *pp;) {
        vg_block_t *b = *pp;
        if (deferred_ready(h, b)) {
            *pp = b->fnext;
            b->fnext = NULL;
            release_free(h, b, 0, 0);
        } else {
            pp = &b->fnext;
        }
    }
}

vg_block_t *vg__heap_unpool(vg_heap_t *h, vg_block_t *b) {
    vg__tlsf_remove(b->gpool->index, b);
    b->gpool = NULL;
    b->state = VG_BLOCK_FREE;
    b->stream = NULL; /* (the caller waited for the device) */
    b->epoch = 0;
    b->mapped = 1;
    vg_block_t *f = vg__block_coalesce(h, b);
    vg__tlsf_insert(&h->index, f);
    return f;
}

/* A block other streams used (record_stream) is freed: record an event on each of them
 * now, as PyTorch does, if none is outstanding (or the outstanding one has completed).
 * Left to the next allocation that needs memory, the event would be recorded and
 * queried a moment apart, and not yet have completed even on an idle stream (on a GPU,
 * or on vgsim once its idle workers sleep): a prefetch loop (record_stream, free, then
 * a synchronisation vramguard does not see) mapped a new buffer every few iterations. */
static void mark_uses(vg_heap_t *h, vg_block_t *b, vg_stream_t *s) {
    bool pushed = vg__heap_ctx_enter(h), progressed = false;
    for (int i = 0; i < b->nuses; i++)
        if (b->uses[i] != s)
            progressed |= vg__stream_refresh(b->uses[i], false);
    vg__heap_ctx_leave(pushed);
    if (progressed)
        h->completion_gen++;
}

void vg__heap_free(vg_heap_t *h, vg_block_t *b, CUstream stream, bool synced) {
    if (VG_UNLIKELY(h->plan))
        vg__plan_release(h->plan, b->id - 1, b->size);
    vg__tell_region_removed(h, b); /* (freed memory is no longer the program's: G12) */
    int pool = vg__pool_of(b->size);
    vg__stat_pool(h->stats.allocation, pool, -1);
    vg__stat_pool(h->stats.allocated_bytes, pool, -(int64_t)b->size);
    vg__stat_pool(h->stats.requested_bytes, pool, -(int64_t)b->requested);
    vg_stream_t *s = vg__heap_stream(h, stream);
    if (!s)
        s = b->stream; /* no memory for a new stream record: the allocation's stream */
    vg__guard_hook_before_free(h, b, s); /* (nothing for a graph's block: never guarded) */
    b->stream = s;
    b->epoch = synced ? 0 : s->epoch; /* (epoch 0 is complete) */
    if (!synced)
        s->last_free_epoch = s->epoch;
    if (b->gpool) { /* a graph's memory: back to its pool, whatever streams used it */
        vg__ptrmap_del(&h->live, b->user);
        if (h->index_on)
            vg__addrindex_del(b->seg, b->user);
        release_free(h, b, 0, 0);
        return;
    }
    if (b->flags & VG_BF_USES_OVERFLOW) { /* too many streams recorded: wait for all */
        bool pushed = vg__heap_ctx_enter(h);
        vg__cuCtxSynchronize();
        vg__heap_ctx_leave(pushed);
        vg__heap_all_synced(h);
        b->nuses = 0;
    }
    bool wait_uses = false;
    for (int i = 0; i < b->nuses && !synced; i++) {
        b->use_epochs[i] = b->uses[i]->epoch;
        if (b->uses[i] != s) {
            wait_uses = true;
            if (b->uses[i]->last_free_epoch < b->use_epochs[i])
                b->uses[i]->last_free_epoch = b->use_epochs[i];
        }
    }
    if (wait_uses) /* (before the quarantine: its blocks wait on the same epochs) */
        mark_uses(h, b, s);
    if (vg__guard_hook_quarantine(h, b, stream)) /* guard mode keeps it poisoned for a while */
        return; /* (it stays in the live map, as QUARANTINED, until it leaves) */
    vg__ptrmap_del(&h->live, b->user);
    if (h->index_on)
        vg__addrindex_del(b->seg, b->user);
    if (wait_uses) {
        b->state = VG_BLOCK_DEFERRED;
        b->fnext = h->deferred;
        h->deferred = b;
        return;
    }
    release_free(h, b, 0, 0);
}

/* A block leaving guard's quarantine: back to the normal path (deferred or free). */
void vg__heap_unquarantine(vg_heap_t *h, vg_block_t *b, uint64_t head, uint64_t tail) {
    vg__ptrmap_del(&h->live, b->user);
    if (h->index_on)
        vg__addrindex_del(b->seg, b->user);
    if (!deferred_ready(h, b)) {
        b->state = VG_BLOCK_DEFERRED;
        b->fnext = h->deferred;
        h->deferred = b;
        return;
    }
    release_free(h, b, head, tail);
}

void vg__heap_history_add(vg_heap_t *h, const vg_block_t *b, uint32_t free_site) {
    if (!h->history) {
        h->history = calloc(VG_FREE_HISTORY, sizeof *h->history);
        if (!h->history)
            return;
    }
    h->history[h->nhistory++ % VG_FREE_HISTORY] =
        (vg_free_rec_t){b->user, b->requested, b->id, b->site, free_site};
}

const vg_free_rec_t *vg__heap_history_find(vg_heap_t *h, uint64_t user, uint64_t id) {
    uint64_t have = VG_MIN(h->nhistory, (uint64_t)VG_FREE_HISTORY);
    for (uint64_t k = 0; h->history && k < have; k++) {
        const vg_free_rec_t *r = &h->history[(h->nhistory - 1 - k) % VG_FREE_HISTORY];
        if (r->user == user && (id == 0 || r->id == id))
            return r;
    }
    return NULL;
}

const vg_free_rec_t *vg__heap_history_containing(vg_heap_t *h, uint64_t p) {
    uint64_t have = VG_MIN(h->nhistory, (uint64_t)VG_FREE_HISTORY);
    for (uint64_t k = 0; h->history && k < have; k++) {
        const vg_free_rec_t *r = &h->history[(h->nhistory - 1 - k) % VG_FREE_HISTORY];
        if (p >= r->user && p - r->user < (r->requested ? r->requested : 1))
            return r;
    }
    return NULL;
}

vg_status_t vg__heap_record_stream(vg_heap_t *h, vg_block_t *b, CUstream stream) {
    vg_stream_t *s = vg__heap_stream(h, stream);
    if (!s)
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
    if (s == b->stream)
        return VG_OK;
    for (int i = 0; i < b->nuses; i++)
        if (b->uses[i] == s)
            return VG_OK;
    if (b->nuses == VG_MAX_USES) {
        b->flags |= VG_BF_USES_OVERFLOW;
        return VG_OK;
    }
    b->uses[b->nuses++] = s;
    return VG_OK;
}

vg_status_t vg__heap_trim(vg_heap_t *h, bool wait_for_streams) {
    bool pushed = vg__heap_ctx_enter(h);
    if (wait_for_streams) /* (its blocks then complete with the streams) */
        vg__guard_hook_flush_quarantine(h);
    refresh_streams(h, wait_for_streams);
    if (wait_for_streams) /* (what the exit checks found) */
        vg__guard_hook_poll(h, "by a check that ran after the allocation was freed");
    process_deferred(h);
    merge_pass(h);
    vg_status_t st = vg__segment_trim(h);
    vg__heap_ctx_leave(pushed);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Queries
 * ------------------------------------------------------------------------------------- */

typedef struct largest_ctx {
    uint64_t best;
} largest_ctx_t;

static bool largest_complete(vg_block_t *b, void *arg) {
    largest_ctx_t *c = arg;
    if (vg__block_complete(b) && b->size > c->best)
        c->best = b->size;
    return true;
}

static uint64_t growable(vg_heap_t *h) {
    size_t free_b = 0, total = 0;
    bool pushed = vg__heap_ctx_enter(h);
    if (vg__cuMemGetInfo(&free_b, &total) != CUDA_SUCCESS)
        free_b = 0;
    vg__heap_ctx_leave(pushed);
    uint64_t g = free_b;
    if (h->limit) {
        uint64_t reserved = (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].current;
        uint64_t room = h->limit > reserved ? h->limit - reserved : 0;
        g = VG_MIN(g, room);
    }
    return g;
}

uint64_t vg__heap_largest_free_block(vg_heap_t *h) {
    if (h->vmm) /* free pages can be rearranged: cached memory that is idle */
        return vg__align_down(vg__segment_idle_bytes(h), VG_ALIGN);
    largest_ctx_t c = {0};
    vg__tlsf_each_desc(&h->index, largest_complete, &c);
    return c.best;
}

uint64_t vg__heap_largest_servable(vg_heap_t *h) {
    largest_ctx_t c = {0}; /* (requests above small_max take only the general range) */
    vg__tlsf_each_desc_from(&h->index, VG_CLASS_GENERAL, 0, largest_complete, &c);
    uint64_t grow = growable(h);
    if (h->vmm) {
        uint64_t phys = vg__segment_idle_bytes(h) + vg__align_down(grow, h->page);
        return VG_MIN(c.best, phys);
    }
    return VG_MAX(c.best, vg__align_down(grow, 2ull << 20));
}
