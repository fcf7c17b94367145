/* copy_batch.c — vgsim: batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync; CUDA 12.8).
 *
 * A batch is a list of copies queued on one stream by one call; the batch runs in stream
 * order, its copies in no promised order among themselves (vgsim runs them in list
 * order). Every copy is checked before the first is queued, so a bad batch queues nothing;
 * the CUDA 12.8 versions (VG_DRIVER_OLDER) also say which copy was bad (failIdx, SIZE_MAX
 * when the fault is the batch's, not a copy's).
 *
 * Each copy says when its source may be read (CUmemcpySrcAccessOrder): in stream order
 * (STREAM), or at any time until the copy completes (ANY), which vgsim treats alike; or
 * during the call (DURING_API_CALL), for a source the program reuses once the call
 * returns, such as a stack buffer: vgsim reads it before returning. The destination is
 * always written in stream order. The legacy default stream is refused
 * (CUDA_ERROR_INVALID_VALUE, as the real driver does); the per-thread one is accepted.
 * Pointer-to-pointer copies only: CUDA arrays are not simulated (NOT_SUPPORTED).
 */
#include "internal.h"

#include <stdint.h>

/* The batch's context and stream, or the error the call returns. */
static CUresult batch_stream(CUstream stream, sim_ctx_t **c) {
    CUresult r = sim_check_init();
    if (r == CUDA_SUCCESS)
        r = sim_ctx_check(c);
    if (r == CUDA_SUCCESS && (stream == NULL || stream == CU_STREAM_LEGACY))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !sim_stream_resolve(*c, stream))
        r = CUDA_ERROR_INVALID_HANDLE;
    return r;
}

static bool order_ok(CUmemcpySrcAccessOrder o) {
    return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
           o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL || o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

static unsigned how_of(CUmemcpySrcAccessOrder o) {
    bool now = o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
    return SIM_COPY_ASYNC | (now ? SIM_COPY_SRC_NOW : 0);
}

/* ---------------------------------------------------------------------------------------
 * cuMemcpyBatchAsync: copies of sizes[i] bytes from srcs[i] to dsts[i], any direction;
 * attrs[k] applies from copy attrsIdxs[k] to the next entry's first copy.
 * ------------------------------------------------------------------------------------- */

/* The attribute lists are well formed: first index 0, increasing, below count. */
static bool attrs_ok(const CUmemcpyAttributes *attrs, const size_t *idxs, size_t nattrs,
                     size_t count) {
    if (!attrs || !idxs || nattrs == 0 || nattrs > count || idxs[0] != 0)
        return false;
    for (size_t k = 0; k < nattrs; k++) {
        if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= count ||
            !order_ok(attrs[k].srcAccessOrder))
            return false;
    }
    return true;
}

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
                      CUstream stream) {
    if (fail)
        *fail = SIZE_MAX;
    sim_ctx_t *c;
    CUresult r = batch_stream(stream, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (count == 0 || !dsts || !srcs || !sizes || !attrs_ok(attrs, idxs, nattrs, count))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        r = sim_copy_check((void *)(uintptr_t)dsts[i], (void *)(uintptr_t)srcs[i], sizes[i], 0);
        if (r != CUDA_SUCCESS) {
            if (fail)
                *fail = i;
            return r;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
        if (k + 1 < nattrs && idxs[k + 1] == i)
            k++;
        r = sim_copy_any((void *)(uintptr_t)dsts[i], (void *)(uintptr_t)srcs[i], sizes[i],
                         stream, how_of(attrs[k].srcAccessOrder));
    }
    return r;
}

VGSIM_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                         size_t count, CUmemcpyAttributes *attrs,
                                         size_t *attrsIdxs, size_t numAttrs, CUstream stream) {
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, stream);
}

VGSIM_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs,
                                              size_t *sizes, size_t count,
                                              CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                              size_t numAttrs, CUstream stream) {
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, SIM_PT(stream));
}

VGSIM_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                      size_t count, CUmemcpyAttributes *attrs,
                                      size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                      CUstream stream) {
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, stream);
}

VGSIM_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                           size_t count, CUmemcpyAttributes *attrs,
                                           size_t *attrsIdxs, size_t numAttrs,
                                           size_t *failIdx, CUstream stream) {
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx,
                 SIM_PT(stream));
}

/* ---------------------------------------------------------------------------------------
 * cuMemcpy3DBatchAsync: boxes of extent width x height x depth bytes between pointer
 * operands (rows rowLength bytes apart, 0: packed; layers layerHeight rows, 0: packed).
 * ------------------------------------------------------------------------------------- */

/* The operand as a side of a 3D copy, or the error for it. */
static CUresult operand_side(const CUmemcpy3DOperand *o, const CUextent3D *e, sim_side_t *s) {
    if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    size_t height = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    if (pitch < e->width || height < e->height)
        return CUDA_ERROR_INVALID_VALUE;
    *s = (sim_side_t){CU_MEMORYTYPE_UNIFIED, (const char *)(uintptr_t)o->op.ptr.ptr, 0, 0, 0,
                      pitch, height, NULL};
    return CUDA_SUCCESS;
}

static CUresult op_shape(const CUDA_MEMCPY3D_BATCH_OP *op, sim_shape_t *p) {
    const CUextent3D *e = &op->extent;
    if (!order_ok(op->srcAccessOrder) || !e->width || !e->height || !e->depth)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = operand_side(&op->src, e, &p->src);
    if (r == CUDA_SUCCESS)
        r = operand_side(&op->dst, e, &p->dst);
    if (r != CUDA_SUCCESS)
        return r;
    p->width = e->width;
    p->rows = e->height;
    p->depth = e->depth;
    p->peer = false;
    return sim_shape_check(p);
}

static CUresult batch_3d(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                         unsigned long long flags, CUstream stream) {
    if (fail)
        *fail = SIZE_MAX;
    sim_ctx_t *c;
    CUresult r = batch_stream(stream, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (n == 0 || !ops || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        sim_shape_t p;
        if ((r = op_shape(&ops[i], &p)) != CUDA_SUCCESS) {
            if (fail)
                *fail = i;
            return r;
        }
    }
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        sim_shape_t p;
        op_shape(&ops[i], &p); /* (checked above) */
        r = sim_shape_queue(&p, stream, how_of(ops[i].srcAccessOrder));
    }
    return r;
}

VGSIM_API CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                           unsigned long long flags, CUstream stream) {
    return batch_3d(numOps, opList, NULL, flags, stream);
}

VGSIM_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                                unsigned long long flags, CUstream stream) {
    return batch_3d(numOps, opList, NULL, flags, SIM_PT(stream));
}

VGSIM_API CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                        size_t *failIdx, unsigned long long flags,
                                        CUstream stream) {
    return batch_3d(numOps, opList, failIdx, flags, stream);
}

VGSIM_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                             size_t *failIdx, unsigned long long flags,
                                             CUstream stream) {
    return batch_3d(numOps, opList, failIdx, flags, SIM_PT(stream));
}
