/* sync_calls.c — a correct program that counts on what the driver's synchronous memory
 * calls promise, which vramguard's replacements must keep (tests/cli interposer_sync_calls):
 *
 *   --free   cuMemFree returns once the device's work is done: a kernel still writing
 *            the buffer on one non-blocking stream cannot overwrite the memory's next
 *            owner, filled on another (and the host may read what it wrote);
 *   --alloc  cuMemAlloc returns memory every stream may use at once, even right after
 *            cuMemFreeAsync on the legacy stream freed memory its pending work still
 *            writes.
 *
 * In both, the work on the freed buffer is held back (a host function, as a long kernel
 * would be) until after the new buffer was filled; the new buffer must hold only 2.0.
 * Exit status 0 when it does, 1 when it does not.
 */
#include "common.h"

enum { N = 1 << 18 };

static int check(CUdeviceptr p, const char *what) {
    static float h[N];
    CK(cuMemcpyDtoH(h, p, sizeof h));
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
        bad += h[i] != 2.0f;
    if (bad)
        printf("%s: %zu of %d floats of the new buffer were overwritten by the freed "
               "buffer's work\n", what, bad, N);
    else
        printf("%s: the new buffer holds what its own kernel wrote\n", what);
    return bad != 0;
}

int main(int argc, char **argv) {
    bool do_free = argc < 2 || !strcmp(argv[1], "--free");
    bool do_alloc = argc < 2 || !strcmp(argv[1], "--alloc");
    ex_t e = ex_init();
    CUstream c, d;
    CK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&d, CU_STREAM_NON_BLOCKING));
    int failed = 0;
    CUdeviceptr old, p;
    if (do_free) {
        CK(cuMemAlloc(&old, N * sizeof(float)));
        ex_hold_stream(c, 200);
        CK(ex_fill(&e, old, 1.0f, N, c));
        CK(cuMemFree(old)); /* waits for stream c */
        CK(cuMemAlloc(&p, N * sizeof(float)));
        CK(ex_fill(&e, p, 2.0f, N, d));
        CK(cuCtxSynchronize());
        failed |= check(p, "cuMemFree");
        CK(cuMemFree(p));
    }
    if (do_alloc) {
        CK(cuMemAllocAsync(&old, N * sizeof(float), NULL));
        ex_hold_stream(NULL, 200);
        CK(ex_fill(&e, old, 1.0f, N, NULL));
        CK(cuMemFreeAsync(old, NULL)); /* after the fill, on the legacy stream */
        CK(cuMemAlloc(&p, N * sizeof(float)));
        CK(ex_fill(&e, p, 2.0f, N, d)); /* a non-blocking stream: not after the legacy one */
        CK(cuCtxSynchronize());
        failed |= check(p, "cuMemAlloc");
        CK(cuMemFree(p));
    }
    CK(cuStreamDestroy(c));
    CK(cuStreamDestroy(d));
    return failed;
}
