/* events.h — a bounded ring of allocator events per heap, for snapshots (issue 7).
 *
 * Every allocation, free, segment map/unmap and OOM is recorded with a process-wide
 * sequence number (so events of all devices, and error reports, can be put in one order)
 * and a coarse timestamp. The ring keeps the last `snapshot_events` events of each heap;
 * recording costs a few nanoseconds under the heap lock the caller already holds.
 */
#ifndef VG_EVENTS_H
#define VG_EVENTS_H

#include <stdint.h>

#include "driver/cuda_abi.h"

typedef enum {
    VG_EV_ALLOC = 0,
    VG_EV_FREE,
    VG_EV_MAP,   /* device memory mapped (a segment grew) */
    VG_EV_UNMAP, /* device memory returned to the driver */
    VG_EV_OOM,   /* an allocation failed */
    VG_EV_NKINDS
} vg_event_kind_t;

typedef struct vg_event {
    uint64_t seq;      /* process-wide, 1, 2, ... */
    uint64_t t_ns;     /* CLOCK_MONOTONIC (coarse) */
    uint64_t addr;
    uint64_t size;     /* ALLOC/FREE: bytes requested; MAP/UNMAP: bytes; OOM: request */
    CUstream stream;
    uint32_t site;
    uint32_t kind;
} vg_event_t;

typedef struct vg_events {
    vg_event_t *ring;  /* allocated at the first event */
    uint64_t cap;      /* 0: recording off */
    uint64_t n;        /* events recorded so far (the ring holds the last cap) */
    uint64_t t_ns;     /* the clock, read every 16 events */
} vg_events_t;

struct vg_heap;
/* Record an event in h (heap lock held). */
void vg__event(struct vg_heap *h, vg_event_kind_t kind, uint64_t addr, uint64_t size,
               CUstream stream, uint32_t site);
/* The same in ring e, kept as a heap's is (the caller serialises e's events). */
void vg__event_in(vg_events_t *e, vg_event_kind_t kind, uint64_t addr, uint64_t size,
                  CUstream stream, uint32_t site);
/* How many events each heap keeps from now on (0: none; -1: as the options say). */
void vg__events_keep(int64_t n);
/* Drop h's events; its ring is made again, at the size now wanted, at its next event
 * (heap lock held). */
void vg__events_restart(struct vg_heap *h);
/* The sequence number the next event will get minus one (for error reports). */
uint64_t vg__event_seq(void);
const char *vg__event_name(vg_event_kind_t k);

#endif /* VG_EVENTS_H */
