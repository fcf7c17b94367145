/* tma.h — kernels_tma.cu's kernel for the examples and tests: a store through the tensor
 * memory accelerator (Hopper's bulk tensor copies), with its host twin for vgsim.
 *
 * Include after common.h. The twin writes its tiles without telling vgsim of any access,
 * as on a GPU the Compute Sanitizer API reports no global store for a bulk copy.
 */
#ifndef VG_EXAMPLES_TMA_H
#define VG_EXAMPLES_TMA_H

#include "kernels_tma_ptx.h" /* generated from kernels_tma.ptx: ex_kernels_tma_ptx[] */

#define EX_TMA_BOX_X 32 /* kernels_tma.cu's tile: 32 floats by 8 rows */
#define EX_TMA_BOX_Y 8

typedef struct ex_tensor_map_view { /* vgsim.h's vgsim_tensor_map_t */
    void *address;
    int rank, data_type;
    unsigned elem_bytes;
    unsigned long long dims[5], strides[4];
    unsigned box[5];
} ex_tensor_map_view_t;

static int (*ex_vgsim_tensor_map)(const void *map, ex_tensor_map_view_t *out);

static void ex_tma_store_host(const ex_launch_t *l) {
    ex_tensor_map_view_t m;
    float v = *(float *)l->params[1];
    if (!ex_vgsim_tensor_map || ex_vgsim_tensor_map(l->params[0], &m) != 0 || m.rank != 2)
        return;
    for (unsigned by = 0; by < l->grid[1]; by++)
        for (unsigned bx = 0; bx < l->grid[0]; bx++)
            for (unsigned long long y = by * EX_TMA_BOX_Y; y < (by + 1ull) * EX_TMA_BOX_Y; y++)
                for (unsigned long long x = bx * EX_TMA_BOX_X; x < (bx + 1ull) * EX_TMA_BOX_X;
                     x++)
                    if (x < m.dims[0] && y < m.dims[1]) /* (the copy clips the box) */
                        *(float *)((char *)m.address + y * m.strides[0] + x * sizeof(float)) = v;
}

/* kernels_tma.cu's ex_tma_store, or NULL where the device has no tensor memory
 * accelerator (compute capability below 9.0). */
static inline CUfunction ex_tma_kernel(void) {
    CUdevice dev;
    int major = 0;
    CK(cuCtxGetDevice(&dev));
    CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    if (major < 9)
        return NULL;
    int (*reg)(const char *, void (*)(const ex_launch_t *)) =
        (int (*)(const char *, void (*)(const ex_launch_t *)))dlsym(RTLD_DEFAULT,
                                                                   "vgsim_register_kernel");
    if (reg) {
        *(void **)&ex_vgsim_tensor_map = dlsym(RTLD_DEFAULT, "vgsim_tensor_map");
        reg("ex_tma_store", ex_tma_store_host);
    }
    CUmodule mod;
    CUfunction f;
    CK(cuModuleLoadData(&mod, ex_kernels_tma_ptx));
    CK(cuModuleGetFunction(&f, mod, "ex_tma_store"));
    return f;
}

/* A tensor map of `rows` rows of `cols` floats, `pitch` bytes apart, at p, in tiles of
 * kernels_tma.cu's box. */
static inline CUtensorMap ex_tma_map(CUdeviceptr p, unsigned long long cols,
                                     unsigned long long rows, unsigned long long pitch) {
    CUtensorMap map;
    cuuint64_t dims[2] = {cols, rows}, strides[1] = {pitch};
    cuuint32_t box[2] = {EX_TMA_BOX_X, EX_TMA_BOX_Y}, elem_strides[2] = {1, 1};
    CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(uintptr_t)p,
                              dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    return map;
}

/* Fill the tensor `map` describes (cols by rows floats) with v, on stream s. */
static inline CUresult ex_tma_store(CUfunction f, const CUtensorMap *map, unsigned long long cols,
                                    unsigned long long rows, float v, CUstream s) {
    CUtensorMap arg = *map;
    void *params[] = {&arg, &v};
    return cuLaunchKernel(f, (unsigned)((cols + EX_TMA_BOX_X - 1) / EX_TMA_BOX_X),
                          (unsigned)((rows + EX_TMA_BOX_Y - 1) / EX_TMA_BOX_Y), 1, 128, 1, 1, 0,
                          s, params, NULL);
}

#endif /* VG_EXAMPLES_TMA_H */
