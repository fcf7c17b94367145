/* hooks_copy_nd.c — 2D and 3D copies, and copies between contexts (peer copies), with
 * the steps of hooks_copy.c: the guard work waiting on the call's stream is launched
 * first (all of it for a synchronous call), the copy is recorded beside the kernels with
 * the first byte of each device side, an asynchronous copy's pinned host side gets the
 * race guard, and a synchronous copy with a host side orders the host after its stream.
 *
 * The race guard takes a host side only when its bytes are one range (copy_shape.h).
 */
#define _GNU_SOURCE
#include "base/common.h"
#include "diag/order.h"
#include "diag/report.h"
#include "copy_shape.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

#define SIDE(p, s, z, height)                                                               \
    ((side_t){(p)->s##MemoryType,                                                           \
              (p)->s##MemoryType == CU_MEMORYTYPE_HOST ? (uint64_t)(uintptr_t)(p)->s##Host  \
                                                       : (uint64_t)(p)->s##Device,          \
              (p)->s##XInBytes, (p)->s##Y, z, (p)->s##Pitch, height})
#define SHAPE_3D(p)                                                                         \
    ((shape_t){SIDE(p, src, (p)->srcZ, (p)->srcHeight), SIDE(p, dst, (p)->dstZ, (p)->dstHeight), \
               (p)->WidthInBytes, (p)->Height, (p)->Depth})

static shape_t shape_2d(const CUDA_MEMCPY2D *p) {
    return (shape_t){SIDE(p, src, 0, 0), SIDE(p, dst, 0, 0), p->WidthInBytes, p->Height, 1};
}

static shape_t shape_3d(const CUDA_MEMCPY3D *p) { return SHAPE_3D(p); }

static shape_t shape_3d_peer(const CUDA_MEMCPY3D_PEER *p) { return SHAPE_3D(p); }

static shape_t shape_linear(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    side_t d = {CU_MEMORYTYPE_DEVICE, dst, 0, 0, 0, n, 0};
    side_t s = {CU_MEMORYTYPE_DEVICE, src, 0, 0, 0, n, 0};
    return (shape_t){s, d, n, 1, 1};
}

/* Before the driver's call: the guard work first, then the race guard of an asynchronous
 * copy's pinned host sides (tokens for after()). */
VGP_INLINE void before(const shape_t *c, const char *call, CUstream s, bool async,
                       uintptr_t token[2]) {
    vg__guard_flush_stream(async ? s : NULL);
    token[0] = token[1] = 0;
    size_t n;
    void *h;
    if (async && (h = host_span(&c->src, c, &n)))
        token[0] = vgp_race_before(h, n, true, s, call);
    if (async && (h = host_span(&c->dst, c, &n)))
        token[1] = vgp_race_before(h, n, false, s, call);
}

/* After it returned r. Inlined into the hook, which vgp_copied's site skips. */
VGP_INLINE CUresult after(CUresult r, const shape_t *c, const char *call, CUstream s,
                          bool async, const uintptr_t token[2]) {
    vgp_race_after(token[0], r, s);
    vgp_race_after(token[1], r, s);
    bool from_dev = on_device(&c->src), to_dev = on_device(&c->dst);
    vgp_copied(r, call, s, to_dev ? first_byte(&c->dst) : 0, from_dev ? first_byte(&c->src) : 0,
               bytes_of(c));
    bool from_gpu = from_dev || c->src.type == CU_MEMORYTYPE_ARRAY;
    bool to_gpu = to_dev || c->dst.type == CU_MEMORYTYPE_ARRAY;
    if (r == CUDA_SUCCESS && !async && !(from_gpu && to_gpu))
        vg__order_stream_done(s); /* (the call returned once the copy was done) */
    return vgp_check(r, call);
}

/* ---------------------------------------------------------------------------------------
 * The hooks. `s` is the stream the copy runs on as the program sees it: NULL (the legacy
 * stream) or CU_STREAM_PER_THREAD for a synchronous call.
 * ------------------------------------------------------------------------------------- */

enum { K_2D, K_3D, K_3D_PEER };

VGP_INLINE CUresult call_driver(void *f, int kind, const void *p, bool async, CUstream s) {
#define CALL(type)                                                                          \
    (async ? ((CUresult(*)(const type *, CUstream))f)((const type *)p, s)                   \
           : ((CUresult(*)(const type *))f)((const type *)p))
    return kind == K_2D ? CALL(CUDA_MEMCPY2D)
         : kind == K_3D ? CALL(CUDA_MEMCPY3D)
                        : CALL(CUDA_MEMCPY3D_PEER);
#undef CALL
}

VGP_INLINE CUresult shaped(void *f, const char *call, int kind, const void *p, bool async,
                           CUstream s) {
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready() || !p)
        return call_driver(f, kind, p, async, s);
    shape_t c = kind == K_2D ? shape_2d(p) : kind == K_3D ? shape_3d(p) : shape_3d_peer(p);
    if (!sides_ok(&c, call, 0, 0, s))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t token[2];
    before(&c, call, s, async, token);
    CUresult r = call_driver(f, kind, p, async, s);
    return after(r, &c, call, s, async, token);
}

#define SHAPED_SYNC(sym, call, kind, type)                                                  \
    VG_API CUresult sym(const type *p) {                                                    \
        static void *next;                                                                  \
        return shaped(vgp_next(#sym, &next), call, kind, p, false, NULL);                   \
    }                                                                                       \
    VG_API CUresult sym##_ptds(const type *p) {                                             \
        static void *next;                                                                  \
        return shaped(vgp_next(#sym "_ptds", &next), call, kind, p, false,                  \
                      CU_STREAM_PER_THREAD);                                                \
    }
#define SHAPED_ASYNC(sym, call, kind, type)                                                 \
    VG_API CUresult sym(const type *p, CUstream s) {                                        \
        static void *next;                                                                  \
        return shaped(vgp_next(#sym, &next), call, kind, p, true, s);                       \
    }                                                                                       \
    VG_API CUresult sym##_ptsz(const type *p, CUstream s) { return sym(p, VGP_PT(s)); }

SHAPED_SYNC(cuMemcpy2D_v2, "cuMemcpy2D", K_2D, CUDA_MEMCPY2D)
SHAPED_SYNC(cuMemcpy2DUnaligned_v2, "cuMemcpy2DUnaligned", K_2D, CUDA_MEMCPY2D)
SHAPED_ASYNC(cuMemcpy2DAsync_v2, "cuMemcpy2DAsync", K_2D, CUDA_MEMCPY2D)
SHAPED_SYNC(cuMemcpy3D_v2, "cuMemcpy3D", K_3D, CUDA_MEMCPY3D)
SHAPED_ASYNC(cuMemcpy3DAsync_v2, "cuMemcpy3DAsync", K_3D, CUDA_MEMCPY3D)
SHAPED_SYNC(cuMemcpy3DPeer, "cuMemcpy3DPeer", K_3D_PEER, CUDA_MEMCPY3D_PEER)
SHAPED_ASYNC(cuMemcpy3DPeerAsync, "cuMemcpy3DPeerAsync", K_3D_PEER, CUDA_MEMCPY3D_PEER)

typedef CUresult (*peer_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
typedef CUresult (*peer_async_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                  CUstream);

VGP_INLINE CUresult peer(void *f, const char *call, CUdeviceptr dst, CUcontext dctx,
                         CUdeviceptr src, CUcontext sctx, size_t n, bool async, CUstream s) {
#define CALL                                                                                \
    (async ? ((peer_async_fn)f)(dst, dctx, src, sctx, n, s)                                 \
           : ((peer_fn)f)(dst, dctx, src, sctx, n))
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return CALL;
    shape_t c = shape_linear(dst, src, n);
    if (!sides_ok(&c, call, 0, 0, s))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t token[2];
    before(&c, call, s, async, token);
    CUresult r = CALL;
    return after(r, &c, call, s, async, token);
#undef CALL
}

VG_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                             size_t n) {
    static void *next;
    return peer(vgp_next("cuMemcpyPeer", &next), "cuMemcpyPeer", dst, dctx, src, sctx, n,
                false, NULL);
}

VG_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                  CUcontext sctx, size_t n) {
    static void *next;
    return peer(vgp_next("cuMemcpyPeer_ptds", &next), "cuMemcpyPeer", dst, dctx, src, sctx, n,
                false, CU_STREAM_PER_THREAD);
}

VG_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                  CUcontext sctx, size_t n, CUstream s) {
    static void *next;
    return peer(vgp_next("cuMemcpyPeerAsync", &next), "cuMemcpyPeerAsync", dst, dctx, src,
                sctx, n, true, s);
}

VG_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                       CUcontext sctx, size_t n, CUstream s) {
    return cuMemcpyPeerAsync(dst, dctx, src, sctx, n, VGP_PT(s));
}
