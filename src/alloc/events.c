/* events.c — the per-heap event ring (see events.h). */
#include "events.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "base/common.h"
#include "heap.h"
#include "base/options.h"

static _Atomic uint64_t g_seq;
static _Atomic int64_t g_history = -1; /* vg_set_event_history: -1 = the options decide */

/* How many events a heap keeps: vg_set_event_history's figure, else the options'. */
static int64_t wanted(void) {
    int64_t want = atomic_load(&g_history);
    if (want < 0)
        want = vg__opt.snapshot_events;
    if (want < 0) /* auto: when snapshots will be written */
        want = vg__opt.snapshot[0] ? 100000 : 0;
    return want;
}

uint64_t vg__event_seq(void) { return atomic_load_explicit(&g_seq, memory_order_relaxed); }

const char *vg__event_name(vg_event_kind_t k) {
    static const char *const names[VG_EV_NKINDS] = {"alloc", "free", "map", "unmap", "oom"};
    return (unsigned)k < VG_EV_NKINDS ? names[k] : "?";
}

void vg__events_keep(int64_t n) { atomic_store(&g_history, n); }

void vg__events_restart(vg_heap_t *h) {
    vg_events_t *e = &h->events; /* (heap lock held) the next event starts a new ring */
    free(e->ring);
    e->ring = NULL;
    e->cap = 0;
    e->n = 0;
}

void vg__event(vg_heap_t *h, vg_event_kind_t kind, uint64_t addr, uint64_t size,
               CUstream stream, uint32_t site) {
    vg__event_in(&h->events, kind, addr, size, stream, site);
}

void vg__event_in(vg_events_t *e, vg_event_kind_t kind, uint64_t addr, uint64_t size,
                  CUstream stream, uint32_t site) {
    if (!e->ring) {
        if (e->cap == UINT64_MAX) /* off (until vg__events_restart) */
            return;
        int64_t want = wanted();
        if (want == 0) {
            e->cap = UINT64_MAX; /* decided once */
            return;
        }
        e->ring = malloc((size_t)want * sizeof *e->ring);
        if (!e->ring) {
            e->cap = UINT64_MAX; /* no memory for it: stay off */
            return;
        }
        e->cap = (uint64_t)want;
    }
    if ((kind == VG_EV_MAP || kind == VG_EV_UNMAP) && e->n > 0) {
        vg_event_t *last = &e->ring[(e->n - 1) % e->cap]; /* page after page: one event */
        if (last->kind == (uint32_t)kind && last->addr + last->size == addr) {
            last->size += size;
            return;
        }
    }
    vg_event_t *ev = &e->ring[e->n++ % e->cap];
    ev->seq = atomic_fetch_add_explicit(&g_seq, 1, memory_order_relaxed) + 1;
    /* The clock is coarse anyway: read it every 16th event of the heap. */
    if ((e->n & 15) == 1 || e->n == 1)
        e->t_ns = vg__now_coarse_ns();
    ev->t_ns = e->t_ns;
    ev->addr = addr;
    ev->size = size;
    ev->stream = stream;
    ev->site = site;
    ev->kind = kind;
}
