/* checker_abi.h — the interface of the guard checker kernel `vg_guard_check`.
 *
 * Shared by kernels/checker.cu (compiled to kernels/checker.ptx for real GPUs), vgsim's
 * host implementation of the same kernel, and the guard (src/core/guard.c), which builds
 * the descriptors. Plain C, no CUDA types, fixed-width fields: the layout is the ABI.
 *
 * One launch checks many ranges. Each descriptor names a device range that should hold
 * a 4-byte pattern, aligned to the address: the expected byte at address a is
 *     (pattern >> (8 * (a & 3))) & 0xff
 * so ranges may start and end anywhere. For every range the kernel records the first
 * and last mismatching offset and how many bytes mismatch, and counts damaged ranges.
 *
 * Kernel signature (extern "C", so the PTX entry keeps this name):
 *   vg_guard_check(const vg_check_desc_t *descs, unsigned int n,
 *                  vg_check_result_t *results, unsigned int *n_bad)
 * `results[i]` must be initialised by the host to {VG_CHECK_NONE, 0, 0} and `*n_bad`
 * to 0 before the launch. Grid: one block per descriptor (blockIdx.x strides over n).
 */
#ifndef VG_CHECKER_ABI_H
#define VG_CHECKER_ABI_H

#include <stdint.h>

#define VG_CHECK_KERNEL_NAME "vg_guard_check"
#define VG_CHECK_NONE UINT64_MAX

/* Byte patterns. Poison is chosen so that every float width read from it is a NaN:
 * bytes BF FF F7 FF; as fp32 0xFFF7FFBF, as fp16/bf16 0xFFBF and 0xFFF7, and as fp64
 * 0xFFF7FFBFFFF7FFBF are all NaN. The canary is any other distinctive word. */
#define VG_PATTERN_POISON 0xFFF7FFBFu
#define VG_PATTERN_CANARY 0xC0DEFACEu

typedef struct vg_check_desc {
    uint64_t addr;    /* device address of the first byte to check */
    uint64_t len;     /* number of bytes */
    uint32_t pattern; /* expected 4-byte pattern, aligned to the address */
    uint32_t tag;     /* the host's index for this range (not read by the kernel) */
} vg_check_desc_t;

typedef struct vg_check_result {
    uint64_t first_bad; /* offset of the first mismatching byte, VG_CHECK_NONE if none */
    uint64_t last_bad;  /* offset of the last mismatching byte */
    uint64_t bad_bytes; /* how many bytes mismatch */
} vg_check_result_t;

static inline uint8_t vg_pattern_byte(uint32_t pattern, uint64_t addr) {
    return (uint8_t)(pattern >> (8u * (unsigned)(addr & 3u)));
}

#endif /* VG_CHECKER_ABI_H */
