/* guard_abi.h — the interface of guard mode's kernels.
 *
 * Shared by kernels/guard.cu (compiled to kernels/guard.ptx for real GPUs), vgsim's host
 * implementation of the same kernels, and src/check/guard.c, which builds the descriptors.
 * Plain C, fixed-width fields: the layout is the ABI.
 *
 * A descriptor names a device range and an operation:
 *   VG_GUARD_FILL   write the pattern over the range;
 *   VG_GUARD_CHECK  compare the range with the pattern and, if any byte differs, append
 *                   one error record (first and last differing offset, how many bytes).
 * Patterns are 4-byte words aligned to the address: the byte at address a is
 *     (pattern >> (8 * (a & 3))) & 0xff
 * so ranges may start and end anywhere. Descriptors of one launch never overlap, so
 * they may run in any order.
 *
 * Two kernels (extern "C", so the PTX entries keep these names):
 *   vg_guard_check(const vg_guard_desc_t *descs, unsigned int n, vg_guard_log_t *log)
 *       any number of descriptors, in memory the device can read (check points);
 *   vg_guard_ranges(vg_guard_batch_t batch, vg_guard_log_t *log)
 *       up to VG_GUARD_BATCH descriptors passed by value (the redzones of one allocation,
 *       the checks and poison of one free): no buffer to upload or keep alive. Here a
 *       descriptor may also stand for a whole block (VG_GUARD_BLOCK_*), so that one
 *       launch carries the work of up to 64 allocations and frees.
 *
 * The log lives in pinned host memory mapped for the device, so the host reads it with
 * plain loads — even after a sticky error has killed the context. It only grows: a kernel
 * takes slot `count % capacity` with an atomic add, writes the record, fences, and then
 * writes `seq` = its index + 1; the host reads records whose seq is set, in order.
 */
#ifndef VG_GUARD_ABI_H
#define VG_GUARD_ABI_H

#include <stdint.h>

#define VG_GUARD_KERNEL "vg_guard_check"

/* Patterns. Poison is chosen so that every float width read from it is a NaN: bytes
 * BF FF F7 FF; as fp32 0xFFF7FFBF, as fp16/bf16 0xFFBF and 0xFFF7, and as fp64
 * 0xFFF7FFBFFFF7FFBF are all NaN (and as int32 it is -524353, an unlikely index). The
 * canary is the same word (docs/decisions.md, G2): a block whose redzones and user bytes
 * all hold it can be reused with no fill at all, and the descriptor's kind, not the
 * pattern, says what a damaged range was. */
#define VG_PATTERN_POISON 0xFFF7FFBFu
#define VG_PATTERN_CANARY VG_PATTERN_POISON

/* Range operations, and block operations (vg_guard_ranges only). A block descriptor has
 * addr/len: the whole block; user: its user address; pattern: the length of its right
 * redzone (the user bytes end at addr + len - pattern); kind: flags OR'ed into the kind
 * of each part. vg_guard_block_parts() below turns it into ranges:
 *   VG_GUARD_BLOCK_NEW    fill both redzones with the canary;
 *   VG_GUARD_BLOCK_FREED  check both redzones and poison the user bytes: all of them if
 *                         there are at most batch.poison_max (or poison_max is 0) or
 *                         at most twice batch.poison_end, else the first and the last
 *                         poison_end;
 *   VG_GUARD_BLOCK_DEAD   fill both redzones and poison the user bytes as above: a block
 *                         freed before its fill was launched (nothing can have written
 *                         it in between, so there is nothing to check yet);
 *   VG_GUARD_BLOCK_EXIT   check both redzones and the poisoned bytes (as poisoned above):
 *                         a block leaving the quarantine. */
enum {
    VG_GUARD_FILL = 1,
    VG_GUARD_CHECK = 2,
    VG_GUARD_BLOCK_NEW = 3,
    VG_GUARD_BLOCK_FREED = 4,
    VG_GUARD_BLOCK_DEAD = 5,
    VG_GUARD_BLOCK_EXIT = 6,
};

/* Does descriptor op stand for a whole block (vg_guard_block_parts)? */
#define VG_GUARD_IS_BLOCK(op) ((op) >= VG_GUARD_BLOCK_NEW && (op) <= VG_GUARD_BLOCK_EXIT)

/* A kind flag: a check that, where it finds damage, reports it and then writes the
 * pattern over the range again (a block leaving the quarantine goes back to the heap
 * believed to hold the pattern). */
#define VG_KIND_REPAIR 0x400

/* What a checked range is (reported back in the error). */
enum {
    VG_RANGE_LEFT = 1,   /* redzone before the user bytes */
    VG_RANGE_RIGHT = 2,  /* redzone (and slack) after the user bytes */
    VG_RANGE_POISON = 3, /* user bytes of a freed block */
    VG_RANGE_FREE = 4,   /* free memory between blocks (canary) */
};

typedef struct vg_guard_desc {
    uint64_t addr;     /* device address of the first byte */
    uint64_t len;      /* bytes */
    uint64_t tag;      /* the host's number for the block (reported back) */
    uint64_t user;     /* the block's user address (reported back) */
    uint32_t pattern;  /* the pattern to write or expect */
    uint16_t op;       /* VG_GUARD_FILL or VG_GUARD_CHECK */
    uint16_t kind;     /* VG_RANGE_* */
} vg_guard_desc_t;

#define VG_GUARD_BATCH 64 /* 2576 bytes of parameters: under the 4 KiB every GPU takes */

typedef struct vg_guard_batch {
    uint32_t n;        /* descriptors used */
    uint32_t poison_max; /* for VG_GUARD_BLOCK_FREED and _DEAD: poisoned whole up to this */
    uint32_t poison_end; /* and larger ones at their first and last poison_end bytes */
    uint32_t pad;
    vg_guard_desc_t d[VG_GUARD_BATCH];
} vg_guard_batch_t;

typedef struct vg_guard_error {
    uint64_t seq;       /* index + 1 once the record is complete; 0 while being written */
    uint64_t tag;       /* the descriptor's tag */
    uint64_t user;      /* the descriptor's user address */
    uint64_t addr;      /* the descriptor's addr */
    uint64_t first_bad; /* offset (from addr) of the first byte that differs */
    uint64_t last_bad;  /* offset of the last byte that differs */
    uint64_t bad_bytes; /* how many bytes differ */
    uint32_t kind;      /* the descriptor's kind */
    uint32_t first_word;/* the 4 bytes found at addr + first_bad (little endian) */
} vg_guard_error_t;

typedef struct vg_guard_log {
    uint32_t count;     /* errors appended so far; entry i is errors[i % capacity] */
    uint32_t capacity;  /* set by the host */
    uint32_t pad[2];
    vg_guard_error_t errors[1]; /* [capacity] */
} vg_guard_log_t;

#ifdef __CUDACC__
#define VG_GUARD_FN __host__ __device__ static inline
#else
#define VG_GUARD_FN static inline
#endif

VG_GUARD_FN uint8_t vg_pattern_byte(uint32_t pattern, uint64_t addr) {
    return (uint8_t)(pattern >> (8u * (unsigned)(addr & 3u)));
}

VG_GUARD_FN void vg_guard_part(vg_guard_desc_t *o, const vg_guard_desc_t *b, uint64_t addr,
                               uint64_t len, uint16_t op, uint16_t kind) {
    o->addr = addr;
    o->len = len;
    o->tag = b->tag;
    o->user = b->user;
    o->pattern = VG_PATTERN_CANARY; /* the poison word too */
    o->op = op;
    o->kind = (uint16_t)(kind | b->kind);
}

/* The poisoned ranges of a freed block's `len` user bytes at `user`: all of them (one
 * range) if there are at most poison_max (or poison_max is 0) or at most twice
 * poison_end, else the first and the last poison_end (two). The host (guard.c) and the
 * kernels share this rule. */
VG_GUARD_FN unsigned vg_guard_poison_split(uint64_t user, uint64_t len, uint64_t poison_max,
                                           uint64_t poison_end, uint64_t *a, uint64_t *n) {
    if (len == 0)
        return 0;
    if (len <= poison_max || poison_max == 0 || len <= 2 * poison_end) {
        a[0] = user;
        n[0] = len;
        return 1;
    }
    a[0] = user;
    n[0] = poison_end;
    a[1] = user + len - poison_end;
    n[1] = poison_end;
    return 2;
}

/* The ranges block descriptor b stands for (at most 4, written to out); returns how many. */
VG_GUARD_FN unsigned vg_guard_block_parts(const vg_guard_desc_t *b, uint32_t poison_max,
                                          uint32_t poison_end, vg_guard_desc_t *out) {
    uint64_t end = b->addr + b->len - b->pattern; /* where the user bytes end */
    int leaving = b->op == VG_GUARD_BLOCK_EXIT;
    uint16_t op = b->op == VG_GUARD_BLOCK_FREED || leaving ? VG_GUARD_CHECK : VG_GUARD_FILL;
    uint16_t poison = leaving ? VG_GUARD_CHECK : VG_GUARD_FILL;
    unsigned n = 0;
    vg_guard_part(&out[n++], b, b->addr, b->user - b->addr, op, VG_RANGE_LEFT);
    vg_guard_part(&out[n++], b, end, b->pattern, op, VG_RANGE_RIGHT);
    if (b->op == VG_GUARD_BLOCK_NEW)
        return n;
    uint64_t a[2], len[2];
    unsigned k = vg_guard_poison_split(b->user, end - b->user, poison_max, poison_end, a, len);
    for (unsigned i = 0; i < k; i++)
        vg_guard_part(&out[n++], b, a[i], len[i], poison, VG_RANGE_POISON);
    return n;
}

#endif /* VG_GUARD_ABI_H */
