/* guard_impl.h — what guard.c (allocations, frees, the quarantine), guard_log.c (the
 * kernels' launches and their error log) and guard_check.c (check points) share: the
 * guard's state and a few helpers. Private to those three files; the rest of vramguard
 * uses guard.h. guard_log.c calls neither of the other two, guard.c calls guard_log.c,
 * guard_check.c calls both. */
#ifndef VG_GUARD_IMPL_H
#define VG_GUARD_IMPL_H

#include "../../kernels/guard_abi.h"
#include "guard.h"

#define LOG_CAPACITY 4096
#define AT_FREE 0x100 /* kind flag: the check made at the free */
#define AT_EXIT 0x200 /* kind flag: the check made as the block left the quarantine */
#define AT_GRAPH 0x800 /* kind flag: a redzone of a CUDA graph's allocation (graphpool.c) */

/* Block flags (beside heap.h's): already reported; freed on another stream; freed on
 * another stream whose order after the allocation's could not be set up. */
enum {
    REP_LEFT = 2,
    REP_RIGHT = 4,
    REP_POISON = 8,
    CROSS_FREE = 16,
    UNORDERED = 64,
};

/* Descriptors in pinned memory the device reads. The buffers it outgrew are kept until the
 * heap goes: freeing pinned memory waits for the whole context (as cudaFreeHost does), and
 * a check runs with the heap's lock held, while another stream may wait for this thread. */
#define VG_DESC_OUTGROWN 40
typedef struct desc_buf {
    vg_guard_desc_t *d;
    CUdeviceptr dev;
    size_t cap;
    void *outgrown[VG_DESC_OUTGROWN]; /* (each half the next: less than cap in all) */
    int noutgrown;
} desc_buf_t;

typedef struct vg_guard {
    CUfunction fn_check, fn_ranges, fn_shadow;
    CUmodule module;
    vg_guard_log_t *log;        /* pinned, mapped for the device */
    CUdeviceptr log_dev;
    uint32_t log_read;          /* records consumed */
    desc_buf_t check_buf;       /* descriptors of check points */
    CUstream stream;            /* where check points run */
    CUstream fill_stream;       /* synchronous allocations' redzone fills (A9), waited for
                                 * alone: not behind the program's work */
    CUevent event;
    vg_block_t **q;             /* the quarantine: a ring, oldest at q_head */
    size_t q_cap, q_head;       /* (q_cap: a power of two) */
    uint64_t q_bytes, q_count;
    uint64_t q_limit;           /* `quarantine`, halved each time memory runs short */
    bool dead;                  /* the context failed: no more launches */
    bool warned_launch;         /* a failed launch was logged */
    uint64_t fills_launched, fills_skipped; /* redzone fills at allocation */
    uint64_t unguarded;         /* allocations and frees of CUDA graph captures (A7) */
    uint64_t launches;          /* of the checker kernels, all kinds */
    uint64_t exits;             /* quarantine exit batches */
} vg_guard_t;

/* One descriptor of guard work on [addr, addr + len) of block b. */
static inline vg_guard_desc_t desc(uint64_t addr, uint64_t len, const vg_block_t *b,
                                   uint32_t pattern, uint16_t op, uint16_t kind) {
    return (vg_guard_desc_t){addr, len, b->id, b->user, pattern, op, kind};
}

/* guard.c */
/* Launch the guard work waiting on every stream (context current; vg__guard_flush_all
 * is the same for callers outside guard mode). */
void vg__guard_flush_streams(vg_heap_t *h);
/* Has everything queued on stream s completed, the guard work launched for it included?
 * False where this thread cannot ask (another thread's per-thread stream) or the stream is
 * being captured (heap lock held). */
bool vg__guard_stream_idle(vg_heap_t *h, const vg_stream_t *s);

/* guard_log.c */
/* The ranges of block b that hold poison (its user bytes, or their two ends): count. */
int vg__guard_poison_ranges(const vg_block_t *b, uint64_t *a, uint64_t *n);
/* The fills or poison of a launch that failed (or could not be ordered) never happened:
 * the blocks the batch names are never checked again (logged once, with why). */
void vg__guard_forget_batch(vg_heap_t *h, const vg_guard_batch_t *batch, const char *why);
/* Launch the ranges kernel over a batch on stream s (context current). */
CUresult vg__guard_launch_ranges(vg_heap_t *h, vg_guard_batch_t *batch, CUstream s);
/* The live or quarantined block at user address `user`, if it is still allocation id. */
vg_block_t *vg__guard_find_block(vg_heap_t *h, uint64_t user, uint64_t id);
/* The check descriptors of block b's unreported ranges, into d (at most 4): count. */
size_t vg__guard_block_checks(const vg_block_t *b, vg_guard_desc_t *d);
/* Order the guard's stream after the work queued on s so far (or wait for that work on the
 * host); false if neither worked. */
bool vg__guard_wait_for(vg_guard_t *g, CUstream s);

#endif /* VG_GUARD_IMPL_H */
