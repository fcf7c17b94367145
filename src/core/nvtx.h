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
 * hook below is one predictable branch on vg__nvtx_on. Every hook runs with the heap's
 * lock held (or before the heap is shared), and never fails: a tool that is missing or
 * misbehaves leaves vramguard working, the memory seen at the driver's granularity.
 */
#ifndef VG_NVTX_H
#define VG_NVTX_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common.h"
#include "heap.h"

/* Set at initialisation when NVTX_INJECTION64_PATH names a tool (loaded when the first
 * heap is set up, its context current, as compute-sanitizer asks); cleared if it cannot
 * be loaded or refuses vramguard's first heap. */
extern _Atomic bool vg__nvtx_on;

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
    return atomic_load_explicit(&vg__nvtx_on, memory_order_relaxed) && vg__nvtx_pads_slow();
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

#define VG_NVTX_HOOK(call)                                                                  \
    do {                                                                                    \
        if (VG_UNLIKELY(atomic_load_explicit(&vg__nvtx_on, memory_order_relaxed)))          \
            call;                                                                           \
    } while (0)

/* A segment was created (VMM reservation, cuMemAlloc or managed chunk) / is about to be
 * freed. */
static inline void vg__nvtx_segment_added(vg_heap_t *h, vg_segment_t *seg) {
    VG_NVTX_HOOK(vg__nvtx_segment_added_slow(h, seg));
}
static inline void vg__nvtx_segment_removed(vg_heap_t *h, vg_segment_t *seg) {
    VG_NVTX_HOOK(vg__nvtx_segment_removed_slow(h, seg));
}
/* Block b became an allocation (user and requested set) / was given its site / is being
 * freed by the program (before any quarantine: freed memory is not the program's). */
static inline void vg__nvtx_region_added(vg_heap_t *h, vg_block_t *b) {
    if (VG_UNLIKELY(b->seg->nvtx_heap != NULL)) /* (a segment the tool took: G12) */
        vg__nvtx_region_added_slow(h, b);
}
static inline void vg__nvtx_region_named(vg_heap_t *h, vg_block_t *b) {
    if (VG_UNLIKELY(b->seg->nvtx_heap != NULL)) /* (a segment the tool took: G12) */
        vg__nvtx_region_named_slow(h, b);
}
static inline void vg__nvtx_region_removed(vg_heap_t *h, vg_block_t *b) {
    if (VG_UNLIKELY(b->seg->nvtx_heap != NULL)) /* (a segment the tool took: G12) */
        vg__nvtx_region_removed_slow(h, b);
}
/* A CUDA graph's pool (A7) took block b from general memory / is released: a replay may
 * touch what its captures allocated even after they freed it, so a pool's regions stay
 * until then. */
static inline void vg__nvtx_pool_adopted(vg_heap_t *h, vg_block_t *b) {
    VG_NVTX_HOOK(vg__nvtx_pool_adopted_slow(h, b));
}
static inline void vg__nvtx_pool_released(vg_heap_t *h, vg_gpool_t *p) {
    VG_NVTX_HOOK(vg__nvtx_pool_released_slow(h, p));
}

#endif /* VG_NVTX_H */
