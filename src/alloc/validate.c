/* validate.c — the heap's invariant checker (vg_validate; tests and fuzzers call it after
 * every step, `vramguard replay --validate` after every operation).
 *
 * It walks every segment's blocks in address order and checks that they tile the segment
 * without gaps or overlaps, that slot boundaries and the mapping of pages agree with the
 * blocks' flags, that free neighbours which should have merged did, that every free block
 * is in the free index under the class of its range (and nothing else is), that the live
 * map holds exactly the allocated and quarantined blocks, and that the statistics add up
 * to what the blocks and pages say. The first broken invariant is returned as
 * VG_ERR_INTERNAL with a message naming the blocks.
 */
#include "heap.h"

#include "base/common.h"

#define FAIL(...) return vg__error(VG_ERR_INTERNAL, "heap of device %d: " __VA_ARGS__)

typedef struct index_check {
    uint64_t n, bytes;
    int cls;          /* the class being walked */
    uint8_t state;    /* the state its blocks must have: free (the heap's), pooled (a pool's) */
    vg_block_t *bad;  /* a block of another state, or in the other class's bins */
} index_check_t;

static const char *class_name(int cls) {
    return cls == VG_CLASS_SMALL   ? "small-request"
           : cls == VG_CLASS_ARENA ? "plan's arena"
                                   : "general";
}

static bool check_index_block(vg_block_t *b, void *arg) {
    index_check_t *c = arg;
    if (b->state != c->state || b->seg->cls != c->cls) {
        c->bad = b;
        return false;
    }
    c->n++;
    c->bytes += b->size;
    return true;
}

/* Each graph pool's index holds exactly its pooled blocks; its byte count covers them and
 * its live blocks. O(pools x blocks). */
static vg_status_t check_pools(vg_heap_t *h) {
    for (vg_gpool_t *p = h->gpools; p; p = p->next) {
        uint64_t n = 0, bytes = 0, owned = 0;
        for (vg_segment_t *seg = h->segments; seg; seg = seg->next)
            for (vg_block_t *b = seg->first; b; b = b->next)
                if (b->gpool == p) {
                    owned += b->size;
                    if (b->state == VG_BLOCK_POOLED)
                        n++, bytes += b->size;
                }
        index_check_t ic = {.state = VG_BLOCK_POOLED};
        for (ic.cls = 0; ic.cls < VG_CLASSES && !ic.bad; ic.cls++)
            vg__tlsf_each_desc_from(p->index, ic.cls, 0, check_index_block, &ic);
        if (ic.bad || ic.n != n || ic.bytes != bytes || p->index->bytes != bytes)
            FAIL("graph pool %llu/%llu: its index holds %llu blocks / %llu bytes, its pooled "
                 "blocks are %llu / %llu",
                 h->device, (unsigned long long)p->id[0], (unsigned long long)p->id[1],
                 (unsigned long long)ic.n, (unsigned long long)ic.bytes,
                 (unsigned long long)n, (unsigned long long)bytes);
        if (owned != p->bytes)
            FAIL("graph pool %llu/%llu owns %llu bytes of blocks but counts %llu", h->device,
                 (unsigned long long)p->id[0], (unsigned long long)p->id[1],
                 (unsigned long long)owned, (unsigned long long)p->bytes);
    }
    return VG_OK;
}

vg_status_t vg__heap_validate(vg_heap_t *h) {
    uint64_t nfree = 0, free_bytes = 0, nalloc = 0, alloc_bytes = 0, requested = 0;
    uint64_t reserved = h->nspare * h->page, active_extra = 0, nquar = 0;
    uint64_t reserved_small = 0; /* the small pool's: pages mapped into the small range,
                                    or 2 MiB cuMemAlloc segments (segment.c) */
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next) {
        uint64_t at = seg->base;
        vg_block_t *prev = NULL;
        size_t mapped = 0;
        if (seg->vmm) {
            for (size_t i = 0; i < seg->npages; i++)
                mapped += seg->pages[i] != 0;
            if (mapped != seg->nmapped)
                FAIL("segment %#llx counts %zu mapped pages but has %zu", h->device,
                     (unsigned long long)seg->base, seg->nmapped, mapped);
            reserved += mapped * h->page;
            reserved_small += seg->small ? mapped * h->page : 0;
        } else {
            reserved += seg->size;
            reserved_small += seg->size == (2ull << 20) ? seg->size : 0;
        }
        for (vg_block_t *b = seg->first; b; prev = b, b = b->next) {
            if (b->seg != seg || b->prev != prev)
                FAIL("block %#llx is linked wrongly", h->device, (unsigned long long)b->addr);
            if (b->addr != at)
                FAIL("gap or overlap at %#llx (block starts at %#llx)", h->device,
                     (unsigned long long)at, (unsigned long long)b->addr);
            if (b->size == 0 || b->size % VG_ALIGN || b->addr % VG_ALIGN)
                FAIL("block %#llx has size %llu", h->device, (unsigned long long)b->addr,
                     (unsigned long long)b->size);
            at += b->size;
            /* A slot's blocks are contiguous: the flag changes only at a boundary. */
            bool in = (b->slot & VG_SLOT_IN) != 0, prev_in = prev && (prev->slot & VG_SLOT_IN);
            if (prev && in != prev_in && !(b->slot & VG_SLOT_START))
                FAIL("blocks %#llx and %#llx: one lies in a slot, the other not, and no "
                     "boundary separates them",
                     h->device, (unsigned long long)prev->addr, (unsigned long long)b->addr);
            /* The address index finds each live-map block from any of its bytes, and
             * nothing from the first byte of any other block. */
            bool live = b->state == VG_BLOCK_ALLOCATED || b->state == VG_BLOCK_QUARANTINED;
            vg_block_t *at_b = NULL;
            vg_at_t found = vg__heap_block_at(h, live ? b->user : b->addr, &at_b);
            if (found != VG_AT_UNKNOWN && (live ? found != VG_AT_BLOCK || at_b != b
                                                : found == VG_AT_BLOCK && at_b->addr <= b->addr))
                FAIL("the address index finds %s at block %#llx (state %d)", h->device,
                     found == VG_AT_BLOCK ? "another block" : "nothing",
                     (unsigned long long)b->addr, b->state);
            if (live && found == VG_AT_BLOCK &&
                (vg__heap_block_at(h, b->addr, &at_b) != VG_AT_BLOCK || at_b != b ||
                 vg__heap_block_at(h, b->addr + b->size - 1, &at_b) != VG_AT_BLOCK || at_b != b))
                FAIL("the address index does not find block %#llx from its first or last byte",
                     h->device, (unsigned long long)b->addr);
            bool must_be_mapped = b->state != VG_BLOCK_FREE || b->mapped;
            if (must_be_mapped && !vg__segment_range_mapped(seg, b->addr, b->size))
                FAIL("block %#llx (state %d) has unmapped pages", h->device,
                     (unsigned long long)b->addr, b->state);
            if (b->gpool && b->state != VG_BLOCK_POOLED && b->state != VG_BLOCK_ALLOCATED)
                FAIL("block %#llx (state %d) belongs to a graph pool", h->device,
                     (unsigned long long)b->addr, b->state);
            switch (b->state) {
            case VG_BLOCK_FREE:
                nfree++;
                free_bytes += b->size;
                /* Neighbours that serve any stream, or that both still wait on the same
                 * epoch of the same stream, are always merged when they become neighbours. */
                if (prev && prev->state == VG_BLOCK_FREE && !(b->slot & VG_SLOT_START) &&
                    ((!prev->stream && !b->stream) ||
                     (prev->stream == b->stream && prev->epoch == b->epoch &&
                      !vg__block_complete(prev) && !vg__block_complete(b))))
                    FAIL("adjacent free blocks %#llx (%llu bytes, stream %p, epoch %llu) and "
                         "%#llx (%llu bytes, stream %p, epoch %llu) were not merged",
                         h->device, (unsigned long long)prev->addr,
                         (unsigned long long)prev->size, (void *)prev->stream,
                         (unsigned long long)prev->epoch, (unsigned long long)b->addr,
                         (unsigned long long)b->size, (void *)b->stream,
                         (unsigned long long)b->epoch);
                break;
            case VG_BLOCK_ALLOCATED:
                nalloc++;
                alloc_bytes += b->size;
                requested += b->requested;
                if (vg__ptrmap_get(&h->live, b->user) != b)
                    FAIL("allocated block %#llx is missing from the live map", h->device,
                         (unsigned long long)b->addr);
                if (b->user < b->addr || b->user + b->requested > b->addr + b->size)
                    FAIL("allocated block %#llx: user range outside the block", h->device,
                         (unsigned long long)b->addr);
                break;
            case VG_BLOCK_QUARANTINED: /* freed, not reusable yet: still active, and found
                                          * by its address (double frees, the log) */
                nquar++;
                active_extra += b->size;
                if (vg__ptrmap_get(&h->live, b->user) != b)
                    FAIL("quarantined block %#llx is missing from the live map", h->device,
                         (unsigned long long)b->addr);
                break;
            case VG_BLOCK_DEFERRED:
                active_extra += b->size;
                break;
            case VG_BLOCK_POOLED: /* freed, kept by its graph pool (and in its index) */
                if (!b->gpool)
                    FAIL("pooled block %#llx belongs to no pool", h->device,
                         (unsigned long long)b->addr);
                break;
            default:
                FAIL("block %#llx has state %d", h->device, (unsigned long long)b->addr, b->state);
            }
        }
        if (at != seg->base + seg->size)
            FAIL("blocks of segment %#llx end at %#llx, not at its end", h->device,
                 (unsigned long long)seg->base, (unsigned long long)at);
    }
    index_check_t ic = {.state = VG_BLOCK_FREE};
    for (ic.cls = 0; ic.cls < VG_CLASSES && !ic.bad; ic.cls++)
        vg__tlsf_each_desc_from(&h->index, ic.cls, 0, check_index_block, &ic);
    if (ic.bad)
        FAIL("block %#llx in the free index has state %d and lies in the %s range, but was "
             "found among the %s blocks",
             h->device, (unsigned long long)ic.bad->addr, ic.bad->state,
             class_name(ic.bad->seg->cls), class_name(ic.cls - 1));
    if (ic.n != nfree || ic.bytes != free_bytes || h->index.nblocks != nfree ||
        h->index.bytes != free_bytes)
        FAIL("free index holds %llu blocks / %llu bytes, segments %llu / %llu", h->device,
             (unsigned long long)ic.n, (unsigned long long)ic.bytes,
             (unsigned long long)nfree, (unsigned long long)free_bytes);
    vg_status_t st = check_pools(h);
    if (st != VG_OK)
        return st;
    if (h->live.n != nalloc + nquar)
        FAIL("live map holds %zu pointers, segments %llu allocated and %llu quarantined blocks",
             h->device, h->live.n, (unsigned long long)nalloc, (unsigned long long)nquar);
    const vg_stats_t *s = &h->stats;
    if ((uint64_t)s->allocation[VG_POOL_ALL].current != nalloc ||
        (uint64_t)s->allocated_bytes[VG_POOL_ALL].current != alloc_bytes ||
        (uint64_t)s->requested_bytes[VG_POOL_ALL].current != requested)
        FAIL("stats say %lld allocations / %lld bytes, blocks say %llu / %llu", h->device,
             (long long)s->allocation[VG_POOL_ALL].current,
             (long long)s->allocated_bytes[VG_POOL_ALL].current, (unsigned long long)nalloc,
             (unsigned long long)alloc_bytes);
    if ((uint64_t)s->active_bytes[VG_POOL_ALL].current != alloc_bytes + active_extra)
        FAIL("stats say %lld active bytes, blocks say %llu", h->device,
             (long long)s->active_bytes[VG_POOL_ALL].current,
             (unsigned long long)(alloc_bytes + active_extra));
    if ((uint64_t)s->reserved_bytes[VG_POOL_ALL].current != reserved)
        FAIL("stats say %lld reserved bytes, pages and segments say %llu", h->device,
             (long long)s->reserved_bytes[VG_POOL_ALL].current, (unsigned long long)reserved);
    if ((uint64_t)s->reserved_bytes[VG_POOL_SMALL].current != reserved_small)
        FAIL("stats say %lld reserved bytes in the small pool, its pages and segments say %llu",
             h->device, (long long)s->reserved_bytes[VG_POOL_SMALL].current,
             (unsigned long long)reserved_small);
    if (h->limit && reserved > VG_MAX(h->limit, h->limit_floor))
        FAIL("reserved %llu bytes, over the limit of %llu", h->device,
             (unsigned long long)reserved, (unsigned long long)h->limit);
    return VG_OK;
}
