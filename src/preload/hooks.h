/* hooks.h — the one list of what the interposer hooks (see preload.h).
 *
 * X(api, symbol): the program-facing name and the ABI symbol exported under it (the same
 * pairs as src/driver/driver_funcs.h, which tests/unit/test_preload_table.c checks). The
 * hook functions are defined, with those symbol names, by area: hooks_memory.c (device
 * and pinned memory), hooks_pool.c (stream-ordered allocation, pools), hooks_copy.c
 * (copies and memsets), hooks_copy_nd.c (2D, 3D and peer copies), hooks_copy_batch.c
 * (batched copies), hooks_memop.c (stream memory operations), hooks_tensormap.c (tensor
 * maps) and hooks_exec.c (launches, synchronisation, streams). VG_HOOKS_PTSZ lists the
 * per-thread-default-stream twins of hooked functions (src/driver/driver_funcs.h, VG_DRIVER_TWINS: cuda.h maps names to them
 * when a program is built with CUDA_API_PER_THREAD_DEFAULT_STREAM, and cuGetProcAddress
 * returns them for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).
 *
 * Everything else — the driver's other ~500 functions — passes through untouched.
 */
#ifndef VG_PRELOAD_HOOKS_H
#define VG_PRELOAD_HOOKS_H

#include "../driver/driver.h"

#define VG_HOOKS(X)                                                                         \
    /* device memory */                                                                     \
    X(cuMemAlloc, cuMemAlloc_v2)                                                            \
    X(cuMemFree, cuMemFree_v2)                                                              \
    X(cuMemAllocPitch, cuMemAllocPitch_v2)                                                  \
    X(cuMemAllocAsync, cuMemAllocAsync)                                                     \
    X(cuMemFreeAsync, cuMemFreeAsync)                                                       \
    X(cuMemGetAddressRange, cuMemGetAddressRange_v2)                                        \
    X(cuMemGetInfo, cuMemGetInfo_v2)                                                        \
    X(cuPointerGetAttribute, cuPointerGetAttribute)                                         \
    X(cuPointerGetAttributes, cuPointerGetAttributes)                                       \
    X(cuIpcGetMemHandle, cuIpcGetMemHandle)                                                 \
    /* stream-ordered allocation from pools (hooks_pool.c, with cuMemAllocAsync) */        \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)                                     \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool)                                 \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool)                                               \
    X(cuDeviceSetMemPool, cuDeviceSetMemPool)                                               \
    X(cuMemGetDefaultMemPool, cuMemGetDefaultMemPool)                                       \
    X(cuMemGetMemPool, cuMemGetMemPool)                                                     \
    X(cuMemSetMemPool, cuMemSetMemPool)                                                     \
    X(cuMemPoolCreate, cuMemPoolCreate)                                                     \
    X(cuMemPoolDestroy, cuMemPoolDestroy)                                                   \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute)                                         \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute)                                         \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo)                                                     \
    /* managed memory */                                                                    \
    X(cuMemAllocManaged, cuMemAllocManaged)                                                 \
    X(cuStreamAttachMemAsync, cuStreamAttachMemAsync)                                       \
    /* pinned host memory */                                                                \
    X(cuMemAllocHost, cuMemAllocHost_v2)                                                    \
    X(cuMemHostAlloc, cuMemHostAlloc)                                                       \
    X(cuMemFreeHost, cuMemFreeHost)                                                         \
    X(cuMemHostRegister, cuMemHostRegister_v2)                                              \
    X(cuMemHostUnregister, cuMemHostUnregister)                                             \
    /* copies */                                                                            \
    X(cuMemcpyHtoD, cuMemcpyHtoD_v2)                                                        \
    X(cuMemcpyDtoH, cuMemcpyDtoH_v2)                                                        \
    X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)                                              \
    X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)                                              \
    X(cuMemcpyAsync, cuMemcpyAsync)                                                         \
    X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2)                                              \
    X(cuMemcpy2DAsync, cuMemcpy2DAsync_v2)                                                  \
    X(cuMemcpyDtoD, cuMemcpyDtoD_v2)                                                        \
    X(cuMemcpy, cuMemcpy)                                                                   \
    X(cuMemcpy2D, cuMemcpy2D_v2)                                                            \
    X(cuMemcpy2DUnaligned, cuMemcpy2DUnaligned_v2)                                          \
    X(cuMemcpy3D, cuMemcpy3D_v2)                                                            \
    X(cuMemcpy3DAsync, cuMemcpy3DAsync_v2)                                                  \
    X(cuMemcpyPeer, cuMemcpyPeer)                                                           \
    X(cuMemcpyPeerAsync, cuMemcpyPeerAsync)                                                 \
    X(cuMemcpy3DPeer, cuMemcpy3DPeer)                                                       \
    X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync)                                             \
    X(cuMemcpyBatchAsync, cuMemcpyBatchAsync_v2)                                            \
    X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_v2)                                        \
    X(cuMemsetD8, cuMemsetD8_v2)                                                            \
    X(cuMemsetD32, cuMemsetD32_v2)                                                          \
    X(cuMemsetD8Async, cuMemsetD8Async)                                                     \
    X(cuMemsetD32Async, cuMemsetD32Async)                                                   \
    X(cuMemsetD16, cuMemsetD16_v2)                                                          \
    X(cuMemsetD16Async, cuMemsetD16Async)                                                   \
    X(cuMemsetD2D8, cuMemsetD2D8_v2)                                                        \
    X(cuMemsetD2D16, cuMemsetD2D16_v2)                                                      \
    X(cuMemsetD2D32, cuMemsetD2D32_v2)                                                      \
    X(cuMemsetD2D8Async, cuMemsetD2D8Async)                                                 \
    X(cuMemsetD2D16Async, cuMemsetD2D16Async)                                               \
    X(cuMemsetD2D32Async, cuMemsetD2D32Async)                                               \
    /* execution and synchronisation */                                                     \
    X(cuLaunchKernel, cuLaunchKernel)                                                       \
    X(cuLaunchKernelEx, cuLaunchKernelEx)                                                   \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel)                                 \
    X(cuStreamSynchronize, cuStreamSynchronize)                                             \
    X(cuCtxSynchronize, cuCtxSynchronize)                                                   \
    X(cuEventSynchronize, cuEventSynchronize)                                               \
    X(cuStreamDestroy, cuStreamDestroy_v2)                                                  \
    X(cuCtxDestroy, cuCtxDestroy_v2)                                                        \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2)                                  \
    X(cuEventRecord, cuEventRecord)                                                         \
    X(cuEventRecordWithFlags, cuEventRecordWithFlags)                                       \
    X(cuStreamWaitEvent, cuStreamWaitEvent)                                                 \
    X(cuStreamQuery, cuStreamQuery)                                                         \
    X(cuEventQuery, cuEventQuery)                                                           \
    X(cuLaunchHostFunc, cuLaunchHostFunc)                                                   \
    X(cuStreamWaitValue32, cuStreamWaitValue32_v2)                                          \
    X(cuStreamWaitValue64, cuStreamWaitValue64_v2)                                          \
    X(cuStreamWriteValue32, cuStreamWriteValue32_v2)                                        \
    X(cuStreamWriteValue64, cuStreamWriteValue64_v2)                                        \
    X(cuStreamBatchMemOp, cuStreamBatchMemOp_v2)                                            \
    X(cuStreamBeginCapture, cuStreamBeginCapture_v2)                                        \
    X(cuStreamEndCapture, cuStreamEndCapture)                                               \
    X(cuGraphLaunch, cuGraphLaunch)                                                         \
    /* tensor maps (hooks_tensormap.c: initcheck learns what bulk tensor copies write) */  \
    X(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled)                                       \
    X(cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2col)                                     \
    X(cuTensorMapEncodeIm2colWide, cuTensorMapEncodeIm2colWide)                             \
    X(cuTensorMapReplaceAddress, cuTensorMapReplaceAddress)                                 \
    /* entry points */                                                                      \
    X(cuInit, cuInit)                                                                       \
    X(cuGetProcAddress, cuGetProcAddress_v2)

/* X(api, symbol, twin): the twin has the symbol's signature; a NULL stream means the
 * calling thread's default stream, on which a _ptds twin (a synchronous call) runs. */
#define VG_HOOKS_PTSZ(X) VG_DRIVER_TWINS_HOOKED(X)

/* Prototypes of every hook, from the driver table (so a hook with the wrong signature
 * does not compile). */
#define VG_X(api, symbol, need, params, args) CUresult symbol params;
VG_DRIVER_FUNCS(VG_X)
#undef VG_X
#define VG_X(api, symbol, twin) __typeof__(symbol) twin;
VG_HOOKS_PTSZ(VG_X)
#undef VG_X
/* Other ABI versions of hooked functions, which cuda.h 13 does not map the names to (not
 * in the driver table): a later one the CUDA runtime gets through cuGetProcAddress,
 * X(api, symbol); and every earlier one of VG_DRIVER_OLDER (src/driver/driver_funcs.h),
 * which programs built with an older cuda.h call (hooks_copy_batch.c). */
#define VG_HOOKS_LATER(X) X(cuCtxSynchronize, cuCtxSynchronize_v2)
CUresult cuCtxSynchronize_v2(CUcontext ctx);
#define VG_X(api, symbol, params, args) CUresult symbol params;
VG_DRIVER_OLDER(VG_X)
#undef VG_X
/* CUDA 11.3-11.8's entry point, before the _v2 with a status argument. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

#endif /* VG_PRELOAD_HOOKS_H */
