/* vgsim_cuda.h — a stand-in for <cuda.h> for driver-API programs built without the CUDA
 * toolkit (tests and examples use <cuda.h> when the toolkit is present).
 *
 * Each function is declared under the name programs write (cuMemAlloc) and bound with an
 * asm label to the ABI symbol that CUDA 13's cuda.h maps it to (cuMemAlloc_v2), so a
 * program compiled against this header calls exactly what one compiled against cuda.h
 * calls. The declarations come from the driver layer's one list (driver_funcs.h).
 */
#ifndef VGSIM_CUDA_H
#define VGSIM_CUDA_H

#include "../src/driver/driver_funcs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_VERSION 13000

#define VG_X(api, sym, need, params, args) CUresult api params __asm__(#sym);
VG_DRIVER_FUNCS(VG_X)
#undef VG_X

typedef struct CUctxCreateParams_st CUctxCreateParams;
CUresult cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                     CUdevice dev) __asm__("cuCtxCreate_v4");

#ifdef __cplusplus
}
#endif
#endif /* VGSIM_CUDA_H */
