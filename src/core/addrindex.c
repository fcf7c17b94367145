/* addrindex.c — which allocation holds a device address: a segment's allocations by
 * address (heap.h, vg_addrindex_t), for the checks of copies, memsets and kernel
 * arguments (docs/decisions.md G11).
 *
 * A hierarchical bitmap over the segment's 512-byte granules marks the user address of
 * every block in the heap's live map (allocated or quarantined). Level 0 has a bit per
 * granule; each higher level a bit per word of the level below, set while that word is
 * not zero; the top level is one word. So marking or unmarking is O(levels) (at most 6
 * for 2^36 granules, 32 TiB), and the nearest mark at or below an address (predecessor),
 * or above it (successor), is O(levels) word operations: no walk over blocks. The live
 * map then gives the block at that user address.
 *
 * Memory: a bit per 512 bytes of address space, 1/4096 of the segment. The large levels
 * of a VMM segment (whose range is twice the device) are anonymous mappings that the
 * kernel backs only where they are written, so a heap pays about 4 KiB of host memory per
 * 16 MiB of address space where allocations have lived. The index is allocated at the
 * segment's first mark; a segment whose index could not be allocated answers "unknown"
 * (its checks are skipped, never wrong).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "heap.h"

#define MAX_LEVELS 8
#define MMAP_FROM (64u << 10) /* levels at least this large are lazily backed mappings */

struct vg_addrindex {
    uint64_t base;               /* the segment's first byte */
    uint64_t granules;
    int levels;
    uint64_t *bits[MAX_LEVELS];  /* level k: words[k] words */
    size_t words[MAX_LEVELS];
};

static void *zeroed(size_t bytes) {
    if (bytes < MMAP_FROM)
        return calloc(1, bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void release(void *p, size_t bytes) {
    if (!p)
        return;
    if (bytes < MMAP_FROM)
        free(p);
    else
        munmap(p, bytes);
}

static void index_free(vg_addrindex_t *x) {
    for (int k = 0; k < x->levels; k++)
        release(x->bits[k], x->words[k] * sizeof(uint64_t));
    free(x);
}

static vg_addrindex_t *index_new(uint64_t base, uint64_t size) {
    vg_addrindex_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->base = base;
    x->granules = size / VG_ALIGN;
    uint64_t n = x->granules ? x->granules : 1;
    do {
        size_t w = (size_t)((n + 63) / 64);
        if (x->levels == MAX_LEVELS || !(x->bits[x->levels] = zeroed(w * sizeof(uint64_t)))) {
            index_free(x);
            return NULL;
        }
        x->words[x->levels++] = w;
        n = w;
    } while (n > 1);
    return x;
}

void vg__addrindex_free(vg_segment_t *seg) {
    if (seg->index)
        index_free(seg->index);
    seg->index = NULL;
    seg->index_failed = false;
}

/* The granule of address p (inside the segment). */
static uint64_t granule(const vg_addrindex_t *x, uint64_t p) { return (p - x->base) / VG_ALIGN; }

bool vg__addrindex_add(vg_segment_t *seg, uint64_t user) {
    if (!seg->index && !seg->index_failed && !(seg->index = index_new(seg->base, seg->size)))
        seg->index_failed = true; /* (its lookups answer "unknown" from now on) */
    vg_addrindex_t *x = seg->index;
    if (!x)
        return false;
    uint64_t i = granule(x, user);
    for (int k = 0; k < x->levels; k++, i >>= 6) {
        uint64_t *w = &x->bits[k][i >> 6], was = *w;
        *w = was | 1ull << (i & 63);
        if (was)
            break; /* (the levels above already mark this word) */
    }
    return true;
}

void vg__addrindex_del(vg_segment_t *seg, uint64_t user) {
    vg_addrindex_t *x = seg->index;
    if (!x)
        return;
    uint64_t i = granule(x, user);
    for (int k = 0; k < x->levels; k++, i >>= 6) {
        uint64_t *w = &x->bits[k][i >> 6];
        *w &= ~(1ull << (i & 63));
        if (*w)
            break;
    }
}

/* The largest marked bit <= i of level k, or -1. */
static int64_t pred_at(const vg_addrindex_t *x, int k, uint64_t i) {
    uint64_t w = i >> 6;
    uint64_t m = x->bits[k][w] & (~0ull >> (63 - (i & 63)));
    if (m)
        return (int64_t)(w * 64 + 63 - (uint64_t)__builtin_clzll(m));
    if (w == 0 || k + 1 >= x->levels)
        return -1;
    int64_t v = pred_at(x, k + 1, w - 1); /* the nearest word below with a mark */
    if (v < 0)
        return -1;
    return v * 64 + 63 - __builtin_clzll(x->bits[k][v]);
}

/* The smallest marked bit >= i of level k, or -1. */
static int64_t succ_at(const vg_addrindex_t *x, int k, uint64_t i) {
    uint64_t w = i >> 6;
    if (w >= x->words[k])
        return -1;
    uint64_t m = x->bits[k][w] & (~0ull << (i & 63));
    if (m)
        return (int64_t)(w * 64 + (uint64_t)__builtin_ctzll(m));
    if (k + 1 >= x->levels)
        return -1;
    int64_t v = succ_at(x, k + 1, w + 1);
    if (v < 0 || (uint64_t)v >= x->words[k])
        return -1;
    return v * 64 + __builtin_ctzll(x->bits[k][v]);
}

int vg__addrindex_near(const vg_segment_t *seg, uint64_t p, uint64_t *below, uint64_t *above) {
    const vg_addrindex_t *x = seg->index;
    *below = *above = 0;
    if (!x)
        return seg->index_failed ? -1 : 0; /* (nothing was ever marked, or no memory) */
    uint64_t i = granule(x, p);
    int64_t b = pred_at(x, 0, i), a = i + 1 < x->granules ? succ_at(x, 0, i + 1) : -1;
    if (b >= 0)
        *below = x->base + (uint64_t)b * VG_ALIGN;
    if (a >= 0)
        *above = x->base + (uint64_t)a * VG_ALIGN;
    return 0;
}

vg_at_t vg__heap_block_at(vg_heap_t *h, uint64_t p, vg_block_t **block) {
    vg_segment_t *seg = h->segments;
    while (seg && !(p >= seg->base && p - seg->base < seg->size))
        seg = seg->next;
    if (!seg)
        return VG_AT_NOT_OURS;
    uint64_t below, above;
    if (vg__addrindex_near(seg, p, &below, &above) < 0)
        return VG_AT_UNKNOWN;
    vg_block_t *b = below ? vg__ptrmap_get(&h->live, below) : NULL;
    if (b && p < b->addr + b->size) { /* (its user bytes or its back redzone) */
        *block = b;
        return VG_AT_BLOCK;
    }
    b = above ? vg__ptrmap_get(&h->live, above) : NULL;
    if (b && p >= b->addr) { /* (the front redzone of the next one) */
        *block = b;
        return VG_AT_BLOCK;
    }
    return VG_AT_GAP;
}

vg_block_t *vg__heap_block_below(vg_heap_t *h, uint64_t p) {
    vg_segment_t *seg = h->segments;
    while (seg && !(p >= seg->base && p - seg->base < seg->size))
        seg = seg->next;
    uint64_t below, above;
    if (!seg || vg__addrindex_near(seg, p, &below, &above) < 0 || !below)
        return NULL;
    return vg__ptrmap_get(&h->live, below);
}

static _Atomic uint64_t g_span_lo = UINT64_MAX, g_span_hi;

void vg__addrindex_span(uint64_t base, uint64_t size) {
    uint64_t lo = atomic_load(&g_span_lo), hi = atomic_load(&g_span_hi);
    while (base < lo && !atomic_compare_exchange_weak(&g_span_lo, &lo, base))
        ;
    while (base + size > hi && !atomic_compare_exchange_weak(&g_span_hi, &hi, base + size))
        ;
}

bool vg__addrindex_maybe_ours(uint64_t p, uint64_t n) {
    uint64_t last = p + (n ? n - 1 : 0);
    if (last < p)
        last = UINT64_MAX;
    return last >= atomic_load_explicit(&g_span_lo, memory_order_relaxed) &&
           p < atomic_load_explicit(&g_span_hi, memory_order_relaxed);
}
