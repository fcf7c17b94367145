/* hooks.h — the allocator's doors: what it asks of the layers above it
 * (docs/architecture.md, docs/decisions.md H1).
 *
 * The allocator knows nothing of guard mode, of compute-sanitizer or of reports. Where it
 * needs them — a block leaving the heap, an out of memory to explain, a tool to tell of a
 * new segment — it calls through this table, which it declares and the layer above fills
 * once, at initialisation (api/init.c's open_doors: with check/guard*.c's, check/nvtx.c's
 * and diag/oom.c's functions), before any heap exists. An empty slot means "nobody
 * asked": the allocator then does what it would do alone.
 *
 * Cost: the fast paths test the same things as before (a heap's guard pointer, a
 * segment's tool heap, one flag) and call through a pointer only when those say there is
 * work; guard mode's calls were calls into another file before.
 */
#ifndef VG_ALLOC_HOOKS_H
#define VG_ALLOC_HOOKS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "heap.h"

typedef struct vg_alloc_hooks {
    /* A heap was set up (its segments' first state known), or is being retired (its
     * blocks still live are about to go with it: leaks, for the layers above). A failure
     * of heap_created fails the heap's creation. */
    vg_status_t (*heap_created)(vg_heap_t *h);
    void (*heap_retiring)(vg_heap_t *h);

    /* Guard mode (check/guard.c), called only for a heap whose `guard` is set: */
    void (*before_free)(vg_heap_t *h, vg_block_t *b, vg_stream_t *s); /* lock held */
    bool (*quarantine)(vg_heap_t *h, vg_block_t *b, CUstream stream); /* kept? */
    bool (*shrink_quarantine)(vg_heap_t *h);  /* memory is short: true if it gave some */
    void (*flush_quarantine)(vg_heap_t *h);   /* give back all it holds */
    void (*flush)(vg_heap_t *h, CUstream stream); /* queued work on a stream, launched now */
    void (*poll)(vg_heap_t *h, const char *origin); /* read the device's findings */
    void (*graph_fill)(vg_heap_t *h);         /* a graph pool's redzones, before a replay */
    void (*unpooled)(vg_heap_t *h, vg_block_t *b); /* a released pool's block, general again
                                                    * (its graphs are gone, no replay runs) */

    /* A memory tool told of vramguard's memory (check/nvtx.c: compute-sanitizer, G12),
     * called only while vg__alloc_tool is set (segments, pools) or for a segment the
     * tool took (regions): */
    void (*segment_added)(vg_heap_t *h, vg_segment_t *seg);
    void (*segment_removed)(vg_heap_t *h, vg_segment_t *seg);
    void (*region_added)(vg_heap_t *h, vg_block_t *b);
    void (*region_named)(vg_heap_t *h, vg_block_t *b);
    void (*region_removed)(vg_heap_t *h, vg_block_t *b);
    void (*pool_adopted)(vg_heap_t *h, vg_block_t *b);
    void (*pool_released)(vg_heap_t *h, vg_gpool_t *p);
    /* Should heaps use cuMemAlloc segments, as the tool takes no pool in virtual memory?
     * (May load the tool: a heap's set-up asks first, with its context current.) */
    bool (*plain_segments)(void);

    /* An allocation failed: explain it (diag/oom.c) into the thread's last error. */
    void (*explain_oom)(vg_heap_t *h, uint64_t requested, uint64_t size, CUstream stream);
} vg_alloc_hooks_t;

extern vg_alloc_hooks_t vg__alloc_hooks;

/* Set while a memory tool is told of segments (check/nvtx.c sets and clears it). */
extern _Atomic bool vg__alloc_tool;

#define VG_ALLOC_TOOL_ON() VG_UNLIKELY(atomic_load_explicit(&vg__alloc_tool, memory_order_relaxed))

/* The tool's doors, each one predictable branch when no tool is told. */
static inline void vg__tell_segment_added(vg_heap_t *h, vg_segment_t *seg) {
    if (VG_ALLOC_TOOL_ON() && vg__alloc_hooks.segment_added)
        vg__alloc_hooks.segment_added(h, seg);
}
static inline void vg__tell_segment_removed(vg_heap_t *h, vg_segment_t *seg) {
    if (VG_ALLOC_TOOL_ON() && vg__alloc_hooks.segment_removed)
        vg__alloc_hooks.segment_removed(h, seg);
}
static inline void vg__tell_pool_adopted(vg_heap_t *h, vg_block_t *b) {
    if (VG_ALLOC_TOOL_ON() && vg__alloc_hooks.pool_adopted)
        vg__alloc_hooks.pool_adopted(h, b);
}
static inline void vg__tell_pool_released(vg_heap_t *h, vg_gpool_t *p) {
    if (VG_ALLOC_TOOL_ON() && vg__alloc_hooks.pool_released)
        vg__alloc_hooks.pool_released(h, p);
}
/* Block b became an allocation (user and requested set) / was given its site / is being
 * freed by the program (before any quarantine: freed memory is not the program's). */
static inline void vg__tell_region_added(vg_heap_t *h, vg_block_t *b) {
    if (VG_UNLIKELY(b->seg->nvtx_heap != NULL)) /* (a segment the tool took) */
        vg__alloc_hooks.region_added(h, b);
}
static inline void vg__tell_region_named(vg_heap_t *h, vg_block_t *b) {
    if (VG_UNLIKELY(b->seg->nvtx_heap != NULL))
        vg__alloc_hooks.region_named(h, b);
}
static inline void vg__tell_region_removed(vg_heap_t *h, vg_block_t *b) {
    if (VG_UNLIKELY(b->seg->nvtx_heap != NULL))
        vg__alloc_hooks.region_removed(h, b);
}
static inline bool vg__alloc_plain_segments(void) {
    return vg__alloc_hooks.plain_segments && vg__alloc_hooks.plain_segments();
}

/* Guard mode's doors: nothing when the heap has no guard. */
static inline void vg__guard_hook_before_free(vg_heap_t *h, vg_block_t *b, vg_stream_t *s) {
    if (h->guard && vg__alloc_hooks.before_free)
        vg__alloc_hooks.before_free(h, b, s);
}
static inline bool vg__guard_hook_quarantine(vg_heap_t *h, vg_block_t *b, CUstream stream) {
    return h->guard && vg__alloc_hooks.quarantine && vg__alloc_hooks.quarantine(h, b, stream);
}
static inline bool vg__guard_hook_shrink(vg_heap_t *h) {
    return h->guard && vg__alloc_hooks.shrink_quarantine && vg__alloc_hooks.shrink_quarantine(h);
}
static inline void vg__guard_hook_flush_quarantine(vg_heap_t *h) {
    if (h->guard && vg__alloc_hooks.flush_quarantine)
        vg__alloc_hooks.flush_quarantine(h);
}
static inline void vg__guard_hook_flush(vg_heap_t *h, CUstream stream) {
    if (h->guard && vg__alloc_hooks.flush)
        vg__alloc_hooks.flush(h, stream);
}
static inline void vg__guard_hook_poll(vg_heap_t *h, const char *origin) {
    if (h->guard && vg__alloc_hooks.poll)
        vg__alloc_hooks.poll(h, origin);
}
static inline void vg__guard_hook_unpooled(vg_heap_t *h, vg_block_t *b) {
    if (h->guard && vg__alloc_hooks.unpooled)
        vg__alloc_hooks.unpooled(h, b);
}
static inline void vg__guard_hook_graph_fill(vg_heap_t *h) {
    if (h->guard && vg__alloc_hooks.graph_fill)
        vg__alloc_hooks.graph_fill(h);
}

#endif /* VG_ALLOC_HOOKS_H */
