/* conformance_library.c — conformance cases of context-independent loading (see
 * conformance.c): a library's kernel launched as the CUDA runtime (12+) launches its own,
 * a CUkernel cast to CUfunction, and what each family of queries says about it. */
#include <string.h>

#include "conformance.h"
#include "kernels_ptx.h" /* generated: const char cf_kernels_ptx[] */

/* The suite's fill kernel loaded as a library fills as the module's does; cuKernelGetName
 * and cuKernelGetParamInfo describe it; cuKernelGetFunction gives a function that the
 * cuFunc* queries describe and that launches too. The cuFunc* queries refuse the kernel
 * handle itself: vgsim's reading of the H100 run of 2026-11-24, where the kernels of
 * PyTorch (a CUDA runtime program) had no name through cuFuncGetName, and of the
 * driver's cuFuncGetAttribute, which answers such a handle with
 * CUDA_ERROR_INVALID_HANDLE (for a GPU run to confirm). */
VG_TEST(library_kernels_launch_as_functions) {
    setup();
    CUlibrary lib;
    CUkernel k;
    CHECK_CU(cuLibraryLoadData(&lib, cf_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_EQ(cuLibraryGetKernel(&k, lib, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuLibraryGetKernel(&k, lib, "cf_fill_u32"));
    const char *name = NULL;
    CHECK_CU(cuKernelGetName(&name, k));
    CHECK(name && strcmp(name, "cf_fill_u32") == 0);
    size_t off = 99, size = 99;
    const size_t want[] = {8, 4, 8}; /* (unsigned *p, unsigned v, unsigned long long n) */
    for (size_t i = 0; i < 3; i++) {
        CHECK_CU(cuKernelGetParamInfo(k, i, &off, &size));
        CHECK_EQ(size, want[i]);
    }
    CHECK_EQ(off, 16);
    CHECK_EQ(cuKernelGetParamInfo(k, 3, &off, &size), CUDA_ERROR_INVALID_VALUE);
    name = NULL;
    CHECK(cuFuncGetName(&name, (CUfunction)(void *)k) != CUDA_SUCCESS);
    CHECK(cuFuncGetParamInfo((CUfunction)(void *)k, 0, &off, &size) != CUDA_SUCCESS);

    enum { N = 64 * 128 };
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, N * 4));
    unsigned v = 7;
    unsigned long long n = N;
    void *args[] = {&d, &v, &n};
    CHECK_CU(cuLaunchKernel((CUfunction)(void *)k, 64, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CHECK_CU(cuCtxSynchronize());
    EXPECT_U32(d, N, 7);

    CUfunction f;
    CHECK_CU(cuKernelGetFunction(&f, k));
    name = NULL;
    CHECK_CU(cuFuncGetName(&name, f));
    CHECK(name && strcmp(name, "cf_fill_u32") == 0);
    CHECK_CU(cuFuncGetParamInfo(f, 2, &off, &size));
    CHECK_EQ(size, 8);
    v = 9;
    CHECK_CU(cuLaunchKernel(f, 64, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CHECK_CU(cuCtxSynchronize());
    EXPECT_U32(d, N, 9);
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuLibraryUnload(lib));
}
