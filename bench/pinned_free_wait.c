/* pinned_free_wait.c — does the driver wait for queued copies before it frees pinned host
 * memory? (issue 34, docs/decisions.md P-series.) For each way of giving pinned memory back
 * (cuMemFreeHost of cuMemHostAlloc'd memory, cuMemHostUnregister of registered memory) it
 * holds a stream for HOLD_MS with a gate, queues a host-to-device copy from the pinned
 * buffer behind it, and times the call that gives the buffer back: about HOLD_MS if the
 * driver waits for the copy (a hidden synchronisation), about 0 if it does not (then the
 * copy reads memory that is no longer the program's: a use after free).
 *
 * usage: pinned_free_wait [HOLD_MS]   (default 300) */
#include "../examples/common.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    long hold = argc > 1 ? atol(argv[1]) : 300;
    ex_t e = ex_init();
    (void)e;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t n = 8u << 20;
    CUdeviceptr d;
    CK(cuMemAlloc(&d, n));
    for (int way = 0; way < 2; way++) {
        void *h = NULL;
        if (way == 0) {
            CK(cuMemHostAlloc(&h, n, 0));
        } else {
            h = aligned_alloc(4096, n);
            CK(cuMemHostRegister(h, n, 0));
        }
        memset(h, 1, n);
        ex_hold_stream(s, hold);
        CK(cuMemcpyHtoDAsync(d, h, n, s));
        double t0 = now_ms();
        CUresult r = way == 0 ? cuMemFreeHost(h) : cuMemHostUnregister(h);
        double t1 = now_ms();
        CUresult q = cuStreamQuery(s);
        const char *rn = "?", *qn = "?";
        cuGetErrorName(r, &rn);
        cuGetErrorName(q, &qn);
        printf("%s with a copy queued behind a %ld ms hold: returned %s after %.1f ms; "
               "the stream then: %s\n",
               way == 0 ? "cuMemFreeHost" : "cuMemHostUnregister", hold, rn, t1 - t0, qn);
        CK(cuStreamSynchronize(s));
        if (way == 1)
            free(h);
    }
    CK(cuMemFree(d));
    CK(cuStreamDestroy(s));
    return 0;
}
