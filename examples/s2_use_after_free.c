/* s2_use_after_free.c — S2: a buffer freed while another stream still uses it.
 *
 * A 1 MiB buffer is used on the main stream, then by a kernel on a side stream that is
 * still busy, and freed on the main stream without waiting for the side stream (the
 * missing record_stream / event wait). Memory recycled to another buffer would be
 * overwritten by the side stream's late kernel. Guard mode reports the free itself, as
 * not ordered after the side stream's kernel (whatever the timing), and the write into
 * the freed block, with the allocation, the free and the kernel.
 *
 * With --struct the side stream's kernel gets the pointer inside a struct argument, as
 * PyTorch's elementwise kernels do; --library launches that kernel as the CUDA runtime
 * launches PyTorch's, a library's CUkernel given to cuLaunchKernel; with --copy the side
 * stream's use is an asynchronous memset instead of a kernel; the report is the same.
 *
 * The correct versions, which must give no report:
 *   --event    the main stream waits for an event recorded on the side stream
 *   --query    the host polls that event until it has completed
 *   --sync     the host synchronises the side stream
 *   --legacy   both streams blocking, the free on the legacy default stream (which waits
 *              for every blocking stream's earlier work)
 *   --memcpy   both streams blocking, a synchronous cuMemcpyDtoH (on the legacy stream,
 *              so after the side stream's work) before the free
 *   --flag     the side stream writes a flag after its kernel (cuStreamWriteValue32), and
 *              the main stream waits for it (cuStreamWaitValue32)
 */
#include "common.h"

#include <unistd.h>

int main(int argc, char **argv) {
    const char *fix = argc > 1 ? argv[1] : "";
    bool legacy = strcmp(fix, "--legacy") == 0, memcpy_sync = strcmp(fix, "--memcpy") == 0;
    unsigned flags = legacy || memcpy_sync ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
    ex_t e = ex_init();
    CUstream main_s, side;
    CK(cuStreamCreate(&main_s, flags));
    CK(cuStreamCreate(&side, flags));
    const unsigned long long n = 256 * 1024; /* 1 MiB of floats */
    CUdeviceptr x, flag = 0;
    if (strcmp(fix, "--flag") == 0) { /* (before the side stream is held: cuMemAlloc waits) */
        CK(cuMemAlloc(&flag, sizeof(unsigned)));
        CK(cuMemsetD32(flag, 0, 1));
        CK(cuCtxSynchronize()); /* (the streams are non-blocking: not ordered after it) */
    }
    CK(cuMemAllocAsync(&x, n * sizeof(float), main_s));
    CK(ex_fill(&e, x, 1.0f, n, main_s));
    /* The side stream comes after that fill (PyTorch's side.wait_stream(main)) ... */
    CUevent filled;
    CK(cuEventCreate(&filled, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(filled, main_s));
    CK(cuStreamWaitEvent(side, filled, 0));
    /* ... and is busy for a while ... (with the bug, until the main stream has
     * moved on past the free, below: the late write then happens on every run) */
    bool library = strcmp(fix, "--library") == 0;
    bool bug = !*fix || strcmp(fix, "--struct") == 0 || strcmp(fix, "--copy") == 0 || library;
    ex_hold_stream(side, bug ? 10000 : 200);
    if (library) { /* ... and then uses x */
        ex_t lib = e;
        lib.fill_span = ex_library_kernel("ex_fill_span");
        CK(ex_fill_span(&lib, x, 2.0f, n, side));
    } else if (strcmp(fix, "--struct") == 0) {
        CK(ex_fill_span(&e, x, 2.0f, n, side));
    } else if (strcmp(fix, "--copy") == 0) {
        CK(cuMemsetD32Async(x, 0x40000000u, n, side));
    } else {
        CK(ex_fill(&e, x, 2.0f, n, side));
    }
    CUevent done;
    CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(done, side));
    if (strcmp(fix, "--event") == 0) {
        CK(cuStreamWaitEvent(main_s, done, 0));
    } else if (strcmp(fix, "--query") == 0) {
        CUresult r;
        while ((r = cuEventQuery(done)) == CUDA_ERROR_NOT_READY)
            usleep(1000);
        CK(r);
    } else if (strcmp(fix, "--sync") == 0) {
        CK(cuStreamSynchronize(side));
    } else if (memcpy_sync) {
        float first;
        CK(cuMemcpyDtoH(&first, x, sizeof first));
    } else if (strcmp(fix, "--flag") == 0) {
        CK(cuStreamWriteValue32(side, flag, 1, 0));
        CK(cuStreamWaitValue32(main_s, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    }
    /* Without a fix, the bug: nothing orders this free after the side stream's kernel. */
    CK(cuMemFreeAsync(x, legacy ? NULL : main_s));
    CK(cuStreamSynchronize(main_s));
    if (bug)
        ex_release_stream(); /* ... and only now does the side stream's kernel write x */
    CK(cuCtxSynchronize());
    CK(cuEventDestroy(done));
    CK(cuEventDestroy(filled));
    if (flag)
        CK(cuMemFree(flag));
    printf("s2: done%s%s\n", *fix ? " with " : "", fix);
    return 0;
}
