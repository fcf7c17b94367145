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
 */
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

vg_block_t *vg__arena_find(vg_heap_t *h, uint64_t size, vg_stream_t *s, uint64_t *addr,
                           bool *missed) {
    uint64_t height, gen;
    bool on = vg__plan_following(h->plan, &height, &gen);
    if (h->arena && (!on || gen != h->arena_gen)) { /* its plan was dropped */
        vg__segment_arena_retire(h, h->arena);
        h->arena = NULL;
    }
    *missed = false;
    if (!on || (!h->arena && h->arena_gen == gen)) /* (no address space for this plan's) */
        return NULL;
    uint64_t off = vg__plan_place(h->plan, h->next_id, size); /* (next_id: this request's) */
    if (off == VG_PLAN_NONE)
        return NULL;
    if (!h->arena) {
        h->arena = vg__segment_arena(h, height);
        h->arena_gen = gen;
        if (!h->arena) { /* no address space for it: placed as before */
            vg__plan_missed(h->plan);
            *missed = true;
            return NULL;
        }
    }
    uint64_t a = h->arena->base + off, past;
    vg_block_t *b = free_at(h, h->arena, a, size, s, &past);
    if (!b) { /* a miss: where the plan leaves room while it lives, if anywhere */
        vg__plan_missed(h->plan);
        *missed = true;
        room_ctx_t c = {h, s};
        uint64_t room = vg__plan_room(h->plan, h->next_id, size, arena_taken, &c);
        if (room == VG_PLAN_NONE)
            return NULL;
        a = h->arena->base + room;
        b = free_at(h, h->arena, a, size, s, &past);
    }
    *addr = a;
    return b;
}
