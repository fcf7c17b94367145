/* launch_heavy.c — a clean, launch-heavy driver-API program for measuring what `vramguard
 * run` costs a program in fast mode: each step allocates a small buffer on a stream,
 * launches a kernel on it, and frees it stream-ordered; every 64 steps the stream is
 * synchronised. Prints the time per step (the whole step: allocation, launch, free).
 *
 * usage: launch_heavy [STEPS] [launch|sync|batch|pool] (default 200000 steps; "launch": one
 * buffer allocated up front, each step is just a launch — the interposer's cost per
 * launch; "sync": the buffer comes from cuMemAlloc and goes back with cuMemFree, as
 * cudaMalloc and cudaFree in a loop; "batch": each step is one cuMemcpyBatchAsync of 8
 * device-to-device copies of 256 bytes — the cost per batch of 8; "pool": the buffer
 * comes from the device's default pool, named as programs that set its release threshold
 * name it, through cuMemAllocFromPoolAsync — what counting a pool's memory costs).
 * bench/run.sh runs it with and without vramguard, alternately, and prints the ratio.
 * Also prints the CPU time of the calling thread per step (the host cost of the calls,
 * less sensitive to other load than the wall time). */
#include "../examples/common.h"

static unsigned long long clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 200000;
    int launch_only = argc > 2 && strcmp(argv[2], "launch") == 0;
    int sync_api = argc > 2 && strcmp(argv[2], "sync") == 0;
    int batch = argc > 2 && strcmp(argv[2], "batch") == 0;
    int pooled = argc > 2 && strcmp(argv[2], "pool") == 0;
    ex_t e = ex_init();
    CUmemoryPool pool = NULL;
    if (pooled) {
        CUdevice dev;
        CK(cuCtxGetDevice(&dev));
        CK(cuDeviceGetDefaultMemPool(&pool, dev));
    }
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr keep;
    CK(cuMemAlloc(&keep, 4096));
    CUdeviceptr dsts[8], srcs[8];
    size_t sizes[8], first = 0;
    for (int k = 0; k < 8; k++) {
        srcs[k] = keep + (CUdeviceptr)k * 256;
        dsts[k] = keep + 2048 + (CUdeviceptr)k * 256;
        sizes[k] = 256;
    }
    CUmemcpyAttributes order;
    memset(&order, 0, sizeof order);
    order.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    unsigned long long t0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; batch && i < steps; i++) {
        CK(cuMemcpyBatchAsync(dsts, srcs, sizes, 8, &order, &first, 1, s));
        if ((i & 63) == 63)
            CK(cuStreamSynchronize(s));
    }
    for (long i = 0; !batch && i < steps; i++) {
        CUdeviceptr x = keep;
        if (sync_api)
            CK(cuMemAlloc(&x, 4096 + (size_t)(i % 8) * 512));
        else if (pooled)
            CK(cuMemAllocFromPoolAsync(&x, 4096 + (size_t)(i % 8) * 512, pool, s));
        else if (!launch_only)
            CK(cuMemAllocAsync(&x, 4096 + (size_t)(i % 8) * 512, s));
        CK(ex_fill(&e, x, 1.0f, 64, s));
        if (sync_api)
            CK(cuMemFree(x));
        else if (!launch_only)
            CK(cuMemFreeAsync(x, s));
        if ((i & 63) == 63)
            CK(cuStreamSynchronize(s));
    }
    CK(cuStreamSynchronize(s));
    unsigned long long dt = now_ns() - t0, dc = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    printf("%.0f ns per step, %.0f ns of this thread's CPU (%ld steps: %s)\n",
           (double)dt / (double)steps, (double)dc / (double)steps, steps,
           launch_only ? "launch"
           : sync_api  ? "cuMemAlloc, launch, cuMemFree"
           : batch     ? "a batch of 8 copies"
           : pooled    ? "allocate from the default pool, launch, free"
                       : "allocate, launch, free");
    CK(cuMemFree(keep));
    return 0;
}
