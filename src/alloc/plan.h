/* plan.h — a training loop's step, learnt from the requests a heap serves, and the plan
 * that would place two steps of it (docs/decisions.md A13; bench/cyclic_plan_model.py is
 * the same design, modelled).
 *
 * With option plan=learn the heap logs each request's size (rounded, as placed) and when
 * it was freed. Every 64 requests it looks for the step: the smallest period P (64 to
 * VG_PLAN_MAX_PERIOD requests) such that the last 2P sizes repeat with period P, which
 * must then hold for P/2 more requests, with live bytes back to within 1 % of what they
 * were one and two periods before (a layer's pattern repeats inside a forward pass too,
 * but live memory grows across it); a period that is a multiple of a shorter one that
 * passes too is cut to that one. The requests of one step freed within the next are
 * packed, when the report is first asked for, as a cycle of two steps (a tensor freed
 * after its own successor is made gets two places, used by turns): greedy, in five
 * orders (by size, size x lifetime, lifetime, and by breadth, the most bytes live at once
 * while the item lives: the busiest moment's items first) and two gap rules, the lowest
 * height kept. With plan=learn the heap only says
 * what the plan would reserve; with plan=on the plan is packed as soon as it is found and
 * the heap places by it (arena.c; issue 37), after giving up what it can of its height
 * to the holes beside the long-lived tensors (vg__plan_fit_holes). A step longer than
 * VG_PLAN_MAX_PERIOD (gradient accumulation: micro-batches, then the optimizer) is looked
 * for as the distance between two rebuildings of a dormant plan's state at the same
 * period (zero_grad freeing the gradients), up to VG_PLAN_LONG_PERIOD (plan.c,
 * outer_step_seen).
 *
 * Not thread-safe: called under the heap's lock.
 */
#ifndef VG_PLAN_H
#define VG_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#define VG_PLAN_MIN_PERIOD 64
#define VG_PLAN_MAX_PERIOD 8192   /* requests in a step, at most */
#define VG_PLAN_LONG_PERIOD 12288 /* ... in an outer step (gradient accumulation) */
#define VG_PLAN_COOL 8            /* requests: a hole's place freed this recently is not the
                                     next tensor's first choice (vg__plan_fit_holes) */

typedef struct vg_plan_item {
    uint64_t size;            /* bytes */
    uint32_t start, end;      /* its lifetime on the cycle: [start, end), end > cycle wraps */
} vg_plan_item_t;

typedef struct vg_plan_report {
    uint64_t period;          /* requests in a step (0: no step found yet) */
    uint64_t found_at;        /* the request count when it was found */
    uint64_t height;          /* bytes the plan needs: its highest planned byte */
    uint64_t planned_peak;    /* the planned requests' live bytes at their peak */
    uint64_t long_lived;      /* bytes live at the step's boundary that no plan places
                                 (parameters, optimizer state: they outlive the steps) */
    uint64_t since, repeated; /* requests after it was found; of them, of the size the
                                 request a period earlier had */
    uint64_t found;           /* steps found so far, this one included (one dropped and
                                 found again counts twice) */
    uint64_t placed, missed;  /* plan=on, all plans so far: requests placed by a plan;
                                 planned ones whose place was taken (by a tensor freed
                                 late, or another stream's work) */
    uint64_t items, in_holes; /* plan=on: the tensors of the plan (two steps); of them,
                                 placed in holes (vg__plan_fit_holes) */
    uint64_t resumed;         /* plan=on: plans taken up again after an interruption
                                 (vg__plan_resumes) */
} vg_plan_report_t;

typedef struct vg_plan vg_plan_t;

#define VG_PLAN_NONE UINT64_MAX

/* NULL when out of memory (the heap then learns nothing). follow: plan=on, each plan is
 * packed as soon as it is found, for vg__plan_place. */
vg_plan_t *vg__plan_new(bool follow);
void vg__plan_free(vg_plan_t *p);
/* Request number `req` (0, 1, 2, ... in the order they were served) of `size` bytes was
 * served. Numbers must come in order; one skipped counts as a request of size 0. */
void vg__plan_alloc(vg_plan_t *p, uint64_t req, uint64_t size);
/* Request `req`, of `size` bytes, was freed. */
void vg__plan_release(vg_plan_t *p, uint64_t req, uint64_t size);
/* What was learnt; the plan is packed at the first call after a step is found (O(n^2)
 * in its lifetimes: about 20 ms for GPT-2's 2,516, a second for the longest steps). */
void vg__plan_get(vg_plan_t *p, vg_plan_report_t *out);

/* plan=on. Where the plan puts request `req` (the next to be served) of `size` bytes: its
 * offset from the plan's base, or VG_PLAN_NONE (no plan followed, not the planned size,
 * or nothing planned at its position). A plan is followed from the position of its cycle
 * where the fewest planned bytes are live. */
uint64_t vg__plan_place(vg_plan_t *p, uint64_t req, uint64_t size, bool *in_hole,
                        uint32_t *item);
/* Is vg__plan_fit_holes due before request `req` is placed (the plan is reaching the
 * point it is followed from, and has not been fitted)? */
bool vg__plan_fit_due(const vg_plan_t *p, uint64_t req);
/* The first request of the step the plan was made from: blocks of earlier requests still
 * live outlive the steps (parameters, optimizer state). */
uint64_t vg__plan_long_lived_before(const vg_plan_t *p);
/* An address range outside the plan's arena that stays free while the plan is followed:
 * the rest of a page that long-lived blocks keep mapped. */
typedef struct vg_plan_hole {
    uint64_t addr, size;
} vg_plan_hole_t;
/* Before the plan is first followed, once: each tensor tries the holes (apart from each
 * other and from the arena) before the arena; then the arena is lowered a page at a time
 * while what would reach above it fits in a hole for as long as it lives. Some holes bridge
 * free pages (paid: their addresses, sorted), which cost a page each once a tensor is put
 * on them: the holes are fitted without those pages, then with them, and the packing kept
 * is the one whose arena pages and paid pages touched are fewest (then the fewest paid
 * pages, then the lowest arena), if it is below the plan's own height; vg__plan_place then
 * gives those in holes by address. Returns the height. O(tensors^2) a packing: 20-90 ms on
 * the traces of bench/traces, up to twice that with paid pages. */
uint64_t vg__plan_fit_holes(vg_plan_t *p, const vg_plan_hole_t *holes, uint32_t nholes,
                            const uint64_t *paid, uint32_t npaid, uint64_t page);
/* The place vg__plan_place gave was not free: a miss. More than 5 % of a period's
 * requests missed or unlike the plan's sizes drops the plan (learnt again). */
void vg__plan_missed(vg_plan_t *p);
/* A miss's room: the lowest offset under the plan's height that the plan leaves free while
 * request `req` is planned to live, where taken(arg, off, size) says the arena is free now
 * (0) or else the offset past what is in the way; VG_PLAN_NONE if there is none. */
uint64_t vg__plan_room(vg_plan_t *p, uint64_t req, uint64_t size,
                       uint64_t (*taken)(void *arg, uint64_t off, uint64_t size), void *arg);
/* Is a plan being followed? Its height, and a number that changes with each plan found
 * (not with a plan taken up again). */
bool vg__plan_following(const vg_plan_t *p, uint64_t *height, uint64_t *generation);
/* plan=on: a plan followed for long whose step was interrupted (an evaluation between
 * training steps, a checkpoint) waits, dormant, for the step to come back: its arena stays
 * (its idle pages lent to other requests), nothing is placed by it. */
bool vg__plan_dormant(const vg_plan_t *p);
/* Request `req` (the next to be served), of `size` bytes, while the plan is dormant: true
 * when it has the size of the step's request where the step stopped; the plan is then
 * followed again, on trial, from that place on its cycle, and waits again if one of the
 * next 8 requests is unlike the step (vg__plan_place). A plan dormant for longer than its
 * longest stretch followed, and 32 cycles of requests, is forgotten. */
bool vg__plan_resumes(vg_plan_t *p, uint64_t req, uint64_t size);
/* Requests in the plan's cycle (two steps), and the tensors it places (item numbers of
 * vg__plan_place: 0 to this - 1); 0 when none is followed. */
uint64_t vg__plan_cycle(const vg_plan_t *p);
uint32_t vg__plan_items(const vg_plan_t *p);
/* Once fitted (vg__plan_fit_holes): for each item, the item planned next at its address,
 * or NULL (none followed, or out of memory). */
const uint32_t *vg__plan_successors(const vg_plan_t *p);

/* The lowest x in [lo, hi) such that [x, x + size) meets none of the places the plan put
 * in holes (vg__plan_fit_holes), or VG_PLAN_NONE: where a request the plan does not place
 * may go in general memory without taking a planned tensor's place. And whether the plan
 * followed put any tensor in a hole. */
uint64_t vg__plan_clear_of_holes(const vg_plan_t *p, uint64_t lo, uint64_t hi, uint64_t size);
bool vg__plan_in_holes(const vg_plan_t *p);

/* Offsets for n items on a cycle of `cycle` requests, packed greedily (tried in five
 * orders, each at the lowest offsets and in the tightest gaps; the lowest height kept).
 * Returns the height (bytes), or UINT64_MAX when out of memory. */
uint64_t vg__plan_pack(const vg_plan_item_t *items, uint32_t n, uint32_t cycle,
                       uint64_t *offsets);

/* The fit's packing under a top (vg__plan_fit_holes, here without holes): the first of
 * its packings that stays under `top` (the fit's three orders, by size, size x lifetime
 * and lifetime, each at the lowest offsets and in the tightest gaps; then the one that
 * got furthest again with its misfit first); its height, or UINT64_MAX if none. */
uint64_t vg__plan_pack_under(const vg_plan_item_t *items, uint32_t n, uint32_t cycle,
                             uint64_t top, uint64_t *offsets);

#endif /* VG_PLAN_H */
