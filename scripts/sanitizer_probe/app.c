/* app.c — the probe's program: reads and writes 10, 1000 and 5000 floats into a 1000-float buffer (run.sh). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#define CK(x) do { CUresult r_ = (x); if (r_) { const char *n = "?"; cuGetErrorName(r_, &n); printf("%s: %s\n", #x, n); exit(1); } } while (0)
int main(int argc, char **argv) {
    CUdevice d; CUcontext c; CUmodule m; CUfunction rd, wr;
    CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
    FILE *f = fopen(argv[1], "rb"); static char ptx[1 << 20]; size_t n = fread(ptx, 1, sizeof ptx - 1, f); ptx[n] = 0; fclose(f);
    CK(cuModuleLoadData(&m, ptx)); CK(cuModuleGetFunction(&rd, m, "probe_read")); CK(cuModuleGetFunction(&wr, m, "probe_write"));
    CUdeviceptr x, out; CK(cuMemAlloc(&x, 1000 * 4)); CK(cuMemAlloc(&out, 4));
    printf("x = %#llx, out = %#llx\n", (unsigned long long)x, (unsigned long long)out);
    long long idx[3] = {10, 1000, 5000};
    for (int k = 0; k < 3; k++) {
        void *p[] = {&x, &idx[k], &out};
        CK(cuLaunchKernel(rd, 1, 1, 1, 32, 1, 1, 0, 0, p, 0));
        CK(cuCtxSynchronize());
        void *q[] = {&x, &idx[k]};
        CK(cuLaunchKernel(wr, 1, 1, 1, 32, 1, 1, 0, 0, q, 0));
        CK(cuCtxSynchronize());
        printf("index %lld done\n", idx[k]);
    }
    return 0;
}
