/* tlsf.c — the free index: two-level segregated fit over free blocks.
 *
 * A size (a multiple of 512 bytes, in units u = size / 512) maps to a first-level class
 * fl = floor(log2 u) and a second-level class sl = the next 5 bits, so each power of two
 * is cut into 32 bins and a bin's sizes differ by less than 1/32. Two bitmaps say which
 * bins are non-empty, so finding the first non-empty bin at or above a class is a couple
 * of bit scans: O(1) whatever the number of free blocks.
 *
 * Search (vg__tlsf_find): first the request's own bin, where a block may be too small,
 * looking at up to 16 blocks for the tightest usable fit; then the first non-empty bins
 * above it, where every block fits, taking the first block the stream may use. Blocks a
 * stream may not use yet (freed on another stream, not complete) are skipped, at most 64
 * per bin, so the cost stays bounded when many such blocks wait.
 *
 * Once the heap has slots (docs/decisions.md A5), a request searches up to three times:
 * mapped memory outside slots (for requests smaller than slot_min), mapped memory
 * anywhere, then anything (memory to map). A request that has mapped memory outside the
 * slots, the usual case, searches once.
 *
 * Blocks of the small-request range (A6) are a class of their own, with their own bins
 * and bitmaps: small requests search that class, every other search the general one, and
 * neither skips over the other's blocks. A plan's arena (plan=on, arena.c) is a third
 * class that no search takes from: only the plan places there.
 */
#include "heap.h"

#define SMALL_UNITS VG_TLSF_SL

static inline int msb64(uint64_t x) { return 63 - __builtin_clzll(x); }

static inline void mapping(uint64_t size, int *fl, int *sl) {
    uint64_t u = size / VG_ALIGN;
    if (u < SMALL_UNITS) {
        *fl = 0;
        *sl = (int)u;
        return;
    }
    int m = msb64(u);
    *fl = m - VG_TLSF_SL_BITS + 1;
    *sl = (int)((u >> (m - VG_TLSF_SL_BITS)) - VG_TLSF_SL);
}

static inline vg_tlsf_class_t *class_of(vg_tlsf_t *t, const vg_block_t *b) {
    return &t->cls[b->seg->cls];
}

void vg__tlsf_insert(vg_tlsf_t *t, vg_block_t *b) {
    vg_tlsf_class_t *c = class_of(t, b);
    int fl, sl;
    mapping(b->size, &fl, &sl);
    vg_block_t *head = c->bins[fl][sl];
    b->fprev = NULL;
    b->fnext = head;
    if (head)
        head->fprev = b;
    c->bins[fl][sl] = b;
    c->fl_bitmap |= 1ull << fl;
    c->sl_bitmap[fl] |= 1u << sl;
    t->nblocks++;
    t->bytes += b->size;
}

void vg__tlsf_remove(vg_tlsf_t *t, vg_block_t *b) {
    vg_tlsf_class_t *c = class_of(t, b);
    int fl, sl;
    mapping(b->size, &fl, &sl);
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        c->bins[fl][sl] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    if (!c->bins[fl][sl]) {
        c->sl_bitmap[fl] &= ~(1u << sl);
        if (!c->sl_bitmap[fl])
            c->fl_bitmap &= ~(1ull << fl);
    }
    b->fprev = b->fnext = NULL;
    t->nblocks--;
    t->bytes -= b->size;
}

/* First non-empty bin strictly after (fl, sl), or false. */
static bool next_bin(const vg_tlsf_class_t *c, int *fl, int *sl) {
    uint32_t sm = (*sl + 1 < (int)VG_TLSF_SL) ? c->sl_bitmap[*fl] & (~0u << (*sl + 1)) : 0;
    if (sm) {
        *sl = __builtin_ctz(sm);
        return true;
    }
    uint64_t fm = (*fl + 1 < 64) ? c->fl_bitmap & (~0ull << (*fl + 1)) : 0;
    if (!fm)
        return false;
    *fl = __builtin_ctzll(fm);
    *sl = __builtin_ctz(c->sl_bitmap[*fl]);
    return true;
}

/* What a search may take: every block the stream may use, or, while slots exist, first
 * only mapped blocks outside slots, then mapped blocks anywhere (A5). */
enum { TAKE_GENERAL, TAKE_MAPPED, TAKE_ANY };

static inline bool takes(const vg_block_t *b, const vg_stream_t *stream, int take) {
    if (!vg__block_usable(b, stream))
        return false;
    return take == TAKE_ANY ||
           (b->mapped && (take == TAKE_MAPPED || !(b->slot & VG_SLOT_IN)));
}

static vg_block_t *search(vg_tlsf_class_t *c, uint64_t size, const vg_stream_t *stream,
                          int take) {
    int fl, sl;
    mapping(size, &fl, &sl);
    /* The request's own bin: blocks may be smaller than the request. */
    vg_block_t *best = NULL;
    int looked = 0;
    for (vg_block_t *b = c->bins[fl][sl]; b && looked < 16; b = b->fnext, looked++) {
        if (b->size >= size && takes(b, stream, take) && (!best || b->size < best->size)) {
            best = b;
            if (b->size == size)
                break;
        }
    }
    if (best)
        return best;
    /* Larger bins: every block fits. */
    while (next_bin(c, &fl, &sl)) {
        int skipped = 0;
        for (vg_block_t *b = c->bins[fl][sl]; b && skipped < 64; b = b->fnext, skipped++)
            if (takes(b, stream, take))
                return b;
    }
    return NULL;
}

vg_block_t *vg__tlsf_find(vg_tlsf_t *t, uint64_t size, vg_stream_t *stream) {
    vg_tlsf_class_t *c = &t->cls[VG_CLASS_GENERAL];
    if (!t->slot_min)
        return search(c, size, stream, TAKE_ANY);
    for (int take = size < t->slot_min ? TAKE_GENERAL : TAKE_MAPPED; take <= TAKE_ANY; take++) {
        vg_block_t *b = search(c, size, stream, take);
        if (b)
            return b;
    }
    return NULL;
}

/* The small-request range has no slots: mapped or not, the first usable block that fits
 * (its unmapped rest is one large block, so mapped blocks come first). */
vg_block_t *vg__tlsf_find_small(vg_tlsf_t *t, uint64_t size, vg_stream_t *stream) {
    return search(&t->cls[VG_CLASS_SMALL], size, stream, TAKE_ANY);
}

/* Visit one class's blocks from its largest bin down to the bin of min_size (the bins
 * below hold only smaller blocks); false once fn said stop. */
static bool walk_from(vg_tlsf_class_t *c, uint64_t min_size,
                      bool (*fn)(vg_block_t *b, void *arg), void *arg) {
    int fl_min = 0, sl_min = 0;
    if (min_size >= VG_ALIGN)
        mapping(min_size, &fl_min, &sl_min);
    for (int fl = VG_TLSF_FL - 1; fl >= fl_min; fl--) {
        if (!(c->fl_bitmap & (1ull << fl)))
            continue;
        for (int sl = VG_TLSF_SL - 1; sl >= (fl == fl_min ? sl_min : 0); sl--) {
            vg_block_t *b = c->bins[fl][sl];
            while (b) {
                vg_block_t *next = b->fnext; /* fn may remove b */
                if (!fn(b, arg))
                    return false;
                b = next;
            }
        }
    }
    return true;
}

bool vg__tlsf_each_asc_from(vg_tlsf_t *t, int cls, uint64_t min_size,
                            bool (*fn)(vg_block_t *b, void *arg), void *arg) {
    vg_tlsf_class_t *c = &t->cls[cls];
    int fl, sl;
    mapping(min_size, &fl, &sl);
    if (!c->bins[fl][sl] && !next_bin(c, &fl, &sl))
        return true;
    do {
        for (vg_block_t *b = c->bins[fl][sl]; b;) {
            vg_block_t *next = b->fnext;
            if (!fn(b, arg))
                return false;
            b = next;
        }
    } while (next_bin(c, &fl, &sl));
    return true;
}

void vg__tlsf_each_desc(vg_tlsf_t *t, bool (*fn)(vg_block_t *b, void *arg), void *arg) {
    vg__tlsf_each_desc_from(t, -1, 0, fn, arg);
}

bool vg__tlsf_each_desc_from(vg_tlsf_t *t, int cls, uint64_t min_size,
                             bool (*fn)(vg_block_t *b, void *arg), void *arg) {
    if (cls >= 0)
        return walk_from(&t->cls[cls], min_size, fn, arg);
    for (cls = 0; cls < VG_CLASSES; cls++)
        if (!walk_from(&t->cls[cls], min_size, fn, arg))
            return false;
    return true;
}
