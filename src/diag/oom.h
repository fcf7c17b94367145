/* oom.h — explaining an out-of-memory failure in the user's terms. */
#ifndef VG_OOM_H
#define VG_OOM_H

#include "base/common.h"
#include "alloc/heap.h"

/* Set the calling thread's last error to the explanation of a failed request of
 * `requested` bytes (`size` after rounding; UINT64_MAX if it overflowed) on `stream`:
 * the device's memory, what vramguard holds and what is free, the largest block that
 * could be served, and the top holders by allocation site (heap lock held). */
void vg__oom_explain(vg_heap_t *h, uint64_t requested, uint64_t size, CUstream stream);

/* Append the top `n` allocation sites by live bytes to b (for OOM and leak reports): of
 * device memory, or (pinned) of pinned host memory. */
void vg__sites_top(vg_buf_t *b, int n, const char *indent, bool pinned);

#endif /* VG_OOM_H */
