/* s9_illegal_address.c — S9: a kernel's illegal address, reported at an unrelated line.
 *
 * A scatter kernel stores through a corrupted index, 4 GiB past its 4000-byte output. The
 * launch succeeds; the error surfaces later, at whatever call waits next. vramguard
 * reports the last kernels launched on each stream with the allocations their pointer
 * arguments point into.
 */
#include "common.h"

int main(void) {
    ex_t e = ex_init();
    CUdeviceptr out, idx;
    CK(cuMemAlloc(&out, 1000 * sizeof(float)));
    CK(cuMemAlloc(&idx, 2 * sizeof(long long)));
    long long bad[2] = {10, 1ll << 30}; /* the second index is corrupt */
    CK(cuMemcpyHtoD(idx, bad, sizeof bad));
    unsigned n = 2;
    float v = 1.0f;
    void *params[] = {&out, &idx, &n, &v};
    CK(cuLaunchKernel(e.scatter, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CUresult r = cuCtxSynchronize(); /* the error shows up here, not at the launch */
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("s9: cuCtxSynchronize returned %s\n", name);
    return 0;
}
