/* clean_program.c — a correct program using everything the examples misuse: allocations on two
 * streams, kernels, pinned buffers with async copies (synchronised before the host
 * touches them), stream-ordered frees. It must run the same with vramguard (any mode)
 * as without, and produce no report.
 */
#include "common.h"

int main(void) {
    ex_t e = ex_init();
    const unsigned long long n = 256 * 1024;
    CUstream s1, s2;
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    float *host;
    CK(cuMemAllocHost((void **)&host, n * sizeof(float)));
    double sum = 0;
    for (int round = 0; round < 20; round++) {
        CUdeviceptr a, b;
        CK(cuMemAllocAsync(&a, n * sizeof(float), s1));
        CK(cuMemAlloc(&b, (size_t)(round + 1) * 4096));
        CK(ex_fill(&e, a, (float)round, n, s1));
        CK(ex_fill(&e, b, 1.0f, (unsigned long long)(round + 1) * 1024, NULL));
        CK(cuMemcpyDtoHAsync(host, a, n * sizeof(float), s1));
        CK(cuStreamSynchronize(s1)); /* before the host reads the copy */
        sum += host[n - 1];
        for (unsigned long long i = 0; i < n; i++)
            host[i] = (float)i;
        CK(cuMemcpyHtoDAsync(a, host, n * sizeof(float), s2));
        CUevent done;
        CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
        CK(cuEventRecord(done, s2));
        CK(cuEventSynchronize(done)); /* before the host writes the source again */
        CK(cuEventDestroy(done));
        host[0] = 0.0f;
        CK(cuMemFreeAsync(a, s2));
        CK(cuMemFree(b));
    }
    CK(cuCtxSynchronize());
    CK(cuMemFreeHost(host));
    printf("clean_program: sum %.1f\n", sum);
    return 0;
}
