/* batch_overrun.c — a batched copy writes past the end of a buffer allocated just before
 * it on the same stream (tests/cli interposer_batch_overrun).
 *
 * A 4000-byte buffer comes from cuMemAllocAsync on a stream; one batch of three copies
 * follows on that stream, the second of which copies 4016 bytes into the buffer. vramguard
 * refuses the whole batch before anything is queued (CUDA_ERROR_INVALID_VALUE, as the
 * driver refuses a copy past the end of its own allocations) and names the copy: "copy 2
 * of 3", its destination 16 bytes past the end, the call made here. With --3d the copies
 * are boxes of cuMemcpy3DBatchAsync (the second 251 rows of 16 bytes).
 *
 * usage: batch_overrun [--3d]. Prints what the batch returned and whether its first copy
 * landed; exit status 0 once the program is done.
 */
#include "common.h"

enum { SIZE = 4000, OVER = 16 };

static CUresult linear_batch(CUdeviceptr dst[3], CUdeviceptr src[3], size_t sizes[3],
                             CUstream s) {
    CUmemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t first = 0;
    return cuMemcpyBatchAsync(dst, src, sizes, 3, &a, &first, 1, s);
}

static CUresult box_batch(CUdeviceptr dst[3], CUdeviceptr src[3], size_t sizes[3],
                          CUstream s) {
    CUDA_MEMCPY3D_BATCH_OP ops[3];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 3; i++) {
        ops[i].src.type = ops[i].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        ops[i].src.op.ptr.ptr = src[i];
        ops[i].dst.op.ptr.ptr = dst[i];
        ops[i].extent.width = 16;
        ops[i].extent.height = sizes[i] / 16;
        ops[i].extent.depth = 1;
        ops[i].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    }
    return cuMemcpy3DBatchAsync(3, ops, 0, s);
}

int main(int argc, char **argv) {
    bool boxes = argc > 1 && strcmp(argv[1], "--3d") == 0;
    ex_init();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr from, other, buf;
    CK(cuMemAlloc(&from, 2 * SIZE));
    CK(cuMemAlloc(&other, 2 * SIZE));
    CK(cuMemsetD8(from, 7, 2 * SIZE));
    CK(cuCtxSynchronize());
    CK(cuMemAllocAsync(&buf, SIZE, s));
    CUdeviceptr dst[3] = {other, buf, other + SIZE};
    CUdeviceptr src[3] = {from, from, from + SIZE};
    size_t sizes[3] = {1024, SIZE + OVER, 1024}; /* the bug: 16 bytes too many */
    CK(cuMemsetD8Async(other, 0, 2 * SIZE, s));
    CUresult r = boxes ? box_batch(dst, src, sizes, s) : linear_batch(dst, src, sizes, s);
    const char *name = "?";
    cuGetErrorName(r, &name);
    CK(cuStreamSynchronize(s));
    unsigned char first;
    CK(cuMemcpyDtoH(&first, other, 1));
    printf("batch: %s, its first copy %s\n", name, first == 7 ? "made" : "not made");
    CK(cuMemFreeAsync(buf, s));
    CK(cuStreamSynchronize(s));
    CK(cuMemFree(from));
    CK(cuMemFree(other));
    CK(cuStreamDestroy(s));
    printf("batch_overrun: done\n");
    return 0;
}
