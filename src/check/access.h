/* access.h — every access the API shows, checked against vramguard's allocations (DESIGN
 * D11, docs/decisions.md G11): the device ranges of copies and memsets, in every mode, and
 * the pointer arguments of kernel launches, in guard mode.
 *
 * Inside vramguard's segments the driver sees one large mapping, not allocations, so it
 * cannot refuse a copy that runs past the end of one as it refuses one past a cuMemAlloc
 * block: vramguard does, before the call is queued. A range is fine when it lies wholly
 * outside vramguard's memory (the driver's business) or within one live allocation's
 * bytes; anything else is reported (once per call site, allocation site and kind) and the
 * hook refuses the call with CUDA_ERROR_INVALID_VALUE. One address-index lookup per range
 * (addrindex.c); the free history is searched only for a range that is already wrong.
 */
#ifndef VG_ACCESS_H
#define VG_ACCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/cuda_abi.h"

/* A device range a call reads or writes: [first, first + bytes), the span from its first
 * byte to its last (a 2D or 3D side spans its rows and the pitch between them). */
typedef struct vg_access {
    const char *call;   /* the driver call, "cuMemcpyDtoD" (a string literal) */
    const char *role;   /* "source", "destination" (a string literal) */
    unsigned index, count; /* copy `index` of a batch of `count` (count <= 1: no batch) */
    bool write;
    uint64_t first, bytes;
    CUstream stream;
} vg_access_t;

/* What is wrong with a range (vg__access_check). */
typedef struct vg_access_fault {
    vg_access_t a;
    int what;            /* VG_FAULT_* */
    int device;
    bool has_block;      /* the allocation below is known (live or freed) */
    uint64_t user, size, id;
    uint32_t alloc_site, free_site;
    CUstream alloc_stream;
    bool managed;
} vg_access_fault_t;

enum {
    VG_FAULT_BOUNDS = 1, /* it runs outside the live allocation it starts in or reaches */
    VG_FAULT_FREED,      /* it lies in a freed allocation (quarantined, or in the history) */
    VG_FAULT_NOWHERE,    /* vramguard's memory that no allocation holds or held lately */
};

/* Is range a fine? False: *f says why (the caller reports it, then refuses the call).
 * Takes the heap locks one at a time. A range of 0 bytes is always fine. */
bool vg__access_check(const vg_access_t *a, vg_access_fault_t *f);

/* What holds [p, p + bytes) in heap h (lock held), for a check that saw the access on
 * the device (memcheck): -1 not h's; 0 a live allocation's bytes (*f names it) or no
 * verdict; 1 and *f says what is wrong (as vg__access_check's). */
struct vg_heap;
int vg__access_classify_locked(struct vg_heap *h, uint64_t p, uint64_t bytes,
                               vg_access_fault_t *f);
/* Where [first, first + bytes) lies for fault f, as report text: "4 bytes starting 96
 * bytes past the end of a 4000-byte allocation", "bytes 0 to 4095 of a 4000-byte
 * allocation, 96 of them past its end", "... at the freed allocation + 0", ... */
void vg__access_where(char *out, size_t n, const vg_access_fault_t *f, uint64_t first,
                      uint64_t bytes);
/* The allocation of fault f into report r. */
struct vg_report;
void vg__access_fill_report(struct vg_report *r, const vg_access_fault_t *f);

/* Report f (out_of_bounds_copy, or use_after_free for freed memory), the call made at
 * `site`, once per call site, allocation site and kind. No heap lock may be held. */
void vg__access_report(const vg_access_fault_t *f, uint32_t site);

/* May a launch's 8-byte parameter word w be a pointer? Not when both of its halves are
 * below 64 KiB: that is two small integers side by side (the sizes and data types in
 * PyTorch's loaders and storers), which on a machine whose device addresses lie near
 * 16 GiB read as one (6 then 4: 0x400000006, on an H200). A pointer that close above a
 * 4 GiB boundary goes unchecked. */
static inline bool vg__launch_word_may_point(uint64_t w) {
    return (w >> 32) >= 0x10000u || (w & 0xffffffffu) >= 0x10000u;
}

/* Guard mode, at a launch of kernel `name` on `stream` from `site`: each pointer word
 * (ptrs[i], where[i]: VG_ARG_WHERE) into a freed allocation — quarantined, or free and
 * not yet reused — is reported as launch_with_freed_pointer, whether or not the kernel
 * touches it (once per kernel, launch site, allocation site and free site). Pointers
 * inside live allocations, one past their end, and into their redzones are not errors (a
 * later report about the allocation names a redzone pointer). No heap lock may be held. */
void vg__access_check_args(const char *name, CUstream stream, uint32_t site,
                           const uint64_t *ptrs, const uint16_t *where, int n);

#endif /* VG_ACCESS_H */
