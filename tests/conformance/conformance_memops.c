/* conformance_memops.c — conformance cases of stream memory operations (see
 * conformance.c): a word written by one stream releases another stream's wait. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "conformance.h"

/* Wait up to 5 s for stream s to complete; false if it did not. */
static bool completes(CUstream s) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        CUresult r = cuStreamQuery(s);
        if (r != CUDA_ERROR_NOT_READY)
            return r == CUDA_SUCCESS;
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < 5);
    return false;
}

/* Stream a fills a buffer behind a gate, then writes a flag; stream b waits for the flag
 * and adds to the buffer: b's work runs only once a's has, whatever the host does. The
 * same through 64-bit words and through a batch. */
VG_TEST(a_written_word_releases_another_streams_wait) {
    setup();
    enum { N = 4096 };
    CUdeviceptr buf, flags;
    CHECK_CU(cuMemAlloc(&buf, N * 4));
    CHECK_CU(cuMemAlloc(&flags, 64));
    CHECK_CU(cuMemsetD8(flags, 0, 64));
    CHECK_CU(cuCtxSynchronize());
    CUstream a, b;
    CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    for (int how = 0; how < 3; how++) {
        CUdeviceptr flag = flags + 8 * (CUdeviceptr)how;
        gate_t g;
        gate_init(&g);
        CHECK_CU(cuLaunchHostFunc(a, gate_fn, &g));
        CHECK_CU(launch_fill(a, buf, 5, N));
        if (how == 0) {
            CHECK_CU(cuStreamWriteValue32(a, flag, 1, 0));
            CHECK_CU(cuStreamWaitValue32(b, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
        } else if (how == 1) {
            CHECK_CU(cuStreamWriteValue64(a, flag, 0x100000001ull, 0));
            CHECK_CU(cuStreamWaitValue64(b, flag, 0x100000001ull, CU_STREAM_WAIT_VALUE_EQ));
        } else {
            CUstreamBatchMemOpParams op[2];
            memset(op, 0, sizeof op);
            op[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
            op[0].writeValue.address = flag;
            op[0].writeValue.value = 6;
            CHECK_CU(cuStreamBatchMemOp(a, 1, op, 0));
            op[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
            op[0].waitValue.address = flag;
            op[0].waitValue.value = 4;
            op[0].waitValue.flags = CU_STREAM_WAIT_VALUE_AND;
            op[1].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
            CHECK_CU(cuStreamBatchMemOp(b, 2, op, 0));
        }
        CHECK_CU(launch_add(b, buf, 2, N));
        EXPECT_BLOCKED(b);
        gate_open(&g);
        CHECK(completes(b));
        CHECK_CU(cuStreamSynchronize(a));
        EXPECT_U32(buf, N, 7);
    }
    CHECK_CU(cuStreamDestroy(a));
    CHECK_CU(cuStreamDestroy(b));
    CHECK_CU(cuMemFree(buf));
    CHECK_CU(cuMemFree(flags));
}

/* Each condition of a wait, on a word already written: GEQ in wrap-around arithmetic, EQ,
 * AND, NOR; none may hold the stream. */
VG_TEST(wait_conditions_hold_as_documented) {
    setup();
    CUdeviceptr w;
    CHECK_CU(cuMemAlloc(&w, 16));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamWriteValue32(s, w, 6, 0));
    CHECK_CU(cuStreamWaitValue32(s, w, 6, CU_STREAM_WAIT_VALUE_EQ));
    CHECK_CU(cuStreamWaitValue32(s, w, 0xFFFFFFF0u, CU_STREAM_WAIT_VALUE_GEQ)); /* 6 - (-16) */
    CHECK_CU(cuStreamWaitValue32(s, w, 2, CU_STREAM_WAIT_VALUE_AND));
    CHECK_CU(cuStreamWaitValue32(s, w, 0xFFFFFFF0u, CU_STREAM_WAIT_VALUE_NOR)); /* ~0xFFFFFFF6 */
    CHECK_CU(cuStreamWriteValue64(s, w + 8, 1ull << 40, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
    CHECK_CU(cuStreamWaitValue64(s, w + 8, 1ull << 39, CU_STREAM_WAIT_VALUE_GEQ));
    CHECK(completes(s));
    unsigned long long got[2];
    CHECK_CU(cuMemcpyDtoH(got, w, sizeof got));
    CHECK_EQ(got[0] & 0xFFFFFFFFu, 6u);
    CHECK_EQ(got[1], 1ull << 40);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(w));
}

/* What the driver manual rules out is refused at the call. */
VG_TEST(stream_memops_refuse_bad_words) {
    setup();
    CUdeviceptr w;
    CHECK_CU(cuMemAlloc(&w, 16));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_EQ(cuStreamWriteValue32(s, w + 2, 1, 0), CUDA_ERROR_INVALID_VALUE); /* unaligned */
    CHECK_EQ(cuStreamWriteValue64(s, w + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuStreamWaitValue32(s, w, 1, 1u << 5), CUDA_ERROR_INVALID_VALUE); /* a flag */
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = w;
    CHECK_EQ(cuStreamBatchMemOp(s, 0, &op, 0), CUDA_ERROR_INVALID_VALUE); /* no operation */
    CHECK_EQ(cuStreamBatchMemOp(s, 1, &op, 1), CUDA_ERROR_INVALID_VALUE); /* flags */
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(w));
}
