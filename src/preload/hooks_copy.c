/* hooks_copy.c — linear copies and memsets (see hooks.h; 2D, 3D and peer copies are in
 * hooks_copy_nd.c, with the same steps).
 *
 * Each hook first launches the guard work waiting on the stream the call runs on (the
 * poison of earlier frees and the redzone fills of new blocks precede the program's
 * writes, or a fill would erase an overrun's evidence), then records the call beside the
 * kernels (reports name it; G7 judges frees after it). Asynchronous copies from and to
 * pinned host memory get the race guard (race.c).
 *
 * Synchronous calls run on the legacy default stream, after every blocking stream's work;
 * their _ptds twins (CUDA_API_PER_THREAD_DEFAULT_STREAM) on the calling thread's default
 * stream. Either way the guard work waiting anywhere goes first (a NULL stream flushes
 * all: launching guard work early is always safe). A synchronous copy with host memory on
 * one side returns once the work queued before it on its stream has completed: the host
 * is then ordered after that work, as a program may rely on (G7).
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "base/common.h"
#include "check/guard.h"
#include "check/memcheck.h"
#include "base/options.h"
#include "diag/order.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

__attribute__((noinline)) void vgp_copied(CUresult r, const char *call, CUstream s,
                                          CUdeviceptr dst, CUdeviceptr src, size_t n) {
    if (r == CUDA_SUCCESS)
        vg__copy_note(call, 0, 1, s, vg__opt.stack_depth ? vg__site_here(2) : 0, dst, src, n);
}

/* ---------------------------------------------------------------------------------------
 * Synchronous copies, and their _ptds twins
 * ------------------------------------------------------------------------------------- */

typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*dtod_fn)(CUdeviceptr, CUdeviceptr, size_t);

/* cuMemcpyHtoD (`to_device`) or cuMemcpyDtoH on stream s (the legacy stream, or the
 * thread's own for a _ptds twin). */
VGP_INLINE CUresult host_copy(void *f, const char *call, bool to_device, CUstream s,
                              CUdeviceptr dev, void *host, size_t n) {
#define HOST_COPY(f) (to_device ? ((htod_fn)(f))(dev, host, n) : ((dtoh_fn)(f))(host, dev, n))
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return HOST_COPY(f);
    if (!VGP_RANGE_OK(call, to_device ? "destination" : "source", to_device, dev, n, s))
        return CUDA_ERROR_INVALID_VALUE;
    vg__guard_flush_stream(NULL);
    CUresult r = HOST_COPY(f);
    vgp_copied(r, call, s, to_device ? dev : 0, to_device ? 0 : dev, n);
    if (r == CUDA_SUCCESS)
        vg__order_stream_done(s);
    return vgp_check(r, call);
#undef HOST_COPY
}

VG_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    static void *next;
    return host_copy(vgp_next("cuMemcpyHtoD_v2", &next), "cuMemcpyHtoD", true, NULL, dst,
                     (void *)src, n);
}

VG_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) {
    static void *next;
    return host_copy(vgp_next("cuMemcpyHtoD_v2_ptds", &next), "cuMemcpyHtoD", true,
                     CU_STREAM_PER_THREAD, dst, (void *)src, n);
}

VG_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    static void *next;
    return host_copy(vgp_next("cuMemcpyDtoH_v2", &next), "cuMemcpyDtoH", false, NULL, src, dst,
                     n);
}

VG_API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
    static void *next;
    return host_copy(vgp_next("cuMemcpyDtoH_v2_ptds", &next), "cuMemcpyDtoH", false,
                     CU_STREAM_PER_THREAD, src, dst, n);
}

__attribute__((noinline)) bool vgp_range_ok(const vg_access_t *a) {
    vg_access_fault_t f;
    if (vg__access_check(a, &f)) {
        if (a->write)
            vg__memcheck_written(a->first, a->bytes, a->stream); /* (initcheck) */
        return true;
    }
    vg__access_report(&f, vg__opt.stack_depth ? vg__site_here(2) : 0);
    __asm__ volatile("" ::: "memory"); /* (not a tail call: the frames skipped include this) */
    return false;
}

__attribute__((noinline)) uint32_t vgp_call_site(void) {
    uint32_t site = vg__opt.stack_depth ? vg__site_here(2) : 0;
    __asm__ volatile("" ::: "memory"); /* (not a tail call: the frames skipped include this) */
    return site;
}

bool vgp_device_memory(CUdeviceptr p) {
    unsigned type = 0;
    return vg__is_ours(p) ||
           (vg__drv_has(cuPointerGetAttribute) &&
            vg__cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) ==
                CUDA_SUCCESS &&
            type == CU_MEMORYTYPE_DEVICE);
}

/* A copy between two devices that the plain call cannot make (a side is vramguard's pages
 * out of the other device's reach, docs/decisions.md A11): made with cuMemcpyPeer, or
 * cuMemcpyPeerAsync on stream s, instead, as PyTorch does for its expandable segments;
 * *r gets its result. False (nothing done) for any other copy. */
static bool peer_instead(CUdeviceptr dst, CUdeviceptr src, size_t n, bool async, CUstream s,
                         CUresult *r) {
    CUcontext dctx, sctx;
    if (!vg__copy_needs_peer(dst, src, &dctx, &sctx)) /* (at once with one heap) */
        return false;
    *r = async || s ? vg__cuMemcpyPeerAsync(dst, dctx, src, sctx, n, s)
                    : vg__cuMemcpyPeer(dst, dctx, src, sctx, n);
    return true;
}

/* cuMemcpyDtoD (`any` false) or cuMemcpy (unified addressing: either side may be host
 * memory). Between device memory the host does not wait; with host memory on a side the
 * call returns once the copy is done, as cuMemcpyHtoD and cuMemcpyDtoH do. */
VGP_INLINE CUresult dtod(dtod_fn f, const char *call, CUstream s, bool any, CUdeviceptr dst,
                         CUdeviceptr src, size_t n) {
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return f(dst, src, n);
    if (!VGP_RANGE_OK(call, "source", false, src, n, s) ||
        !VGP_RANGE_OK(call, "destination", true, dst, n, s))
        return CUDA_ERROR_INVALID_VALUE;
    vg__guard_flush_stream(NULL);
    bool to_dev = !any || vgp_device_memory(dst), from_dev = !any || vgp_device_memory(src);
    CUresult r;
    if (!(to_dev && from_dev) || !peer_instead(dst, src, n, false, s, &r))
        r = f(dst, src, n);
    vgp_copied(r, call, s, to_dev ? dst : 0, from_dev ? src : 0, n);
    if (r == CUDA_SUCCESS && !(to_dev && from_dev))
        vg__order_stream_done(s);
    return vgp_check(r, call);
}

VG_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    static void *next;
    return dtod((dtod_fn)vgp_next("cuMemcpyDtoD_v2", &next), "cuMemcpyDtoD", NULL, false, dst,
                src, n);
}

VG_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    static void *next;
    return dtod((dtod_fn)vgp_next("cuMemcpyDtoD_v2_ptds", &next), "cuMemcpyDtoD",
                CU_STREAM_PER_THREAD, false, dst, src, n);
}

VG_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    static void *next;
    return dtod((dtod_fn)vgp_next("cuMemcpy", &next), "cuMemcpy", NULL, true, dst, src, n);
}

VG_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    static void *next;
    return dtod((dtod_fn)vgp_next("cuMemcpy_ptds", &next), "cuMemcpy", CU_STREAM_PER_THREAD,
                true, dst, src, n);
}

/* ---------------------------------------------------------------------------------------
 * Asynchronous copies
 * ------------------------------------------------------------------------------------- */

VG_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    static void *next;
    CUresult (*f)(CUdeviceptr, CUdeviceptr, size_t, CUstream) =
        (CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))vgp_next("cuMemcpyAsync", &next);
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return f(dst, src, n, s);
    if (!VGP_RANGE_OK("cuMemcpyAsync", "source", false, src, n, s) ||
        !VGP_RANGE_OK("cuMemcpyAsync", "destination", true, dst, n, s))
        return CUDA_ERROR_INVALID_VALUE;
    vg__guard_flush_stream(s);
    /* With unified addressing either side may be pinned host memory (cudaMemcpyAsync with
     * cudaMemcpyDefault): each side that is gets the race guard. */
    uintptr_t from = vgp_race_before((const void *)(uintptr_t)src, n, true, s, "cuMemcpyAsync");
    uintptr_t to = vgp_race_before((void *)(uintptr_t)dst, n, false, s, "cuMemcpyAsync");
    CUresult r;
    if (from || to || !peer_instead(dst, src, n, true, s, &r)) /* (a pinned side: no) */
        r = f(dst, src, n, s);
    vgp_race_after(from, r, s);
    vgp_race_after(to, r, s);
    vgp_copied(r, "cuMemcpyAsync", s, dst, src, n);
    return vgp_check(r, "cuMemcpyAsync");
}

VG_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    return cuMemcpyAsync(dst, src, n, VGP_PT(s));
}

VG_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    static void *next;
    CUresult (*f)(CUdeviceptr, CUdeviceptr, size_t, CUstream) =
        (CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))vgp_next("cuMemcpyDtoDAsync_v2",
                                                                         &next);
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return f(dst, src, n, s);
    if (!VGP_RANGE_OK("cuMemcpyDtoDAsync", "source", false, src, n, s) ||
        !VGP_RANGE_OK("cuMemcpyDtoDAsync", "destination", true, dst, n, s))
        return CUDA_ERROR_INVALID_VALUE;
    vg__guard_flush_stream(s);
    CUresult r;
    if (!peer_instead(dst, src, n, true, s, &r))
        r = f(dst, src, n, s);
    vgp_copied(r, "cuMemcpyDtoDAsync", s, dst, src, n);
    return vgp_check(r, "cuMemcpyDtoDAsync");
}

VG_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    return cuMemcpyDtoDAsync_v2(dst, src, n, VGP_PT(s));
}

typedef CUresult (*htod_async_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_async_fn)(void *, CUdeviceptr, size_t, CUstream);

/* An asynchronous copy between host memory and the device (`to_device`: from host to
 * device): the race guard on the host side, when it is pinned. */
VGP_INLINE CUresult host_copy_async(void *f, const char *call, bool to_device,
                                    CUdeviceptr dev, void *host, size_t n, CUstream s) {
#define HOST_COPY(f)                                                                        \
    (to_device ? ((htod_async_fn)(f))(dev, host, n, s) : ((dtoh_async_fn)(f))(host, dev, n, s))
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return HOST_COPY(f);
    if (!VGP_RANGE_OK(call, to_device ? "destination" : "source", to_device, dev, n, s))
        return CUDA_ERROR_INVALID_VALUE;
    vg__guard_flush_stream(s);
    uintptr_t token = vgp_race_before(host, n, to_device, s, call);
    CUresult r = HOST_COPY(f);
    vgp_race_after(token, r, s);
    vgp_copied(r, call, s, to_device ? dev : 0, to_device ? 0 : dev, n);
    return vgp_check(r, call);
#undef HOST_COPY
}

VG_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    static void *next;
    return host_copy_async(vgp_next("cuMemcpyHtoDAsync_v2", &next), "cuMemcpyHtoDAsync", true,
                           dst, (void *)src, n, s);
}

VG_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    return cuMemcpyHtoDAsync_v2(dst, src, n, VGP_PT(s));
}

VG_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    static void *next;
    return host_copy_async(vgp_next("cuMemcpyDtoHAsync_v2", &next), "cuMemcpyDtoHAsync", false,
                           src, dst, n, s);
}

VG_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    return cuMemcpyDtoHAsync_v2(dst, src, n, VGP_PT(s));
}

/* ---------------------------------------------------------------------------------------
 * Memsets: D8, D16, D32 and their 2D forms, each synchronous (and its _ptds twin) and
 * asynchronous (and its _ptsz twin). A 2D memset is recorded with the first byte it sets
 * and the bytes it sets.
 * ------------------------------------------------------------------------------------- */

/* The bytes a 2D memset spans: its rows of `row` bytes, `pitch` apart. */
static inline uint64_t span_2d(size_t pitch, size_t row, size_t rows) {
    return row && rows ? (uint64_t)(rows - 1) * pitch + row : 0;
}

#define MEMSET_HOOKS(api, type, elem)                                                       \
    VGP_INLINE CUresult api##_sync(CUresult (*f)(CUdeviceptr, type, size_t), CUstream s,    \
                               CUdeviceptr dst, type v, size_t n) {                         \
        if (!f)                                                                             \
            return CUDA_ERROR_NOT_INITIALIZED;                                              \
        if (!vgp_ready())                                                                   \
            return f(dst, v, n);                                                            \
        if (!VGP_RANGE_OK(#api, "destination", true, dst, (uint64_t)n * elem, s))           \
            return CUDA_ERROR_INVALID_VALUE;                                                \
        vg__guard_flush_stream(NULL);                                                       \
        CUresult r = f(dst, v, n);                                                          \
        vgp_copied(r, #api, s, dst, 0, n * elem);                                           \
        return vgp_check(r, #api);                                                          \
    }                                                                                       \
    VG_API CUresult api##_v2(CUdeviceptr dst, type v, size_t n) {                           \
        static void *next;                                                                  \
        return api##_sync((__typeof__(&api##_v2))vgp_next(#api "_v2", &next), NULL, dst, v, \
                          n);                                                               \
    }                                                                                       \
    VG_API CUresult api##_v2_ptds(CUdeviceptr dst, type v, size_t n) {                      \
        static void *next;                                                                  \
        return api##_sync((__typeof__(&api##_v2))vgp_next(#api "_v2_ptds", &next),          \
                          CU_STREAM_PER_THREAD, dst, v, n);                                 \
    }                                                                                       \
    VG_API CUresult api##Async(CUdeviceptr dst, type v, size_t n, CUstream s) {             \
        static void *next;                                                                  \
        __typeof__(&api##Async) f = (__typeof__(&api##Async))vgp_next(#api "Async", &next); \
        if (!f)                                                                             \
            return CUDA_ERROR_NOT_INITIALIZED;                                              \
        if (!vgp_ready())                                                                   \
            return f(dst, v, n, s);                                                         \
        if (!VGP_RANGE_OK(#api "Async", "destination", true, dst, (uint64_t)n * elem, s))   \
            return CUDA_ERROR_INVALID_VALUE;                                                \
        vg__guard_flush_stream(s);                                                          \
        CUresult r = f(dst, v, n, s);                                                       \
        vgp_copied(r, #api "Async", s, dst, 0, n * elem);                                   \
        return vgp_check(r, #api "Async");                                                  \
    }                                                                                       \
    VG_API CUresult api##Async_ptsz(CUdeviceptr dst, type v, size_t n, CUstream s) {        \
        return api##Async(dst, v, n, VGP_PT(s));                                            \
    }

#define MEMSET_2D_HOOKS(api, type, elem)                                                    \
    VGP_INLINE CUresult api##_sync(CUresult (*f)(CUdeviceptr, size_t, type, size_t, size_t), \
                               CUstream s, CUdeviceptr dst, size_t pitch, type v, size_t w, \
                               size_t h) {                                                  \
        if (!f)                                                                             \
            return CUDA_ERROR_NOT_INITIALIZED;                                              \
        if (!vgp_ready())                                                                   \
            return f(dst, pitch, v, w, h);                                                  \
        if (!VGP_RANGE_OK(#api, "destination", true, dst, span_2d(pitch, w * elem, h), s))   \
            return CUDA_ERROR_INVALID_VALUE;                                                \
        vg__guard_flush_stream(NULL);                                                       \
        CUresult r = f(dst, pitch, v, w, h);                                                \
        vgp_copied(r, #api, s, dst, 0, w * h * elem);                                       \
        return vgp_check(r, #api);                                                          \
    }                                                                                       \
    VG_API CUresult api##_v2(CUdeviceptr dst, size_t pitch, type v, size_t w, size_t h) {   \
        static void *next;                                                                  \
        return api##_sync((__typeof__(&api##_v2))vgp_next(#api "_v2", &next), NULL, dst,    \
                          pitch, v, w, h);                                                  \
    }                                                                                       \
    VG_API CUresult api##_v2_ptds(CUdeviceptr dst, size_t pitch, type v, size_t w,          \
                                  size_t h) {                                               \
        static void *next;                                                                  \
        return api##_sync((__typeof__(&api##_v2))vgp_next(#api "_v2_ptds", &next),          \
                          CU_STREAM_PER_THREAD, dst, pitch, v, w, h);                       \
    }                                                                                       \
    VG_API CUresult api##Async(CUdeviceptr dst, size_t pitch, type v, size_t w, size_t h,   \
                               CUstream s) {                                                \
        static void *next;                                                                  \
        __typeof__(&api##Async) f = (__typeof__(&api##Async))vgp_next(#api "Async", &next); \
        if (!f)                                                                             \
            return CUDA_ERROR_NOT_INITIALIZED;                                              \
        if (!vgp_ready())                                                                   \
            return f(dst, pitch, v, w, h, s);                                               \
        if (!VGP_RANGE_OK(#api "Async", "destination", true, dst, span_2d(pitch, w * elem, h), \
                          s))                                                               \
            return CUDA_ERROR_INVALID_VALUE;                                                \
        vg__guard_flush_stream(s);                                                          \
        CUresult r = f(dst, pitch, v, w, h, s);                                             \
        vgp_copied(r, #api "Async", s, dst, 0, w * h * elem);                               \
        return vgp_check(r, #api "Async");                                                  \
    }                                                                                       \
    VG_API CUresult api##Async_ptsz(CUdeviceptr dst, size_t pitch, type v, size_t w,        \
                                    size_t h, CUstream s) {                                 \
        return api##Async(dst, pitch, v, w, h, VGP_PT(s));                                  \
    }

MEMSET_HOOKS(cuMemsetD8, unsigned char, 1)
MEMSET_HOOKS(cuMemsetD16, unsigned short, 2)
MEMSET_HOOKS(cuMemsetD32, unsigned int, 4)
MEMSET_2D_HOOKS(cuMemsetD2D8, unsigned char, 1)
MEMSET_2D_HOOKS(cuMemsetD2D16, unsigned short, 2)
MEMSET_2D_HOOKS(cuMemsetD2D32, unsigned int, 4)
