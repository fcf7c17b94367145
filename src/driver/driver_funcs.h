/* driver_funcs.h — the one list of CUDA driver functions vramguard knows about.
 *
 * X(api, symbol, need, params, args)
 *   api     the name a program writes (the cuda.h macro name, e.g. cuMemAlloc)
 *   symbol  the ABI symbol that name maps to in CUDA 13's cuda.h (e.g. cuMemAlloc_v2):
 *           what libcuda.so.1 exports, what vgsim exports, what the interposer hooks
 *   need    REQ: the driver layer refuses a driver without it; OPT: optional, and
 *           the feature that needs it is off when it is missing (VMM, modules, ...)
 *   params  the parenthesised parameter list, args the matching argument names
 *
 * Everything that must stay in step with this list — the function-pointer table, the
 * loader, vgsim's prototypes, the interposer's name tables — is generated from it.
 * The order is free; it groups by API area.
 */
#ifndef VG_DRIVER_FUNCS_H
#define VG_DRIVER_FUNCS_H

#include "cuda_abi.h"

#define VG_DRIVER_FUNCS(X)                                                                  \
    /* --- initialisation, errors, entry points --- */                                      \
    X(cuInit, cuInit, REQ, (unsigned int flags), (flags))                                   \
    X(cuDriverGetVersion, cuDriverGetVersion, REQ, (int *version), (version))               \
    X(cuGetErrorName, cuGetErrorName, REQ, (CUresult error, const char **str), (error, str)) \
    X(cuGetErrorString, cuGetErrorString, REQ, (CUresult error, const char **str),          \
      (error, str))                                                                         \
    X(cuGetProcAddress, cuGetProcAddress_v2, OPT,                                           \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                   \
       CUdriverProcAddressQueryResult *status),                                             \
      (symbol, pfn, cudaVersion, flags, status))                                            \
    /* --- devices --- */                                                                   \
    X(cuDeviceGet, cuDeviceGet, REQ, (CUdevice *device, int ordinal), (device, ordinal))    \
    X(cuDeviceGetCount, cuDeviceGetCount, REQ, (int *count), (count))                       \
    X(cuDeviceGetName, cuDeviceGetName, REQ, (char *name, int len, CUdevice dev),           \
      (name, len, dev))                                                                     \
    X(cuDeviceTotalMem, cuDeviceTotalMem_v2, REQ, (size_t *bytes, CUdevice dev), (bytes, dev)) \
    X(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer, OPT,                                    \
      (int *canAccessPeer, CUdevice dev, CUdevice peerDev), (canAccessPeer, dev, peerDev))   \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute, REQ,                                      \
      (int *value, CUdevice_attribute attrib, CUdevice dev), (value, attrib, dev))          \
    /* --- contexts --- */                                                                  \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, REQ, (CUcontext *pctx, CUdevice dev), \
      (pctx, dev))                                                                          \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, REQ, (CUdevice dev), (dev))  \
    X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, OPT,                          \
      (CUdevice dev, unsigned int *flags, int *active), (dev, flags, active))               \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, OPT, (CUdevice dev), (dev))      \
    X(cuCtxGetCurrent, cuCtxGetCurrent, REQ, (CUcontext *pctx), (pctx))                     \
    X(cuCtxSetCurrent, cuCtxSetCurrent, REQ, (CUcontext ctx), (ctx))                        \
    X(cuCtxPushCurrent, cuCtxPushCurrent_v2, OPT, (CUcontext ctx), (ctx))                   \
    X(cuCtxPopCurrent, cuCtxPopCurrent_v2, OPT, (CUcontext *pctx), (pctx))                  \
    X(cuCtxGetDevice, cuCtxGetDevice, REQ, (CUdevice *device), (device))                    \
    X(cuCtxSynchronize, cuCtxSynchronize, REQ, (void), ())                                  \
    X(cuCtxDestroy, cuCtxDestroy_v2, OPT, (CUcontext ctx), (ctx))                           \
    /* --- device memory --- */                                                             \
    X(cuMemGetInfo, cuMemGetInfo_v2, REQ, (size_t *free, size_t *total), (free, total))     \
    X(cuMemAlloc, cuMemAlloc_v2, REQ, (CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize)) \
    X(cuMemAllocPitch, cuMemAllocPitch_v2, OPT,                                             \
      (CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elemsize), \
      (dptr, pitch, width, height, elemsize))                                               \
    X(cuMemFree, cuMemFree_v2, REQ, (CUdeviceptr dptr), (dptr))                             \
    X(cuMemGetAddressRange, cuMemGetAddressRange_v2, OPT,                                   \
      (CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr), (pbase, psize, dptr))          \
    X(cuPointerGetAttribute, cuPointerGetAttribute, OPT,                                    \
      (void *data, CUpointer_attribute attribute, CUdeviceptr ptr), (data, attribute, ptr)) \
    X(cuPointerGetAttributes, cuPointerGetAttributes, OPT,                                  \
      (unsigned int n, CUpointer_attribute *attributes, void **data, CUdeviceptr ptr),      \
      (n, attributes, data, ptr))                                                           \
    X(cuIpcGetMemHandle, cuIpcGetMemHandle, OPT,                                            \
      (CUipcMemHandle *handle, CUdeviceptr dptr), (handle, dptr))                           \
    X(cuMemAllocAsync, cuMemAllocAsync, OPT,                                                \
      (CUdeviceptr *dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream))      \
    X(cuMemFreeAsync, cuMemFreeAsync, OPT, (CUdeviceptr dptr, CUstream stream), (dptr, stream)) \
    /* --- memory pools (stream-ordered allocation from a named pool) --- */               \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, OPT,                                \
      (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream),             \
      (dptr, bytesize, pool, stream))                                                       \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, OPT,                            \
      (CUmemoryPool *pool, CUdevice dev), (pool, dev))                                      \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool, OPT, (CUmemoryPool *pool, CUdevice dev),      \
      (pool, dev))                                                                          \
    X(cuDeviceSetMemPool, cuDeviceSetMemPool, OPT, (CUdevice dev, CUmemoryPool pool),       \
      (dev, pool))                                                                          \
    X(cuMemGetDefaultMemPool, cuMemGetDefaultMemPool, OPT,                                  \
      (CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type),              \
      (pool, location, type))                                                               \
    X(cuMemGetMemPool, cuMemGetMemPool, OPT,                                                \
      (CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type),              \
      (pool, location, type))                                                               \
    X(cuMemSetMemPool, cuMemSetMemPool, OPT,                                                \
      (CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool),               \
      (location, type, pool))                                                               \
    X(cuMemPoolCreate, cuMemPoolCreate, OPT,                                                \
      (CUmemoryPool *pool, const CUmemPoolProps *props), (pool, props))                     \
    X(cuMemPoolDestroy, cuMemPoolDestroy, OPT, (CUmemoryPool pool), (pool))                 \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, OPT,                                    \
      (CUmemoryPool pool, CUmemPool_attribute attr, void *value), (pool, attr, value))      \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, OPT,                                    \
      (CUmemoryPool pool, CUmemPool_attribute attr, void *value), (pool, attr, value))      \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, OPT, (CUmemoryPool pool, size_t minBytesToKeep),    \
      (pool, minBytesToKeep))                                                               \
    X(cuMemPoolSetAccess, cuMemPoolSetAccess, OPT,                                          \
      (CUmemoryPool pool, const CUmemAccessDesc *map, size_t count), (pool, map, count))    \
    X(cuMemPoolGetAccess, cuMemPoolGetAccess, OPT,                                          \
      (CUmemAccess_flags *flags, CUmemoryPool pool, CUmemLocation *location),               \
      (flags, pool, location))                                                              \
    X(cuMemPoolExportPointer, cuMemPoolExportPointer, OPT,                                  \
      (CUmemPoolPtrExportData *data, CUdeviceptr ptr), (data, ptr))                         \
    /* --- managed memory --- */                                                            \
    X(cuMemAllocManaged, cuMemAllocManaged, OPT,                                            \
      (CUdeviceptr *dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags))    \
    X(cuStreamAttachMemAsync, cuStreamAttachMemAsync, OPT,                                  \
      (CUstream stream, CUdeviceptr dptr, size_t length, unsigned int flags),               \
      (stream, dptr, length, flags))                                                        \
    X(cuMemPrefetchAsync, cuMemPrefetchAsync_v2, OPT,                                       \
      (CUdeviceptr dptr, size_t count, CUmemLocation location, unsigned int flags,          \
       CUstream stream),                                                                    \
      (dptr, count, location, flags, stream))                                               \
    X(cuMemAdvise, cuMemAdvise_v2, OPT,                                                     \
      (CUdeviceptr dptr, size_t count, CUmem_advise advice, CUmemLocation location),        \
      (dptr, count, advice, location))                                                      \
    /* --- pinned host memory --- */                                                        \
    X(cuMemAllocHost, cuMemAllocHost_v2, OPT, (void **pp, size_t bytesize), (pp, bytesize)) \
    X(cuMemHostAlloc, cuMemHostAlloc, OPT, (void **pp, size_t bytesize, unsigned int flags), \
      (pp, bytesize, flags))                                                                \
    X(cuMemFreeHost, cuMemFreeHost, OPT, (void *p), (p))                                    \
    X(cuMemHostRegister, cuMemHostRegister_v2, OPT,                                         \
      (void *p, size_t bytesize, unsigned int flags), (p, bytesize, flags))                 \
    X(cuMemHostUnregister, cuMemHostUnregister, OPT, (void *p), (p))                        \
    X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, OPT,                         \
      (CUdeviceptr *pdptr, void *p, unsigned int flags), (pdptr, p, flags))                 \
    /* --- copies and sets --- */                                                           \
    X(cuMemcpy, cuMemcpy, OPT, (CUdeviceptr dst, CUdeviceptr src, size_t bytes),            \
      (dst, src, bytes))                                                                    \
    X(cuMemcpyAsync, cuMemcpyAsync, OPT,                                                    \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream),                    \
      (dst, src, bytes, stream))                                                            \
    X(cuMemcpyHtoD, cuMemcpyHtoD_v2, REQ,                                                   \
      (CUdeviceptr dst, const void *src, size_t bytes), (dst, src, bytes))                  \
    X(cuMemcpyDtoH, cuMemcpyDtoH_v2, REQ, (void *dst, CUdeviceptr src, size_t bytes),       \
      (dst, src, bytes))                                                                    \
    X(cuMemcpyDtoD, cuMemcpyDtoD_v2, OPT, (CUdeviceptr dst, CUdeviceptr src, size_t bytes), \
      (dst, src, bytes))                                                                    \
    X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, REQ,                                         \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream),                    \
      (dst, src, bytes, stream))                                                            \
    X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, REQ,                                         \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream), (dst, src, bytes, stream)) \
    X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, OPT,                                         \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream),                    \
      (dst, src, bytes, stream))                                                            \
    X(cuMemcpy2D, cuMemcpy2D_v2, OPT, (const CUDA_MEMCPY2D *copy), (copy))                  \
    X(cuMemcpy2DAsync, cuMemcpy2DAsync_v2, OPT, (const CUDA_MEMCPY2D *copy, CUstream stream), \
      (copy, stream))                                                                       \
    X(cuMemcpy2DUnaligned, cuMemcpy2DUnaligned_v2, OPT, (const CUDA_MEMCPY2D *copy), (copy)) \
    X(cuMemcpy3D, cuMemcpy3D_v2, OPT, (const CUDA_MEMCPY3D *copy), (copy))                  \
    X(cuMemcpy3DAsync, cuMemcpy3DAsync_v2, OPT, (const CUDA_MEMCPY3D *copy, CUstream stream), \
      (copy, stream))                                                                       \
    X(cuMemcpyPeer, cuMemcpyPeer, OPT,                                                      \
      (CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,        \
       size_t bytes),                                                                       \
      (dst, dstContext, src, srcContext, bytes))                                            \
    X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, OPT,                                            \
      (CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,        \
       size_t bytes, CUstream stream),                                                      \
      (dst, dstContext, src, srcContext, bytes, stream))                                    \
    X(cuMemcpy3DPeer, cuMemcpy3DPeer, OPT, (const CUDA_MEMCPY3D_PEER *copy), (copy))        \
    X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, OPT,                                        \
      (const CUDA_MEMCPY3D_PEER *copy, CUstream stream), (copy, stream))                    \
    X(cuMemcpyBatchAsync, cuMemcpyBatchAsync_v2, OPT,                                      \
      (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,                   \
       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream stream),     \
      (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream))                       \
    X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_v2, OPT,                                  \
      (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,            \
       CUstream stream),                                                                    \
      (numOps, opList, flags, stream))                                                      \
    X(cuMemsetD8, cuMemsetD8_v2, OPT, (CUdeviceptr dst, unsigned char value, size_t count), \
      (dst, value, count))                                                                  \
    X(cuMemsetD32, cuMemsetD32_v2, OPT, (CUdeviceptr dst, unsigned int value, size_t count), \
      (dst, value, count))                                                                  \
    X(cuMemsetD8Async, cuMemsetD8Async, REQ,                                                \
      (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream),                \
      (dst, value, count, stream))                                                          \
    X(cuMemsetD32Async, cuMemsetD32Async, REQ,                                              \
      (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream),                 \
      (dst, value, count, stream))                                                          \
    X(cuMemsetD16, cuMemsetD16_v2, OPT, (CUdeviceptr dst, unsigned short value, size_t count),\
      (dst, value, count))                                                                  \
    X(cuMemsetD16Async, cuMemsetD16Async, OPT,                                              \
      (CUdeviceptr dst, unsigned short value, size_t count, CUstream stream),               \
      (dst, value, count, stream))                                                          \
    X(cuMemsetD2D8, cuMemsetD2D8_v2, OPT,                                                   \
      (CUdeviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height),    \
      (dst, pitch, value, width, height))                                                   \
    X(cuMemsetD2D8Async, cuMemsetD2D8Async, OPT,                                            \
      (CUdeviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height,     \
       CUstream stream),                                                                    \
      (dst, pitch, value, width, height, stream))                                           \
    X(cuMemsetD2D16, cuMemsetD2D16_v2, OPT,                                                 \
      (CUdeviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height),   \
      (dst, pitch, value, width, height))                                                   \
    X(cuMemsetD2D16Async, cuMemsetD2D16Async, OPT,                                          \
      (CUdeviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height,    \
       CUstream stream),                                                                    \
      (dst, pitch, value, width, height, stream))                                           \
    X(cuMemsetD2D32, cuMemsetD2D32_v2, OPT,                                                 \
      (CUdeviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height),     \
      (dst, pitch, value, width, height))                                                   \
    X(cuMemsetD2D32Async, cuMemsetD2D32Async, OPT,                                          \
      (CUdeviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height,      \
       CUstream stream),                                                                    \
      (dst, pitch, value, width, height, stream))                                           \
    /* --- streams and events --- */                                                       \
    X(cuStreamCreate, cuStreamCreate, REQ, (CUstream *pstream, unsigned int flags),         \
      (pstream, flags))                                                                     \
    X(cuStreamCreateWithPriority, cuStreamCreateWithPriority, OPT,                          \
      (CUstream *pstream, unsigned int flags, int priority), (pstream, flags, priority))    \
    X(cuStreamDestroy, cuStreamDestroy_v2, REQ, (CUstream stream), (stream))                \
    X(cuStreamQuery, cuStreamQuery, REQ, (CUstream stream), (stream))                       \
    X(cuStreamSynchronize, cuStreamSynchronize, REQ, (CUstream stream), (stream))           \
    X(cuStreamWaitEvent, cuStreamWaitEvent, REQ,                                            \
      (CUstream stream, CUevent event, unsigned int flags), (stream, event, flags))         \
    X(cuStreamGetFlags, cuStreamGetFlags, OPT, (CUstream stream, unsigned int *flags),     \
      (stream, flags))                                                                      \
    X(cuEventCreate, cuEventCreate, REQ, (CUevent *pevent, unsigned int flags), (pevent, flags)) \
    X(cuEventRecord, cuEventRecord, REQ, (CUevent event, CUstream stream), (event, stream)) \
    X(cuEventRecordWithFlags, cuEventRecordWithFlags, OPT,                                 \
      (CUevent event, CUstream stream, unsigned int flags), (event, stream, flags))         \
    X(cuEventQuery, cuEventQuery, REQ, (CUevent event), (event))                            \
    X(cuEventSynchronize, cuEventSynchronize, REQ, (CUevent event), (event))                \
    X(cuEventElapsedTime, cuEventElapsedTime_v2, OPT,                                       \
      (float *ms, CUevent start, CUevent end), (ms, start, end))                            \
    X(cuEventDestroy, cuEventDestroy_v2, REQ, (CUevent event), (event))                     \
    X(cuLaunchHostFunc, cuLaunchHostFunc, OPT, (CUstream stream, CUhostFn fn, void *data),  \
      (stream, fn, data))                                                                   \
    X(cuStreamWaitValue32, cuStreamWaitValue32_v2, OPT,                                     \
      (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),            \
      (stream, addr, value, flags))                                                         \
    X(cuStreamWaitValue64, cuStreamWaitValue64_v2, OPT,                                     \
      (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags),            \
      (stream, addr, value, flags))                                                         \
    X(cuStreamWriteValue32, cuStreamWriteValue32_v2, OPT,                                   \
      (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),            \
      (stream, addr, value, flags))                                                         \
    X(cuStreamWriteValue64, cuStreamWriteValue64_v2, OPT,                                   \
      (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags),            \
      (stream, addr, value, flags))                                                         \
    X(cuStreamBatchMemOp, cuStreamBatchMemOp_v2, OPT,                                       \
      (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *ops, unsigned int flags), \
      (stream, count, ops, flags))                                                          \
    /* --- stream capture and graphs --- */                                                 \
    X(cuStreamBeginCapture, cuStreamBeginCapture_v2, OPT,                                   \
      (CUstream stream, CUstreamCaptureMode mode), (stream, mode))                          \
    X(cuStreamEndCapture, cuStreamEndCapture, OPT, (CUstream stream, CUgraph *graph),       \
      (stream, graph))                                                                      \
    X(cuStreamIsCapturing, cuStreamIsCapturing, OPT,                                        \
      (CUstream stream, CUstreamCaptureStatus *status), (stream, status))                   \
    X(cuThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode, OPT,            \
      (CUstreamCaptureMode *mode), (mode))                                                  \
    X(cuGraphInstantiate, cuGraphInstantiateWithFlags, OPT,                                 \
      (CUgraphExec *exec, CUgraph graph, unsigned long long flags), (exec, graph, flags))   \
    X(cuGraphLaunch, cuGraphLaunch, OPT, (CUgraphExec exec, CUstream stream), (exec, stream)) \
    X(cuGraphExecDestroy, cuGraphExecDestroy, OPT, (CUgraphExec exec), (exec))              \
    X(cuGraphDestroy, cuGraphDestroy, OPT, (CUgraph graph), (graph))                        \
    /* --- modules and kernels --- */                                                       \
    X(cuModuleLoadData, cuModuleLoadData, OPT, (CUmodule *module, const void *image),       \
      (module, image))                                                                      \
    X(cuModuleUnload, cuModuleUnload, OPT, (CUmodule module), (module))                     \
    X(cuModuleGetFunction, cuModuleGetFunction, OPT,                                        \
      (CUfunction *func, CUmodule module, const char *name), (func, module, name))          \
    X(cuFuncGetName, cuFuncGetName, OPT, (const char **name, CUfunction func), (name, func)) \
    X(cuFuncGetParamInfo, cuFuncGetParamInfo, OPT,                                          \
      (CUfunction func, size_t index, size_t *offset, size_t *size),                        \
      (func, index, offset, size))                                                          \
    /* The CUDA runtime (12+) loads its kernels as libraries and launches a CUkernel cast \
     * to CUfunction: the cuFunc* queries refuse such a handle, the cuKernel* ones answer. */ \
    X(cuLibraryLoadData, cuLibraryLoadData, OPT,                                            \
      (CUlibrary *library, const void *code, CUjit_option *jit_options,                     \
       void **jit_values, unsigned int njit, CUlibraryOption *library_options,              \
       void **library_values, unsigned int nlibrary),                                       \
      (library, code, jit_options, jit_values, njit, library_options, library_values,       \
       nlibrary))                                                                           \
    X(cuLibraryUnload, cuLibraryUnload, OPT, (CUlibrary library), (library))                \
    X(cuLibraryGetKernel, cuLibraryGetKernel, OPT,                                          \
      (CUkernel *kernel, CUlibrary library, const char *name), (kernel, library, name))     \
    X(cuKernelGetFunction, cuKernelGetFunction, OPT, (CUfunction *func, CUkernel kernel),   \
      (func, kernel))                                                                       \
    X(cuKernelGetName, cuKernelGetName, OPT, (const char **name, CUkernel kernel),          \
      (name, kernel))                                                                       \
    X(cuKernelGetParamInfo, cuKernelGetParamInfo, OPT,                                      \
      (CUkernel kernel, size_t index, size_t *offset, size_t *size),                        \
      (kernel, index, offset, size))                                                        \
    /* Tensor maps (compute capability 9.0+): memcheck mode's initcheck learns from them \
     * which bytes a kernel's tensor memory accelerator copies write (docs/memcheck.md). */ \
    X(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled, OPT,                                  \
      (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,   \
       void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,   \
       const cuuint32_t *boxDim, const cuuint32_t *elementStrides,                          \
       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,                        \
       CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill),                \
      (tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,      \
       boxDim, elementStrides, interleave, swizzle, l2Promotion, oobFill))                  \
    X(cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2col, OPT,                                \
      (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,   \
       void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,   \
       const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner,                      \
       cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,                             \
       const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,                  \
       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,                      \
       CUtensorMapFloatOOBfill oobFill),                                                    \
      (tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,      \
       pixelBoxLowerCorner, pixelBoxUpperCorner, channelsPerPixel, pixelsPerColumn,         \
       elementStrides, interleave, swizzle, l2Promotion, oobFill))                          \
    X(cuTensorMapEncodeIm2colWide, cuTensorMapEncodeIm2colWide, OPT,                        \
      (CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,   \
       void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,   \
       int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth,                          \
       cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,                             \
       const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,                  \
       CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,                          \
       CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill),                \
      (tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,      \
       pixelBoxLowerCornerWidth, pixelBoxUpperCornerWidth, channelsPerPixel,                \
       pixelsPerColumn, elementStrides, interleave, mode, swizzle, l2Promotion, oobFill))   \
    X(cuTensorMapReplaceAddress, cuTensorMapReplaceAddress, OPT,                            \
      (CUtensorMap *tensorMap, void *globalAddress), (tensorMap, globalAddress))            \
    X(cuLaunchKernel, cuLaunchKernel, OPT,                                                  \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,    \
       unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream,               \
       void **params, void **extra),                                                        \
      (f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra))                            \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, OPT,                            \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,    \
       unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream,               \
       void **params),                                                                      \
      (f, gx, gy, gz, bx, by, bz, shmem, stream, params))                                   \
    X(cuLaunchKernelEx, cuLaunchKernelEx, OPT,                                              \
      (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),           \
      (config, f, params, extra))                                                           \
    /* --- virtual memory management --- */                                                \
    X(cuMemAddressReserve, cuMemAddressReserve, OPT,                                        \
      (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,                   \
       unsigned long long flags),                                                           \
      (ptr, size, alignment, addr, flags))                                                  \
    X(cuMemAddressFree, cuMemAddressFree, OPT, (CUdeviceptr ptr, size_t size), (ptr, size)) \
    X(cuMemCreate, cuMemCreate, OPT,                                                        \
      (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,  \
       unsigned long long flags),                                                           \
      (handle, size, prop, flags))                                                          \
    X(cuMemRelease, cuMemRelease, OPT, (CUmemGenericAllocationHandle handle), (handle))     \
    X(cuMemMap, cuMemMap, OPT,                                                              \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,    \
       unsigned long long flags),                                                           \
      (ptr, size, offset, handle, flags))                                                   \
    X(cuMemUnmap, cuMemUnmap, OPT, (CUdeviceptr ptr, size_t size), (ptr, size))             \
    X(cuMemSetAccess, cuMemSetAccess, OPT,                                                  \
      (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count),            \
      (ptr, size, desc, count))                                                             \
    X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, OPT,                    \
      (size_t *granularity, const CUmemAllocationProp *prop,                                \
       CUmemAllocationGranularity_flags option),                                            \
      (granularity, prop, option))

/* Earlier ABI versions of functions above that cuda.h 13 no longer maps the names to,
 * but that programs built with an older cuda.h call and cuGetProcAddress returns for an
 * older cudaVersion: CUDA 12.8's batched copies had a failIdx argument (where the batch
 * failed) before the stream. X(api, symbol, params, args); their per-thread twins are
 * listed as functions of their own. vgsim exports them; the interposer hooks them. */
#define VG_DRIVER_OLDER(X)                                                                  \
    X(cuMemcpyBatchAsync, cuMemcpyBatchAsync,                                               \
      (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,                   \
       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,      \
       CUstream stream),                                                                    \
      (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, stream))              \
    X(cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz,                                          \
      (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,                   \
       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,      \
       CUstream stream),                                                                    \
      (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, stream))              \
    X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync,                                           \
      (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,                     \
       unsigned long long flags, CUstream stream),                                          \
      (numOps, opList, failIdx, flags, stream))                                             \
    X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_ptsz,                                      \
      (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,                     \
       unsigned long long flags, CUstream stream),                                          \
      (numOps, opList, failIdx, flags, stream))

/* The per-thread-default-stream twins of functions above: cuda.h maps a name to them
 * (cuMemcpyHtoD to cuMemcpyHtoD_v2_ptds, cuLaunchKernel to cuLaunchKernel_ptsz) when a
 * program is built with CUDA_API_PER_THREAD_DEFAULT_STREAM (nvcc --default-stream
 * per-thread), and cuGetProcAddress returns them for
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. A twin takes its symbol's parameters; a
 * NULL stream means the calling thread's default stream instead of the legacy one, and a
 * _ptds twin (a synchronous call, with no stream parameter) runs on that stream.
 * X(api, symbol, twin). vgsim exports every twin; the interposer hooks those of the
 * functions it hooks (src/preload/hooks.h). */
#define VG_DRIVER_TWINS(X)                                                                  \
    VG_DRIVER_TWINS_HOOKED(X)                                                               \
    X(cuStreamGetFlags, cuStreamGetFlags, cuStreamGetFlags_ptsz)                            \
    X(cuStreamIsCapturing, cuStreamIsCapturing, cuStreamIsCapturing_ptsz)                  \
    X(cuMemPrefetchAsync, cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz)
/* The twins of the functions the interposer hooks (src/preload/hooks.h). */
#define VG_DRIVER_TWINS_HOOKED(X)                                                           \
    X(cuMemcpy, cuMemcpy, cuMemcpy_ptds)                                                    \
    X(cuMemcpyHtoD, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds)                                  \
    X(cuMemcpyDtoH, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds)                                  \
    X(cuMemcpyDtoD, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds)                                  \
    X(cuMemcpy2D, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds)                                        \
    X(cuMemcpy2DUnaligned, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds)             \
    X(cuMemcpy3D, cuMemcpy3D_v2, cuMemcpy3D_v2_ptds)                                        \
    X(cuMemcpyPeer, cuMemcpyPeer, cuMemcpyPeer_ptds)                                        \
    X(cuMemcpy3DPeer, cuMemcpy3DPeer, cuMemcpy3DPeer_ptds)                                  \
    X(cuMemsetD8, cuMemsetD8_v2, cuMemsetD8_v2_ptds)                                        \
    X(cuMemsetD16, cuMemsetD16_v2, cuMemsetD16_v2_ptds)                                     \
    X(cuMemsetD32, cuMemsetD32_v2, cuMemsetD32_v2_ptds)                                     \
    X(cuMemsetD2D8, cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds)                                  \
    X(cuMemsetD2D16, cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds)                               \
    X(cuMemsetD2D32, cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds)                               \
    X(cuMemAllocAsync, cuMemAllocAsync, cuMemAllocAsync_ptsz)                               \
    X(cuMemFreeAsync, cuMemFreeAsync, cuMemFreeAsync_ptsz)                                  \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)       \
    X(cuStreamAttachMemAsync, cuStreamAttachMemAsync, cuStreamAttachMemAsync_ptsz)          \
    X(cuMemcpyAsync, cuMemcpyAsync, cuMemcpyAsync_ptsz)                                     \
    X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz)                   \
    X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz)                   \
    X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)                   \
    X(cuMemcpy2DAsync, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz)                         \
    X(cuMemcpy3DAsync, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz)                         \
    X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz)                         \
    X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz)                   \
    X(cuMemcpyBatchAsync, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz)                \
    X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz)          \
    X(cuMemsetD8Async, cuMemsetD8Async, cuMemsetD8Async_ptsz)                               \
    X(cuMemsetD16Async, cuMemsetD16Async, cuMemsetD16Async_ptsz)                            \
    X(cuMemsetD32Async, cuMemsetD32Async, cuMemsetD32Async_ptsz)                            \
    X(cuMemsetD2D8Async, cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz)                         \
    X(cuMemsetD2D16Async, cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz)                      \
    X(cuMemsetD2D32Async, cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz)                      \
    X(cuStreamQuery, cuStreamQuery, cuStreamQuery_ptsz)                                     \
    X(cuStreamSynchronize, cuStreamSynchronize, cuStreamSynchronize_ptsz)                   \
    X(cuStreamWaitEvent, cuStreamWaitEvent, cuStreamWaitEvent_ptsz)                         \
    X(cuEventRecord, cuEventRecord, cuEventRecord_ptsz)                                     \
    X(cuEventRecordWithFlags, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz)          \
    X(cuLaunchKernel, cuLaunchKernel, cuLaunchKernel_ptsz)                                  \
    X(cuLaunchKernelEx, cuLaunchKernelEx, cuLaunchKernelEx_ptsz)                            \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz) \
    X(cuLaunchHostFunc, cuLaunchHostFunc, cuLaunchHostFunc_ptsz)                            \
    X(cuStreamWaitValue32, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz)             \
    X(cuStreamWaitValue64, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz)             \
    X(cuStreamWriteValue32, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz)          \
    X(cuStreamWriteValue64, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz)          \
    X(cuStreamBatchMemOp, cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz)                \
    X(cuStreamBeginCapture, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz)          \
    X(cuStreamEndCapture, cuStreamEndCapture, cuStreamEndCapture_ptsz)                      \
    X(cuGraphLaunch, cuGraphLaunch, cuGraphLaunch_ptsz)
#endif /* VG_DRIVER_FUNCS_H */
