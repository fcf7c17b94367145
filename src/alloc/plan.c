/* plan.c — a training loop's step, learnt from the requests a heap serves, and the plan of
 * two steps packed from it (plan.h; docs/decisions.md A13).
 *
 * The log is a ring of the last VG_PLAN_WINDOW requests: each one's size, the request
 * count when it was freed, the live bytes just after it was served and the bytes served
 * so far. Finding a step of P requests needs 3P of them logged, and packing its plan reads
 * the last 2.5P; the window holds four of the longest steps looked for.
 */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "plan.h"

#define VG_PLAN_WINDOW (4u * VG_PLAN_MAX_PERIOD)
_Static_assert(VG_PLAN_LONG_PERIOD * 5 / 2 <= VG_PLAN_WINDOW,
               "the whole-step search reads 2.5 periods of the log (outer_search)");
#define LIVE UINT64_MAX /* freed_at of a request still live */
#define VG_FIT_RETRIES 4 /* an order failing under a top: tried again, its misfit first */

struct vg_plan {
    uint64_t n;                 /* requests logged */
    uint64_t live;              /* their live bytes now */
    uint64_t to_check;          /* a step found: requests until a period is followed (the
                                   fast path's count, for rep.since % rep.period) */
    uint64_t min_p;             /* the smallest period still worth trying */
    uint64_t outer;             /* an outer step looked for, about this long (0: none) */
    uint64_t outer_until;       /* ... until this request (outer_step_seen) */
    uint64_t rebuilt_at, rebuilt_per; /* a dormant plan's state last rebuilt: when, its period */
    uint64_t cand, cand_at;     /* a period being confirmed, and from which request */
    uint64_t differ;            /* requests of the current period unlike a step before */
    vg_plan_report_t rep;
    vg_plan_item_t *items;      /* the lifetimes of the step found, packed when asked for */
    uint32_t nitems, cycle;
    uint64_t found;             /* steps found so far (a step dropped and found again: 2) */
    uint64_t confirmed;         /* the period confirmed for it, before smallest_step */
    bool follow;                /* plan=on: the heap places by the plan (packed at once) */
    uint64_t *off;              /* follow: each item's offset, once packed */
    uint64_t *hole;             /* follow: the address of an item placed in a hole, or 0 */
    struct span *taken;         /* follow: the places planned in holes, merged, by address */
    uint32_t ntaken;
    uint32_t *succ;             /* follow: the item planned next at each one's address */
    int32_t *at_pos;            /* follow: the item starting at each position, or -1 */
    uint64_t base;              /* the request at position 0 of the cycle */
    uint32_t low;               /* the position it is followed from */
    bool started;               /* that position was reached */
    uint32_t in_step;           /* requests in a row whose sizes were the plan's */
    bool fitted;                /* vg__plan_fit_holes was called for this plan */
    uint64_t last_req;          /* the request vg__plan_place was last asked for ... */
    uint32_t last_pos;          /* ... and its position on the cycle */
    uint64_t placed, missed;    /* follow: requests placed by the plans; places taken */
    bool dormant;               /* follow: a plan held long and interrupted, kept to resume */
    vg_plan_report_t held;      /* dormant: its report, restored when it resumes */
    uint64_t *csize;            /* follow: the cycle's sizes by position, every request's
                                   (placed or not), from the log the plan was made of */
    uint64_t in_phase_from;     /* follow: the first request known in phase with the plan */
    uint64_t ll_base;           /* requests before this one outlived the steps */
    uint32_t resume_pos;        /* dormant: the position where it was interrupted */
    uint32_t trial;             /* taken up again: requests still to be the step's, or 0 */
    uint64_t dormant_until;     /* dormant: forgotten at this request */
    uint64_t stretch_from;      /* rep.since when the plan was last taken up (0: found) */
    uint64_t longest;           /* requests of its longest stretch followed, so far */
    uint64_t grace_until;       /* resumed: requests before this one are not watched */
    uint64_t resumed;           /* dormant plans taken up again */
    uint64_t ll_freed;          /* bytes freed, since the plan was made, of requests older
                                   than its base (parameters, optimizer state...) */
    uint64_t mismatch[VG_PLAN_LONG_PERIOD + 1]; /* period_of: for each period per, the
                                   latest request x found whose size differs from request
                                   x - per's (0: none yet); per fails while x is in its window */
    uint64_t size[VG_PLAN_WINDOW];
    uint64_t freed_at[VG_PLAN_WINDOW];
    uint64_t live_after[VG_PLAN_WINDOW];
    uint64_t served[VG_PLAN_WINDOW]; /* bytes served by the requests up to this one */
};

/* A request is placed where the plan puts it only after this many requests in a row of
 * the plan's sizes (those the plan places). A program out of step with the plan, run
 * again in the same process or changed, still meets the plan's size at a place now and
 * then, and a tensor placed there by chance pins an arena page until it is freed: lstm_lm
 * run twice reserved 10 pages more for them (bench/RESULTS.md, fourteenth session). */
#define VG_PLAN_IN_STEP 8

/* A plan followed for at least VG_PLAN_HELD periods, then dropped, was the program's step,
 * interrupted (an evaluation, a checkpoint) or left for good. The step is looked for again
 * from the smallest period, and the plan waits, dormant, for as many requests as its
 * longest stretch followed without a break, and at least VG_PLAN_DORMANT cycles of them:
 * an evaluation over a whole validation set (ImageNet's 782 batches of 64: 86 cycles of
 * cnn_train_eval's step) is seldom longer than the training between two, though often
 * longer than 32 cycles. The step that comes back as it was takes up its plan and arena
 * again, on trial from the request of its size where it stopped, for good after
 * VG_PLAN_IN_STEP requests in a row of its sizes. Meanwhile a step of another length (an
 * evaluation's loop over its batches) gets no plan of its own. */
#define VG_PLAN_HELD 4
#define VG_PLAN_DORMANT 32

static inline uint32_t at(uint64_t req) { return (uint32_t)(req % VG_PLAN_WINDOW); }

vg_plan_t *vg__plan_new(bool follow) {
    vg_plan_t *p = calloc(1, sizeof *p);
    if (p) {
        p->min_p = VG_PLAN_MIN_PERIOD;
        p->follow = follow;
        p->last_req = UINT64_MAX;
    }
    return p;
}

/* Forget the plan (not what was logged). */
static void plan_clear(vg_plan_t *p) {
    free(p->items);
    free(p->off);
    free(p->at_pos);
    free(p->hole);
    free(p->taken);
    free(p->succ);
    p->items = NULL, p->off = NULL, p->at_pos = NULL, p->hole = NULL, p->taken = NULL;
    p->succ = NULL;
    p->ntaken = 0;
    free(p->csize);
    p->csize = NULL;
    p->dormant = false;
    p->trial = 0;
    p->stretch_from = p->longest = 0;
    p->grace_until = 0;
    p->in_step = 0;
    p->started = false;
    p->fitted = false;
    p->last_req = UINT64_MAX;
}

void vg__plan_free(vg_plan_t *p) {
    if (p)
        plan_clear(p);
    free(p);
}

/* Pack the plan found: its height. Only to report it (plan=learn), the lifetimes then go;
 * to follow it, they stay, with their offsets. False when out of memory. */
static bool pack(vg_plan_t *p) {
    uint64_t *offsets = malloc((size_t)p->nitems * sizeof *offsets + 1);
    uint64_t h = offsets ? vg__plan_pack(p->items, p->nitems, p->cycle, offsets) : UINT64_MAX;
    if (h == UINT64_MAX) {
        free(offsets);
        return false;
    }
    p->rep.height = h;
    if (p->follow) {
        p->off = offsets;
    } else {
        free(offsets);
        free(p->items);
        p->items = NULL;
    }
    return true;
}

/* With plan=learn the plan is packed when first asked for, not when the step is found:
 * packing is O(lifetimes^2), a second on the longest steps, and nothing places by it. */
void vg__plan_get(vg_plan_t *p, vg_plan_report_t *out) {
    if (p->items && !p->off) /* (a step found, not packed yet) */
        pack(p);
    *out = p->dormant ? p->held : p->rep; /* (dormant: the step it waits for) */
    out->found = p->found;
    out->resumed = p->resumed;
    out->placed = p->placed;
    out->missed = p->missed;
    out->items = p->at_pos ? p->nitems : 0;
}

static bool trial_holds(vg_plan_t *p, uint32_t pos, uint64_t size);

uint64_t vg__plan_place(vg_plan_t *p, uint64_t req, uint64_t size, bool *in_hole,
                        uint32_t *item) {
    if (!p->at_pos || req < p->base)
        return VG_PLAN_NONE;
    uint32_t pos = req == p->last_req + 1 /* (the next one; UINT64_MAX + 1: none yet) */
                       ? (p->last_pos + 1 == p->cycle ? 0 : p->last_pos + 1)
                       : (uint32_t)((req - p->base) % p->cycle);
    p->last_req = req, p->last_pos = pos;
    if (VG_UNLIKELY(p->trial) && !trial_holds(p, pos, size))
        return VG_PLAN_NONE;
    if (!p->started) { /* (from its low point: the fewest planned tensors live elsewhere) */
        if (pos != p->low)
            return VG_PLAN_NONE;
        p->started = true;
        p->in_step = VG_PLAN_IN_STEP;
    }
    int32_t i = p->at_pos[pos];
    if (i < 0)
        return VG_PLAN_NONE; /* (a request the plan leaves to general memory) */
    if (p->items[i].size != size) {
        p->in_step = 0;
        /* A size unlike the plan's counts in learn when it is unlike the step a period
         * before too; when the program repeats its step but not the plan's, or just
         * after the plan was taken up (the log's period before is not the step's), the
         * plan is out of phase: that counts here. */
        if (req < p->grace_until || (req <= p->n && p->size[at(req - p->rep.period)] == size))
            p->differ++; /* (req <= n: the period before it is logged) */
        return VG_PLAN_NONE;
    }
    if (p->in_step < VG_PLAN_IN_STEP) { /* (out of step until then: see VG_PLAN_IN_STEP) */
        p->in_step++;
        return VG_PLAN_NONE;
    }
    p->placed++;
    *in_hole = p->hole && p->hole[i];
    *item = (uint32_t)i;
    return *in_hole ? p->hole[i] : p->off[i];
}

bool vg__plan_fit_due(const vg_plan_t *p, uint64_t req) {
    return p->at_pos && !p->fitted && req >= p->base &&
           (p->started || (uint32_t)((req - p->base) % p->cycle) == p->low);
}

uint64_t vg__plan_long_lived_before(const vg_plan_t *p) { return p->base; }

void vg__plan_missed(vg_plan_t *p) {
    p->placed--;
    p->missed++;
    p->differ++;
}

bool vg__plan_following(const vg_plan_t *p, uint64_t *height, uint64_t *generation) {
    *height = p->rep.height;
    *generation = p->found;
    return p->at_pos != NULL && !p->dormant;
}

bool vg__plan_dormant(const vg_plan_t *p) { return p->dormant; }

bool vg__plan_resumes(vg_plan_t *p, uint64_t req, uint64_t size) {
    if (!p->dormant)
        return false;
    if (req >= p->dormant_until) { /* (the step did not come back) */
        plan_clear(p);
        return false;
    }
    if (p->csize[p->resume_pos] != size)
        return false;
    /* The step's request where it stopped: the plan is taken up on trial, request req at
     * that place on its cycle; the next requests say whether the step is back (trial_holds):
     * its first tensors then have their places, not general memory's. */
    p->dormant = false;
    p->trial = VG_PLAN_IN_STEP;
    p->base = req - p->resume_pos;
    p->in_phase_from = req;
    p->rep = p->held;
    p->stretch_from = p->rep.since;
    p->cand = 0;
    p->differ = 0;
    p->to_check = p->rep.period;
    p->grace_until = req + p->rep.period; /* (the log's period before is not the step's) */
    p->last_req = UINT64_MAX;
    p->started = true;
    p->in_step = VG_PLAN_IN_STEP;
    return true;
}

/* A plan on trial (vg__plan_resumes), request at position pos: the step's size there, and
 * the trial passes after VG_PLAN_IN_STEP of them; any other size and the plan waits again,
 * dormant (what the trial placed stays where it is). */
static bool trial_holds(vg_plan_t *p, uint32_t pos, uint64_t size) {
    if (p->csize[pos] != size) {
        p->trial = 0;
        p->dormant = true;
        p->rep = (vg_plan_report_t){0};
        p->differ = 0;
        return false;
    }
    if (--p->trial == 0)
        p->resumed++;
    return true;
}

uint64_t vg__plan_cycle(const vg_plan_t *p) { return p->at_pos ? p->cycle : 0; }

uint32_t vg__plan_items(const vg_plan_t *p) { return p->at_pos ? p->nitems : 0; }

/* ---- packing --------------------------------------------------------------------------- */

/* A plan of more tensors than two of the longest steps looked for can have (an outer
 * step's: gradient accumulation) is packed in one order and one gap rule, not ten: each
 * packing is O(n^2), 0.1-0.2 s at 19,448 tensors, where the orders by size, size x
 * lifetime and breadth gave the same height (gpt_train_accum's outer step). */
#define VG_PLAN_BIG_ITEMS 16384

typedef struct {
    unsigned __int128 a;        /* larger first */
    uint64_t b;                 /* then larger first */
    uint32_t start, idx;        /* then earlier first */
} order_key_t;

static int by_key(const void *x, const void *y) {
    const order_key_t *p = x, *q = y;
    if (p->a != q->a)
        return p->a > q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b > q->b ? -1 : 1;
    if (p->start != q->start)
        return p->start < q->start ? -1 : 1;
    return p->idx < q->idx ? -1 : p->idx > q->idx;
}

/* A lifetime on the cycle as at most two spans: [s, e) and, when it wraps, [0, w). */
typedef struct {
    uint32_t s, e, w;
} life_t;

/* Item it's lifetime on a cycle of `cycle` requests. */
static inline life_t life_on(const vg_plan_item_t *it, uint32_t cycle) {
    uint32_t e = it->end;
    return (life_t){it->start, e < cycle ? e : cycle, e > cycle ? e - cycle : 0};
}

static inline bool overlap(life_t a, life_t b) { /* (two that wrap meet before the end) */
    return (a.s < b.e && b.s < a.e) || (a.w && b.s < a.w) || (b.w && a.s < b.w);
}

typedef struct span {
    uint64_t lo, hi;
} span_t;

/* An item placed by a packing, as its inner loops read it: where and while it lives, side
 * by side (not through the item's index: one array read in order, not three at random). */
typedef struct {
    uint64_t lo, hi;
    life_t life;
} placed_t;

/* A packing's state. Holes (vg__plan_fit_holes): an item that would reach above `top` in
 * the arena goes to the tightest hole with room for it while it lives, if any. */
typedef struct packer {
    const vg_plan_item_t *items;
    const life_t *life;
    uint32_t n;
    uint64_t *off;              /* each item's offset in the arena */
    placed_t *placed;           /* the items in the arena so far, by offset */
    uint64_t top;               /* UINT64_MAX: no holes */
    bool holes_first;           /* each item tries the holes before the arena */
    const vg_plan_hole_t *holes;
    uint32_t nholes;
    uint64_t *hole;             /* an item's address in a hole, or 0 */
    placed_t *holed;            /* the items in holes so far, by address */
    span_t *busy;               /* scratch: the holes' items living at the same time */
    uint32_t cycle;
} packer_t;

static int by_lo(const void *x, const void *y) {
    uint64_t a = ((const span_t *)x)->lo, b = ((const span_t *)y)->lo;
    return a < b ? -1 : a > b;
}

/* The first of v[0..n) (sorted by lo) whose lo is x or more. */
static uint32_t first_from(const span_t *v, uint32_t n, uint64_t x) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (v[mid].lo < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The lowest x in [lo, hi) where [x, x + size) misses every span of busy (sorted by lo),
 * or UINT64_MAX. */
static uint64_t lowest_fit(const span_t *busy, uint32_t n, uint64_t lo, uint64_t hi,
                           uint64_t size) {
    uint64_t x = lo;
    for (uint32_t k = 0; k < n && busy[k].lo < x + size; k++)
        if (busy[k].hi > x)
            x = busy[k].hi;
    return x + size <= hi ? x : UINT64_MAX;
}

/* Item i in the tightest hole with room from `cool` requests before it starts to `cool`
 * after it ends: its address, or UINT64_MAX. */
static uint64_t in_a_hole_from(packer_t *pk, uint32_t i, uint32_t nholed, uint32_t cool) {
    uint64_t size = pk->items[i].size, best = UINT64_MAX, best_size = UINT64_MAX;
    uint32_t nb = 0, c = pk->cycle;
    life_t a = pk->life[i], mine = a, before = {0, 0, 0}; /* (before: wrapped to the end) */
    if (cool && 2 * cool < c) { /* [s - cool, e + cool) on the cycle */
        mine.s = a.s > cool ? a.s - cool : 0;
        if (a.s < cool)
            before = (life_t){c - (cool - a.s), c, 0};
        if (a.w)
            mine.w = a.w + cool < mine.s ? a.w + cool : mine.s;
        else if (a.e + cool > c)
            mine.e = c, mine.w = a.e + cool - c < mine.s ? a.e + cool - c : mine.s;
        else
            mine.e = a.e + cool;
    }
    for (uint32_t q = 0; q < nholed; q++) {
        const placed_t *h = &pk->holed[q];
        if (overlap(mine, h->life) || (before.e && overlap(before, h->life)))
            pk->busy[nb++] = (span_t){h->lo, h->hi}; /* (by address, as holed) */
    }
    for (uint32_t k = 0; k < pk->nholes; k++) {
        const vg_plan_hole_t *hl = &pk->holes[k];
        if (hl->size < size || hl->size >= best_size)
            continue;
        /* (each item in a hole lies inside it, and holes do not overlap: the spans below
         * this hole's first end at or below it, and change nothing) */
        uint32_t from = first_from(pk->busy, nb, hl->addr);
        uint64_t x = lowest_fit(pk->busy + from, nb - from, hl->addr, hl->addr + hl->size, size);
        if (x != UINT64_MAX)
            best = x, best_size = hl->size;
    }
    return best;
}

/* Item i in the tightest hole with room while it lives, preferring a place that none left
 * less than VG_PLAN_COOL requests before: its address, or UINT64_MAX. A tensor freed a few
 * requests late (another stream, another order of frees) then does not take the next
 * one's place: the hole's next tensor would be a miss, and a miss goes to general memory,
 * where tight fits are the holes' small places (unet_train --perturb=1: 246 misses, 35
 * with cool places). The arena leaves this to the misses' room. */
static uint64_t in_a_hole(packer_t *pk, uint32_t i, uint32_t nholed) {
    uint64_t a = in_a_hole_from(pk, i, nholed, VG_PLAN_COOL);
    return a != UINT64_MAX ? a : in_a_hole_from(pk, i, nholed, 0);
}

/* Insert x into v[0..n), kept by lo. */
static void insert_by_lo(placed_t *v, uint32_t n, placed_t x) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (v[mid].lo <= x.lo)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(v + lo + 1, v + lo, (n - lo) * sizeof *v);
    v[lo] = x;
}

/* Item i goes to a hole, at a. */
static void to_hole(packer_t *pk, uint32_t i, uint64_t a, uint32_t *nholed) {
    pk->hole[i] = a;
    insert_by_lo(pk->holed, (*nholed)++, (placed_t){a, a + pk->items[i].size, pk->life[i]});
    pk->off[i] = 0; /* (not in the arena) */
}

/* One greedy packing: items in `order`, each at the lowest offset free of the items placed
 * before it that overlap it on the cycle, or in the tightest such gap. `placed` keeps the
 * items placed so far by offset, so the gaps are read in one pass: O(n) an item. Returns
 * the height, or UINT64_MAX if an item fits neither under top nor in a hole (the k-th of
 * the order: *failed = k). */
static uint64_t pack_once(packer_t *pk, const order_key_t *order, bool tightest,
                          uint32_t *failed) {
    const vg_plan_item_t *items = pk->items;
    uint64_t *off = pk->off, height = 0;
    placed_t *placed = pk->placed;
    uint32_t np = 0, nholed = 0;
    for (uint32_t k = 0; k < pk->n; k++) {
        uint32_t i = order[k].idx;
        if (pk->hole)
            pk->hole[i] = 0;
        if (pk->holes_first) {
            uint64_t a = in_a_hole(pk, i, nholed);
            if (a != UINT64_MAX) {
                to_hole(pk, i, a, &nholed);
                continue;
            }
        }
        uint64_t x = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
        life_t mine = pk->life[i];
        for (uint32_t j = 0; j < np; j++) {
            if (!overlap(mine, placed[j].life))
                continue;
            uint64_t lo = placed[j].lo, hi = placed[j].hi;
            if (lo >= x && lo - x >= items[i].size && lo - x < best_gap) {
                best_gap = lo - x;
                best = x;
                if (!tightest || best_gap == items[i].size) /* (none tighter than exact) */
                    break;
            }
            if (hi > x)
                x = hi;
        }
        off[i] = best != UINT64_MAX ? best : x;
        if (off[i] + items[i].size > pk->top) {
            uint64_t a = in_a_hole(pk, i, nholed);
            if (a == UINT64_MAX) {
                *failed = k;
                return UINT64_MAX;
            }
            to_hole(pk, i, a, &nholed);
            continue;
        }
        insert_by_lo(placed, np++, (placed_t){off[i], off[i] + items[i].size, mine});
        if (off[i] + items[i].size > height)
            height = off[i] + items[i].size;
    }
    return height;
}

static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* live[x]: the bytes of the items live at position x of the cycle (live: cycle + 1
 * entries, zeroed), from a difference array. */
static void live_on_cycle(const vg_plan_item_t *items, uint32_t n, uint32_t cycle,
                          uint64_t *live) {
    for (uint32_t i = 0; i < n; i++) {
        life_t l = life_on(&items[i], cycle);
        live[l.s] += items[i].size, live[l.e] -= items[i].size;
        if (l.w)
            live[0] += items[i].size, live[l.w] -= items[i].size;
    }
    for (uint32_t t = 1; t < cycle; t++)
        live[t] += live[t - 1];
}

/* Each item's breadth: the most bytes the items live at once at any point of its
 * lifetime (its busiest moment), read from a sparse table of the cycle's live bytes:
 * O(n + C log C). NULL when out of memory. */
static uint64_t *breadths(const vg_plan_item_t *items, const life_t *life, uint32_t n,
                          uint32_t cycle) {
    uint32_t levels = 1;
    while ((2u << (levels - 1)) <= cycle)
        levels++;
    uint64_t *tab = calloc((size_t)levels * (cycle + 1), sizeof *tab);
    uint64_t *out = malloc((size_t)n * sizeof *out + 1);
    if (!tab || !out) {
        free(tab), free(out);
        return NULL;
    }
    live_on_cycle(items, n, cycle, tab);
    for (uint32_t l = 1; l < levels; l++) { /* row l: the max of 2^l positions from t */
        uint64_t *row = tab + (size_t)l * (cycle + 1), *prev = row - (cycle + 1);
        for (uint32_t t = 0; t + (1u << l) <= cycle; t++)
            row[t] = max64(prev[t], prev[t + (1u << (l - 1))]);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t span[2][2] = {{life[i].s, life[i].e}, {0, life[i].w}};
        out[i] = 0;
        for (int k = 0; k < 2; k++) {
            uint32_t a = span[k][0], b = span[k][1], l = 0;
            if (b <= a)
                continue;
            while ((2u << l) <= b - a)
                l++;
            const uint64_t *row = tab + (size_t)l * (cycle + 1);
            out[i] = max64(out[i], max64(row[a], row[b - (1u << l)]));
        }
    }
    free(tab);
    return out;
}

/* order: the items in packing order o (by size, by size x lifetime, by lifetime then size,
 * by breadth then size, by breadth then lifetime). */
static void set_order(order_key_t *order, const vg_plan_item_t *items, uint32_t n,
                      const uint64_t *breadth, int o) {
    for (uint32_t i = 0; i < n; i++) {
        uint64_t len = items[i].end - items[i].start;
        order[i] = (order_key_t){o == 0   ? items[i].size
                                 : o == 1 ? (unsigned __int128)items[i].size * len
                                 : o == 2 ? len
                                          : breadth[i],
                                 o == 2 || o == 3 ? items[i].size : o == 4 ? len : 0,
                                 items[i].start, i};
    }
    qsort(order, n, sizeof *order, by_key);
}

/* A packing of height h kept if the lowest so far. */
static void keep_best(const packer_t *pk, uint64_t h, uint64_t *best, uint64_t *offsets,
                      uint64_t *hole_out) {
    if (h >= *best)
        return;
    *best = h;
    memcpy(offsets, pk->off, (size_t)pk->n * sizeof *pk->off);
    if (hole_out)
        memcpy(hole_out, pk->hole, (size_t)pk->n * sizeof *pk->hole);
}

/* The lowest height of the greedy packings tried (five orders, three with holes, each at
 * the lowest offsets and in the tightest gaps), its offsets (and holes) in offsets
 * (hole_out); UINT64_MAX if every one failed or out of memory. The last two orders, by
 * breadth, pack the items of the busiest moment first, side by side at the bottom ("greedy
 * by breadth", as TensorFlow Lite's arena planner), closer to the peak of the live bytes
 * where the others leave a page or two of gaps (lstm_lm's plan: 121.79 pages, its peak,
 * not 123.98; cnn_train's 81.12 for a peak of 80.56, not 81.69).
 * Under a top (the fit's lowering, vg__plan_fit_holes) the first packing that fits is
 * kept; if none does and the holes are tried first, the one that got furthest is tried
 * again with the item that did not fit moved to its front, up to VG_FIT_RETRIES times
 * ("squeaky wheel": placed early, it takes a low place, and the small ones after it fill
 * round it; cnn_train's arena 79.875 -> 78.750 pages). */
static uint64_t pack_best(const vg_plan_item_t *items, uint32_t n, uint32_t cycle,
                          uint64_t top, bool holes_first, const vg_plan_hole_t *holes,
                          uint32_t nholes, uint64_t *offsets, uint64_t *hole_out) {
    order_key_t *order = malloc((size_t)n * sizeof *order + 1);
    bool under = top != UINT64_MAX; /* the fit's lowering: the first packing under it */
    order_key_t *again = under && holes_first ? malloc((size_t)n * sizeof *again + 1) : NULL;
    life_t *life = malloc((size_t)n * sizeof *life + 1);
    packer_t pk = {items, life, n, malloc((size_t)n * sizeof *pk.off + 1),
                   malloc((size_t)n * sizeof *pk.placed + 1), top, holes_first, holes, nholes,
                   hole_out ? malloc((size_t)n * sizeof *pk.hole + 1) : NULL,
                   hole_out ? malloc((size_t)n * sizeof *pk.holed + 1) : NULL,
                   hole_out ? malloc((size_t)n * sizeof *pk.busy + 1) : NULL, cycle};
    uint64_t best = UINT64_MAX, *breadth = NULL;
    if (!order || !life || !pk.off || !pk.placed || (under && holes_first && !again) ||
        (hole_out && (!pk.hole || !pk.holed || !pk.busy)))
        goto out;
    for (uint32_t i = 0; i < n; i++)
        life[i] = life_on(&items[i], cycle);
    /* (Not in the fit to holes: there the tighter layouts kept fewer pages in the trace's
     * own order but lost more places in perturbed ones, and unet_train --perturb=2 dropped
     * its plan: docs/decisions.md A13. Without the table, three orders.) */
    breadth = hole_out ? NULL : breadths(items, life, n, cycle);
    /* By size, by size x lifetime, by lifetime (then size), by breadth then size, by
     * breadth then lifetime. */
    uint32_t far = 0, far_o = 0, far_t = 0; /* under a top: the packing that got furthest */
    int o_lo = 0, o_hi = breadth ? 5 : 3, rules = 2;
    if (n > VG_PLAN_BIG_ITEMS) /* (an outer step's: one order, one gap rule) */
        o_lo = breadth ? 3 : 0, o_hi = o_lo + 1, rules = 1;
    for (int o = o_lo; o < o_hi && !(under && best != UINT64_MAX); o++) {
        set_order(order, items, n, breadth, o);
        for (int tightest = 0; tightest < rules && !(under && best != UINT64_MAX); tightest++) {
            uint32_t failed = 0;
            uint64_t h = pack_once(&pk, order, tightest, &failed);
            if (h == UINT64_MAX && failed >= far)
                far = failed, far_o = (uint32_t)o, far_t = (uint32_t)tightest;
            keep_best(&pk, h, &best, offsets, hole_out);
        }
    }
    if (again && best == UINT64_MAX) { /* none fits: the one that got furthest, its misfit
                                          first, again (not if the first did not fit) */
        set_order(again, items, n, breadth, (int)far_o);
        for (int r = 0; r < VG_FIT_RETRIES && best == UINT64_MAX && far > 0; r++) {
            order_key_t first = again[far];
            memmove(again + 1, again, far * sizeof *again);
            again[0] = first;
            keep_best(&pk, pack_once(&pk, again, far_t, &far), &best, offsets, hole_out);
        }
    }
    if (n == 0)
        best = 0;
out:
    free(order);
    free(again);
    free(life);
    free(breadth);
    free(pk.off), free(pk.placed), free(pk.hole), free(pk.holed), free(pk.busy);
    return best;
}

uint64_t vg__plan_pack(const vg_plan_item_t *items, uint32_t n, uint32_t cycle,
                       uint64_t *offsets) {
    return pack_best(items, n, cycle, UINT64_MAX, false, NULL, 0, offsets, NULL);
}

uint64_t vg__plan_pack_under(const vg_plan_item_t *items, uint32_t n, uint32_t cycle,
                             uint64_t top, uint64_t *offsets) {
    uint64_t *hole = malloc((size_t)n * sizeof *hole + 1);
    uint64_t h = hole ? pack_best(items, n, cycle, top, true, NULL, 0, offsets, hole)
                      : UINT64_MAX;
    free(hole);
    return h;
}

/* ---- room for a miss ------------------------------------------------------------------- */


uint64_t vg__plan_room(vg_plan_t *p, uint64_t req, uint64_t size,
                       uint64_t (*taken)(void *arg, uint64_t off, uint64_t size), void *arg) {
    if (!p->at_pos || req < p->base)
        return VG_PLAN_NONE;
    int32_t i = p->at_pos[(req - p->base) % p->cycle];
    span_t *busy = i >= 0 ? malloc(((size_t)p->nitems + 1) * sizeof *busy) : NULL;
    if (!busy)
        return VG_PLAN_NONE;
    life_t mine = life_on(&p->items[i], p->cycle);
    uint32_t n = 0;
    for (uint32_t j = 0; j < p->nitems; j++) /* the places planned for while it lives */
        if (j != (uint32_t)i && !(p->hole && p->hole[j]) &&
            overlap(mine, life_on(&p->items[j], p->cycle)))
            busy[n++] = (span_t){p->off[j], p->off[j] + p->items[j].size};
    qsort(busy, n, sizeof *busy, by_lo);
    busy[n++] = (span_t){p->rep.height, p->rep.height};
    uint64_t lo = 0, found = VG_PLAN_NONE;
    for (uint32_t k = 0; k < n && found == VG_PLAN_NONE; k++) {
        for (uint64_t x = lo; x + size <= busy[k].lo;) { /* a gap: free now? */
            uint64_t past = taken(arg, x, size);
            if (!past) {
                found = x;
                break;
            }
            x = past;
        }
        if (busy[k].hi > lo)
            lo = busy[k].hi;
    }
    free(busy);
    return found;
}

/* ---- holes: the plan's top pages given up --------------------------------------------- */

/* For each item, the one planned next at its address (itself if none): items at one
 * address never live at once, so in the order they start, each is followed by the next
 * (the first after the last, a cycle later). By address, then start: O(n log n). */
typedef struct {
    uint64_t addr;
    uint32_t in_hole, start, idx;
} at_addr_t;

static int by_addr_start(const void *x, const void *y) {
    const at_addr_t *a = x, *b = y;
    if (a->in_hole != b->in_hole) /* (an arena offset and a hole's address: two spaces) */
        return a->in_hole < b->in_hole ? -1 : 1;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

static bool same_place(const at_addr_t *a, const at_addr_t *b) {
    return a->in_hole == b->in_hole && a->addr == b->addr;
}

static void successors(vg_plan_t *p) {
    uint32_t n = p->nitems;
    at_addr_t *v = malloc((size_t)n * sizeof *v + 1);
    p->succ = malloc((size_t)n * sizeof *p->succ + 1);
    if (!v || !p->succ) { /* (no hints but each tensor's own) */
        free(v), free(p->succ);
        p->succ = NULL;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        bool hole = p->hole && p->hole[i];
        v[i] = (at_addr_t){hole ? p->hole[i] : p->off[i], hole, p->items[i].start, i};
    }
    qsort(v, n, sizeof *v, by_addr_start);
    for (uint32_t k = 0, first = 0; k < n; k++) {
        if (k > 0 && !same_place(&v[k], &v[k - 1]))
            first = k;
        bool last = k + 1 == n || !same_place(&v[k + 1], &v[k]);
        p->succ[v[k].idx] = v[last ? first : k + 1].idx;
    }
    free(v);
}

#define VG_FIT_MAX_PAGES 64 /* pages given up at most (a packing each) */

/* The first of paid[0..n) (sorted) at or above x. */
static uint32_t first_at_or_above(const uint64_t *paid, uint32_t n, uint64_t x) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (paid[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* How many of the paid pages (their addresses, sorted) the items a packing put in holes
 * touch; used: scratch, npaid entries. */
static uint32_t paid_touched(const vg_plan_t *p, const uint64_t *hole, const uint64_t *paid,
                             uint32_t npaid, uint64_t page, uint8_t *used) {
    uint32_t count = 0;
    memset(used, 0, npaid);
    for (uint32_t i = 0; npaid && i < p->nitems; i++) {
        if (!hole[i])
            continue;
        uint64_t end = hole[i] + p->items[i].size;
        for (uint32_t k = first_at_or_above(paid, npaid, hole[i] / page * page);
             k < npaid && paid[k] < end; k++)
            if (!used[k])
                used[k] = 1, count++;
    }
    return count;
}

/* The holes without their paid pages, into out (room for nholes + npaid). */
static uint32_t unpaid(const vg_plan_hole_t *holes, uint32_t nholes, const uint64_t *paid,
                       uint32_t npaid, uint64_t page, vg_plan_hole_t *out) {
    uint32_t m = 0;
    for (uint32_t k = 0; k < nholes; k++) {
        uint64_t lo = holes[k].addr, hi = lo + holes[k].size;
        for (uint32_t j = first_at_or_above(paid, npaid, lo); j < npaid && paid[j] < hi; j++) {
            if (paid[j] > lo)
                out[m++] = (vg_plan_hole_t){lo, paid[j] - lo};
            lo = paid[j] + page;
        }
        if (lo < hi)
            out[m++] = (vg_plan_hole_t){lo, hi - lo};
    }
    return m;
}

typedef struct fit {
    vg_plan_t *p;
    uint64_t page;
    uint64_t cost, height;      /* the best so far: the arena's pages and the paid pages its
                                   holes' items touch (bytes), and the arena's height */
    uint64_t *off, *hole;       /* scratch: a packing */
    uint8_t *used;              /* scratch: the paid pages touched */
    uint32_t touched;           /* the paid pages the best so far touches */
} fit_t;

/* The arena lowered a page at a time with these holes (plan.h), from a page below `from`
 * (UINT64_MAX: from the packing under no top); each packing kept in the plan if it costs
 * less than the best so far, or as much with fewer paid pages (a free page mapped for
 * nothing saved, and moved away whenever idle), or with as many and a lower arena. */
static void lower_with(fit_t *f, const vg_plan_hole_t *holes, uint32_t nholes,
                       const uint64_t *paid, uint32_t npaid, uint64_t from) {
    vg_plan_t *p = f->p;
    uint32_t n = p->nitems;
    uint64_t page = f->page, lowest = from == UINT64_MAX ? p->rep.height : from;
    for (int k = 0; k <= VG_FIT_MAX_PAGES; k++) {
        uint64_t top = UINT64_MAX, h;
        if (k > 0 || from != UINT64_MAX) {
            if (lowest <= page) /* (nothing left to give up) */
                break;
            top = (lowest + page - 1) / page * page - page;
        }
        h = pack_best(p->items, n, p->cycle, top, true, holes, nholes, f->off, f->hole);
        if (h == UINT64_MAX && top != UINT64_MAX)
            h = pack_best(p->items, n, p->cycle, top, false, holes, nholes, f->off, f->hole);
        if (h == UINT64_MAX)
            break;
        uint32_t touched = paid_touched(p, f->hole, paid, npaid, page, f->used);
        uint64_t cost = ((h + page - 1) / page + touched) * page;
        if (cost < f->cost ||
            (cost == f->cost &&
             (touched < f->touched || (touched == f->touched && h < f->height)))) {
            f->cost = cost, f->height = h, f->touched = touched;
            memcpy(p->off, f->off, (size_t)n * sizeof *f->off);
            memcpy(p->hole, f->hole, (size_t)n * sizeof *f->hole);
        }
        lowest = h < lowest ? h : lowest;
    }
}

uint64_t vg__plan_fit_holes(vg_plan_t *p, const vg_plan_hole_t *holes, uint32_t nholes,
                            const uint64_t *paid, uint32_t npaid, uint64_t page) {
    if (!p->off || p->fitted)
        return p->rep.height;
    p->fitted = true;
    uint32_t n = p->nitems;
    uint64_t height = p->rep.height;
    fit_t f = {p, page, page ? (height + page - 1) / page * page : 0, height,
               malloc((size_t)n * sizeof *f.off + 1), malloc((size_t)n * sizeof *f.hole + 1),
               malloc((size_t)npaid + 1)};
    vg_plan_hole_t *plain = malloc(((size_t)nholes + npaid) * sizeof *plain + 1);
    p->hole = calloc((size_t)n + 1, sizeof *p->hole);
    if (nholes && page && f.off && f.hole && f.used && plain && p->hole) {
        /* The holes without the pages between (free pages would be mapped for them), then
         * with them, at their cost. */
        lower_with(&f, plain, unpaid(holes, nholes, paid, npaid, page, plain), NULL, 0,
                   UINT64_MAX);
        if (npaid) /* (an arena no lower than the best so far costs no less with them) */
            lower_with(&f, holes, nholes, paid, npaid, f.height);
    }
    bool fitted = f.height < height; /* (a packing kept: it costs less, or is lower) */
    height = f.height;
    free(f.off), free(f.hole), free(f.used), free(plain);
    if (!fitted) {
        free(p->hole);
        p->hole = NULL;
    }
    for (uint32_t i = 0; p->hole && i < n; i++)
        p->rep.in_holes += p->hole[i] != 0;
    if (p->rep.in_holes && (p->taken = malloc(p->rep.in_holes * sizeof *p->taken))) {
        for (uint32_t i = 0; i < n; i++) /* (the union of the places planned in holes) */
            if (p->hole[i])
                p->taken[p->ntaken++] = (span_t){p->hole[i], p->hole[i] + p->items[i].size};
        qsort(p->taken, p->ntaken, sizeof *p->taken, by_lo);
        uint32_t m = 0;
        for (uint32_t k = 0; k < p->ntaken; k++) {
            if (m && p->taken[k].lo <= p->taken[m - 1].hi)
                p->taken[m - 1].hi = max64(p->taken[m - 1].hi, p->taken[k].hi);
            else
                p->taken[m++] = p->taken[k];
        }
        p->ntaken = m;
    }
    p->rep.height = height;
    successors(p);
    return height;
}

const uint32_t *vg__plan_successors(const vg_plan_t *p) { return p->at_pos ? p->succ : NULL; }

bool vg__plan_in_holes(const vg_plan_t *p) { return p->at_pos && p->ntaken; }

uint64_t vg__plan_clear_of_holes(const vg_plan_t *p, uint64_t lo, uint64_t hi, uint64_t size) {
    uint32_t a = 0, b = p->ntaken; /* the first place planned in a hole ending above lo */
    while (a < b) {
        uint32_t mid = (a + b) / 2;
        if (p->taken[mid].hi <= lo)
            a = mid + 1;
        else
            b = mid;
    }
    return lowest_fit(p->taken + a, p->ntaken - a, lo, hi, size); /* (VG_PLAN_NONE: none) */
}

/* ---- learning the step ----------------------------------------------------------------- */

/* The requests a period seen twice must hold for before a plan is made of it: half a
 * period. (A whole one, before the twelfth session: the plan then came a step later, and
 * a training loop's learning layout, the one before the plan, set cnn_train's peak with
 * --perturb=1. A pattern inside a step that breaks later is dropped by learn().) */
static inline uint64_t confirm(uint64_t per) { return per / 2; }

/* Of the `count` sizes up to request `last`, going back, the first that differs from the
 * one `per` requests earlier: its distance from last, or count if none does. */
static uint64_t first_difference(const vg_plan_t *p, uint64_t last, uint64_t per,
                                 uint64_t count) {
    uint64_t k = 0;
    while (k < count && p->size[at(last - k)] == p->size[at(last - k - per)])
        k++;
    return k;
}

/* Do the `count` sizes up to request `last` each equal the one `per` requests earlier? */
static bool repeats(const vg_plan_t *p, uint64_t last, uint64_t per, uint64_t count) {
    return first_difference(p, last, per, count) == count;
}

/* The smallest period P >= min_p such that the last 2P sizes repeat with period P, with
 * at least 3P requests logged; 0 if none. A size that differs from the one P requests
 * earlier keeps P out for as long as it lies in P's window, so each period is compared
 * again only once the difference found last has left it: about five periods a request
 * instead of the 128 of comparing them all every 64 requests (a program without a step,
 * generation, looks for one for as long as it runs). */
static uint64_t period_of(vg_plan_t *p) {
    uint64_t n = p->n, hi = n / 3 < VG_PLAN_MAX_PERIOD ? n / 3 : VG_PLAN_MAX_PERIOD;
    for (uint64_t per = p->min_p; per <= hi; per++) {
        if (p->mismatch[per] >= n - per) /* (a difference in the last per sizes) */
            continue;
        uint64_t k = first_difference(p, n - 1, per, per);
        if (k == per)
            return per;
        p->mismatch[per] = n - 1 - k;
    }
    return 0;
}

static uint64_t absdiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

/* Does live memory come back after one and two periods of per, ending at idx, within 1 %
 * of what they served? Across a layer of a forward pass it grows by what the layer
 * keeps, a large share of what it serves, however small a share of all that is live. */
static bool balanced(const vg_plan_t *p, uint64_t idx, uint64_t per) {
    uint64_t now = p->live_after[at(idx)];
    for (uint64_t k = 1; k <= 2; k++)
        if (absdiff(p->live_after[at(idx - k * per)], now) >
            (p->served[at(idx)] - p->served[at(idx - k * per)]) / 100)
            return false;
    return true;
}

/* A period per confirmed at idx may be a multiple of the step: the smaller periods tried
 * before were rejected while the program did something else (a warm-up allocating the
 * same size while live memory grew), and min_p only grows. The smallest divisor of per
 * (64 at least) over which the sizes since the first of per's repetitions repeat and live
 * memory comes back. */
static uint64_t smallest_step(const vg_plan_t *p, uint64_t idx, uint64_t per) {
    for (uint64_t q = VG_PLAN_MIN_PERIOD; q < per; q++)
        if (per % q == 0 && repeats(p, idx, q, 2 * per + confirm(per) - q) &&
            balanced(p, idx, q))
            return q;
    return per;
}

/* Two steps of period per, the model step being the first of the two seen repeating (it
 * ended a period and a half before the last request): the requests freed within the
 * period after it, packed on a cycle of 2per. */
static void make_plan(vg_plan_t *p, uint64_t per) {
    uint64_t n = p->n, base = n - 2 * per - confirm(per);
    vg_plan_item_t *items = malloc(2 * per * sizeof *items);
    uint64_t *live_at = calloc(2 * per + 1, sizeof *live_at);
    uint32_t m = 0, low = 0;
    plan_clear(p);
    p->ll_freed = 0;
    if (!items || !live_at)
        goto out;
    for (uint64_t j = base; j < base + per; j++) {
        uint64_t f = p->freed_at[at(j)];
        if (f == LIVE || f - base > 2 * per || p->size[at(j)] == 0)
            continue;
        uint32_t s = (uint32_t)(j - base), e = (uint32_t)(f - base);
        items[m++] = (vg_plan_item_t){p->size[at(j)], s, e > s ? e : s + 1};
    }
    for (uint32_t i = 0, half = m; i < half; i++) /* the second step: the same, P later */
        items[m++] = (vg_plan_item_t){items[i].size, items[i].start + (uint32_t)per,
                                      items[i].end + (uint32_t)per};
    uint32_t cycle = (uint32_t)(2 * per);
    live_on_cycle(items, m, cycle, live_at); /* the planned bytes live at each point */
    uint64_t peak = 0, least = UINT64_MAX;
    for (uint32_t x = 0; x < cycle; x++) {
        peak = max64(peak, live_at[x]);
        if (live_at[x] < least)
            least = live_at[x], low = x;
    }
    /* (the last request logged sits at confirm(per) - 1 on the cycle) */
    uint64_t live = p->live_after[at(n - 1)], at_boundary = live_at[confirm(per) - 1];
    p->rep = (vg_plan_report_t){.period = per, .found_at = n, .planned_peak = peak,
                                .long_lived = live > at_boundary ? live - at_boundary : 0};
    p->to_check = per;
    p->found++;
    p->items = items, p->nitems = m, p->cycle = cycle;
    items = NULL;
    p->ll_base = base;
    if (p->follow) { /* packed now: the next requests may be placed by it */
        p->base = p->in_phase_from = base, p->low = low;
        p->at_pos = malloc(cycle * sizeof *p->at_pos);
        p->csize = malloc(cycle * sizeof *p->csize);
        for (uint32_t x = 0; p->csize && x < cycle; x++) /* (the log holds [base, n)) */
            p->csize[x] = p->size[at(base + x)];
        if (p->at_pos && p->csize && pack(p)) {
            memset(p->at_pos, 0xff, cycle * sizeof *p->at_pos);
            for (uint32_t i = 0; i < m; i++)
                p->at_pos[p->items[i].start] = (int32_t)i;
        } else {
            plan_clear(p); /* (out of memory: reported, not followed) */
        }
    }
out:
    free(items);
    free(live_at);
    if (!p->rep.period)
        p->min_p = VG_PLAN_MAX_PERIOD + 1; /* out of memory: learn nothing more */
}

/* More than an eighth of the bytes that outlived the steps when the plan was made are
 * freed: the program made its model anew (a loop run again in the same process), and the
 * plan's places beside them (its holes) and its general memory are not as they were. */
static bool state_rebuilt(const vg_plan_t *p) {
    uint64_t ll = p->dormant ? p->held.long_lived : p->rep.long_lived;
    return p->ll_freed * 8 > ll;
}

/* A dormant plan's state rebuilt twice at the same period: gradient accumulation's
 * micro-batch, whose gradients are freed at each optimizer step. The outer step is looked
 * for, about as long as the distance between the two, for four times that at most. (A
 * distance that is no step costs only the search: a plan is made only of a period over
 * which the sizes repeat and live memory comes back.) */
static void outer_step_seen(vg_plan_t *p, uint64_t per) {
    uint64_t d = p->n - p->rebuilt_at;
    if (p->rebuilt_at && p->rebuilt_per == per && d > 2 * per && d <= VG_PLAN_LONG_PERIOD) {
        p->outer = d;
        p->outer_until = p->n + 4 * d; /* (found within 2.5 of them, if there) */
    }
    p->rebuilt_at = p->n, p->rebuilt_per = per;
}

static void long_lived_freed(vg_plan_t *p, uint64_t size) {
    p->ll_freed += size;
    if (p->dormant && state_rebuilt(p)) {
        outer_step_seen(p, p->held.period);
        plan_clear(p); /* (dormant: it will not be taken up again) */
    }
}

/* Is request ip at position pos of the cycle, by the w requests before it? */
static bool in_phase_at(const vg_plan_t *p, uint64_t ip, uint32_t pos, uint64_t w) {
    for (uint64_t k = 1; k <= w; k++)
        if (p->size[at(ip - k)] != p->csize[(pos + p->cycle - k) % p->cycle]) /* (k < cycle) */
            return false;
    return true;
}

/* The plan held long is dropped: where was its step interrupted? The last request, at most
 * a period back and past the first request known in phase, that ends VG_PLAN_IN_STEP
 * requests like the step a period before; the one after it is where the step would start
 * again. Its place on the cycle is the one whose sizes (csize) the requests before it
 * match, up to a period of them: the plan's own count first, else any (a plan taken up a
 * request early by a run of equal sizes is set right so; a window of a few requests would
 * match a pattern inside the step at many places). False (the plan then goes) if there is
 * none. */
static bool go_dormant(vg_plan_t *p) {
    uint64_t per = p->rep.period, n = p->n, lo = p->in_phase_from + per + VG_PLAN_IN_STEP;
    if (!p->follow || !p->at_pos || !p->csize || state_rebuilt(p) ||
        n < p->in_phase_from + VG_PLAN_IN_STEP)
        return false;
    uint64_t ip = n; /* (less than a period since it was taken up: dropped at the period's
                        end, out of phase, the step going on; the phase is checked below) */
    if (n > lo) {
        uint64_t r = n - 1, stop = VG_MAX(n - VG_MIN(n, per), lo);
        for (; r >= stop; r--) {
            uint32_t k = 0;
            while (k < VG_PLAN_IN_STEP && p->size[at(r - k)] == p->size[at(r - k - per)])
                k++;
            if (k == VG_PLAN_IN_STEP)
                break;
        }
        if (r < stop)
            return false;
        ip = r + 1;
    }
    /* (the requests before ip since the plan was last known in phase, a period at most,
     * less a few: it may have been taken up a request or two early) */
    uint64_t w = VG_MIN(per, ip - p->in_phase_from);
    w = w > 2 * VG_PLAN_IN_STEP ? w - VG_PLAN_IN_STEP : VG_PLAN_IN_STEP;
    uint32_t pos = (uint32_t)((ip - p->base) % p->cycle); /* (the plan's count first) */
    if (!in_phase_at(p, ip, pos, w)) {
        for (pos = 0; pos < p->cycle && !in_phase_at(p, ip, pos, w); pos++)
            ;
        if (pos == p->cycle)
            return false;
    }
    p->resume_pos = pos;
    p->trial = 0;
    p->longest = VG_MAX(p->longest, p->rep.since - p->stretch_from);
    p->dormant_until = n + VG_MAX((uint64_t)VG_PLAN_DORMANT * p->cycle, p->longest);
    p->held = p->rep;
    p->dormant = true;
    return true;
}

/* A period followed since the step was found, or the request that made more than 5 % of
 * the period unlike the step before: that drops the plan, at once (a program that changed
 * would otherwise have its requests placed where sizes happen to match the plan until the
 * period ends: run again in the same process, lstm_lm reserved 1.155 of its peak instead
 * of 1.016). A pattern inside the step (an optimizer's loop over layers of the
 * same shapes, balanced too), or the program changed: periods longer than the one
 * confirmed are looked for. A changed step of the same length is then found as a
 * multiple of itself, and cut back (smallest_step). */
static __attribute__((noinline)) void period_followed(vg_plan_t *p) {
    if (p->differ * 20 > p->rep.period) {
        bool held = p->rep.since >= VG_PLAN_HELD * p->rep.period;
        /* (dropped early, periods longer than the one confirmed are looked for, if the
         * search reaches them: else, as an outer step's plan, from the smallest again) */
        p->min_p = held || p->confirmed >= VG_PLAN_MAX_PERIOD ? VG_PLAN_MIN_PERIOD
                                                              : p->confirmed + 1;
        if (!(held && go_dormant(p)))
            plan_clear(p);
        p->rep = (vg_plan_report_t){0};
    }
    p->differ = 0;
    p->to_check = p->rep.period;
}

/* An outer step looked for (outer_step_seen), while no plan is followed (from the state's
 * rebuilding until the inner step is found again: its arena then holds nothing, and is
 * let go for the outer plan's): the smallest period within 1/16 of it over which the last
 * 1.5 periods of sizes repeat (its step was seen twice already, by the rebuilding) and
 * live memory comes back. The comparison reads 2.5 periods of the log, which its 4 x 8,192
 * requests hold up to 13,107 (VG_PLAN_LONG_PERIOD: 12,288). */
static __attribute__((noinline)) void outer_search(vg_plan_t *p, uint64_t idx) {
    uint64_t n = idx + 1, d = p->outer;
    uint64_t hi = d + d / 16 < VG_PLAN_LONG_PERIOD ? d + d / 16 : VG_PLAN_LONG_PERIOD;
    for (uint64_t per = d - d / 16; per <= hi && 3 * per <= n; per++) {
        uint64_t want = per + per / 2;
        if (p->mismatch[per] + want >= n) /* (a difference in the last sizes compared) */
            continue;
        uint64_t k = first_difference(p, idx, per, want);
        if (k < want) {
            p->mismatch[per] = idx - k;
            continue;
        }
        if (!balanced(p, idx, per))
            continue;
        p->outer = 0;
        p->cand = 0;
        p->confirmed = per;
        make_plan(p, per);
        return;
    }
}

/* Request idx, logged, against the step found (a period earlier). */
static inline void watch(vg_plan_t *p, uint64_t idx) {
    bool same = p->size[at(idx)] == p->size[at(idx - p->rep.period)] || idx < p->grace_until;
    p->rep.since++;
    p->rep.repeated += same;
    p->differ += !same;
    if (VG_UNLIKELY(--p->to_check == 0 || (!same && p->differ * 20 > p->rep.period)))
        period_followed(p);
}

/* Log request r of `size` bytes, served (it) or a number skipped (0 bytes, freed). */
static inline void log_one(vg_plan_t *p, uint64_t r, uint64_t size, bool it) {
    p->n = r + 1;
    p->size[at(r)] = size;
    p->freed_at[at(r)] = it ? LIVE : r + 1;
    p->live += size;
    p->live_after[at(r)] = p->live;
    p->served[at(r)] = (r ? p->served[at(r - 1)] : 0) + size;
}

static void learn(vg_plan_t *p, uint64_t idx) {
    if (p->rep.period) {
        watch(p, idx);
        return;
    }
    if (p->outer && idx % 64 == 0) {
        if (idx >= p->outer_until)
            p->outer = 0; /* (no such step: the search stops) */
        else
            outer_search(p, idx);
        if (p->rep.period)
            return;
    }
    if (!p->cand) {
        if (idx % 64 == 0 && p->min_p <= VG_PLAN_MAX_PERIOD) {
            uint64_t per = period_of(p);
            if (per)
                p->cand = per, p->cand_at = idx + 1;
        }
        return;
    }
    uint64_t per = p->cand;
    if (p->size[at(idx)] != p->size[at(idx - per)]) {
        p->min_p = per + 1, p->cand = 0;
        return;
    }
    if (idx + 1 - p->cand_at < confirm(per))
        return;
    if (!balanced(p, idx, per)) {
        p->min_p = per + 1, p->cand = 0; /* live memory did not come back: no step */
        return;
    }
    p->cand = 0;
    uint64_t step = smallest_step(p, idx, per);
    if (p->dormant && step != p->held.period)
        return; /* (another step while a plan waits: an evaluation's own loop, left to
                   general memory; the dormant plan, or this step once it is forgotten) */
    p->confirmed = per;
    make_plan(p, step);
}

/* Requests up to req logged (those skipped as 0 bytes) and learnt from. */
static __attribute__((noinline)) void alloc_slow(vg_plan_t *p, uint64_t req, uint64_t size) {
    if (req < p->n)
        return; /* (out of order: not logged) */
    while (p->n <= req) {
        uint64_t r = p->n;
        log_one(p, r, r == req ? size : 0, r == req);
        learn(p, r);
    }
}

/* The usual case, a step found and the next request in order, is kept short: it is on
 * the allocator's fast path with plan=on (bench/RESULTS.md, thirteenth session). */
void vg__plan_alloc(vg_plan_t *p, uint64_t req, uint64_t size) {
    if (VG_LIKELY(req == p->n && p->rep.period)) {
        log_one(p, req, size, true);
        watch(p, req);
        return;
    }
    alloc_slow(p, req, size);
}

void vg__plan_release(vg_plan_t *p, uint64_t req, uint64_t size) {
    if (req >= p->n)
        return;
    p->live -= size <= p->live ? size : p->live;
    if (req + VG_PLAN_WINDOW >= p->n && p->freed_at[at(req)] == LIVE)
        p->freed_at[at(req)] = p->n;
    if (VG_UNLIKELY(req < p->ll_base) && p->at_pos) /* (a tensor that outlived the steps) */
        long_lived_freed(p, size);
}
