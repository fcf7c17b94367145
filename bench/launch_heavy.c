/* launch_heavy.c — a clean, launch-heavy driver-API program for measuring what `vramguard
 * run` costs a program in fast mode: each step allocates a small buffer on a stream,
 * launches a kernel on it, and frees it stream-ordered; every 64 steps the stream is
 * synchronised. Prints the time per step (the whole step: allocation, launch, free).
 *
 * usage: launch_heavy [STEPS] [launch|sync]   (default 200000 steps; "launch": one buffer
 * allocated up front, each step is just a launch — the interposer's cost per launch;
 * "sync": the buffer comes from cuMemAlloc and goes back with cuMemFree, as cudaMalloc
 * and cudaFree in a loop).
 * bench/run.sh runs it with and without vramguard, alternately, and prints the ratio. */
#include "../examples/common.h"

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 200000;
    int launch_only = argc > 2 && strcmp(argv[2], "launch") == 0;
    int sync_api = argc > 2 && strcmp(argv[2], "sync") == 0;
    ex_t e = ex_init();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr keep;
    CK(cuMemAlloc(&keep, 4096));
    unsigned long long t0 = now_ns();
    for (long i = 0; i < steps; i++) {
        CUdeviceptr x = keep;
        if (sync_api)
            CK(cuMemAlloc(&x, 4096 + (size_t)(i % 8) * 512));
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
    unsigned long long dt = now_ns() - t0;
    printf("%.0f ns per step (%ld steps: %s)\n", (double)dt / (double)steps, steps,
           launch_only ? "launch"
           : sync_api  ? "cuMemAlloc, launch, cuMemFree"
                       : "allocate, launch, free");
    CK(cuMemFree(keep));
    return 0;
}
