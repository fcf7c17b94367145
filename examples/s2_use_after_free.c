/* s2_use_after_free.c — S2: a buffer freed while another stream still uses it.
 *
 * A 1 MiB buffer is used on the main stream, then by a kernel on a side stream that is
 * still busy, and freed on the main stream without waiting for the side stream (the
 * missing record_stream / event wait). Memory recycled to another buffer would be
 * overwritten by the side stream's late kernel. Guard mode poisons the freed block and
 * reports the write into it, with the allocation, the free and the kernel.
 */
#include "common.h"

int main(void) {
    ex_t e = ex_init();
    CUstream main_s, side;
    CK(cuStreamCreate(&main_s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    const unsigned long long n = 256 * 1024; /* 1 MiB of floats */
    CUdeviceptr x;
    CK(cuMemAllocAsync(&x, n * sizeof(float), main_s));
    CK(ex_fill(&e, x, 1.0f, n, main_s));
    ex_hold_stream(side, 200); /* the side stream is busy for a while ... */
    CK(ex_fill(&e, x, 2.0f, n, side)); /* ... and then uses x */
    CK(cuMemFreeAsync(x, main_s)); /* the bug: nothing orders this after the side stream */
    CK(cuStreamSynchronize(main_s));
    CK(cuCtxSynchronize());
    printf("s2: done\n");
    return 0;
}
