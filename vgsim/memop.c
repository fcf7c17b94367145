/* memop.c — vgsim: stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64,
 * cuStreamBatchMemOp), and their per-thread-default-stream twins.
 *
 * A write stores a 32- or 64-bit word when the stream reaches it; a wait holds the
 * stream until the word meets its condition (GEQ, EQ, AND, NOR), which another stream, or
 * the host, must bring about. The word must be aligned to its size and lie in device
 * memory or in pinned host memory (the driver asks for memory the device can reach);
 * anything else is CUDA_ERROR_INVALID_VALUE at the call. Memory barriers and flushes of
 * remote writes have nothing to do on vgsim: a host thread's writes are coherent.
 */
#include "internal.h"

/* Is one operation well formed? */
static CUresult check_op(CUstreamBatchMemOpType type, uint64_t addr, unsigned flags) {
    if (type == CU_STREAM_MEM_OP_BARRIER || type == CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES)
        return CUDA_SUCCESS;
    if (type != CU_STREAM_MEM_OP_WAIT_VALUE_32 && type != CU_STREAM_MEM_OP_WAIT_VALUE_64 &&
        type != CU_STREAM_MEM_OP_WRITE_VALUE_32 && type != CU_STREAM_MEM_OP_WRITE_VALUE_64)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned allowed = sim_memop_is_wait(type) ? 3u | CU_STREAM_WAIT_VALUE_FLUSH
                                     : CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER;
    size_t n = sim_memop_wide(type) ? 8 : 4;
    if ((flags & ~allowed) || addr % n)
        return CUDA_ERROR_INVALID_VALUE;
    int side = sim_classify((const void *)(uintptr_t)addr, n);
    return side == SIDE_DEVICE || side == SIDE_PINNED ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult enqueue_op(sim_stream_t *s, CUstreamBatchMemOpType type, uint64_t addr,
                           uint64_t value, unsigned flags) {
    bool nop = type == CU_STREAM_MEM_OP_BARRIER || type == CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
    sim_op_t *op = sim_op_get(s, nop ? OP_NOP : OP_MEMOP);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!nop) {
        op->u.memop.addr = addr;
        op->u.memop.value = sim_memop_wide(type) ? value : (uint32_t)value;
        op->u.memop.flags = flags;
        op->u.memop.type = type;
    }
    return sim_enqueue(s, op);
}

static CUresult memop(CUstream stream, CUstreamBatchMemOpType type, CUdeviceptr addr,
                      uint64_t value, unsigned flags) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r == CUDA_SUCCESS)
        r = check_op(type, addr, flags);
    return r != CUDA_SUCCESS ? r : enqueue_op(s, type, addr, value, flags);
}

/* The driver's limit on a batch's operations. */
#define MAX_BATCH 256

static CUresult batch(CUstream stream, unsigned count, CUstreamBatchMemOpParams *ops,
                      unsigned flags) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags != 0 || count == 0 || count > MAX_BATCH || !ops)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) { /* every operation checked before one is queued */
        const CUstreamBatchMemOpParams *p = &ops[i];
        r = p->operation == CU_STREAM_MEM_OP_BARRIER ||
                    p->operation == CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES
                ? CUDA_SUCCESS
                : check_op(p->operation, p->waitValue.address, p->waitValue.flags);
        if (r != CUDA_SUCCESS)
            return r;
    }
    for (unsigned i = 0; i < count && r == CUDA_SUCCESS; i++) {
        const CUstreamBatchMemOpParams *p = &ops[i]; /* (wait and write share a layout) */
        bool simple = p->operation != CU_STREAM_MEM_OP_BARRIER &&
                      p->operation != CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
        r = enqueue_op(s, p->operation, simple ? p->waitValue.address : 0,
                       simple ? p->waitValue.value64 : 0, simple ? p->waitValue.flags : 0);
    }
    return r;
}

/* Each operation and its _ptsz twin (with the calling thread's stream for NULL). */
#define VGSIM_MEMOP(sym, type, vtype)                                                       \
    VGSIM_API CUresult sym(CUstream stream, CUdeviceptr addr, vtype value,                  \
                           unsigned int flags) {                                            \
        return memop(stream, type, addr, value, flags);                                     \
    }                                                                                       \
    VGSIM_API CUresult sym##_ptsz(CUstream stream, CUdeviceptr addr, vtype value,           \
                                  unsigned int flags) {                                     \
        return memop(SIM_PT(stream), type, addr, value, flags);                             \
    }
VGSIM_MEMOP(cuStreamWaitValue32_v2, CU_STREAM_MEM_OP_WAIT_VALUE_32, cuuint32_t)
VGSIM_MEMOP(cuStreamWaitValue64_v2, CU_STREAM_MEM_OP_WAIT_VALUE_64, cuuint64_t)
VGSIM_MEMOP(cuStreamWriteValue32_v2, CU_STREAM_MEM_OP_WRITE_VALUE_32, cuuint32_t)
VGSIM_MEMOP(cuStreamWriteValue64_v2, CU_STREAM_MEM_OP_WRITE_VALUE_64, cuuint64_t)

VGSIM_API CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                         CUstreamBatchMemOpParams *ops, unsigned int flags) {
    return batch(stream, count, ops, flags);
}

VGSIM_API CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count,
                                              CUstreamBatchMemOpParams *ops,
                                              unsigned int flags) {
    return batch(SIM_PT(stream), count, ops, flags);
}
