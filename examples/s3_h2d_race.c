/* s3_h2d_race.c — S3: the host writes a pinned buffer while an async copy reads it.
 *
 * cuMemcpyHtoDAsync from pinned memory returns at once; the copy happens later. Writing
 * the source before the copy completes sends the old bytes, the new ones, or a mix.
 * Guard mode write-protects the source until the copy completes and reports the write
 * (the copy, its stream, where it was enqueued, where the host wrote), then lets the
 * write proceed once the copy is done. With --generic the copy is cuMemcpyAsync with the
 * host pointer as a unified address (cudaMemcpyAsync with cudaMemcpyDefault); with --2d,
 * cuMemcpy2DAsync of 256 rows of 4 KiB (cudaMemcpy2DAsync); with --3d, cuMemcpy3DAsync
 * of 16 slices of 16 such rows (cudaMemcpy3DAsync); with --batch, cuMemcpyBatchAsync
 * (cudaMemcpyBatchAsync, CUDA 12.8), the source read in stream order; with --batch-3d,
 * cuMemcpy3DBatchAsync of the 3D copy's box. With --batch-during-call the batched copy
 * reads its source during the call (CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL), which
 * makes the write that follows correct: nothing is reported.
 */
#include "common.h"

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    ex_init();
    const size_t n = 1 << 20;
    float *src;
    CK(cuMemAllocHost((void **)&src, n));
    for (size_t i = 0; i < n / sizeof(float); i++)
        src[i] = 1.0f;
    CUdeviceptr d;
    CUstream s;
    CK(cuMemAlloc(&d, n));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ex_hold_stream(s, 1000); /* earlier work keeps the stream busy */
    if (strcmp(how, "--generic") == 0) {
        CK(cuMemcpyAsync(d, (CUdeviceptr)(uintptr_t)src, n, s));
    } else if (strcmp(how, "--2d") == 0) {
        CUDA_MEMCPY2D c;
        memset(&c, 0, sizeof c);
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = src;
        c.srcPitch = 4096;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = d;
        c.dstPitch = 4096;
        c.WidthInBytes = 4096;
        c.Height = n / 4096;
        CK(cuMemcpy2DAsync(&c, s));
    } else if (strcmp(how, "--3d") == 0) {
        CUDA_MEMCPY3D c;
        memset(&c, 0, sizeof c);
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = src;
        c.srcPitch = 4096;
        c.srcHeight = 16;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = d;
        c.dstPitch = 4096;
        c.dstHeight = 16;
        c.WidthInBytes = 4096;
        c.Height = 16;
        c.Depth = n / (4096 * 16);
        CK(cuMemcpy3DAsync(&c, s));
    } else if (strncmp(how, "--batch", 7) == 0 && strcmp(how, "--batch-3d") != 0) {
        bool now = strcmp(how, "--batch-during-call") == 0;
        CK(ex_batch_copy(d, (CUdeviceptr)(uintptr_t)src, n,
                         now ? CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL
                             : CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
                         s));
    } else if (strcmp(how, "--batch-3d") == 0) {
        CUDA_MEMCPY3D_BATCH_OP op;
        memset(&op, 0, sizeof op);
        op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)src;
        op.dst.op.ptr.ptr = d;
        op.extent.width = 4096;
        op.extent.height = 16;
        op.extent.depth = n / (4096 * 16);
        op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        CK(cuMemcpy3DBatchAsync(1, &op, 0, s));
    } else {
        CK(cuMemcpyHtoDAsync(d, src, n, s));
    }
    src[1000] = 42.0f; /* the bug: the copy has not happened yet */
    CK(cuStreamSynchronize(s));
    CK(cuMemFree(d));
    CK(cuMemFreeHost(src));
    printf("s3: done\n");
    return 0;
}
