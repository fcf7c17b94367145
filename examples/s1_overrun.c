/* s1_overrun.c — S1: a kernel writes past the end of a buffer.
 *
 * A 4x250 float tensor (4000 bytes) is filled by a kernel told it has 4x251 elements:
 * the last 16 bytes land after the end. On a GPU this silently corrupts whatever lies
 * next; `vramguard run --mode=guard` reports the allocation, the 16 bytes and the kernel.
 * With --launch-ex the kernel is launched through cuLaunchKernelEx (cudaLaunchKernelEx);
 * with --graph it is captured into a CUDA graph, which is launched twice; with --stream
 * it runs on a non-blocking stream; with --blocking the buffer comes from
 * cuMemAllocAsync on the legacy stream and the kernel runs on a blocking stream, which
 * waits for the legacy stream's work; with --managed the buffer is managed memory
 * (cuMemAllocManaged, cudaMallocManaged), which guard mode checks the same way.
 */
#include "common.h"

int main(int argc, char **argv) {
    bool launch_ex = argc > 1 && strcmp(argv[1], "--launch-ex") == 0;
    bool graph = argc > 1 && strcmp(argv[1], "--graph") == 0;
    ex_t e = ex_init();
    const unsigned long long rows = 4, cols = 250;
    bool blocking = argc > 1 && strcmp(argv[1], "--blocking") == 0;
    CUdeviceptr t;
    if (blocking)
        CK(cuMemAllocAsync(&t, rows * cols * sizeof(float), NULL));
    else if (argc > 1 && strcmp(argv[1], "--managed") == 0)
        CK(cuMemAllocManaged(&t, rows * cols * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    else
        CK(cuMemAlloc(&t, rows * cols * sizeof(float)));
    /* the bug: one column too many */
    if (launch_ex) {
        CK(ex_fill_ex(&e, t, 1.0f, rows * (cols + 1), NULL));
    } else if (graph) {
        CUstream s;
        CUgraph g;
        CUgraphExec x;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(ex_fill(&e, t, 1.0f, rows * (cols + 1), s));
        CK(cuStreamEndCapture(s, &g));
        CK(cuGraphInstantiate(&x, g, 0));
        for (int i = 0; i < 2; i++)
            CK(cuGraphLaunch(x, s));
        CK(cuStreamSynchronize(s));
        CK(cuGraphExecDestroy(x));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(s));
    } else if (blocking || (argc > 1 && strcmp(argv[1], "--stream") == 0)) {
        CUstream s;
        CK(cuStreamCreate(&s, blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
        CK(ex_fill(&e, t, 1.0f, rows * (cols + 1), s));
        CK(cuStreamSynchronize(s));
        CK(cuStreamDestroy(s));
    } else {
        CK(ex_fill(&e, t, 1.0f, rows * (cols + 1), NULL));
    }
    CK(cuCtxSynchronize());
    CK(cuMemFree(t));
    printf("s1: filled a %llux%llu tensor\n", rows, cols);
    return 0;
}
