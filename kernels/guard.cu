// guard.cu — guard mode's kernels for real GPUs (see guard_abi.h for the interface).
// Regenerate kernels/guard.ptx with kernels/regen-ptx.sh after any change; vgsim runs the
// host twins of these kernels (vgsim/module.c), which must behave the same way.
#include "guard_abi.h"
#include "memcheck_abi.h"

__device__ static unsigned char pattern_byte(unsigned int pattern, unsigned long long a) {
    return (unsigned char)(pattern >> (8u * (unsigned)(a & 3ull)));
}

__device__ static void fill(const vg_guard_desc_t &d) {
    unsigned char *p = (unsigned char *)d.addr;
    const unsigned long long a = d.addr, len = d.len;
    unsigned long long mid0 = (4 - (a & 3)) & 3;
    if (mid0 > len)
        mid0 = len;
    unsigned long long mid1 = mid0 + ((len - mid0) & ~3ull);
    for (unsigned long long k = threadIdx.x; k < mid0; k += blockDim.x)
        p[k] = pattern_byte(d.pattern, a + k);
    for (unsigned long long k = mid1 + threadIdx.x; k < len; k += blockDim.x)
        p[k] = pattern_byte(d.pattern, a + k);
    unsigned int *w = (unsigned int *)(p + mid0);
    for (unsigned long long k = threadIdx.x; k < (mid1 - mid0) / 4; k += blockDim.x)
        w[k] = d.pattern;
}

__device__ static void note(unsigned long long k, unsigned long long &first,
                            unsigned long long &last, unsigned long long &bad) {
    first = first < k ? first : k;
    last = last > k ? last : k;
    bad++;
}

// Check one descriptor with the whole thread block; thread 0 appends the error, if any.
__device__ static void check(const vg_guard_desc_t &d, vg_guard_log_t *log,
                             unsigned long long *sh) {
    const unsigned char *p = (const unsigned char *)d.addr;
    const unsigned long long a = d.addr, len = d.len;
    if (threadIdx.x == 0) {
        sh[0] = ~0ull;
        sh[1] = 0;
        sh[2] = 0;
    }
    __syncthreads();
    unsigned long long mid0 = (4 - (a & 3)) & 3;
    if (mid0 > len)
        mid0 = len;
    unsigned long long mid1 = mid0 + ((len - mid0) & ~3ull);
    unsigned long long first = ~0ull, last = 0, bad = 0;
    for (unsigned long long k = threadIdx.x; k < mid0; k += blockDim.x)
        if (p[k] != pattern_byte(d.pattern, a + k))
            note(k, first, last, bad);
    for (unsigned long long k = mid1 + threadIdx.x; k < len; k += blockDim.x)
        if (p[k] != pattern_byte(d.pattern, a + k))
            note(k, first, last, bad);
    const unsigned int *w = (const unsigned int *)(p + mid0);
    for (unsigned long long k = threadIdx.x; k < (mid1 - mid0) / 4; k += blockDim.x) {
        unsigned int v = w[k];
        if (v != d.pattern)
            for (int b = 0; b < 4; b++)
                if (((v >> (8 * b)) & 0xff) != pattern_byte(d.pattern, a + mid0 + 4 * k + b))
                    note(mid0 + 4 * k + b, first, last, bad);
    }
    if (bad) {
        atomicMin(&sh[0], first);
        atomicMax(&sh[1], last);
        atomicAdd(&sh[2], bad);
    }
    __syncthreads();
    if (threadIdx.x == 0 && sh[2]) {
        unsigned int idx = atomicAdd(&log->count, 1u);
        vg_guard_error_t *e = &log->errors[idx % log->capacity];
        e->tag = d.tag;
        e->user = d.user;
        e->addr = a;
        e->first_bad = sh[0];
        e->last_bad = sh[1];
        e->bad_bytes = sh[2];
        e->kind = d.kind;
        unsigned int word = 0;
        for (int b = 3; b >= 0; b--)
            word = (word << 8) | (sh[0] + b < len ? p[sh[0] + b] : 0u);
        e->first_word = word;
        __threadfence_system(); // the record is visible before its seq says so
        *(volatile unsigned long long *)&e->seq = (unsigned long long)idx + 1;
    }
    __syncthreads();
    if ((d.kind & VG_KIND_REPAIR) && sh[2]) {
        fill(d);
        __syncthreads(); // (sh is reused by the next descriptor)
    }
}

// One descriptor, with the whole thread block: a range, or the ranges of a block.
__device__ static void one(const vg_guard_desc_t &d, unsigned int poison_max,
                           unsigned int poison_end, vg_guard_log_t *log, unsigned long long *sh) {
    vg_guard_desc_t parts[4];
    unsigned int n = 1;
    if (VG_GUARD_IS_BLOCK(d.op))
        n = vg_guard_block_parts(&d, poison_max, poison_end, parts);
    else
        parts[0] = d;
    for (unsigned int k = 0; k < n; k++) {
        if (parts[k].op == VG_GUARD_FILL)
            fill(parts[k]);
        else
            check(parts[k], log, sh);
    }
}

extern "C" __global__ void vg_guard_check(const vg_guard_desc_t *descs, unsigned int n,
                                          vg_guard_log_t *log) {
    __shared__ unsigned long long sh[3];
    for (unsigned int i = blockIdx.x; i < n; i += gridDim.x)
        one(descs[i], 0, 0, log, sh);
}

extern "C" __global__ void vg_guard_ranges(const vg_guard_batch_t batch, vg_guard_log_t *log) {
    __shared__ unsigned long long sh[3];
    for (unsigned int i = blockIdx.x; i < batch.n; i += gridDim.x)
        one(batch.d[i], batch.poison_max, batch.poison_end, log, sh);
}

// memcheck mode (kernels/memcheck_abi.h): one block's shadow words, at its allocation or
// its free, in stream order.
extern "C" __global__ void vg_guard_shadow(const vg_mc_shadow_op_t op) {
    uint16_t *w = (uint16_t *)op.shadow;
    uint32_t *bits = (uint32_t *)op.init;
    unsigned int n = op.n > op.init_n ? op.n : op.init_n;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x) {
        if (i < op.n)
            w[i] = vg_mc_shadow_apply(&op, i, w[i]);
        if (i < op.init_n) {
            uint32_t m = vg_mc_init_mask(&op, i);
            if (m == ~0u || m == 0)
                bits[i] = m;
            else
                atomicOr(&bits[i], m); // (an edge word: kernels may set its other bits)
        }
    }
}
