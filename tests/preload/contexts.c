/* contexts.c — a program that creates and destroys contexts, as test suites and plugin
 * hosts do (tests/cli interposer_contexts): each of ROUNDS rounds (default 70, more than
 * vramguard keeps heaps for at once) creates a context, allocates, fills and reads back
 * 4 MiB, frees it in odd rounds only (cuCtxDestroy frees the rest, as with cuMemAlloc),
 * sets and reads 4 KiB of managed memory through its pointer and frees it (guard mode
 * keeps a second heap per context for that memory), and destroys the context. Device memory free in a new context must be what it was
 * before the first round (within 32 MiB, for a real driver): nothing outlives its context.
 *
 * usage: contexts [ROUNDS]. Exit status 0 when every round worked and nothing leaked.
 */
#include "common.h"

static size_t free_now(CUdevice dev) {
    CUcontext ctx;
    size_t free_b = 0, total = 0;
    CK(cuCtxCreate(&ctx, NULL, 0, dev));
    CK(cuMemGetInfo(&free_b, &total));
    CK(cuCtxDestroy(ctx));
    return free_b;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 70;
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    size_t before = free_now(dev);
    int wrong = 0;
    enum { N = 1 << 20 };
    static unsigned host[N];
    for (int round = 0; round < rounds; round++) {
        CUcontext ctx;
        CK(cuCtxCreate(&ctx, NULL, 0, dev));
        CUdeviceptr p;
        CK(cuMemAlloc(&p, N * sizeof(unsigned)));
        CK(cuMemsetD32(p, (unsigned)round, N));
        CK(cuMemcpyDtoH(host, p, sizeof host));
        for (int i = 0; i < N; i++)
            wrong += host[i] != (unsigned)round;
        if (round % 2)
            CK(cuMemFree(p));
        CUdeviceptr m;
        CK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemsetD32(m, (unsigned)round + 1, 1024));
        CK(cuCtxSynchronize());
        for (int i = 0; i < 1024; i++)
            wrong += ((unsigned *)(uintptr_t)m)[i] != (unsigned)round + 1;
        CK(cuMemFree(m));
        CK(cuCtxDestroy(ctx));
    }
    size_t after = free_now(dev);
    printf("%d contexts: %d wrong values; device memory free %zu MiB before, %zu MiB after\n",
           rounds, wrong, before >> 20, after >> 20);
    return wrong || after + (32u << 20) < before; /* (a driver's own figure may wobble) */
}
