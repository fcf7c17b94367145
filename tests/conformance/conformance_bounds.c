/* conformance_bounds.c — what the driver does with a copy or memset that runs past the end
 * of an allocation: the behaviour vramguard imitates inside its own segments (DESIGN D11,
 * docs/decisions.md G11), where the driver sees one mapping and not the allocations.
 *
 * The case prints each probe's result ("bounds: ...") so that a run on a GPU records the
 * driver's answers, and checks the answers recorded on the H200 on 2026-11-26 (driver
 * 580.159.04, CUDA 13: docs/gpu-validation.md), which vgsim gives too: the driver checks
 * a copy against the bytes a cuMemAlloc block was asked for (cuMemGetAddressRange's
 * size), not against its rounding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

static const char *name_of(CUresult r) {
    const char *n = "?";
    cuGetErrorName(r, &n);
    return n;
}

/* Run one probe: its result printed, then the context checked for a sticky error. */
static CUresult probe(const char *what, CUresult r) {
    CUresult s = cuCtxSynchronize();
    printf("bounds: %-58s %s%s%s\n", what, name_of(r), s ? ", then " : "", s ? name_of(s) : "");
    return r;
}

VG_TEST(copies_and_memsets_past_an_allocation) {
    setup();
    enum { N = 4000 };
    static unsigned char h[4 << 20];
    CUdeviceptr p, q, big;
    CHECK_CU(cuMemAlloc(&p, N));
    CHECK_CU(cuMemAlloc(&q, 8192));
    CHECK_CU(cuMemAlloc(&big, 2 << 20));
    CUdeviceptr base = 0;
    size_t range = 0;
    CHECK_CU(cuMemGetAddressRange(&base, &range, p + 100));
    printf("bounds: cuMemGetAddressRange of a 4000-byte block: %zu bytes from its start %s\n",
           range, base == p ? "(its pointer)" : "(elsewhere)");
    CUresult r[16];
    r[0] = probe("cuMemsetD8 4000 of 4000 (cuMemAlloc)", cuMemsetD8(p, 1, N));
    r[1] = probe("cuMemsetD8 4001 of 4000", cuMemsetD8(p, 1, N + 1));
    r[2] = probe("cuMemsetD8 4096 of 4000", cuMemsetD8(p, 1, 4096));
    r[3] = probe("cuMemsetD8 4097 of 4000", cuMemsetD8(p, 1, 4097));
    r[4] = probe("cuMemsetD8 16 from its end", cuMemsetD8(p + N, 1, 16));
    r[5] = probe("cuMemcpyDtoH 4096 of 4000", cuMemcpyDtoH(h, p, 4096));
    r[6] = probe("cuMemcpyDtoD 4096 of 4000 (source)", cuMemcpyDtoD(q, p, 4096));
    r[7] = probe("cuMemcpyHtoD 4096 into 4000", cuMemcpyHtoD(p, h, 4096));
    r[8] = probe("cuMemsetD8 2 MiB + 1 of a 2 MiB block", cuMemsetD8(big, 1, (2 << 20) + 1));
    r[9] = probe("cuMemcpyDtoH 1 MiB from 4000 (far past)", cuMemcpyDtoH(h, p, 1 << 20));
    CHECK_CU(cuMemFree(p));
    CHECK_CU(cuMemFree(q));
    CHECK_CU(cuMemFree(big));

    /* A VMM mapping: two 2 MiB pages of two handles side by side, then the end. */
    size_t gran = 0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
    CUmemGenericAllocationHandle h1, h2;
    CHECK_CU(cuMemCreate(&h1, gran, &prop, 0));
    CHECK_CU(cuMemCreate(&h2, gran, &prop, 0));
    CHECK_CU(cuMemMap(va, gran, 0, h1, 0));
    CHECK_CU(cuMemMap(va + gran, gran, 0, h2, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK_CU(cuMemSetAccess(va, 2 * gran, &acc, 1));
    r[10] = probe("cuMemsetD8 across two VMM mappings", cuMemsetD8(va, 2, 2 * gran));
    r[11] = probe("cuMemsetD8 past the mapped pages (+1 byte)", cuMemsetD8(va, 2, 2 * gran + 1));
    r[12] = probe("cuMemcpyDtoH across two VMM mappings", cuMemcpyDtoH(h, va, 2 * gran));
    r[13] = probe("cuMemcpyDtoH past the mapped pages (+1)", cuMemcpyDtoH(h, va + gran, gran + 1));
    CHECK_CU(cuMemUnmap(va, 2 * gran));
    CHECK_CU(cuMemRelease(h1));
    CHECK_CU(cuMemRelease(h2));
    CHECK_CU(cuMemAddressFree(va, 4 * gran));
    /* Within a block, and across two VMM mappings, the calls succeed. Past a cuMemAlloc
     * block's requested end — by one byte, within its rounding, or starting at its end —
     * and past a mapping into unmapped addresses they are refused, before anything runs
     * (no sticky error follows). vramguard refuses the same inside its own segments. */
    CHECK_CU_EQ(r[0], CUDA_SUCCESS);
    for (int i = 1; i <= 9; i++)
        CHECK_CU_EQ(r[i], CUDA_ERROR_INVALID_VALUE);
    CHECK_CU_EQ(r[10], CUDA_SUCCESS);
    CHECK_CU_EQ(r[12], CUDA_SUCCESS);
    CHECK_CU_EQ(r[11], CUDA_ERROR_INVALID_VALUE);
    CHECK_CU_EQ(r[13], CUDA_ERROR_INVALID_VALUE);
}

/* A tensor map (compute capability 9.0+) checks its shape when it is built: the driver
 * manual's rules, which vgsim applies (a map vramguard records must be one the driver
 * accepted). Each answer is printed, for a run on a GPU to compare. */
VG_TEST(tensor_maps_check_their_shape) {
    setup();
    CUdevice dev;
    int major = 0;
    CHECK_CU(cuCtxGetDevice(&dev));
    CHECK_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    if (major < 9)
        vgt_skip("tensor maps need compute capability 9.0 (this device: %d.x)", major);
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 1 << 16));
    CUtensorMap map;
    cuuint64_t dims[2] = {64, 16}, pitch[1] = {256}, odd[1] = {260};
    cuuint32_t box[2] = {32, 8}, narrow[2] = {2, 8}, big[2] = {512, 8}, es[2] = {1, 1};
    void *a = (void *)(uintptr_t)d, *skew = (void *)(uintptr_t)(d + 8);
#define ENCODE(addr, st, bx)                                                                \
    cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, addr, dims, st, bx, es,    \
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,         \
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    CHECK_EQ(probe("tensor map, 64x16 floats, box 32x8", ENCODE(a, pitch, box)), CUDA_SUCCESS);
    CHECK_EQ(probe("tensor map, address 8 bytes off 16", ENCODE(skew, pitch, box)),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(probe("tensor map, stride not a multiple of 16", ENCODE(a, odd, box)),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(probe("tensor map, box row of 8 bytes", ENCODE(a, pitch, narrow)),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(probe("tensor map, box of 512", ENCODE(a, pitch, big)), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(ENCODE(a, pitch, box));
#undef ENCODE
    CHECK_EQ(probe("tensor map moved 8 bytes off 16", cuTensorMapReplaceAddress(&map, skew)),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(probe("tensor map moved 4096 bytes on",
                   cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)(d + 4096))),
             CUDA_SUCCESS);
    /* im2col: an NHWC tensor (16 channels, 8 x 8 pixels, 2 images), 3 dimensions at least */
    cuuint64_t nhwc[4] = {16, 8, 8, 2}, nhwc_strides[3] = {64, 512, 4096};
    cuuint32_t es4[4] = {1, 1, 1, 1};
    int lower[2] = {0, 0}, upper[2] = {0, 0};
#define IM2COL(rank, dm, st, e)                                                             \
    cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, a, dm, st, lower, upper, \
                            16, 64, e, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, \
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    CHECK_EQ(probe("im2col tensor map, NHWC 16x8x8x2", IM2COL(4, nhwc, nhwc_strides, es4)),
             CUDA_SUCCESS);
    CHECK_EQ(probe("im2col tensor map of rank 2", IM2COL(2, dims, pitch, es)),
             CUDA_ERROR_INVALID_VALUE);
#undef IM2COL
    CHECK_CU(cuMemFree(d));
}
