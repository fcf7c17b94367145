// memcheck.cu — memcheck mode's device callback (docs/memcheck.md, kernels/memcheck_abi.h).
//
// NVIDIA's Compute Sanitizer API patches a call to vg_memcheck_access() before every
// global-memory load, store and atomic of every kernel vramguard patches (sanitizer
// patches: compiled with --compile-as-tools-patch, loaded with sanitizerAddPatches).
// It checks the access against vramguard's shadow and logs the ones the shadow refuses.
// Regenerate memcheck.fatbin with:  kernels/regen-ptx.sh
#include "memcheck_abi.h"

__device__ __forceinline__ static void vg_mc_or(uint32_t *p, uint32_t bit) {
    if (!(*(volatile uint32_t *)p & bit)) // (most stores rewrite written words: no atomic)
        atomicOr(p, bit);
}

// The check, and the log of what it refused. `init`: initcheck's bitmap is kept (stores
// mark their words, reads of unmarked words are refused); without it the check needs
// fewer registers, which the patch ABI's small register window makes worth a function of
// its own (ptxas, sm_90: a 32-byte stack frame instead of 40).
__device__ __forceinline__ static int vg_mc_access(bool init, void *userdata, uint64_t pc,
                                                   void *ptr, uint32_t size, uint32_t flags) {
    uint64_t ud = (uint64_t)userdata;
    if (ud == 0 || (flags & VG_MC_PREFETCH))
        return 0; // (SANITIZER_PATCH_SUCCESS)
    const vg_mc_state_t *st = (const vg_mc_state_t *)(ud & ~(uint64_t)(VG_MC_LAUNCH_SPAN - 1));
    const vg_mc_table_t *t = (const vg_mc_table_t *)st->table;
    if (t == 0)
        return 0;
    uint32_t w;
    if (init)
        VG_MC_CHECK(t, (uint64_t)ptr, size, flags, vg_mc_or, w);
    else
        w = vg_mc_refuses(t, (uint64_t)ptr, size);
    if (w == 0)
        return 0;
    vg_mc_log_t *log = (vg_mc_log_t *)st->log;
    if (*(volatile uint32_t *)&log->count - *(volatile uint32_t *)&log->read >= log->capacity) {
        atomicAdd(&log->dropped, 1u);
        return 0;
    }
    uint32_t k = atomicAdd(&log->count, 1u);
    if (k - *(volatile uint32_t *)&log->read >= log->capacity) { // (a full ring: never overwrite)
        atomicAdd(&log->dropped, 1u);
        return 0;
    }
    vg_mc_record_t *r = &log->rec[k % log->capacity];
    r->addr = (uint64_t)ptr;
    r->pc = pc;
    r->launch = (uint32_t)(ud & (VG_MC_LAUNCH_SPAN - 1));
    r->size = size;
    r->flags = flags;
    r->shadow = w;
    r->block[0] = blockIdx.x, r->block[1] = blockIdx.y, r->block[2] = blockIdx.z;
    r->thread[0] = threadIdx.x, r->thread[1] = threadIdx.y, r->thread[2] = threadIdx.z;
    __threadfence_system();
    *(volatile uint32_t *)&r->seq = k + 1;
    return 0;
}

// With initcheck=1.
extern "C" __device__ __noinline__ int vg_memcheck_access(void *userdata, uint64_t pc, void *ptr,
                                                          uint32_t size, uint32_t flags,
                                                          const void *new_value) {
    (void)new_value;
    return vg_mc_access(true, userdata, pc, ptr, size, flags);
}

// Without (the default).
extern "C" __device__ __noinline__ int vg_memcheck_access_noinit(void *userdata, uint64_t pc,
                                                                 void *ptr, uint32_t size,
                                                                 uint32_t flags,
                                                                 const void *new_value) {
    (void)new_value;
    return vg_mc_access(false, userdata, pc, ptr, size, flags);
}

// The same signature doing nothing: VRAMGUARD_MEMCHECK_SPLIT=patch-empty patches it in to
// measure what the API's call costs by itself (memcheck_abi.h, VG_MC_CALLBACK_EMPTY).
extern "C" __device__ __noinline__ int vg_memcheck_nothing(void *, uint64_t, void *, uint32_t,
                                                           uint32_t, const void *) {
    return 0;
}
