/* arena.c — plan=on: a training step's tensors placed where its plan puts them
 * (docs/decisions.md A13; plan.c learns the step and packs the plan).
 *
 * Once a plan is found, its requests are placed in an arena: a range of virtual memory of
 * the plan's height, reserved when the plan's cycle reaches its low point (the position
 * with the fewest planned bytes live), whose pages are mapped as planned tensors first
 * touch them, from the idle pages of the layout the program had while the step was
 * learnt (segment.c moves them, one way). Its free blocks form a class of the free index
 * that no search takes from, so nothing but the plan places there.
 *
 * The i-th request of the cycle, of its planned size, is carved at its planned offset
 * when the free block holding that range may serve the request's stream (A2's rule:
 * freed on it, or complete). Otherwise — the place still held by a tensor of the last
 * cycle freed late, or by another stream's work — it is a miss: it goes where the plan
 * leaves room for as long as it is planned to live, or else to general memory (whose
 * pages may then be the arena's idle ones, lent: segment.c). More than 5 % of a period
 * missed or unlike the plan drops the plan (plan.c);
 * the arena then becomes general memory, and a step found again gets an arena of its
 * own.
 *
 * Holes: the long-lived tensors (blocks older than the step the plan was made from) keep
 * their pages mapped, with free space beside them. Before the plan is first followed, the
 * free blocks' parts on those pages are offered to it (plan.h, vg__plan_fit_holes); a
 * tensor planned there is carved at its address as in the arena, and a hole taken by
 * something else is a miss, which goes to the arena's room as the arena's own do.
 *
 * Settling (last section): a program without a step keeps moving pages to its best fits;
 * once it has moved four times its memory, placement prefers the pages already mapped.
 */
#include <stdlib.h>

#include "base/common.h"
#include "heap.h"
#include "plan.h"

/* The first of the arena's free blocks that together hold [a, a + size), each usable by
 * s, or NULL with *past the end of a block in the way. The live map's nearest allocation
 * below a (the address index) starts a walk over the free blocks between it and a.
 * (Neighbours freed at different epochs stay apart while they wait; s may take them
 * together: vg__heap_carve_at.) */
static vg_block_t *free_at(vg_heap_t *h, vg_segment_t *seg, uint64_t a, uint64_t size,
                           vg_stream_t *s, uint64_t *past) {
    vg_block_t *b = vg__heap_block_below(h, a);
    if (b && b->seg != seg)
        b = NULL;
    if (b && a < b->addr + b->size) { /* an allocation holds it */
        *past = b->addr + b->size;
        return NULL;
    }
    for (b = b ? b->next : seg->first; b && b->addr + b->size <= a; b = b->next)
        ;
    for (vg_block_t *n = b; n && n->addr < a + size; n = n->next) {
        if (n->state != VG_BLOCK_FREE || !vg__block_usable(n, s)) {
            *past = n->addr + n->size;
            return NULL;
        }
    }
    return b;
}

typedef struct room_ctx {
    vg_heap_t *h;
    vg_stream_t *s;
} room_ctx_t;

static uint64_t arena_taken(void *arg, uint64_t off, uint64_t size) {
    room_ctx_t *c = arg;
    uint64_t base = c->h->arena->base, past = 0;
    return free_at(c->h, c->h->arena, base + off, size, c->s, &past) ? 0 : past - base;
}

/* ---- holes ---------------------------------------------------------------------------- */

/* The holes of the plan (plan.h) in the ranges outside arenas: the space on pages that
 * blocks older than the plan's step keep mapped (their free or soon freed neighbours). */
typedef struct holes {
    vg_heap_t *h;
    uint64_t before_id;         /* blocks of this id or lower, still allocated, stay */
    vg_plan_hole_t *v;
    uint32_t n, cap;
    uint64_t *paid;             /* the free pages bridged (VG_BRIDGE_PAGES), by address */
    uint32_t npaid, paid_cap;
} holes_t;

static bool stays(const vg_block_t *b, uint64_t before_id) { /* (a graph's pool may go) */
    return (b->state == VG_BLOCK_ALLOCATED || b->state == VG_BLOCK_QUARANTINED) &&
           b->id <= before_id;
}

static void hole_add(holes_t *c, uint64_t lo, uint64_t hi) {
    if (hi <= lo)
        return;
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 64;
        vg_plan_hole_t *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return; /* (fewer holes) */
        c->v = v, c->cap = cap;
    }
    c->v[c->n++] = (vg_plan_hole_t){lo, hi - lo};
}

/* Free pages (mapped or not) between two kept ones in one free block: the bridge makes
 * one hole of the free space on both, where a tensor wider than either rest fits, at a
 * page's cost for each of those pages it touches (vg__plan_fit_holes weighs it). */
#define VG_BRIDGE_PAGES 2

/* The free pages of block b, between its first and last pages, both kept (kept[i] = 1),
 * made part of its hole (kept[i] = 2) and paid, if VG_BRIDGE_PAGES or fewer. */
static void bridge(holes_t *c, vg_segment_t *seg, const vg_block_t *b, uint8_t *kept) {
    uint64_t page = c->h->page;
    size_t p = (size_t)((b->addr - seg->base) / page);
    size_t q = (size_t)((b->addr + b->size - 1 - seg->base) / page);
    if (q < p + 2 || q - p - 1 > VG_BRIDGE_PAGES || kept[p] != 1 || kept[q] != 1)
        return;
    if (c->npaid + (q - p - 1) > c->paid_cap) {
        uint32_t cap = c->paid_cap ? 2 * c->paid_cap : 64;
        uint64_t *v = realloc(c->paid, cap * sizeof *v);
        if (!v)
            return; /* (no bridge) */
        c->paid = v, c->paid_cap = cap;
    }
    for (size_t i = p + 1; i < q; i++) {
        kept[i] = 2;
        c->paid[c->npaid++] = seg->base + i * page;
    }
}

/* The holes of a segment: its free blocks' parts on pages where a block that stays has a
 * byte (mapped, and kept mapped while it lives), and the pages they bridge. A hole never
 * crosses a slot's boundary (A5: a block starting a slot never merges with the one below).
 * In the small-request range it may take a tensor above small_max: A6 keeps searches
 * apart, and no search takes a hole's space from the plan (cnn_train: a page less). */
static bool segment_holes(vg_segment_t *seg, void *arg) {
    holes_t *c = arg;
    uint64_t page = c->h->page;
    if (seg->cls == VG_CLASS_ARENA || !seg->vmm)
        return true;
    size_t npages = (size_t)(seg->size / page);
    uint8_t *kept = calloc(npages ? npages : 1, 1);
    if (!kept)
        return true; /* (fewer holes) */
    for (vg_block_t *b = seg->first; b; b = b->next)
        if (stays(b, c->before_id))
            for (uint64_t i = (b->addr - seg->base) / page;
                 i <= (b->addr + b->size - 1 - seg->base) / page; i++)
                kept[i] = 1;
    for (vg_block_t *b = seg->first; b; b = b->next)
        if (b->state == VG_BLOCK_FREE)
            bridge(c, seg, b, kept);
    uint64_t lo = 0, hi = 0; /* the hole being extended */
    for (vg_block_t *b = seg->first; b; b = b->next) {
        if (b->state != VG_BLOCK_FREE)
            continue;
        for (uint64_t x = b->addr, e = b->addr + b->size; x < e;) {
            uint64_t pe = VG_MIN(e, vg__align_down(x - seg->base, page) + page + seg->base);
            if (kept[(x - seg->base) / page]) {
                if (x != hi || (x == b->addr && (b->slot & VG_SLOT_START))) {
                    hole_add(c, lo, hi);
                    lo = x;
                }
                hi = pe;
            }
            x = pe;
        }
    }
    hole_add(c, lo, hi);
    free(kept);
    return true;
}

static int by_address(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* The plan's arena may give up its top pages for the holes (plan.h). */
static void fit_holes(vg_heap_t *h) {
    holes_t c = {h, vg__plan_long_lived_before(h->plan), NULL, 0, 0, NULL, 0, 0};
    vg__heap_each_segment(h, segment_holes, &c);
    if (c.npaid)
        qsort(c.paid, c.npaid, sizeof *c.paid, by_address);
    vg__plan_fit_holes(h->plan, c.v, c.n, c.paid, c.npaid, h->page);
    free(c.v);
    free(c.paid);
}

/* The block the tensor being placed was last carved as, if it is free now, holds
 * [a, a + size) of seg (NULL: any segment) and may serve s: then it is the free block
 * free_at would find, without the address index. Since the hint was set, its block may
 * have been merged into the free block below (its struct put back, whose `prev` still
 * names the block that took it in), or had a tensor carved or a piece split off at its
 * front (the place then lies in the blocks after it): both are followed a few steps.
 * (Block structs are recycled, never freed while the heap lives, and a recycled one is
 * poisoned or describes its new block: the checks hold either way.) */
static vg_block_t *hinted(vg_heap_t *h, const vg_segment_t *seg, uint64_t a, uint64_t size,
                          vg_stream_t *s) {
    vg_block_t *b = h->arena_item < h->arena_hints ? h->arena_hint[h->arena_item] : NULL;
    for (int hop = 0; b && b->state == VG_BLOCK_PUT && hop < 4; hop++)
        b = b->prev;
    for (int hop = 0; b && b->state != VG_BLOCK_PUT && b->addr + b->size <= a && hop < 2; hop++)
        b = b->next;
    if (b && b->state == VG_BLOCK_FREE && (!seg || b->seg == seg) && b->addr <= a &&
        a + size <= b->addr + b->size && vg__block_usable(b, s))
        return b;
    return NULL;
}

void vg__arena_placed(vg_heap_t *h, vg_block_t *b) {
    if (h->arena_item < h->arena_hints) {
        h->arena_hint[h->arena_item] = b;
        b->plan_item = h->arena_item + 1;
    }
}

/* The free block that took in a planned tensor's place is where the tensor planned next
 * there will be carved: its hint (most places are taken over within a few requests). */
void vg__arena_freed(vg_heap_t *h, uint32_t item, vg_block_t *f) {
    const uint32_t *succ = vg__plan_successors(h->plan);
    if (succ && item < h->arena_hints) /* (an item of a plan since dropped: out of range) */
        h->arena_hint[succ[item]] = f;
}

static void hints_reset(vg_heap_t *h, uint32_t n) {
    free(h->arena_hint);
    h->arena_hint = n ? calloc(n, sizeof *h->arena_hint) : NULL;
    h->arena_hints = h->arena_hint ? n : 0;
}

/* A miss: the arena may take its own idle pages for a cycle (segment.c). */
void vg__arena_missed(vg_heap_t *h) {
    vg__plan_missed(h->plan);
    h->arena_missed_until = h->next_id + vg__plan_cycle(h->plan);
}

static void missed_here(vg_heap_t *h, bool *missed) {
    vg__arena_missed(h);
    *missed = true;
}

/* A miss goes to general memory, but not to a place the plan put in a hole (it would make
 * that hole's tensor a miss too, and so on: unet_train --perturb=2 dropped its plan so):
 * the tightest mapped free block of the request's range with room clear of them, outside
 * slots as a search would be (A5), by a walk of the free index (misses are rare), else
 * NULL (general memory as usual). */
typedef struct clear_ctx {
    vg_heap_t *h;
    vg_stream_t *s;
    uint64_t size, at;
    vg_block_t *best;
} clear_ctx_t;

static bool clear_fit(vg_block_t *b, void *arg) {
    clear_ctx_t *c = arg;
    if (b->size < c->size || !b->mapped || (c->best && b->size >= c->best->size) ||
        ((b->slot & VG_SLOT_IN) && c->size < c->h->slot_min) || !vg__block_usable(b, c->s))
        return true; /* (a slot is kept whole for a request of its size: A5) */
    uint64_t x = vg__plan_clear_of_holes(c->h->plan, b->addr, b->addr + b->size, c->size);
    if (x != VG_PLAN_NONE)
        c->best = b, c->at = x;
    return !c->best || c->best->size != c->size; /* (an exact fit: no tighter one) */
}

static vg_block_t *clear_of_holes(vg_heap_t *h, uint64_t size, vg_stream_t *s,
                                  uint64_t *addr) {
    clear_ctx_t c = {h, s, size, 0, NULL};
    if (!vg__plan_in_holes(h->plan))
        return NULL; /* (nothing to keep clear of: the search of general memory) */
    int cls = size <= h->small_max && h->small_seg ? VG_CLASS_SMALL : VG_CLASS_GENERAL;
    vg__tlsf_each_desc_from(&h->index, cls, size, clear_fit, &c);
    *addr = c.at;
    return c.best;
}

/* A miss's place: where the plan leaves the arena free for as long as the request is
 * planned to live, if anywhere; else clear of the places planned in holes. A miss in a hole
 * goes to the arena's room too: in general memory it mapped a page, taken from the arena's
 * idle ones, which the arena's next tensor needed (cnn_train --perturb=2: a page more). */
static vg_block_t *miss_room(vg_heap_t *h, uint64_t size, vg_stream_t *s, uint64_t *addr) {
    if (h->arena) {
        room_ctx_t c = {h, s};
        uint64_t room = vg__plan_room(h->plan, h->next_id, size, arena_taken, &c), past;
        vg_block_t *b = room == VG_PLAN_NONE
                            ? NULL
                            : free_at(h, h->arena, h->arena->base + room, size, s, &past);
        if (b) {
            *addr = h->arena->base + room;
            return b;
        }
    }
    return clear_of_holes(h, size, s, addr);
}

vg_block_t *vg__arena_find(vg_heap_t *h, uint64_t size, vg_stream_t *s, uint64_t *addr,
                           bool *missed) {
    uint64_t height, gen;
    bool on = vg__plan_following(h->plan, &height, &gen);
    if (!on && vg__plan_resumes(h->plan, h->next_id, size)) /* (a dormant plan's step back) */
        on = vg__plan_following(h->plan, &height, &gen);
    bool dormant = !on && vg__plan_dormant(h->plan); /* (its arena waits, lent) */
    if (h->arena && !dormant && (!on || gen != h->arena_gen)) { /* its plan was dropped */
        vg__segment_arena_retire(h, h->arena);
        h->arena = NULL;
        hints_reset(h, 0);
    }
    *missed = false;
    if (dormant)
        return NULL;
    if (!on || (!h->arena && h->arena_gen == gen)) /* (no address space for this plan's) */
        return NULL;
    if (!h->arena && vg__plan_fit_due(h->plan, h->next_id)) {
        fit_holes(h);
        vg__plan_following(h->plan, &height, &gen);
        hints_reset(h, vg__plan_items(h->plan));
    }
    bool in_hole;
    uint64_t off = vg__plan_place(h->plan, h->next_id, size, &in_hole, &h->arena_item);
    if (off == VG_PLAN_NONE) /* (next_id: this request's) */
        return NULL;
    if (in_hole) {
        vg_block_t *b = hinted(h, NULL, off, size, s); /* (a free block holding it: its own) */
        if (!b) {
            vg_segment_t *seg = vg__heap_segment_at(h, off);
            uint64_t past;
            b = seg ? free_at(h, seg, off, size, s, &past) : NULL;
        }
        if (!b) { /* (the arena's own pages need not move for it) */
            vg__plan_missed(h->plan);
            *missed = true;
            return miss_room(h, size, s, addr);
        }
        *addr = off;
        return b;
    }
    if (!h->arena) {
        h->arena = vg__segment_arena(h, height);
        h->arena_gen = gen;
        /* (the handover: while the last layout's tensors go, the arena's idle pages move) */
        h->arena_missed_until = h->next_id + vg__plan_cycle(h->plan);
        if (!h->arena) { /* no address space for it: placed as before */
            missed_here(h, missed);
            return NULL;
        }
    }
    uint64_t a = h->arena->base + off, past;
    vg_block_t *b = hinted(h, h->arena, a, size, s);
    if (!b)
        b = free_at(h, h->arena, a, size, s, &past);
    if (!b) { /* a miss */
        missed_here(h, missed);
        return miss_room(h, size, s, addr);
    }
    *addr = a;
    return b;
}

/* ---- settling (heap.h, vg__heap_settling) ---------------------------------------------
 *
 * No plan followed, and a program that moved pages without one for long: a request whose
 * best fit b would map pages goes instead, among the MF_CANDIDATES smallest free blocks
 * that hold it, to the one, at its start or its end, that needs the fewest pages mapped.
 * A cache grown by concatenation frees its old copy right after making the new one;
 * placed where pages are mapped, the copies reuse the same pages token after token, where
 * best fit leaves them behind and moves pages to each new copy
 * (bench/mapped_first_model.py). */
#define MF_CANDIDATES 16
#define MF_LOOKS 64 /* blocks looked at, at most (as a search of the free index skips) */
typedef struct mf_ctx {
    vg_heap_t *h;
    vg_stream_t *s;
    uint64_t size;
    int fits, looks;
    size_t need;        /* the best one's pages to map */
    vg_block_t *best;
    uint64_t at;
} mf_ctx_t;

static bool mf_visit(vg_block_t *b, void *arg) {
    mf_ctx_t *c = arg;
    if (++c->looks > MF_LOOKS)
        return false;
    if (b->size < c->size || !vg__block_usable(b, c->s) ||
        ((b->slot & VG_SLOT_IN) && c->size < c->h->slot_min))
        return true; /* (a slot is kept whole for a request of its size: A5) */
    uint64_t ends[2] = {b->addr, b->addr + b->size - c->size};
    for (int k = 0; k < 2; k++) {
        size_t need = vg__segment_unmapped_pages(b->seg, ends[k], c->size);
        if (need < c->need)
            c->need = need, c->best = b, c->at = ends[k];
    }
    return c->need > 0 && ++c->fits < MF_CANDIDATES;
}

vg_block_t *vg__arena_mapped_first(vg_heap_t *h, uint64_t size, vg_stream_t *s, vg_block_t *b,
                                   uint64_t *at) {
    mf_ctx_t c = {h, s, size, 0, 0, vg__segment_unmapped_pages(b->seg, b->addr, size), b,
                  b->addr};
    if (c.need == 0)
        return NULL;
    int cls = b->seg->cls == VG_CLASS_SMALL ? VG_CLASS_SMALL : VG_CLASS_GENERAL;
    vg__tlsf_each_asc_from(&h->index, cls, size, mf_visit, &c); /* (the class b came from) */
    if (c.best == b && c.at == b->addr)
        return NULL;
    *at = c.at;
    return c.best;
}
