/* s4_d2h_race.c — S4: the host reads a pinned buffer before the async copy into it ends.
 *
 * The PyTorch form is `t.to("cpu", non_blocking=True)` read before synchronising.
 * cuMemcpyDtoHAsync into pinned memory returns at once; reading the destination before
 * the copy completes reads stale data. Guard mode makes the destination inaccessible
 * until the copy completes and reports the read.
 */
#include "common.h"

int main(void) {
    ex_t e = ex_init();
    const unsigned long long n = 256 * 1024;
    float *dst;
    CK(cuMemAllocHost((void **)&dst, n * sizeof(float)));
    memset(dst, 0, n * sizeof(float));
    CUdeviceptr d;
    CUstream s;
    CK(cuMemAlloc(&d, n * sizeof(float)));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(ex_fill(&e, d, 7.0f, n, s));
    ex_hold_stream(s, 1000);
    CK(cuMemcpyDtoHAsync(dst, d, n * sizeof(float), s));
    float first = dst[0]; /* the bug: read before the copy has completed */
    CK(cuStreamSynchronize(s));
    printf("s4: read %g\n", first);
    CK(cuMemFree(d));
    CK(cuMemFreeHost(dst));
    return 0;
}
