/* addrindex.c — which allocation holds a device address: a segment's allocations by
 * address (heap.h, vg_addrindex_t), for the checks of copies, memsets and kernel
 * arguments (docs/decisions.md G11).
 *
 * A hierarchical bitmap over the segment's 512-byte granules marks the user address of
 * every block in the heap's live map (allocated or quarantined). Level 0 has a bit per
 * granule; each higher level a bit per word of the level below, set when that word may
 * be non-zero; the top level is one word. The nearest mark at or below an address
 * (predecessor), or above it (successor), is found in O(levels) word operations (at most
 * 6 for 2^36 granules, 32 TiB): no walk over blocks. The live map then gives the block.
 *
 * The allocator's fast path pays one word of level 0 per allocation and free (the rest is
 * read, and written only the first time a region is used): unmarking never clears the
 * levels above, whose bits may so say "maybe" of a word that is zero by now; a search
 * that meets such a bit clears it and goes on (so the cleaning is paid by lookups, under
 * the same heap lock). And a heap keeps no index at all until the first lookup (the
 * first copy, memset or launch the interposer checks), which builds it from the live map:
 * a program that only allocates (PyTorch's allocator through the package, a replay) pays
 * nothing.
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

#include "base/common.h"
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

static void mark(vg_addrindex_t *x, uint64_t i) {
    x->bits[0][i >> 6] |= 1ull << (i & 63);
    for (int k = 1; k < x->levels; k++) {
        i >>= 6;
        uint64_t *w = &x->bits[k][i >> 6], bit = 1ull << (i & 63);
        if (*w & bit)
            break; /* (already "maybe": so are the levels above) */
        *w |= bit;
    }
}

bool vg__addrindex_add(vg_segment_t *seg, uint64_t user) {
    if (!seg->index && !seg->index_failed && !(seg->index = index_new(seg->base, seg->size)))
        seg->index_failed = true; /* (its lookups answer "unknown" from now on) */
    vg_addrindex_t *x = seg->index;
    if (!x)
        return false;
    mark(x, granule(x, user));
    return true;
}

void vg__addrindex_del(vg_segment_t *seg, uint64_t user) {
    vg_addrindex_t *x = seg->index;
    if (!x)
        return;
    uint64_t i = granule(x, user);
    x->bits[0][i >> 6] &= ~(1ull << (i & 63)); /* (the levels above: cleaned by searches) */
}

/* The largest marked bit <= i of level k, or -1; a "maybe" bit met above a zero word is
 * cleared on the way. */
static int64_t pred_at(vg_addrindex_t *x, int k, uint64_t i) {
    for (;;) {
        uint64_t w = i >> 6;
        uint64_t m = x->bits[k][w] & (~0ull >> (63 - (i & 63)));
        if (m)
            return (int64_t)(w * 64 + 63 - (uint64_t)__builtin_clzll(m));
        if (w == 0 || k + 1 >= x->levels)
            return -1;
        int64_t v = pred_at(x, k + 1, w - 1); /* the nearest word below that may hold one */
        if (v < 0)
            return -1;
        if (x->bits[k][v])
            return v * 64 + 63 - __builtin_clzll(x->bits[k][v]);
        x->bits[k + 1][v >> 6] &= ~(1ull << (v & 63)); /* a stale "maybe" */
        i = (uint64_t)v * 64; /* (its bits are all clear: bit 0 of it finds none, then below) */
    }
}

/* The smallest marked bit >= i of level k, or -1 (stale bits cleared as in pred_at). */
static int64_t succ_at(vg_addrindex_t *x, int k, uint64_t i) {
    for (;;) {
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
        if (x->bits[k][v])
            return v * 64 + __builtin_ctzll(x->bits[k][v]);
        x->bits[k + 1][v >> 6] &= ~(1ull << (v & 63));
        i = (uint64_t)v * 64 + 63;
    }
}

int vg__addrindex_near(const vg_segment_t *seg, uint64_t p, uint64_t *below, uint64_t *above) {
    vg_addrindex_t *x = seg->index;
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

/* The first lookup of a heap: its indexes built from the blocks, and kept from now on. */
static void index_start(vg_heap_t *h) {
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next)
        for (vg_block_t *b = seg->first; b; b = b->next)
            if (b->state == VG_BLOCK_ALLOCATED || b->state == VG_BLOCK_QUARANTINED)
                vg__addrindex_add(seg, b->user);
    h->index_on = true;
}

vg_at_t vg__heap_block_at(vg_heap_t *h, uint64_t p, vg_block_t **block) {
    if (VG_UNLIKELY(!h->index_on))
        index_start(h);
    vg_segment_t *seg = vg__heap_segment_at(h, p);
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

vg_segment_t *vg__heap_segment_at(const vg_heap_t *h, uint64_t p) {
    vg_segment_t *seg = h->segments;
    while (seg && !(p >= seg->base && p - seg->base < seg->size))
        seg = seg->next;
    return seg;
}

vg_block_t *vg__heap_block_below(vg_heap_t *h, uint64_t p) {
    if (VG_UNLIKELY(!h->index_on))
        index_start(h);
    vg_segment_t *seg = vg__heap_segment_at(h, p);
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
