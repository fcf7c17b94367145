// patch.cu — the probe's device callback: counts global accesses, keeps the first 8 (run.sh).
#include <sanitizer_patching.h>
struct rec { unsigned long long count; unsigned long long addr[8]; unsigned size[8]; unsigned flags[8]; unsigned long long pc[8]; };
extern "C" __device__ __noinline__ SanitizerPatchResult probe_access(void *userdata, uint64_t pc, void *ptr,
        uint32_t size, uint32_t flags, const void *pData) {
    rec *r = (rec *)userdata;
    if (!r) return SANITIZER_PATCH_SUCCESS;
    unsigned long long k = atomicAdd(&r->count, 1ULL);
    if (k < 8) { r->addr[k] = (unsigned long long)ptr; r->size[k] = size; r->flags[k] = flags; r->pc[k] = pc; }
    return SANITIZER_PATCH_SUCCESS;
}
