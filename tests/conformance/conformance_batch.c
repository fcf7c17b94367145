/* conformance_batch.c — conformance cases of batched copies (cuMemcpyBatchAsync,
 * cuMemcpy3DBatchAsync; see conformance.c): what they copy, when they read their sources,
 * what they refuse, and CUDA 12.8's versions with failIdx through cuGetProcAddress.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

static CUmemcpyAttributes attr(CUmemcpySrcAccessOrder order) {
    CUmemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = order;
    return a;
}

#define BATCH_DEVPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* One batch of three copies in three directions (pinned and pageable host to device,
 * device to device) with two attribute entries, then one batch back (device to pinned
 * host, device to device): every byte lands where it should. */
VG_TEST(batch_copies_round_trip) {
    setup();
    enum { K = 1024 };
    unsigned char *pinned, *back, *pageable = malloc(K);
    CHECK(pageable != NULL);
    CHECK_CU(cuMemAllocHost((void **)&pinned, K));
    CHECK_CU(cuMemAllocHost((void **)&back, 3 * K));
    for (int i = 0; i < K; i++) {
        pinned[i] = (unsigned char)(i * 3 + 1);
        pageable[i] = (unsigned char)(i * 5 + 2);
    }
    CUdeviceptr a, b, c;
    CHECK_CU(cuMemAlloc(&a, 3 * K));
    CHECK_CU(cuMemAlloc(&b, 3 * K));
    CHECK_CU(cuMemAlloc(&c, K));
    CHECK_CU(cuMemsetD8(c, 0x5A, K));
    CHECK_CU(cuMemsetD8(b, 0, 3 * K));
    CHECK_CU(cuCtxSynchronize());
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr dsts[3] = {a, a + K, a + 2 * K};
    CUdeviceptr srcs[3] = {BATCH_DEVPTR(pinned), BATCH_DEVPTR(pageable), c};
    size_t sizes[3] = {K, K, K};
    CUmemcpyAttributes attrs[2] = {attr(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                   attr(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
    size_t idxs[2] = {0, 2};
    CHECK_CU(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, s));
    CHECK_CU(cuStreamSynchronize(s));
    CUdeviceptr dsts2[2] = {BATCH_DEVPTR(back), b + K};
    CUdeviceptr srcs2[2] = {a, a + K};
    size_t sizes2[2] = {3 * K, 2 * K};
    CHECK_CU(cuMemcpyBatchAsync(dsts2, srcs2, sizes2, 2, attrs, idxs, 1, s));
    CHECK_CU(cuStreamSynchronize(s));
    for (int i = 0; i < K; i++) {
        CHECK_EQ(back[i], pinned[i]);
        CHECK_EQ(back[K + i], pageable[i]);
        CHECK_EQ(back[2 * K + i], 0x5A);
    }
    unsigned char *bb = malloc(3 * K);
    CHECK(bb != NULL);
    CHECK_CU(cuMemcpyDtoH(bb, b, 3 * K));
    for (int i = 0; i < 3 * K; i++)
        CHECK_EQ(bb[i], i < K ? 0 : back[i]);
    free(bb);
    free(pageable);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(a));
    CHECK_CU(cuMemFree(b));
    CHECK_CU(cuMemFree(c));
    CHECK_CU(cuMemFreeHost(pinned));
    CHECK_CU(cuMemFreeHost(back));
}

/* A source read DURING_API_CALL may be changed as soon as the call returns: the copy has
 * the old bytes even though its stream only reaches it later. A source read in STREAM
 * order is read when the stream gets there: it has the new ones. */
VG_TEST(batch_copy_reads_a_during_call_source_before_returning) {
    setup();
    enum { N = 512 };
    unsigned *now, *later;
    CHECK_CU(cuMemAllocHost((void **)&now, N * 4));
    CHECK_CU(cuMemAllocHost((void **)&later, N * 4));
    for (int i = 0; i < N; i++)
        now[i] = later[i] = 1;
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 2 * N * 4));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    gate_t g;
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(s, gate_fn, &g));
    CUdeviceptr dsts[2] = {d, d + N * 4};
    CUdeviceptr srcs[2] = {BATCH_DEVPTR(now), BATCH_DEVPTR(later)};
    size_t sizes[2] = {N * 4, N * 4};
    CUmemcpyAttributes attrs[2] = {attr(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL),
                                   attr(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    size_t idxs[2] = {0, 1};
    CHECK_CU(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 2, s));
    EXPECT_BLOCKED(s);
    for (int i = 0; i < N; i++)
        now[i] = later[i] = 2;
    gate_open(&g);
    CHECK_CU(cuStreamSynchronize(s));
    EXPECT_U32(d, N, 1);
    EXPECT_U32(d + N * 4, N, 2);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuMemFreeHost(now));
    CHECK_CU(cuMemFreeHost(later));
}

typedef CUresult (*batch_fail_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                                  CUmemcpyAttributes *, size_t *, size_t, size_t *, CUstream);

/* What a batch may not be: on the legacy stream, empty, with malformed attribute lists or
 * an invalid source order, or with a copy from NULL; CUDA 12.8's version (failIdx), as
 * cuGetProcAddress gives it for 12080, says which copy was at fault. On vgsim a refused
 * batch copies nothing. */
VG_TEST(batch_copies_refuse_bad_batches) {
    setup();
    enum { K = 256 };
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc(&a, 2 * K));
    CHECK_CU(cuMemAlloc(&b, 2 * K));
    CHECK_CU(cuMemsetD8(a, 0x11, 2 * K));
    CHECK_CU(cuMemsetD8(b, 0x22, 2 * K));
    CHECK_CU(cuCtxSynchronize());
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr dsts[2] = {b, b + K}, srcs[2] = {a, a + K};
    size_t sizes[2] = {K, K};
    CUmemcpyAttributes ok[2] = {attr(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                attr(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
    CUmemcpyAttributes bad = attr(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID);
    size_t idx0[2] = {0, 1}, idx1[1] = {1}, idx_down[2] = {1, 0};
    CHECK_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, ok, idx0, 1, NULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, ok, idx0, 1, CU_STREAM_LEGACY),
             CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 0, ok, idx0, 1, s) != CUDA_SUCCESS);
    CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, ok, idx1, 1, s) != CUDA_SUCCESS);
    CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, ok, idx_down, 2, s) != CUDA_SUCCESS);
    CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 1, ok, idx0, 2, s) != CUDA_SUCCESS);
    CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &bad, idx0, 1, s) != CUDA_SUCCESS);
    CUdeviceptr null_src[2] = {a, 0};
    CHECK(cuMemcpyBatchAsync(dsts, null_src, sizes, 2, ok, idx0, 1, s) != CUDA_SUCCESS);
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    CHECK_CU(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CHECK(fn != NULL);
    size_t fail = 7;
    CHECK(((batch_fail_fn)fn)(dsts, null_src, sizes, 2, ok, idx0, 1, &fail, s) != CUDA_SUCCESS);
    CHECK_EQ(fail, 1);
    CHECK_CU(((batch_fail_fn)fn)(dsts, srcs, sizes, 2, ok, idx0, 1, &fail, s));
    CHECK_CU(cuStreamSynchronize(s));
    if (g_on_vgsim) { /* (the real driver may have made the good copies of a bad batch) */
        unsigned char got[2 * K];
        CHECK_CU(cuMemcpyDtoH(got, b, 2 * K));
        CHECK_EQ(got[0], 0x11); /* (the last, good batch) */
    }
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(a));
    CHECK_CU(cuMemFree(b));
}

/* ---------------------------------------------------------------------------------------
 * cuMemcpy3DBatchAsync
 * ------------------------------------------------------------------------------------- */

static CUmemcpy3DOperand pointer(CUdeviceptr p, size_t row_length, size_t layer_height) {
    CUmemcpy3DOperand o;
    memset(&o, 0, sizeof o);
    o.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    o.op.ptr.ptr = p;
    o.op.ptr.rowLength = row_length;
    o.op.ptr.layerHeight = layer_height;
    return o;
}

static CUDA_MEMCPY3D_BATCH_OP box_op(CUmemcpy3DOperand src, CUmemcpy3DOperand dst, size_t w,
                                     size_t h, size_t d) {
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src = src;
    op.dst = dst;
    op.extent.width = w;
    op.extent.height = h;
    op.extent.depth = d;
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return op;
}

/* A packed host box of W x H x D bytes into a pitched device layout (rows RL bytes apart,
 * layers LH rows), in one batch with a second box at the layout's far end; then the whole
 * layout back: each box exactly where it should be, nothing else changed. */
VG_TEST(batch_3d_boxes_round_trip) {
    setup();
    enum { W = 24, H = 3, D = 2, RL = 64, LH = 5, SIZE = RL * LH * D };
    unsigned char *box, *back;
    CHECK_CU(cuMemAllocHost((void **)&box, W * H * D));
    CHECK_CU(cuMemAllocHost((void **)&back, SIZE));
    for (int i = 0; i < W * H * D; i++)
        box[i] = (unsigned char)(i * 11 + 3);
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, SIZE));
    CHECK_CU(cuMemsetD8(d, 0xEE, SIZE));
    CHECK_CU(cuCtxSynchronize());
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t far = RL - W + (size_t)(LH - H) * RL; /* (the last W bytes of the last H rows) */
    CUDA_MEMCPY3D_BATCH_OP ops[2] = {
        box_op(pointer(BATCH_DEVPTR(box), 0, 0), pointer(d, RL, LH), W, H, D),
        box_op(pointer(BATCH_DEVPTR(box), 0, 0), pointer(d + far, RL, LH), W, H, D)};
    CHECK_CU(cuMemcpy3DBatchAsync(2, ops, 0, s));
    CUDA_MEMCPY3D_BATCH_OP all = box_op(pointer(d, 0, 0), pointer(BATCH_DEVPTR(back), 0, 0),
                                        SIZE, 1, 1);
    CHECK_CU(cuMemcpy3DBatchAsync(1, &all, 0, s));
    CHECK_CU(cuStreamSynchronize(s));
    for (int z = 0; z < D; z++)
        for (int y = 0; y < LH; y++)
            for (int x = 0; x < RL; x++) {
                int in_first = y < H && x < W, in_far = y >= LH - H && x >= RL - W;
                int by = in_first ? y : y - (LH - H), bx = in_first ? x : x - (RL - W);
                unsigned char want =
                    in_first || in_far ? box[(z * H + by) * W + bx] : (unsigned char)0xEE;
                CHECK_EQ(back[(z * LH + y) * RL + x], want);
            }
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuMemFreeHost(box));
    CHECK_CU(cuMemFreeHost(back));
}

VG_TEST(batch_3d_refuses_bad_ops) {
    setup();
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc(&a, 4096));
    CHECK_CU(cuMemAlloc(&b, 4096));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUDA_MEMCPY3D_BATCH_OP good = box_op(pointer(a, 64, 8), pointer(b, 64, 8), 32, 4, 2);
    CUDA_MEMCPY3D_BATCH_OP op = good;
    CHECK_CU(cuMemcpy3DBatchAsync(1, &op, 0, s));
    CHECK_EQ(cuMemcpy3DBatchAsync(1, &op, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemcpy3DBatchAsync(1, &op, 1, s) != CUDA_SUCCESS); /* (flags must be 0) */
    CHECK(cuMemcpy3DBatchAsync(0, &op, 0, s) != CUDA_SUCCESS);
    op.extent.depth = 0;
    CHECK(cuMemcpy3DBatchAsync(1, &op, 0, s) != CUDA_SUCCESS);
    op = good;
    op.src.op.ptr.rowLength = 16; /* (shorter than a row of the copy) */
    CHECK(cuMemcpy3DBatchAsync(1, &op, 0, s) != CUDA_SUCCESS);
    op = good;
    op.dst.op.ptr.layerHeight = 2; /* (fewer rows than a layer of the copy) */
    CHECK(cuMemcpy3DBatchAsync(1, &op, 0, s) != CUDA_SUCCESS);
    op = good;
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    CHECK(cuMemcpy3DBatchAsync(1, &op, 0, s) != CUDA_SUCCESS);
    op = good;
    op.dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY; /* (a NULL array) */
    CHECK(cuMemcpy3DBatchAsync(1, &op, 0, s) != CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(a));
    CHECK_CU(cuMemFree(b));
}
