/* ptds.c — vgsim: the per-thread-default-stream twins (src/driver/driver_funcs.h,
 * VG_DRIVER_TWINS) of the stream-taking functions, and cuGetProcAddress's table of them.
 *
 * A program built with CUDA_API_PER_THREAD_DEFAULT_STREAM (nvcc --default-stream
 * per-thread) calls cuLaunchKernel_ptsz where it wrote cuLaunchKernel: the same call, with
 * a NULL stream meaning the calling thread's default stream (CU_STREAM_PER_THREAD) rather
 * than the legacy one. The copies' and memsets' twins are in copy.c and copy_nd.c beside
 * the functions they twin (the synchronous ones' _ptds twins run on that stream).
 */
#include "internal.h"

#include <string.h>

VGSIM_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return cuMemAllocAsync(dptr, bytesize, SIM_PT(stream));
}

VGSIM_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    return cuMemFreeAsync(dptr, SIM_PT(stream));
}

VGSIM_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream stream) {
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, SIM_PT(stream));
}

VGSIM_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                      CUstream stream) {
    return cuMemcpyAsync(dst, src, bytes, SIM_PT(stream));
}

VGSIM_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t bytes,
                                             CUstream stream) {
    return cuMemcpyHtoDAsync_v2(dst, src, bytes, SIM_PT(stream));
}

VGSIM_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t bytes,
                                             CUstream stream) {
    return cuMemcpyDtoHAsync_v2(dst, src, bytes, SIM_PT(stream));
}

VGSIM_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                             CUstream stream) {
    return cuMemcpyDtoDAsync_v2(dst, src, bytes, SIM_PT(stream));
}

VGSIM_API CUresult cuStreamQuery_ptsz(CUstream stream) { return cuStreamQuery(SIM_PT(stream)); }

VGSIM_API CUresult cuStreamSynchronize_ptsz(CUstream stream) {
    return cuStreamSynchronize(SIM_PT(stream));
}

VGSIM_API CUresult cuStreamWaitEvent_ptsz(CUstream stream, CUevent event, unsigned int flags) {
    return cuStreamWaitEvent(SIM_PT(stream), event, flags);
}

VGSIM_API CUresult cuStreamGetFlags_ptsz(CUstream stream, unsigned int *flags) {
    return cuStreamGetFlags(SIM_PT(stream), flags);
}

VGSIM_API CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) {
    return cuEventRecord(event, SIM_PT(stream));
}

VGSIM_API CUresult cuEventRecordWithFlags_ptsz(CUevent event, CUstream stream,
                                               unsigned int flags) {
    return cuEventRecordWithFlags(event, SIM_PT(stream), flags);
}

VGSIM_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                       unsigned int gz, unsigned int bx, unsigned int by,
                                       unsigned int bz, unsigned int shmem, CUstream stream,
                                       void **params, void **extra) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, SIM_PT(stream), params, extra);
}

VGSIM_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                         void **params, void **extra) {
    if (!config)
        return cuLaunchKernelEx(config, f, params, extra);
    CUlaunchConfig c = *config;
    c.hStream = SIM_PT(c.hStream);
    return cuLaunchKernelEx(&c, f, params, extra);
}

VGSIM_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx,
                                                  unsigned int gy, unsigned int gz,
                                                  unsigned int bx, unsigned int by,
                                                  unsigned int bz, unsigned int shmem,
                                                  CUstream stream, void **params) {
    return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem, SIM_PT(stream), params);
}

VGSIM_API CUresult cuLaunchHostFunc_ptsz(CUstream stream, CUhostFn fn, void *data) {
    return cuLaunchHostFunc(SIM_PT(stream), fn, data);
}

VGSIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
    return cuStreamBeginCapture_v2(SIM_PT(stream), mode);
}

VGSIM_API CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph *graph) {
    return cuStreamEndCapture(SIM_PT(stream), graph);
}

VGSIM_API CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus *status) {
    return cuStreamIsCapturing(SIM_PT(stream), status);
}

VGSIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
    return cuGraphLaunch(exec, SIM_PT(stream));
}

/* ---------------------------------------------------------------------------------------
 * cuGetProcAddress with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
 * ------------------------------------------------------------------------------------- */

static const struct {
    const char *api;
    void *fn;
} g_twins[] = {
#define VG_X(api, sym, twin) {#api, (void *)twin},
    VG_DRIVER_TWINS(VG_X)
#undef VG_X
};

void *sim_twin_proc(const char *api) {
    for (size_t i = 0; i < sizeof g_twins / sizeof g_twins[0]; i++)
        if (strcmp(g_twins[i].api, api) == 0)
            return g_twins[i].fn;
    return NULL;
}
