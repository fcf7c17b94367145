/* order.h — what a stream's work is known to come after (guard mode's S2 check, G7).
 *
 * A block freed on stream S is reused by S's later work at once (stream-ordered reuse, as
 * PyTorch's allocator and cuMemFreeAsync do). If a kernel on another stream T was given a
 * pointer into the block, the free is safe only when something orders S's later work
 * after that kernel: S waited on an event recorded on T after it, the host waited for it
 * (stream, event or context synchronisation, a query that said complete), the legacy
 * default stream's implicit synchronisation, or record_stream (the allocator then waits
 * for T itself). This module keeps that knowledge, from what the interposer sees, as a
 * vector clock per stream over the launch numbers of report.c:
 *
 *   clock[S][T] = q   work queued on S from now on comes after T's launches up to q
 *   host[T] = q       T's launches up to q are known complete
 *
 * An event remembers (stream, launch number) at its record; waiting on it merges the
 * recording stream's clock as it is when waited on (a little more than at the record:
 * fewer reports, never a false one). An event or stream vramguard does not know is taken
 * as ordering everything before it, for the same reason. Streams beyond VG_ORDER_STREAMS
 * are not tracked (their launches are never reported).
 *
 * Every function is thread safe (one leaf mutex) and cheap; none calls the driver while
 * holding it. Captured work (CUDA graphs) is not tracked.
 */
#ifndef VG_ORDER_H
#define VG_ORDER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver/cuda_abi.h"

#define VG_ORDER_STREAMS 128

/* The program's operations, as the interposer sees them (after the driver accepted them). */
void vg__order_launch(CUstream s, uint64_t seq);   /* a kernel, launch number seq */
void vg__order_event_record(CUevent e, CUstream s);
void vg__order_stream_wait(CUstream s, CUevent e);
void vg__order_stream_done(CUstream s);            /* synchronised, or a query said done */
void vg__order_event_done(CUevent e);              /* likewise for an event */
void vg__order_all_done(void);                     /* a context synchronisation */
void vg__order_stream_destroyed(CUstream s);

/* Is work queued on s from now on ordered after launch `seq` on stream t? */
bool vg__order_after(CUstream s, CUstream t, uint64_t seq);
/* Does work queued on s wait for the legacy default stream's earlier work (the legacy
 * stream itself, the per-thread default stream, a stream created without
 * CU_STREAM_NON_BLOCKING; a stream the driver cannot tell about counts as one)? Asks the
 * driver: call it without locks that a driver call must not be made under. */
bool vg__stream_blocking(CUstream s);

/* Cheap first test for a free on s of memory allocated at launch number `since`: could
 * any other stream have launched after `since` work not known ordered before s? */
bool vg__order_may_race(CUstream s, uint64_t since);

/* Strict questions for guard mode's own ordering (G3), where a wrong "yes" would put a
 * check before the fill it checks. Event records are numbered ("ticks"); tick() is the
 * number of the latest. waited_after(s, t, tick): did s itself wait for an event recorded
 * on t after that moment? Only direct waits count: no host knowledge, no implicit order
 * of the legacy stream, no chain of waits, no per-thread stream, nothing unknown. */
uint64_t vg__order_tick(void);
bool vg__order_waited_after(CUstream s, CUstream t, uint64_t tick);

/* The number of the last kernel or copy launched (0: none yet); report.c publishes each
 * new one, under its launch lock. */
extern _Atomic uint64_t vg__launches;
static inline uint64_t vg__launch_seq(void) { return atomic_load(&vg__launches); }
static inline void vg__launch_seq_publish(uint64_t seq) { atomic_store(&vg__launches, seq); }

#endif /* VG_ORDER_H */
