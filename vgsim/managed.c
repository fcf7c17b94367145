/* managed.c — vgsim: managed (unified) memory: cuMemAllocManaged, cuStreamAttachMemAsync,
 * cuMemPrefetchAsync and cuMemAdvise.
 *
 * Device memory here is host memory already (memory.c), reachable from the host thread
 * that allocated it and from every kernel, so managed memory is an ordinary allocation
 * that says it is managed (CU_POINTER_ATTRIBUTE_IS_MANAGED). vgsim behaves as a device
 * with CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS (the host and kernels touch it at
 * the same time, coherently), so a stream association, a prefetch and advice change
 * nothing: their arguments are checked as the manual says, and they succeed.
 * VGSIM_CONCURRENT_MANAGED=0 makes the device attribute read 0 (to test a tool's
 * fallback) without changing that behaviour. Not modelled: oversubscription (managed
 * memory takes device memory when it is allocated), __managed__ variables, and
 * cuMemRangeGetAttribute.
 */
#include "internal.h"

VGSIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    SIM_UNSAFE_DURING_CAPTURE();
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    r = sim_mem_alloc(c, dptr, bytesize, true); /* (size 0: CUDA_ERROR_INVALID_VALUE) */
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&g_sim.lock);
        sim_region_find(*dptr)->managed = true;
        pthread_mutex_unlock(&g_sim.lock);
    }
    return r;
}

/* Whether [p, p + n) lies in one managed allocation; *whole: it is that allocation. */
static bool managed_range(CUdeviceptr p, size_t n, bool *whole) {
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg = sim_region_find(p);
    bool ok = reg && reg->kind == REGION_ALLOC && reg->managed && n <= reg->user_size &&
              p - reg->base <= reg->user_size - n;
    if (whole)
        *whole = ok && p == reg->base && (n == 0 || n == reg->user_size);
    pthread_mutex_unlock(&g_sim.lock);
    return ok;
}

/* "For managed allocations, length must be either zero or the entire allocation's size";
 * vgsim also asks for the allocation's start (the manual's examples pass it). */
VGSIM_API CUresult cuStreamAttachMemAsync(CUstream stream, CUdeviceptr dptr, size_t length,
                                          unsigned int flags) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    bool whole = false;
    if ((flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
         flags != CU_MEM_ATTACH_SINGLE) ||
        !managed_range(dptr, length, &whole) || !whole)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuStreamAttachMemAsync_ptsz(CUstream stream, CUdeviceptr dptr, size_t length,
                                               unsigned int flags) {
    return cuStreamAttachMemAsync(SIM_PT(stream), dptr, length, flags);
}

/* A location a managed range may move to or be advised about: a device or the host. */
static bool location_ok(CUmemLocation loc) {
    if (loc.type == CU_MEM_LOCATION_TYPE_HOST)
        return true;
    return loc.type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id >= 0 && loc.id < g_sim.ndevices;
}

VGSIM_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr dptr, size_t count, CUmemLocation location,
                                         unsigned int flags, CUstream stream) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (count == 0 || flags != 0 || !location_ok(location) || !managed_range(dptr, count, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr dptr, size_t count,
                                              CUmemLocation location, unsigned int flags,
                                              CUstream stream) {
    return cuMemPrefetchAsync_v2(dptr, count, location, flags, SIM_PT(stream));
}

VGSIM_API CUresult cuMemAdvise_v2(CUdeviceptr dptr, size_t count, CUmem_advise advice,
                                  CUmemLocation location) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    bool located = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                   advice == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                   advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (count == 0 || advice < CU_MEM_ADVISE_SET_READ_MOSTLY ||
        advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY || (located && !location_ok(location)) ||
        !managed_range(dptr, count, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
