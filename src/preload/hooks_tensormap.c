/* hooks_tensormap.c — tensor maps: cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
 * cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress (see hooks.h).
 *
 * Each is the driver's call, unchanged; what it built is recorded with the region of
 * global memory it describes (check/tensormaps.h), so that memcheck mode's initcheck
 * counts the region as written when a launch carries the map (a Hopper kernel's bulk
 * tensor stores, which the Compute Sanitizer API does not report). Outside memcheck mode
 * with initcheck=1 nothing is recorded.
 */
#define _GNU_SOURCE
#include <string.h>

#include "check/tensormaps.h"
#include "hooks.h"
#include "preload.h"

#define REAL(symbol)                                                                        \
    ({                                                                                      \
        static void *next_;                                                                 \
        (__typeof__(&symbol))vgp_next(#symbol, &next_);                                     \
    })

static void encoded(CUresult r, const CUtensorMap *map, CUtensorMapDataType type,
                    cuuint32_t rank, const void *address, const cuuint64_t *dims,
                    const cuuint64_t *strides) {
    if (r == CUDA_SUCCESS && vgp_ready() && vg__tensormaps_wanted())
        vg__tensormap_encoded(map, (uint64_t)(uintptr_t)address,
                              vg__tensormap_span(type, rank, dims, strides));
}

VG_API CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type,
                                       cuuint32_t rank, void *address, const cuuint64_t *dims,
                                       const cuuint64_t *strides, const cuuint32_t *box,
                                       const cuuint32_t *element_strides,
                                       CUtensorMapInterleave interleave,
                                       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                       CUtensorMapFloatOOBfill fill) {
    __typeof__(&cuTensorMapEncodeTiled) real = REAL(cuTensorMapEncodeTiled);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(map, type, rank, address, dims, strides, box, element_strides,
                      interleave, swizzle, l2, fill);
    encoded(r, map, type, rank, address, dims, strides);
    return r;
}

VG_API CUresult cuTensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType type,
                                        cuuint32_t rank, void *address, const cuuint64_t *dims,
                                        const cuuint64_t *strides, const int *lower,
                                        const int *upper, cuuint32_t channels,
                                        cuuint32_t pixels, const cuuint32_t *element_strides,
                                        CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill fill) {
    __typeof__(&cuTensorMapEncodeIm2col) real = REAL(cuTensorMapEncodeIm2col);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(map, type, rank, address, dims, strides, lower, upper, channels, pixels,
                      element_strides, interleave, swizzle, l2, fill);
    encoded(r, map, type, rank, address, dims, strides);
    return r;
}

VG_API CUresult cuTensorMapEncodeIm2colWide(
    CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *address,
    const cuuint64_t *dims, const cuuint64_t *strides, int lower, int upper,
    cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *element_strides,
    CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill) {
    __typeof__(&cuTensorMapEncodeIm2colWide) real = REAL(cuTensorMapEncodeIm2colWide);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(map, type, rank, address, dims, strides, lower, upper, channels, pixels,
                      element_strides, interleave, mode, swizzle, l2, fill);
    encoded(r, map, type, rank, address, dims, strides);
    return r;
}

VG_API CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *address) {
    __typeof__(&cuTensorMapReplaceAddress) real = REAL(cuTensorMapReplaceAddress);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    bool wanted = map && vgp_ready() && vg__tensormaps_wanted();
    unsigned char before[sizeof(CUtensorMap)];
    if (wanted)
        memcpy(before, map, sizeof before);
    CUresult r = real(map, address);
    if (r == CUDA_SUCCESS && wanted)
        vg__tensormap_replaced(before, map, (uint64_t)(uintptr_t)address);
    return r;
}
