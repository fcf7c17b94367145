/* device_reset.c — cudaDeviceReset as programs call it (tests/cli interposer_device_reset):
 * between phases of a program and just before it exits, as the CUDA samples do. Each of
 * three rounds uses the primary context as the runtime does (retain, make current),
 * allocates, fills and reads back 4 MiB, leaves it to the reset to free, and resets the
 * primary context (cuDevicePrimaryCtxReset, what cudaDeviceReset calls). Device memory
 * free after must be what it was before (within 32 MiB, for a real driver).
 *
 * Exit status 0 when every round read back what it wrote and nothing leaked.
 */
#include "common.h"

static CUcontext use_primary(CUdevice dev) {
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    return ctx;
}

int main(void) {
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    enum { N = 1 << 20 };
    static unsigned host[N];
    size_t before = 0, after = 0, total = 0;
    use_primary(dev);
    CK(cuMemGetInfo(&before, &total));
    int wrong = 0;
    for (int round = 0; round < 3; round++) {
        use_primary(dev);
        CUdeviceptr p;
        CK(cuMemAlloc(&p, N * sizeof(unsigned)));
        CK(cuMemsetD32(p, 0xc0de0000u + (unsigned)round, N));
        CK(cuMemcpyDtoH(host, p, sizeof host));
        for (int i = 0; i < N; i++)
            wrong += host[i] != 0xc0de0000u + (unsigned)round;
        CK(cuDevicePrimaryCtxReset(dev)); /* frees p */
        CK(cuDevicePrimaryCtxRelease(dev));
    }
    use_primary(dev);
    CK(cuMemGetInfo(&after, &total));
    printf("3 resets: %d wrong values; device memory free %zu MiB before, %zu MiB after\n",
           wrong, before >> 20, after >> 20);
    CK(cuDevicePrimaryCtxReset(dev)); /* and once more before exiting, as samples do */
    return wrong || after + (32u << 20) < before; /* (a driver's own figure may wobble) */
}
