/* guard.h — guard mode (redzones, poison, quarantine, checks): see guard.c. */
#ifndef VG_GUARD_H
#define VG_GUARD_H

#include <stdbool.h>

#include "alloc/heap.h"

bool vg__guard_on(void);
/* The left redzone, and the block size for an n-byte request (false on overflow). */
uint64_t vg__guard_left(void);
bool vg__guard_total(uint64_t n, uint64_t *total);

/* Heap set-up (loads the kernels, the error log); a no-op in fast mode. Context current. */
vg_status_t vg__guard_heap_init(vg_heap_t *h);
/* Fill the redzones of a new allocation, on its stream (heap lock held). */
vg_status_t vg__guard_after_alloc(vg_heap_t *h, vg_block_t *b, CUstream stream);
/* The interposer is inside the program's synchronous cuMemAlloc/cuMemFree (on), or has
 * left it (off): their guard work completes before they return (guard.c). */
void vg__guard_sync_call(bool on);
/* The interposer forwards the program's launches: guard work may wait for them (G3). */
void vg__guard_launches_seen(void);
/* Before block b (allocated on b->stream) is freed on stream s (heap lock held). */
void vg__guard_before_free(vg_heap_t *h, vg_block_t *b, vg_stream_t *s);
/* G7: the program frees live block b on `stream`, stream-ordered. True if a kernel or
 * copy on another stream was given a pointer into it and nothing orders the free after it
 * (order.h); u then describes it, for vg__report_unordered_free once the heap lock is
 * released (heap lock held). */
struct vg_unordered;
bool vg__guard_unordered_free(vg_heap_t *h, const vg_block_t *b, CUstream stream,
                              struct vg_unordered *u);
/* Called by vg__heap_free for a block the user freed (stamped with its free stream).
 * In guard mode the block's redzones are checked and its bytes poisoned on `stream`, and
 * it enters the quarantine: returns true and the heap must not touch it. In fast mode
 * returns false. */
bool vg__guard_quarantine(vg_heap_t *h, vg_block_t *b, CUstream stream);
/* Launch the checks and poison of frees on `stream` that wait for a launch (heap lock
 * held): the interposer calls it before forwarding a program's launch on that stream. */
void vg__guard_flush(vg_heap_t *h, CUstream stream);
/* The heap's context has failed (a sticky error): launch nothing more (heap lock held). */
void vg__guard_context_failed(vg_heap_t *h);
/* Launch what waits on every stream (heap lock held): before a synchronisation, so that
 * the poison of earlier frees precedes the work waited for. */
void vg__guard_flush_all(vg_heap_t *h);
/* Memory is short: release the older half of h's quarantine (after checking it); false
 * if it was empty. */
bool vg__guard_shrink_quarantine(vg_heap_t *h);
/* Release every quarantined block of h (after checking it): memory pressure. */
void vg__guard_flush_quarantine(vg_heap_t *h);
/* The quarantined block with this user address, or NULL (heap lock held). */
vg_block_t *vg__guard_quarantined(vg_heap_t *h, uint64_t user);
/* Read the error log and report what it holds; `origin` says what found the errors. */
void vg__guard_poll(vg_heap_t *h, const char *origin);
/* The program says the work queued on `stream` has completed (vg_stream_synchronized). In
 * guard mode vramguard queues work of its own there too — another thread's free pushes a
 * block out of the quarantine with a check on the stream that freed it — perhaps after
 * the program's synchronisation: true if the stream has completed everything queued on
 * it (so the claim holds for vramguard's work too), or guard mode is off (heap lock
 * held). */
bool vg__guard_claim_holds(vg_heap_t *h, CUstream stream);
/* Check every live and quarantined block of h in one launch and report (heap lock held).
 * With `wait`, after the work queued on every stream; without, only the blocks of streams
 * whose work has completed (a stream synchronisation: see guard_check.c). */
void vg__guard_check_all(vg_heap_t *h, const char *origin, bool wait);
/* Fill the redzones of the CUDA graphs' allocations recorded since the last fill (no
 * capture runs; heap lock held): from now on check points check them. */
void vg__guard_graph_fill(vg_heap_t *h);
/* At exit: the final check. */
void vg__guard_heap_shutdown(vg_heap_t *h);
/* The heap retires (its context is about to be destroyed or reset, still alive; heap
 * lock held): the guard's stream, event, module and pinned buffers go back, and nothing
 * is launched or read from them after. */
void vg__guard_heap_release(vg_heap_t *h);

#endif /* VG_GUARD_H */
