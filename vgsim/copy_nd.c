/* copy_nd.c — vgsim: 2D and 3D copies, and copies between contexts (peer copies).
 *
 * A 2D or 3D copy is rows of WidthInBytes bytes: Height rows a slice, Depth slices. Each
 * row is copied as a copy of its own on the stream, with copy.c's rules for when the
 * host waits; every row is checked before the first is queued, so a bad copy queues
 * nothing. Arrays are not simulated (CUDA_ERROR_NOT_SUPPORTED).
 *
 * A peer copy names the contexts its device sides belong to; each side must be memory of
 * that context's device. The asynchronous ones run on their stream like any copy. The
 * synchronous ones (cuMemcpyPeer, cuMemcpy3DPeer) are, in the driver manual's words,
 * "serialized with respect to all pending and future asynchronous work in the current
 * context, srcContext, and dstContext": the copy waits for the work queued on the other
 * contexts' blocking streams, and their legacy streams (so their blocking streams' later
 * work) wait for the copy. As with cuMemcpyDtoD, the host does not wait for a copy
 * between device memory.
 */
#include "internal.h"

#include <stdlib.h>

typedef sim_side_t side_t;
typedef sim_shape_t shape_t;

static side_t side_of(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
                      size_t z, size_t pitch, size_t height, CUcontext ctx) {
    bool device = type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
    return (side_t){type, device ? (const char *)(uintptr_t)dev : (const char *)host,
                    x, y, z, pitch, height, (sim_ctx_t *)ctx};
}

/* The offset of row (y, z) of the copy from the side's base, or false if it overflows. */
static bool row_offset(const side_t *s, size_t y, size_t z, size_t *off) {
    size_t slice, row;
    return !__builtin_add_overflow(s->z, z, &slice) &&
           !__builtin_mul_overflow(slice, s->height, &slice) &&
           !__builtin_add_overflow(s->y, y, &row) && !__builtin_add_overflow(slice, row, &row) &&
           !__builtin_mul_overflow(row, s->pitch, &row) &&
           !__builtin_add_overflow(row, s->x, off);
}

/* The side's layout is one the driver accepts, and its last byte has an address. */
static CUresult side_check(const side_t *s, const shape_t *c) {
    if (s->type == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (s->type != CU_MEMORYTYPE_HOST && s->type != CU_MEMORYTYPE_DEVICE &&
        s->type != CU_MEMORYTYPE_UNIFIED)
        return CUDA_ERROR_INVALID_VALUE;
    size_t end, last;
    if (__builtin_add_overflow(s->x, c->width, &end) || s->pitch < end)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->depth > 1 && (__builtin_add_overflow(s->y, c->rows, &end) || s->height < end))
        return CUDA_ERROR_INVALID_VALUE;
    if (!row_offset(s, c->rows - 1, c->depth - 1, &last) ||
        __builtin_add_overflow(last, c->width, &end) ||
        (uintptr_t)s->base > UINTPTR_MAX - end)
        return CUDA_ERROR_INVALID_VALUE; /* (runs past the end of the address space) */
    return CUDA_SUCCESS;
}

/* Every row of the side is memory its type allows (a device side's rows device memory;
 * a peer copy's, memory of its context's device). */
static bool side_rows_ok(const side_t *s, const shape_t *c) {
    bool device = s->type == CU_MEMORYTYPE_DEVICE;
    if (c->peer && s->type != CU_MEMORYTYPE_HOST) {
        if (!s->ctx || atomic_load(&s->ctx->sticky))
            return false;
        device = true;
    }
    for (size_t z = 0; z < c->depth; z++) {
        for (size_t y = 0; y < c->rows; y++) {
            size_t off = 0; /* (side_check: no row overflows) */
            row_offset(s, y, z, &off);
            const char *row = s->base + off;
            int side = sim_classify(row, c->width);
            if (side == SIDE_BAD || (device && side != SIDE_DEVICE))
                return false;
            if (c->peer && side == SIDE_DEVICE &&
                sim_memory_device((uintptr_t)row) != s->ctx->dev)
                return false;
        }
    }
    return true;
}

/* The contexts other than c that a synchronous peer copy serialises with (at most 2). */
static int other_contexts(const shape_t *p, sim_ctx_t *c, sim_ctx_t *out[2]) {
    int n = 0;
    const side_t *sides[2] = {&p->src, &p->dst};
    for (int i = 0; i < 2; i++) {
        sim_ctx_t *o = sides[i]->type == CU_MEMORYTYPE_HOST ? NULL : sides[i]->ctx;
        if (o && o != c && (n == 0 || out[0] != o))
            out[n++] = o;
    }
    return n;
}

/* A no-op queued on s that waits for the work queued so far on ctx's blocking streams
 * (ctx), or on stream t up to seq (ctx NULL). */
static CUresult enqueue_wait(sim_stream_t *s, sim_ctx_t *ctx, sim_stream_t *t, uint64_t seq) {
    sim_op_t *op = sim_op_get(s, OP_NOP);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!(ctx ? sim_op_after_blocking(op, ctx, NULL) : sim_op_after(op, t, seq))) {
        sim_op_destroy(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return sim_enqueue(s, op);
}

CUresult sim_shape_check(const shape_t *p) {
    if (p->width == 0 || p->rows == 0 || p->depth == 0)
        return CUDA_SUCCESS;
    CUresult r;
    if ((r = side_check(&p->src, p)) != CUDA_SUCCESS)
        return r;
    if ((r = side_check(&p->dst, p)) != CUDA_SUCCESS)
        return r;
    if (!side_rows_ok(&p->src, p) || !side_rows_ok(&p->dst, p))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult sim_shape_queue(const shape_t *p, CUstream stream, unsigned how) {
    CUresult r = CUDA_SUCCESS;
    if (p->peer)
        how |= SIM_COPY_PEER;
    for (size_t z = 0; z < p->depth && r == CUDA_SUCCESS; z++) {
        for (size_t y = 0; y < p->rows && r == CUDA_SUCCESS; y++) {
            size_t so = 0, dof = 0;
            row_offset(&p->src, y, z, &so);
            row_offset(&p->dst, y, z, &dof);
            r = sim_copy_any((char *)p->dst.base + dof, p->src.base + so, p->width, stream, how);
        }
    }
    return r;
}

/* Check the copy, then queue its rows on `stream`; `async`: an asynchronous call. */
static CUresult copy_shape(const shape_t *p, CUstream stream, bool async) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (p->width == 0 || p->rows == 0 || p->depth == 0)
        return CUDA_SUCCESS;
    if ((r = sim_shape_check(p)) != CUDA_SUCCESS)
        return r;
    sim_stream_t *s = sim_stream_resolve(c, stream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_ctx_t *others[2];
    int nothers = p->peer && !async ? other_contexts(p, c, others) : 0;
    if (nothers > 0)
        SIM_UNSAFE_DURING_CAPTURE();
    for (int i = 0; i < nothers && r == CUDA_SUCCESS; i++)
        r = enqueue_wait(s, others[i], NULL, 0);
    if (r == CUDA_SUCCESS)
        r = sim_shape_queue(p, stream, async ? SIM_COPY_ASYNC : 0);
    uint64_t last = atomic_load(&s->enqueued); /* (or later: waiting longer is still right) */
    for (int i = 0; i < nothers && r == CUDA_SUCCESS; i++)
        r = enqueue_wait(others[i]->legacy, NULL, s, last); /* (its blocking streams too) */
    return r;
}

/* ---------------------------------------------------------------------------------------
 * The parameter structures
 * ------------------------------------------------------------------------------------- */

static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream stream, bool async) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    shape_t c = {
        side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0,
                p->srcPitch, 0, NULL),
        side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0,
                p->dstPitch, 0, NULL),
        p->WidthInBytes, p->Height, 1, false};
    return copy_shape(&c, stream, async);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, CUstream stream, bool async) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!p || p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    shape_t c = {
        side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ,
                p->srcPitch, p->srcHeight, NULL),
        side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ,
                p->dstPitch, p->dstHeight, NULL),
        p->WidthInBytes, p->Height, p->Depth, false};
    return copy_shape(&c, stream, async);
}

static CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER *p, CUstream stream, bool async) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!p || p->srcLOD || p->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    shape_t c = {
        side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ,
                p->srcPitch, p->srcHeight, p->srcContext),
        side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ,
                p->dstPitch, p->dstHeight, p->dstContext),
        p->WidthInBytes, p->Height, p->Depth, true};
    return copy_shape(&c, stream, async);
}

/* A linear peer copy: one row. */
static CUresult copy_peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                          size_t n, CUstream stream, bool async) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!dctx || !sctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    shape_t c = {side_of(CU_MEMORYTYPE_DEVICE, NULL, src, 0, 0, 0, n, 0, sctx),
                 side_of(CU_MEMORYTYPE_DEVICE, NULL, dst, 0, 0, 0, n, 0, dctx), n, 1, 1, true};
    return copy_shape(&c, stream, async);
}

/* ---------------------------------------------------------------------------------------
 * Entry points, with their per-thread-default-stream twins (the synchronous ones on the
 * calling thread's default stream, the asynchronous ones with that stream for NULL)
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *copy) { return copy_2d(copy, NULL, false); }

VGSIM_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *copy) {
    return copy_2d(copy, CU_STREAM_PER_THREAD, false);
}

/* (Unaligned: the real driver may take a slower path; the copy is the same.) */
VGSIM_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *copy) {
    return copy_2d(copy, NULL, false);
}

VGSIM_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *copy) {
    return copy_2d(copy, CU_STREAM_PER_THREAD, false);
}

VGSIM_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *copy, CUstream stream) {
    return copy_2d(copy, stream, true);
}

VGSIM_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *copy, CUstream stream) {
    return copy_2d(copy, SIM_PT(stream), true);
}

VGSIM_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *copy) { return copy_3d(copy, NULL, false); }

VGSIM_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *copy) {
    return copy_3d(copy, CU_STREAM_PER_THREAD, false);
}

VGSIM_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *copy, CUstream stream) {
    return copy_3d(copy, stream, true);
}

VGSIM_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *copy, CUstream stream) {
    return copy_3d(copy, SIM_PT(stream), true);
}

VGSIM_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *copy) {
    return copy_3d_peer(copy, NULL, false);
}

VGSIM_API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *copy) {
    return copy_3d_peer(copy, CU_STREAM_PER_THREAD, false);
}

VGSIM_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *copy, CUstream stream) {
    return copy_3d_peer(copy, stream, true);
}

VGSIM_API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *copy, CUstream stream) {
    return copy_3d_peer(copy, SIM_PT(stream), true);
}

VGSIM_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                size_t bytes) {
    return copy_peer(dst, dctx, src, sctx, bytes, NULL, false);
}

VGSIM_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                     CUcontext sctx, size_t bytes) {
    return copy_peer(dst, dctx, src, sctx, bytes, CU_STREAM_PER_THREAD, false);
}

VGSIM_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                     CUcontext sctx, size_t bytes, CUstream stream) {
    return copy_peer(dst, dctx, src, sctx, bytes, stream, true);
}

VGSIM_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                          CUcontext sctx, size_t bytes, CUstream stream) {
    return copy_peer(dst, dctx, src, sctx, bytes, SIM_PT(stream), true);
}
