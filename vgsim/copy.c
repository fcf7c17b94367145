/* copy.c — vgsim: memcpy and memset, synchronous and asynchronous, with CUDA's rules
 * for when the host waits ("API synchronization behavior" in the driver manual):
 *
 *  - HtoD from pageable memory: the source is staged before the call returns, so the
 *    host may reuse it at once; from pinned memory the copy reads the buffer when the
 *    stream reaches it (the hazard of scenario S3).
 *  - DtoH into pageable memory: the call waits for the copy; into pinned memory an async
 *    copy writes the buffer when the stream reaches it (scenario S4).
 *  - DtoD and memsets of device memory never make the host wait, even the "synchronous"
 *    entry points, which are ordered on the legacy default stream.
 *  - Synchronous HtoD/DtoH copies return when the copy is complete.
 *
 * Device ranges are checked when the call is made (CUDA_ERROR_INVALID_VALUE if any byte
 * is not mapped device memory or mapped pinned memory), as the real driver does.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int sim_classify(const void *p, size_t n) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (a == 0 && n > 0) /* (the real driver refuses NULL too) */
        return SIDE_BAD;
    if (sim_is_device_addr(a))
        return sim_device_range_ok(a, n) ? SIDE_DEVICE : SIDE_BAD;
    return sim_is_pinned(p, n) ? SIDE_PINNED : SIDE_HOST;
}

static bool device_side(int side) { return side == SIDE_DEVICE || side == SIDE_PINNED; }

/* Queue a copy on `stream`. `wait` makes the host wait for it; `stage` copies the
 * source now. */
static CUresult copy_on(CUstream stream, void *dst, const void *src, size_t n, bool wait,
                        bool stage) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_stream_t *s = sim_stream_resolve(c, stream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (n == 0)
        return CUDA_SUCCESS;
    sim_op_t *op = sim_op_get(s, OP_COPY);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.n = n;
    if (stage) {
        op->u.copy.staging = malloc(n);
        if (!op->u.copy.staging) {
            free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(op->u.copy.staging, src, n);
    }
    return wait ? sim_enqueue_wait(s, op) : sim_enqueue(s, op);
}

/* A copy between two devices through the plain copy calls: cuMemAlloc memory the driver
 * stages through the host if need be, but not a VMM mapping whose access list leaves the
 * other device out (PyTorch copies its expandable segments with cudaMemcpyPeerAsync
 * then): vgsim refuses such a copy. A peer copy (`peer`) names the contexts and may
 * always be made. */
static bool devices_reach(const void *dst, const void *src, unsigned peer) {
    if (peer || g_sim.ndevices < 2)
        return true;
    sim_device_t *dd = sim_memory_device((uintptr_t)dst);
    sim_device_t *sd = sim_memory_device((uintptr_t)src);
    return !dd || !sd || dd == sd ||
           (sim_reaches((uintptr_t)dst, sd) && sim_reaches((uintptr_t)src, dd));
}

/* Whether the copy may be made, with what each side is (*ds, *ss). */
static CUresult check_sides(const void *dst, const void *src, size_t n, unsigned how, int *ds,
                            int *ss) {
    *ds = sim_classify(dst, n);
    *ss = sim_classify(src, n);
    if (*ds == SIDE_BAD || *ss == SIDE_BAD)
        return CUDA_ERROR_INVALID_VALUE;
    if (*ds == SIDE_DEVICE && *ss == SIDE_DEVICE &&
        !devices_reach(dst, src, how & SIM_COPY_PEER))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult sim_copy_check(const void *dst, const void *src, size_t n, unsigned how) {
    int ds, ss;
    return check_sides(dst, src, n, how, &ds, &ss);
}

CUresult sim_copy_any(void *dst, const void *src, size_t n, CUstream stream, unsigned how) {
    int ds, ss;
    CUresult r = check_sides(dst, src, n, how, &ds, &ss);
    if (r != CUDA_SUCCESS)
        return r;
    bool dst_dev = ds == SIDE_DEVICE, src_dev = ss == SIDE_DEVICE;
    bool now = how & SIM_COPY_SRC_NOW;
    if (!(how & SIM_COPY_ASYNC)) /* synchronous copies: DtoD does not wait, the rest does */
        return copy_on(stream, dst, src, n, !(dst_dev && src_dev), false);
    if (!src_dev && !dst_dev) /* host to host through the driver: ordered and waited */
        return copy_on(stream, dst, src, n, true, false);
    if (dst_dev && ss == SIDE_HOST) /* pageable source: staged, host may reuse it */
        return copy_on(stream, dst, src, n, false, true);
    if (src_dev && ds == SIDE_HOST) /* pageable destination: the host waits */
        return copy_on(stream, dst, src, n, true, false);
    return copy_on(stream, dst, src, n, false, now);
}

static CUresult check_dev(CUdeviceptr p, size_t n) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return device_side(sim_classify((void *)(uintptr_t)p, n)) ? CUDA_SUCCESS
                                                           : CUDA_ERROR_INVALID_VALUE;
}

#define DEV(p) ((void *)(uintptr_t)(p))

/* The synchronous copies run on the legacy default stream (NULL), their _ptds twins
 * (CUDA_API_PER_THREAD_DEFAULT_STREAM) on the calling thread's default stream. */
static CUresult htod(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream) {
    CUresult r = check_dev(dst, bytes);
    return r != CUDA_SUCCESS ? r : sim_copy_any(DEV(dst), src, bytes, stream, 0);
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    CUresult r = check_dev(src, bytes);
    return r != CUDA_SUCCESS ? r : sim_copy_any(dst, DEV(src), bytes, stream, 0);
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream,
                     bool async) {
    CUresult r = check_dev(dst, bytes);
    if (r == CUDA_SUCCESS)
        r = check_dev(src, bytes);
    return r != CUDA_SUCCESS ? r
                             : sim_copy_any(DEV(dst), DEV(src), bytes, stream,
                                            async ? SIM_COPY_ASYNC : 0);
}

VGSIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return sim_copy_any(DEV(dst), DEV(src), bytes, NULL, 0);
}

VGSIM_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return sim_copy_any(DEV(dst), DEV(src), bytes, CU_STREAM_PER_THREAD, 0);
}

VGSIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    return sim_copy_any(DEV(dst), DEV(src), bytes, stream, SIM_COPY_ASYNC);
}

VGSIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    return htod(dst, src, bytes, NULL);
}

VGSIM_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t bytes) {
    return htod(dst, src, bytes, CU_STREAM_PER_THREAD);
}

VGSIM_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    return dtoh(dst, src, bytes, NULL);
}

VGSIM_API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t bytes) {
    return dtoh(dst, src, bytes, CU_STREAM_PER_THREAD);
}

VGSIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return dtod(dst, src, bytes, NULL, false);
}

VGSIM_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return dtod(dst, src, bytes, CU_STREAM_PER_THREAD, false);
}

VGSIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes,
                                        CUstream stream) {
    CUresult r = check_dev(dst, bytes);
    return r != CUDA_SUCCESS ? r
                             : sim_copy_any(DEV(dst), src, bytes, stream, SIM_COPY_ASYNC);
}

VGSIM_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes,
                                        CUstream stream) {
    CUresult r = check_dev(src, bytes);
    return r != CUDA_SUCCESS ? r
                             : sim_copy_any(dst, DEV(src), bytes, stream, SIM_COPY_ASYNC);
}

VGSIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                        CUstream stream) {
    return dtod(dst, src, bytes, stream, true);
}

/* ---------------------------------------------------------------------------------------
 * Memsets: never make the host wait for device memory.
 * ------------------------------------------------------------------------------------- */

/* Check a memset of `height` rows of `count` elements of `elem` bytes, `pitch` bytes
 * apart, at dst; its side (SIDE_DEVICE or SIDE_PINNED: pinned memory mapped for the
 * device, which the host then waits for), or SIDE_BAD. Every row is checked before one
 * is queued, so a bad memset queues nothing. */
static int memset_side(CUdeviceptr dst, size_t pitch, unsigned elem, size_t count,
                       size_t height) {
    if ((dst % elem) || (height > 1 && pitch % elem) || count > SIZE_MAX / elem)
        return SIDE_BAD;
    if (height > 1 && (pitch < count * elem || pitch > (UINT64_MAX - dst) / (height - 1)))
        return SIDE_BAD; /* (rows that overlap, or run past the end of the address space) */
    int side = SIDE_DEVICE;
    for (size_t y = 0; y < height; y++) {
        int row = sim_classify(DEV(dst + y * pitch), count * elem);
        if (!device_side(row))
            return SIDE_BAD;
        if (row == SIDE_PINNED)
            side = SIDE_PINNED;
    }
    return side;
}

static CUresult memset_on(CUstream stream, CUdeviceptr dst, size_t pitch, uint32_t value,
                          unsigned elem, size_t count, size_t height) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    int side = memset_side(dst, pitch, elem, count, height);
    if (side == SIDE_BAD)
        return CUDA_ERROR_INVALID_VALUE;
    sim_stream_t *s = sim_stream_resolve(c, stream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t y = 0; y < height && count > 0 && r == CUDA_SUCCESS; y++) {
        sim_op_t *op = sim_op_get(s, OP_MEMSET);
        if (!op)
            return CUDA_ERROR_OUT_OF_MEMORY;
        op->u.set.dst = DEV(dst + y * pitch);
        op->u.set.value = value;
        op->u.set.elem = elem;
        op->u.set.count = count;
        r = side == SIDE_PINNED && y + 1 == height ? sim_enqueue_wait(s, op) : sim_enqueue(s, op);
    }
    return r;
}

/* Each memset, its asynchronous form, and their twins for CUDA_API_PER_THREAD_DEFAULT_STREAM
 * (the synchronous one on the calling thread's default stream, the asynchronous one with
 * that stream for NULL). */
#define VGSIM_MEMSET(name, type, elem)                                                      \
    VGSIM_API CUresult name##_v2(CUdeviceptr dst, type value, size_t count) {               \
        return memset_on(NULL, dst, 0, value, elem, count, 1);                              \
    }                                                                                       \
    VGSIM_API CUresult name##_v2_ptds(CUdeviceptr dst, type value, size_t count) {          \
        return memset_on(CU_STREAM_PER_THREAD, dst, 0, value, elem, count, 1);              \
    }                                                                                       \
    VGSIM_API CUresult name##Async(CUdeviceptr dst, type value, size_t count,               \
                                   CUstream stream) {                                       \
        return memset_on(stream, dst, 0, value, elem, count, 1);                            \
    }                                                                                       \
    VGSIM_API CUresult name##Async_ptsz(CUdeviceptr dst, type value, size_t count,          \
                                        CUstream stream) {                                  \
        return memset_on(SIM_PT(stream), dst, 0, value, elem, count, 1);                    \
    }
#define VGSIM_MEMSET_2D(name, type, elem)                                                   \
    VGSIM_API CUresult name##_v2(CUdeviceptr dst, size_t pitch, type value, size_t width,   \
                                 size_t height) {                                           \
        return memset_on(NULL, dst, pitch, value, elem, width, height);                     \
    }                                                                                       \
    VGSIM_API CUresult name##_v2_ptds(CUdeviceptr dst, size_t pitch, type value,            \
                                      size_t width, size_t height) {                        \
        return memset_on(CU_STREAM_PER_THREAD, dst, pitch, value, elem, width, height);     \
    }                                                                                       \
    VGSIM_API CUresult name##Async(CUdeviceptr dst, size_t pitch, type value, size_t width, \
                                   size_t height, CUstream stream) {                        \
        return memset_on(stream, dst, pitch, value, elem, width, height);                   \
    }                                                                                       \
    VGSIM_API CUresult name##Async_ptsz(CUdeviceptr dst, size_t pitch, type value,          \
                                        size_t width, size_t height, CUstream stream) {     \
        return memset_on(SIM_PT(stream), dst, pitch, value, elem, width, height);           \
    }
VGSIM_MEMSET(cuMemsetD8, unsigned char, 1)
VGSIM_MEMSET(cuMemsetD16, unsigned short, 2)
VGSIM_MEMSET(cuMemsetD32, unsigned int, 4)
VGSIM_MEMSET_2D(cuMemsetD2D8, unsigned char, 1)
VGSIM_MEMSET_2D(cuMemsetD2D16, unsigned short, 2)
VGSIM_MEMSET_2D(cuMemsetD2D32, unsigned int, 4)

/* ---------------------------------------------------------------------------------------
 * Stream-ordered free: when the stream reaches it (cuMemAllocAsync is in mempool.c).
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_stream_t *s = sim_stream_resolve(c, stream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    CUdeviceptr base;
    if (cuMemGetAddressRange_v2(&base, NULL, dptr) != CUDA_SUCCESS || base != dptr)
        return CUDA_ERROR_INVALID_VALUE;
    sim_op_t *op = sim_op_get(s, OP_FREE);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.free.ptr = dptr;
    return sim_enqueue(s, op);
}
