/* hooks_memop.c — stream memory operations: cuStreamWriteValue32/64, cuStreamWaitValue32/64,
 * cuStreamBatchMemOp, and their _ptsz twins (see hooks.h).
 *
 * A write is a device write like a memset's: the guard work waiting on its stream is
 * launched first, and it is recorded beside the kernels with its address. A wait orders
 * its stream after whatever writes the word, which vramguard cannot know (another stream,
 * the host, another process): for guard mode's judgement of frees (G7) the stream is
 * taken as ordered after everything launched so far, as a wait on an event vramguard
 * never saw recorded is. A program that orders streams with flags in memory then gets no
 * false "unordered free"; a free that truly races with such a stream is not reported.
 */
#define _GNU_SOURCE
#include "base/common.h"
#include "diag/order.h"
#include "diag/report.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

static bool is_write(CUstreamBatchMemOpType t) {
    return t == CU_STREAM_MEM_OP_WRITE_VALUE_32 || t == CU_STREAM_MEM_OP_WRITE_VALUE_64;
}

static bool is_wait(CUstreamBatchMemOpType t) {
    return t == CU_STREAM_MEM_OP_WAIT_VALUE_32 || t == CU_STREAM_MEM_OP_WAIT_VALUE_64;
}

typedef CUresult (*value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
typedef CUresult (*value64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned);

/* One wait or write. The call's name and size come from its type. */
VGP_INLINE CUresult memop(void *f, CUstreamBatchMemOpType type, CUstream s, CUdeviceptr addr,
                          cuuint64_t value, unsigned flags) {
    bool wide = type == CU_STREAM_MEM_OP_WAIT_VALUE_64 || type == CU_STREAM_MEM_OP_WRITE_VALUE_64;
#define CALL                                                                                \
    (wide ? ((value64_fn)f)(s, addr, value, flags)                                          \
          : ((value32_fn)f)(s, addr, (cuuint32_t)value, flags))
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return CALL;
    static const char *const names[] = {
        [CU_STREAM_MEM_OP_WAIT_VALUE_32] = "cuStreamWaitValue32",
        [CU_STREAM_MEM_OP_WRITE_VALUE_32] = "cuStreamWriteValue32",
        [CU_STREAM_MEM_OP_WAIT_VALUE_64] = "cuStreamWaitValue64",
        [CU_STREAM_MEM_OP_WRITE_VALUE_64] = "cuStreamWriteValue64"};
    vg__guard_flush_stream(s);
    CUresult r = CALL;
    if (is_write(type))
        vgp_copied(r, names[type], s, addr, 0, wide ? 8 : 4);
    else if (r == CUDA_SUCCESS)
        vg__order_stream_wait(s, NULL); /* (an event never seen: orders everything so far) */
    return vgp_check(r, names[type]);
#undef CALL
}

#define MEMOP_HOOK(sym, type, vtype)                                                        \
    VG_API CUresult sym(CUstream s, CUdeviceptr addr, vtype value, unsigned int flags) {    \
        static void *next;                                                                  \
        return memop(vgp_next(#sym, &next), type, s, addr, value, flags);                   \
    }                                                                                       \
    VG_API CUresult sym##_ptsz(CUstream s, CUdeviceptr addr, vtype value, unsigned int flags) { \
        return sym(VGP_PT(s), addr, value, flags);                                          \
    }

MEMOP_HOOK(cuStreamWaitValue32_v2, CU_STREAM_MEM_OP_WAIT_VALUE_32, cuuint32_t)
MEMOP_HOOK(cuStreamWaitValue64_v2, CU_STREAM_MEM_OP_WAIT_VALUE_64, cuuint64_t)
MEMOP_HOOK(cuStreamWriteValue32_v2, CU_STREAM_MEM_OP_WRITE_VALUE_32, cuuint32_t)
MEMOP_HOOK(cuStreamWriteValue64_v2, CU_STREAM_MEM_OP_WRITE_VALUE_64, cuuint64_t)

/* A batch: recorded once, as "cuStreamBatchMemOp of N bytes" with its first write's
 * address (the bytes: all its writes'); a wait anywhere in it orders the stream. */
VG_API CUresult cuStreamBatchMemOp_v2(CUstream s, unsigned int count,
                                      CUstreamBatchMemOpParams *ops, unsigned int flags) {
    static void *next;
    CUresult (*f)(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned) =
        (CUresult(*)(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned))vgp_next(
            "cuStreamBatchMemOp_v2", &next);
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready() || !ops)
        return f(s, count, ops, flags);
    vg__guard_flush_stream(s);
    CUresult r = f(s, count, ops, flags);
    CUdeviceptr first = 0;
    size_t bytes = 0;
    bool waits = false;
    for (unsigned i = 0; i < count && r == CUDA_SUCCESS; i++) {
        CUstreamBatchMemOpType t = ops[i].operation;
        waits |= is_wait(t);
        if (is_write(t)) {
            first = first ? first : ops[i].writeValue.address;
            bytes += t == CU_STREAM_MEM_OP_WRITE_VALUE_64 ? 8 : 4;
        }
    }
    if (bytes)
        vgp_copied(r, "cuStreamBatchMemOp", s, first, 0, bytes);
    if (waits)
        vg__order_stream_wait(s, NULL);
    return vgp_check(r, "cuStreamBatchMemOp");
}

VG_API CUresult cuStreamBatchMemOp_v2_ptsz(CUstream s, unsigned int count,
                                           CUstreamBatchMemOpParams *ops, unsigned int flags) {
    return cuStreamBatchMemOp_v2(VGP_PT(s), count, ops, flags);
}
