/* memcheck_abi.h — the interface of memcheck mode's device callback (docs/memcheck.md).
 *
 * Shared by kernels/memcheck.cu (the callback NVIDIA's Compute Sanitizer API calls before
 * every global load, store and atomic of every patched kernel, compiled to
 * kernels/memcheck.fatbin), by vgsim's host twin of it, by guard mode's shadow kernel
 * (kernels/guard.cu) and by src/check/memcheck.c, which keeps the shadow and reads the
 * log. Plain C, fixed-width fields: the layout is the ABI.
 *
 * The shadow. Each of vramguard's segments has one 16-bit shadow word per 512 bytes
 * (VG_ALIGN: every allocation starts on such a granule):
 *   0            every byte of the granule belongs to a live allocation;
 *   1..511       the first k bytes do (an allocation's last granule), the rest do not;
 *   VG_MC_FREED  the granule belongs to an allocation the program freed;
 *   VG_MC_NONE   no allocation holds it: a redzone, or segment space never allocated.
 * Guard mode's shadow kernel rewrites a block's words in stream order at its allocation
 * and at its free, as it fills redzones.
 *
 * initcheck=1 adds an init bitmap per segment: one bit per 4-byte word, set by every
 * kernel store and atomic and by the copies and memsets vramguard sees (in 32-bit words
 * of the bitmap: 128 bytes at a time), cleared at each allocation; a load of a word whose
 * bit is clear reads memory never written since the allocation (VG_MC_UNINIT).
 *
 * The table. The device finds the segment of an address in a directory of the 2 MiB
 * pages between the lowest and the highest segment (one 32-bit entry a page: the index + 1
 * of the segment holding the whole page, 0 for none, VG_MC_DIR_SEARCH for a page two
 * segments share), else — a page shared, or no directory because the span is too wide —
 * by a binary search of the sorted segments. The host replaces the table (never edits
 * it) when segments come and go: a launch uses the table that was current when it was
 * launched.
 *
 * The state: {table, log} in device memory, aligned to VG_MC_LAUNCH_SPAN. The callback's
 * user data is the state's address plus the launch's number modulo VG_MC_LAUNCH_SPAN, so
 * a record names its launch with no per-launch upload. User data 0: not checked.
 *
 * The log lives in pinned host memory mapped for the device, read by the host with plain
 * loads (also after a sticky error). A record takes index `count` with an atomic add and,
 * if fewer than `capacity` records wait unread, slot index % capacity: it is written,
 * fenced, and then gets `seq` = its index + 1. The host reads records in order and moves
 * `read` past them; an index taken while the log was full is never written (it only
 * counts in `dropped`), and the host skips it. A full log is never overwritten, so the
 * first violations are the ones kept, and a kernel that faults in every thread stays
 * fast.
 */
#ifndef VG_MEMCHECK_ABI_H
#define VG_MEMCHECK_ABI_H

#include <stdint.h>

#define VG_MC_CALLBACK "vg_memcheck_access" /* the device function patched in (initcheck=1), */
#define VG_MC_CALLBACK_NOINIT "vg_memcheck_access_noinit" /* or without initcheck */
/* A device function that does nothing, patched in instead only to measure the API's own
 * cost (VRAMGUARD_MEMCHECK_SPLIT=patch-empty, src/check/memcheck.c): the callback above
 * keeps more values than the API's register window for patches holds (ptxas: a 40-byte
 * stack frame, 36 bytes spilled, on sm_90), this one none. */
#define VG_MC_CALLBACK_EMPTY "vg_memcheck_nothing"
#define VG_MC_SHIFT 9u
#define VG_MC_GRANULE (1u << VG_MC_SHIFT)
#define VG_MC_FREED 0xFFFDu
#define VG_MC_UNINIT 0xFFFEu /* (in records only: a read of bytes never written) */
#define VG_MC_NONE 0xFFFFu
#define VG_MC_LAUNCH_SPAN 65536u /* launch numbers in the user data: modulo this */

/* Compute Sanitizer's access flags (sanitizer_patching.h, Sanitizer_DeviceMemoryFlags). */
#define VG_MC_READ 0x1u
#define VG_MC_WRITE 0x2u
#define VG_MC_ATOMIC 0x4u
#define VG_MC_PREFETCH 0x8u

typedef struct vg_mc_seg {
    uint64_t base, end; /* [base, end): the segment's device addresses */
    uint64_t shadow;    /* device address of its (end - base) >> VG_MC_SHIFT words */
    uint64_t init;      /* device address of its init bitmap, or 0 (initcheck off) */
} vg_mc_seg_t;

#define VG_MC_DIR_SHIFT 21u
#define VG_MC_DIR_SEARCH 0xFFFFFFFFu
#define VG_MC_DIR_MAX (1u << 18) /* pages (512 GiB of span) at most; wider: search only */

typedef struct vg_mc_table {
    uint64_t n;       /* segments, sorted by base, not overlapping */
    uint64_t lo, hi;  /* the first base and the last end: outside, nothing is ours */
    uint64_t ndir;    /* directory entries after the segments (0: none) */
    vg_mc_seg_t seg[1]; /* (n of them, then ndir uint32_t entries) */
} vg_mc_table_t;

/* Bytes of a table of n segments and ndir directory entries. */
#define VG_MC_TABLE_BYTES(n, ndir)                                                          \
    (sizeof(vg_mc_table_t) - sizeof(vg_mc_seg_t) + (n) * sizeof(vg_mc_seg_t) +             \
     (ndir) * sizeof(uint32_t))

typedef struct vg_mc_record {
    uint64_t addr;      /* the first byte accessed */
    uint64_t pc;        /* the instruction's address (on vgsim: the host twin's) */
    uint32_t launch;    /* the launch's number modulo VG_MC_LAUNCH_SPAN */
    uint32_t size;      /* bytes accessed */
    uint32_t flags;     /* VG_MC_READ / WRITE / ATOMIC */
    uint32_t shadow;    /* the shadow word that refused it */
    uint32_t block[3], thread[3];
    uint32_t seq;       /* index + 1 once the record is complete */
    uint32_t pad;
} vg_mc_record_t;

typedef struct vg_mc_log {
    uint32_t count;     /* records taken */
    uint32_t capacity;
    uint32_t dropped;   /* violations not recorded: the log was full */
    uint32_t read;      /* records the host has read (the host writes it) */
    vg_mc_record_t rec[1]; /* (capacity of them) */
} vg_mc_log_t;

typedef struct vg_mc_state {
    uint64_t table; /* device address of the current vg_mc_table_t (0: none yet) */
    uint64_t log;   /* device address of the vg_mc_log_t (pinned, mapped) */
} vg_mc_state_t;

/* Guard mode's shadow kernel: one block's words, `n` of them from `shadow`: words
 * [live, live + full) get 0, word live + full gets `partial` if it is not 0, every other
 * word `outside`; and `init_n` 32-bit words of an init bitmap from `init`: with
 * `init_value` 0 cleared (an allocation: never written), else set (a copy or memset
 * wrote them) from bit `init_lo` of the first to bit `init_hi` of the last. With `merge`
 * set (an allocation of a CUDA graph's pool), a word only ever gains bytes: the old and
 * the new word's live bytes together (vg_mc_shadow_union), as a graph's replays touch
 * every allocation its captures made there, also those a later one reused. */
typedef struct vg_mc_shadow_op {
    uint64_t shadow, init;
    uint32_t n, live, full;
    uint32_t init_n, init_value;
    uint16_t partial, outside;
    uint16_t init_lo, init_hi;
    uint32_t merge;
} vg_mc_shadow_op_t;


#ifdef __CUDACC__
#define VG_MC_FN static __device__ __forceinline__
#else
#define VG_MC_FN static inline
#endif

/* The shadow word refusing an access of `size` bytes at `a`, or 0 if the access is fine
 * or not in vramguard's memory. (A refusing word is never 0: see vg_mc_word_refuses.) */
VG_MC_FN uint32_t vg_mc_word_refuses(uint32_t w, uint64_t off_in_granule, uint32_t size) {
    if (w == 0)
        return off_in_granule + size > VG_MC_GRANULE ? VG_MC_NONE : 0;
    if (w < VG_MC_GRANULE)
        return off_in_granule + size > w ? w : 0;
    return w;
}

/* The access against segment s, which holds a. */
VG_MC_FN uint32_t vg_mc_seg_refuses(const vg_mc_seg_t *s, uint64_t a, uint32_t size) {
    uint64_t off = a - s->base;
    const uint16_t *shadow = (const uint16_t *)(uintptr_t)s->shadow;
    uint32_t w = shadow[off >> VG_MC_SHIFT];
    uint64_t in = off & (VG_MC_GRANULE - 1);
    if (w == 0 && in + size > VG_MC_GRANULE) { /* (crosses into the next granule) */
        if (a + size > s->end)
            return VG_MC_NONE;
        w = shadow[(off >> VG_MC_SHIFT) + 1];
        return vg_mc_word_refuses(w, 0, (uint32_t)(in + size - VG_MC_GRANULE));
    }
    return vg_mc_word_refuses(w, in, size);
}

/* The segment holding a, or NULL (not vramguard's). */
VG_MC_FN const vg_mc_seg_t *vg_mc_find(const vg_mc_table_t *t, uint64_t a) {
    if (a < t->lo || a >= t->hi)
        return 0;
    if (t->ndir) {
        const uint32_t *dir = (const uint32_t *)&t->seg[t->n];
        uint32_t e = dir[(a - t->lo) >> VG_MC_DIR_SHIFT];
        if (e == 0)
            return 0;
        if (e != VG_MC_DIR_SEARCH)
            return &t->seg[e - 1];
    }
    uint64_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        const vg_mc_seg_t *s = &t->seg[mid];
        if (a < s->base)
            hi = mid;
        else if (a >= s->end)
            lo = mid + 1;
        else
            return s;
    }
    return 0;
}

VG_MC_FN uint32_t vg_mc_refuses(const vg_mc_table_t *t, uint64_t a, uint32_t size) {
    const vg_mc_seg_t *s = vg_mc_find(t, a);
    return s ? vg_mc_seg_refuses(s, a, size) : 0;
}

/* initcheck: has every 4-byte word of [a, a + size) been written (s->init set)? */
VG_MC_FN int vg_mc_written(const vg_mc_seg_t *s, uint64_t a, uint32_t size) {
    const uint32_t *bits = (const uint32_t *)(uintptr_t)s->init;
    uint64_t w0 = (a - s->base) >> 2, w1 = (a + size - 1 - s->base) >> 2;
    for (uint64_t w = w0; w <= w1; w++)
        if (!((bits[w >> 5] >> (w & 31)) & 1u))
            return 0;
    return 1;
}

/* What the callback does with an access: the word refusing it (a shadow word, or
 * VG_MC_UNINIT) or 0. A write marks its words written; `or_fn` is the atomic OR of the
 * platform. */
#define VG_MC_CHECK(t, a, size, flags, or_fn, out)                                          \
    do {                                                                                    \
        const vg_mc_seg_t *s_ = vg_mc_find((t), (a));                                       \
        (out) = s_ ? vg_mc_seg_refuses(s_, (a), (size)) : 0;                                 \
        if (s_ && !(out) && s_->init) {                                                     \
            if ((flags) & (VG_MC_WRITE | VG_MC_ATOMIC)) {                                   \
                uint32_t *bits_ = (uint32_t *)(uintptr_t)s_->init;                          \
                uint64_t w0_ = ((a) - s_->base) >> 2, w1_ = ((a) + (size) - 1 - s_->base) >> 2; \
                for (uint64_t w_ = w0_; w_ <= w1_; w_++)                                    \
                    or_fn(&bits_[w_ >> 5], 1u << (w_ & 31));                                \
            } else if (!vg_mc_written(s_, (a), (size))) {                                   \
                (out) = VG_MC_UNINIT;                                                       \
            }                                                                               \
        }                                                                                   \
    } while (0)

/* The bits the shadow kernel sets in init word i of op (a set: 0 means clear it). */
VG_MC_FN uint32_t vg_mc_init_mask(const vg_mc_shadow_op_t *op, uint32_t i) {
    if (!op->init_value)
        return 0;
    uint32_t m = ~0u;
    if (i == 0)
        m &= ~0u << op->init_lo;
    if (i == op->init_n - 1 && op->init_hi < 31)
        m &= (1u << (op->init_hi + 1)) - 1;
    return m;
}

/* The word the shadow kernel writes at index i of op. */
VG_MC_FN uint16_t vg_mc_shadow_word(const vg_mc_shadow_op_t *op, uint32_t i) {
    if (i >= op->live && i < op->live + op->full)
        return 0;
    if (i == op->live + op->full && op->partial)
        return op->partial;
    return op->outside;
}

/* The bytes live in either of two words, as one word (a freed or unallocated word
 * yields to the new one). */
VG_MC_FN uint16_t vg_mc_shadow_union(uint16_t old, uint16_t w) {
    if (old == 0 || w == 0)
        return 0;
    if (old < VG_MC_GRANULE && w < VG_MC_GRANULE)
        return old > w ? old : w;
    return old < VG_MC_GRANULE ? old : w;
}

/* What the shadow kernel leaves at index i of op, over the word `old` there. */
VG_MC_FN uint16_t vg_mc_shadow_apply(const vg_mc_shadow_op_t *op, uint32_t i, uint16_t old) {
    uint16_t w = vg_mc_shadow_word(op, i);
    return op->merge ? vg_mc_shadow_union(old, w) : w;
}

#endif /* VG_MEMCHECK_ABI_H */
