/* hooks_memory.c — device memory and pinned host memory (see hooks.h; copies and memsets
 * are in hooks_copy.c).
 *
 * Device allocations come from vramguard's allocator (stream-ordered, guarded in guard
 * mode); a free of memory vramguard does not hold (the driver's own, from a path not
 * hooked) goes to the driver. Pinned host memory is the driver's, counted on its way
 * (diag/pinned.h: by site, under pinned_limit) and followed by the race guard, which
 * wraps asynchronous copies from and to it.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>

#include "base/common.h"
#include "base/options.h"
#include "diag/leaks.h"
#include "diag/order.h"
#include "diag/pinned.h"
#include "check/guard.h"
#include "alloc/heap.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

/* ---------------------------------------------------------------------------------------
 * Device memory
 * ------------------------------------------------------------------------------------- */

VG_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    if (!vgp_ready())
        NEXT(cuMemAlloc_v2, dptr, bytesize);
    if (vgp_sticky())
        return vgp_sticky();
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = NULL;
    vg__guard_sync_call(true);
    vg_status_t st = vg__malloc_synchronous(&p, bytesize, false);
    vg__guard_sync_call(false);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return vgp_alloc_result(st);
}

VG_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                   size_t height, unsigned int elementSize) {
    if (!vgp_ready())
        NEXT(cuMemAllocPitch_v2, dptr, pitch, width, height, elementSize);
    if (vgp_sticky())
        return vgp_sticky();
    if (!dptr || !pitch || width == 0 || height == 0 ||
        (elementSize != 4 && elementSize != 8 && elementSize != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) & ~(size_t)511; /* rows 512-byte aligned, like the driver */
    if (height > SIZE_MAX / p)
        return CUDA_ERROR_INVALID_VALUE;
    void *ptr = NULL;
    vg__guard_sync_call(true);
    vg_status_t st = vg__malloc_synchronous(&ptr, p * height, false);
    vg__guard_sync_call(false);
    *dptr = (CUdeviceptr)(uintptr_t)ptr;
    if (st == VG_OK)
        *pitch = p;
    return vgp_alloc_result(st);
}

/* Managed memory (docs/decisions.md G9): in guard mode it comes from a heap of
 * cuMemAllocManaged segments, so that overruns and uses after free are caught as they are
 * in device memory; the host reaches it as before. Only devices where the host and
 * kernels may touch managed memory at once are served (vramguard's checks run beside the
 * program's host code), and there an allocation first attached to the host is reached
 * as one attached globally. Fast mode, and other devices, keep the driver's. */
VG_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    if (!vgp_ready() || !vg__guard_on() ||
        (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) || !dptr || bytesize == 0)
        NEXT(cuMemAllocManaged, dptr, bytesize, flags);
    if (vgp_sticky())
        return vgp_sticky();
    void *p = NULL;
    vg__guard_sync_call(true);
    vg_status_t st = vg__malloc_synchronous(&p, bytesize, true);
    vg__guard_sync_call(false);
    if (st == VG_ERR_NOT_SUPPORTED)
        NEXT(cuMemAllocManaged, dptr, bytesize, flags);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return vgp_alloc_result(st);
}

/* The driver changes a managed allocation's stream association as a whole ("length must
 * be either zero or the entire allocation's size"): for vramguard's, the segment holding
 * it. Only devices that let the host and kernels touch managed memory at once get such
 * memory, where the association restricts no access. */
VG_API CUresult cuStreamAttachMemAsync(CUstream stream, CUdeviceptr dptr, size_t length,
                                       unsigned int flags) {
    uint64_t base, size, seg;
    if (vgp_ready() && vg__live_range(dptr, &base, &size) &&
        vg__heap_containing_seg(dptr, &seg)) {
        if (dptr != base || (length != 0 && length != size))
            return CUDA_ERROR_INVALID_VALUE;
        dptr = (CUdeviceptr)seg;
        length = 0;
    }
    NEXT(cuStreamAttachMemAsync, stream, dptr, length, flags);
}

VG_API CUresult cuStreamAttachMemAsync_ptsz(CUstream stream, CUdeviceptr dptr, size_t length,
                                            unsigned int flags) {
    return cuStreamAttachMemAsync(VGP_PT(stream), dptr, length, flags);
}

/* A free: vramguard's memory goes back to its allocator (which reports bad frees);
 * anything else goes to the driver, and an error from it is reported as a bad free. A
 * synchronous cuMemFree first waits for the context, as the driver's does: programs count
 * on it (a kernel still writing the freed buffer on one stream would race with its next
 * owner on another; the host may read what earlier async copies wrote). */
static CUresult free_hook(CUdeviceptr dptr, CUstream stream, bool async) {
    if (vgp_sticky())
        return vgp_sticky();
    if (dptr == 0)
        return CUDA_SUCCESS;
    if (vg__is_ours(dptr)) {
        if (async && vg__stream_capturing(stream)) { /* the graph frees it at each replay */
            static atomic_flag said = ATOMIC_FLAG_INIT;
            if (!atomic_flag_test_and_set(&said))
                vg__log("a CUDA graph capture frees %p, allocated before the capture: "
                        "vramguard keeps that memory until the program ends (reported once)",
                        (void *)(uintptr_t)dptr);
            return CUDA_SUCCESS;
        }
        CUresult waited = CUDA_SUCCESS;
        vgp_pool_forget(dptr); /* (before: another thread may get the address next) */
        vg__guard_sync_call(!async);
        vg_status_t st = async ? vg_free((void *)(uintptr_t)dptr, stream)
                               : vg__free_synchronous((void *)(uintptr_t)dptr, &waited);
        vg__guard_sync_call(false);
        if (st != VG_OK && !vg__guard_on()) /* (guard mode reported it in full) */
            vg__log("%s", vg_last_error());
        if (st == VG_OK && waited != CUDA_SUCCESS) /* (as the driver's: an earlier launch's) */
            return waited;
        return st == VG_OK ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    static void *next_sync, *next_async;
    CUresult r = CUDA_ERROR_NOT_INITIALIZED;
    if (async) {
        CUresult (*f)(CUdeviceptr, CUstream) =
            (CUresult(*)(CUdeviceptr, CUstream))vgp_next("cuMemFreeAsync", &next_async);
        if (f)
            r = f(dptr, stream);
    } else {
        CUresult (*f)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))vgp_next("cuMemFree_v2", &next_sync);
        if (f)
            r = f(dptr);
    }
    if (r == CUDA_ERROR_INVALID_VALUE) /* the driver never allocated it either */
        vg_free((void *)(uintptr_t)dptr, stream); /* reports the invalid free */
    return r;
}

VG_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
    if (!vgp_ready())
        NEXT(cuMemFree_v2, dptr);
    return vgp_check(free_hook(dptr, NULL, false), "cuMemFree");
}

VG_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    if (!vgp_ready())
        NEXT(cuMemFreeAsync, dptr, hStream);
    return vgp_check(free_hook(dptr, hStream, true), "cuMemFreeAsync");
}

VG_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    return cuMemFreeAsync(dptr, hStream ? hStream : CU_STREAM_PER_THREAD);
}

VG_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    uint64_t base, size;
    if (vgp_ready() && vg__live_range(dptr, &base, &size)) {
        if (pbase)
            *pbase = (CUdeviceptr)base; /* the allocation, not vramguard's segment */
        if (psize)
            *psize = (size_t)size;
        return CUDA_SUCCESS;
    }
    NEXT(cuMemGetAddressRange_v2, pbase, psize, dptr);
}

/* A pointer's range, asked as an attribute, is the allocation too, as with
 * cuMemGetAddressRange (libraries that cache registrations or export memory key on it),
 * and its pool is the one it was allocated for (hooks_pool.c): true if `a` is such an
 * attribute of a live vramguard allocation, and data is set. */
static bool range_attribute(CUpointer_attribute a, void *data, CUdeviceptr ptr) {
    uint64_t base, size;
    if (a == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE && data && vgp_ready())
        return vgp_pool_attribute(ptr, (CUmemoryPool *)data);
    if ((a != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && a != CU_POINTER_ATTRIBUTE_RANGE_SIZE) ||
        !data || !vgp_ready() || !vg__live_range(ptr, &base, &size))
        return false;
    if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)data = (CUdeviceptr)base;
    else
        *(size_t *)data = (size_t)size;
    return true;
}

VG_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    if (range_attribute(attribute, data, ptr))
        return CUDA_SUCCESS;
    NEXT(cuPointerGetAttribute, data, attribute, ptr);
}

VG_API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attributes,
                                       void **data, CUdeviceptr ptr) {
    static void *next;
    __typeof__(&cuPointerGetAttributes) f =
        (__typeof__(&cuPointerGetAttributes))vgp_next("cuPointerGetAttributes", &next);
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = f(n, attributes, data, ptr);
    for (unsigned i = 0; r == CUDA_SUCCESS && attributes && data && i < n; i++)
        range_attribute(attributes[i], data[i], ptr);
    return r;
}

/* Legacy CUDA IPC exports a whole driver allocation, and the driver refuses memory mapped
 * through the virtual-memory calls: an exported vramguard block would fail, or (from a
 * cuMemAlloc segment) hand the other process the wrong memory. Refused, with the reason. */
VG_API CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    if (vgp_ready() && vg__is_ours(dptr)) {
        static atomic_flag said = ATOMIC_FLAG_INIT;
        if (!atomic_flag_test_and_set(&said))
            vg__log("cuIpcGetMemHandle(%p): memory from vramguard's allocator cannot be "
                    "shared with another process through CUDA IPC; the call fails with "
                    "CUDA_ERROR_NOT_SUPPORTED (run the program without vramguard to share "
                    "it; reported once)", (void *)(uintptr_t)dptr);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    NEXT(cuIpcGetMemHandle, handle, dptr);
}

/* With limit= the program sees the smaller device it asked for; memory vramguard holds
 * but has not handed out counts as free, since the program's allocations can use it. */
VG_API CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
    static void *next;
    CUresult (*f)(size_t *, size_t *) = (CUresult(*)(size_t *, size_t *))vgp_next("cuMemGetInfo_v2", &next);
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = f(free_b, total_b);
    if (r != CUDA_SUCCESS || !free_b || !total_b || !vgp_ready())
        return r;
    vg_stats_t s = {.size = sizeof s};
    if (vg_get_stats(-1, &s) != VG_OK)
        return r;
    uint64_t held = (uint64_t)s.reserved_bytes[0].current, used = (uint64_t)s.allocated_bytes[0].current;
    uint64_t fr = *free_b + (held > used ? held - used : 0);
    if (s.limit && s.limit < *total_b) {
        *total_b = (size_t)s.limit;
        fr = s.limit > used ? VG_MIN(fr, s.limit - used) : 0;
    }
    *free_b = (size_t)VG_MIN(fr, (uint64_t)*total_b);
    return r;
}

/* ---------------------------------------------------------------------------------------
 * Pinned host memory: counted by site (diag/pinned.h), capped by pinned_limit, followed by
 * the race guard
 * ------------------------------------------------------------------------------------- */

/* After a pinning call made at t0 (its result r): recorded, or its failure explained.
 * For leaks=auto, the host cache that asked for it, from the C stack (a site of Python
 * lines does not show it: diag/leaks.h). */
static CUresult pinned(CUresult r, void *p, size_t n, uint32_t site, bool registered,
                       const char *call, uint64_t t0) {
    uint64_t took = vg__now_ns() - t0;
    bool auto_leaks = vg__opt.leaks == VG_LEAKS_AUTO && vg__leaks_wanted();
    if (r == CUDA_SUCCESS)
        vg__pinned_added(p, n, site, registered, auto_leaks ? vg__host_cache_here() : NULL, took);
    else
        vg__pinned_failed(n, site, call, (int)r);
    return r;
}

/* A pinning hook's body: the program's site (taken here, in the hook), pinned_limit, the
 * driver's call timed, then the count (pinned()). `ptr`: the range's address, read once
 * the driver answered. */
#define PINNING_HOOK(symbol, call, n, ptr, registered, ...)                                 \
    do {                                                                                    \
        if (!vgp_ready())                                                                   \
            NEXT(symbol, __VA_ARGS__);                                                      \
        uint32_t site_ = vgp_call_site();                                                   \
        if (!vg__pinned_admit((n), site_, (call)))                                          \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                \
        uint64_t t0_ = vg__now_ns();                                                        \
        CUresult r_;                                                                        \
        CALL_NEXT(r_, symbol, __VA_ARGS__);                                                 \
        return pinned(r_, (ptr), (n), site_, (registered), (call), t0_);                    \
    } while (0)

VG_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
    PINNING_HOOK(cuMemAllocHost_v2, "cuMemAllocHost", bytesize, pp ? *pp : NULL, false, pp,
                 bytesize);
}

VG_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
    PINNING_HOOK(cuMemHostAlloc, "cuMemHostAlloc", bytesize, pp ? *pp : NULL, false, pp,
                 bytesize, Flags);
}

VG_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
    PINNING_HOOK(cuMemHostRegister_v2, "cuMemHostRegister", bytesize, p, true, p, bytesize,
                 Flags);
}

/* Where site s was, as a user reads it (its innermost frame's text; a compiler may give
 * one line several call instructions), as a hash. */
static uint64_t place_key(uint32_t id) {
    vg_site_t *s = vg__site(id);
    const char *t = s && s->nframes ? vg__symbolize(s->frames[0]) : "";
    uint64_t h = 1469598103934665603ull;
    for (; t && *t; t++)
        h = (h ^ (unsigned char)*t) * 1099511628211ull;
    return h;
}

/* A free or unregistration of pinned range p (its record: rec), which the driver made
 * wait for an asynchronous copy still queued on it (docs/decisions.md G14): in verbose
 * mode, a note naming the call, where it was made, and the copy it waited for, once per
 * pair of places. */
static void note_hidden_sync(const char *call, const vg_pinned_rec_t *rec, uint32_t site,
                             const vgp_copy_t *copy, uint64_t waited_ns) {
    if (!vg__report_first_time(0x5e11ull << 48 ^ place_key(site) ^ place_key(copy->site) << 1))
        return;
    vg_buf_t b = {0};
    char sz[32];
    vg__buf_printf(&b, "note: %s(%p) waited %.1f ms for %s of %s on stream %p, still queued "
                       "on the buffer: the driver completes a pinned buffer's copies before "
                       "it lets the buffer go, a synchronisation the program may not expect "
                       "(said once for these two places)",
                   call, (void *)rec->base, (double)waited_ns / 1e6, copy->api,
                   vg__fmt_bytes(sz, copy->bytes), (void *)copy->stream);
    const char *what[2] = {call, "the copy"};
    uint32_t sites[2] = {site, copy->site};
    for (int k = 0; k < 2; k++) {
        vg_site_t *s = vg__site(sites[k]);
        if (!s || !s->nframes)
            continue;
        uint32_t shown = vg__site_symbolize(s);
        vg__buf_printf(&b, "\n  %s was made at:", what[k]);
        for (uint32_t i = 0; i < shown && i < 6; i++)
            vg__buf_printf(&b, "\n    #%u %s", i, vg__symbolize(s->frames[i]));
    }
    if (b.data)
        vg__log("%s", b.data);
    vg__buf_free(&b);
}

/* cuMemFreeHost and cuMemHostUnregister: the record goes before the driver's call (after
 * it, another thread may be given the same address), then the driver frees. */
static CUresult unpin(CUresult (*next)(void *), void *p, bool registered, const char *call,
                      uint32_t site) {
    vg_pinned_rec_t rec;
    bool known = vg__pinned_remove(p, registered, &rec);
    vgp_copy_t copy;
    bool queued = known && vgp_race_unpinned(p, rec.size, &copy);
    uint64_t t0 = vg__now_ns();
    CUresult r = next ? next(p) : CUDA_ERROR_NOT_INITIALIZED;
    uint64_t took = vg__now_ns() - t0;
    if (known && r != CUDA_SUCCESS) /* (the driver kept it: so does the count) */
        vg__pinned_restore(&rec);
    else if (known)
        vg__pinned_free_time(took);
    if (queued && r == CUDA_SUCCESS && vg__opt.verbose)
        note_hidden_sync(call, &rec, site, &copy, took);
    return r;
}

/* An unpinning hook's body: its site (in verbose mode, for the note; taken here, in the
 * hook), then unpin(). */
#define UNPINNING_HOOK(symbol, registered, p)                                               \
    do {                                                                                    \
        if (!vgp_ready())                                                                   \
            NEXT(symbol, p);                                                                \
        static void *next_;                                                                 \
        uint32_t site_ = vg__opt.verbose ? vgp_call_site() : 0;                             \
        return unpin((CUresult(*)(void *))vgp_next(#symbol, &next_), (p), (registered),     \
                     #symbol, site_);                                                       \
    } while (0)

VG_API CUresult cuMemFreeHost(void *p) { UNPINNING_HOOK(cuMemFreeHost, false, p); }

VG_API CUresult cuMemHostUnregister(void *p) { UNPINNING_HOOK(cuMemHostUnregister, true, p); }
