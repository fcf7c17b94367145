/* nvtx.h — telling compute-sanitizer (any NVTX tool) where vramguard's allocations are,
 * through NVTX's Memory API (docs/decisions.md G12, docs/compute-sanitizer.md).
 *
 * Each (cuMemAlloc'd or managed) segment is registered as a sub-allocator heap, each live
 * allocation as a region of it ([user, user + requested)), named "vramguard #17, 4000
 * bytes, app.c:40".
 * memcheck then reports accesses outside live allocations inside vramguard's memory,
 * reads included; initcheck --track-unused-memory sees allocations, not segments.
 *
 * Cost when no tool is named (NVTX_INJECTION64_PATH unset): nothing is loaded, and each
 * of the allocator's doors to the hooks below is one predictable branch. Every hook runs with the heap's
 * lock held (or before the heap is shared), and never fails: a tool that is missing or
 * misbehaves leaves vramguard working, the memory seen at the driver's granularity.
 */
#ifndef VG_NVTX_H
#define VG_NVTX_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/common.h"
#include "alloc/heap.h"
#include "alloc/hooks.h"

/* The allocator's vg__alloc_tool (alloc/hooks.h) is this file's switch: set at
 * initialisation when NVTX_INJECTION64_PATH names a tool (loaded when the first heap is
 * set up, its context current, as compute-sanitizer asks); cleared if it cannot be loaded
 * or refuses vramguard's first heap. The allocator calls the hooks below through its
 * doors (alloc/hooks.h), which api.c fills with them. */

/* At initialisation (options read): is a tool named? */
void vg__nvtx_init(void);
/* The tool took the Memory API (it checks accesses against vramguard's regions): guard
 * mode then launches no fills or checks of its own (G12). */
bool vg__nvtx_attached(void);
/* A tool is named, loads and takes the Memory API, and vmm=auto: heaps use cuMemAlloc
 * segments, as compute-sanitizer takes no pool in virtual memory (G12). Loads the tool
 * (a heap's set-up asks first, with its context current). */
bool vg__nvtx_plain_segments(void);
/* A tool was loaded and has not refused vramguard's heaps: allocations are padded as in
 * guard mode (redzones that are no region), so that an access past one lands outside
 * every region instead of in its neighbour, as compute-sanitizer's --padding does for the
 * driver's allocations (G12). */
bool vg__nvtx_pads_slow(void);
static inline bool vg__nvtx_pads(void) {
    return atomic_load_explicit(&vg__alloc_tool, memory_order_relaxed) && vg__nvtx_pads_slow();
}

/* The hooks' work is out of the allocator's way: a cold call behind one branch. */
#define VG_NVTX_COLD __attribute__((cold, noinline))
VG_NVTX_COLD void vg__nvtx_segment_added_slow(vg_heap_t *h, vg_segment_t *seg);
VG_NVTX_COLD void vg__nvtx_segment_removed_slow(vg_heap_t *h, vg_segment_t *seg);
VG_NVTX_COLD void vg__nvtx_region_added_slow(vg_heap_t *h, vg_block_t *b);
VG_NVTX_COLD void vg__nvtx_region_named_slow(vg_heap_t *h, vg_block_t *b);
VG_NVTX_COLD void vg__nvtx_region_removed_slow(vg_heap_t *h, vg_block_t *b);
VG_NVTX_COLD void vg__nvtx_pool_adopted_slow(vg_heap_t *h, vg_block_t *b);
VG_NVTX_COLD void vg__nvtx_pool_released_slow(vg_heap_t *h, vg_gpool_t *p);

#endif /* VG_NVTX_H */
