/* hooks_exec.c — kernel launches, synchronisation and streams (see hooks.h).
 *
 * Launches are recorded per stream, by name, with their pointer arguments and the host
 * backtrace (for "kernels since the last clean check" and for S9); guard work waiting on
 * the stream is launched first, so the poison of earlier frees precedes the kernel.
 * Synchronisations are check points (check_sync), and tell the allocator that streams
 * completed. A context-killing error from any of them is attributed (S9).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "check/access.h"
#include "base/common.h"
#include "check/guard.h"
#include "check/memcheck.h"
#include "alloc/heap.h"
#include "check/nvtx.h"
#include "check/tensormaps.h"
#include "base/options.h"
#include "diag/order.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

#define NEXT_FN(symbol)                                                                     \
    ({                                                                                      \
        static void *next_;                                                                 \
        (__typeof__(&symbol))vgp_next(#symbol, &next_);                                     \
    })

/* ---------------------------------------------------------------------------------------
 * What is known about a kernel: its name, and which words of its parameters may be device
 * pointers: every 8-byte parameter, then the 8-byte words of larger ones (PyTorch's
 * kernels get their tensors' data pointers in a struct, at::detail::Array<char *, N>),
 * up to VG_LAUNCH_PTRS in all. A small open-addressing cache keyed by CUfunction
 * (functions live as long as their module, and the set a program launches is small).
 * The CUDA runtime (12+) launches a library's CUkernel cast to CUfunction, which the
 * cuFunc* queries refuse (PyTorch's kernels were "(unnamed kernel)" with no pointer
 * arguments on the H100, 2026-11-24): then the cuKernel* queries are asked.
 * ------------------------------------------------------------------------------------- */

#define FUNCS 1024
#define STRUCT_MAX 512 /* larger parameters are not scanned */
#define BIG_PARAMS 8   /* parameters that may hold a tensor map (128 bytes or more) */
typedef struct func_info {
    CUfunction f;
    const char *name;
    int nptr, nbig;
    uint32_t params_size;            /* the parameter buffer's size (0: unknown) */
    uint8_t index[VG_LAUNCH_PTRS];   /* the parameter each word is in, */
    uint16_t byte[VG_LAUNCH_PTRS];   /* and where in it */
    uint8_t big[BIG_PARAMS];         /* the large parameters, */
    uint16_t big_offset[BIG_PARAMS]; /* where each lies in the parameter buffer, */
    uint16_t big_size[BIG_PARAMS];   /* and its size */
} func_info_t;

static func_info_t g_funcs[FUNCS];
static pthread_mutex_t g_funcs_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_word(func_info_t *out, size_t index, size_t byte) {
    out->index[out->nptr] = (uint8_t)index;
    out->byte[out->nptr] = (uint16_t)byte;
    out->nptr++;
}

/* Parameter `index`'s place and size, from the cuFunc* or the cuKernel* query; false past
 * the last. */
static bool param_info(CUfunction f, bool kernel, size_t index, size_t *off, size_t *size) {
    if (kernel)
        return vg__drv_has(cuKernelGetParamInfo) &&
               vg__cuKernelGetParamInfo((CUkernel)(void *)f, index, off, size) == CUDA_SUCCESS;
    return vg__drv_has(cuFuncGetParamInfo) &&
           vg__cuFuncGetParamInfo(f, index, off, size) == CUDA_SUCCESS;
}

static void describe_func(CUfunction f, func_info_t *out) {
    out->f = f;
    out->name = "(unnamed kernel)";
    out->nptr = 0;
    const char *n = NULL;
    bool kernel = false; /* a CUkernel cast to CUfunction */
    if (vg__drv_has(cuFuncGetName) && vg__cuFuncGetName(&n, f) == CUDA_SUCCESS && n) {
        out->name = vg__kernel_name(n); /* (the driver's text, or vramguard's copy) */
    } else if (vg__drv_has(cuKernelGetName) &&
               vg__cuKernelGetName(&n, (CUkernel)(void *)f) == CUDA_SUCCESS && n) {
        out->name = vg__kernel_name(n);
        kernel = true;
    } else {
        /* no name (a driver before 12.3): which query knows the parameters? */
        size_t off, size;
        kernel = !param_info(f, false, 0, &off, &size) && param_info(f, true, 0, &off, &size);
    }
    /* The parameters are counted by asking until the driver refuses an index. Under
     * compute-sanitizer each refusal is reported as an API error of the program's, so
     * there the arguments are not read (the tool checks every access itself: G12). */
    size_t sizes[256], offsets[256], np = 0;
    while (np < 256 && !vg__nvtx_attached() &&
           param_info(f, kernel, np, &offsets[np], &sizes[np]))
        np++;
    out->nbig = 0;
    out->params_size = 0;
    for (size_t i = 0; i < np; i++)
        if (offsets[i] + sizes[i] > out->params_size && offsets[i] + sizes[i] <= UINT32_MAX)
            out->params_size = (uint32_t)(offsets[i] + sizes[i]);
    for (size_t i = 0; i < np && out->nbig < BIG_PARAMS; i++)
        if (sizes[i] >= sizeof(CUtensorMap) && sizes[i] <= UINT16_MAX &&
            offsets[i] <= UINT16_MAX) {
            out->big[out->nbig] = (uint8_t)i;
            out->big_offset[out->nbig] = (uint16_t)offsets[i];
            out->big_size[out->nbig++] = (uint16_t)sizes[i];
        }
    for (size_t i = 0; i < np && out->nptr < VG_LAUNCH_PTRS; i++)
        if (sizes[i] == 8)
            add_word(out, i, 0);
    for (size_t i = 0; i < np && out->nptr < VG_LAUNCH_PTRS; i++)
        if (sizes[i] > 8 && sizes[i] <= STRUCT_MAX) /* (the words at 8-byte offsets in it) */
            for (size_t b = 0; b + 8 <= sizes[i] && out->nptr < VG_LAUNCH_PTRS; b += 8)
                add_word(out, i, b);
}

static func_info_t lookup_func(CUfunction f) {
    size_t h = ((uintptr_t)f >> 4) & (FUNCS - 1);
    func_info_t info;
    pthread_mutex_lock(&g_funcs_lock);
    for (size_t k = 0; k < 8; k++, h = (h + 1) & (FUNCS - 1)) {
        if (g_funcs[h].f == f) {
            info = g_funcs[h];
            pthread_mutex_unlock(&g_funcs_lock);
            return info;
        }
        if (!g_funcs[h].f)
            break;
    }
    pthread_mutex_unlock(&g_funcs_lock);
    describe_func(f, &info); /* outside the lock: it calls the driver */
    pthread_mutex_lock(&g_funcs_lock);
    g_funcs[h] = info; /* (a full probe window just replaces an entry) */
    pthread_mutex_unlock(&g_funcs_lock);
    return info;
}

/* ---------------------------------------------------------------------------------------
 * Launches
 * ------------------------------------------------------------------------------------- */

/* A launch's pointer words, kept from before the driver's launch to after it. */
typedef struct launch_args {
    const char *name;
    CUstream stream;
    uint32_t site;
    int n;
    uint64_t ptrs[VG_LAUNCH_PTRS];
    uint16_t where[VG_LAUNCH_PTRS];
    char captured_name[200];
} launch_args_t;

/* initcheck: the regions of the tensor maps among the launch's parameters count as
 * written before it runs (check/tensormaps.h). Parameters come from kernelParams, or
 * packed in an `extra` buffer. */
static void tensor_maps(const func_info_t *info, void **params, void **extra, CUstream stream) {
    if (!vg__tensormaps_any())
        return;
    for (int i = 0; params && i < info->nbig; i++)
        vg__tensormaps_scan(params[info->big[i]], info->big_size[i], info->big_offset[i],
                            stream);
    const void *buffer = NULL;
    size_t size = 0;
    for (size_t i = 0; !params && extra && i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buffer = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
            size = *(const size_t *)extra[i + 1];
    }
    if (info->params_size && size > info->params_size) /* (no further than the kernel's) */
        size = info->params_size;
    vg__tensormaps_scan(buffer, size, 0, stream);
}

/* What every launch does before it reaches the driver: note the kernel, its pointer
 * arguments and where it was launched, then launch the guard work waiting on its stream
 * (and initcheck's marks of what its tensor maps write). */
__attribute__((noinline)) static void before_launch(CUfunction f, CUstream stream,
                                                   void **params, void **extra,
                                                   launch_args_t *a) {
    func_info_t info = lookup_func(f);
    int n = 0;
    for (int i = 0; params && i < info.nptr; i++) { /* kernelParams: a pointer per param */
        memcpy(&a->ptrs[n], (const char *)params[info.index[i]] + info.byte[i],
               sizeof a->ptrs[0]);
        if (vg__launch_word_may_point(a->ptrs[n])) /* (not two small integers) */
            a->where[n++] = VG_ARG_WHERE(info.index[i], info.byte[i]);
    }
    a->n = n;
    a->name = info.name;
    a->stream = stream;
    bool captured = vg__stream_capturing(stream);
    if (captured) { /* it runs at each launch of the graph (A7) */
        snprintf(a->captured_name, sizeof a->captured_name, "%s (captured into a CUDA graph)",
                 info.name);
        a->name = a->captured_name;
    }
    a->site = vg__opt.stack_depth ? vg__site_here(2) : 0;
    vg__launch_note_args(a->name, stream, a->site, a->ptrs, a->where, n, captured);
    vg__guard_flush_stream(stream);
    tensor_maps(&info, params, extra, stream);
    vg__memcheck_take_checked(); /* (a decision of a launch not made through here: gone) */
}

/* ... and after it: G11's check of the pointers to freed memory, unless memcheck mode's
 * device check took the launch (it sees which of them the kernel uses). */
static CUresult after_launch(CUresult r, const launch_args_t *a, const char *call) {
    if (vg__memcheck_take_checked() || !vg__guard_on())
        return vgp_check(r, call);
    vg__access_check_args(a->name, a->stream, a->site, a->ptrs, a->where, a->n);
    return vgp_check(r, call);
}

VG_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int shmem, CUstream stream, void **params,
                               void **extra) {
    __typeof__(&cuLaunchKernel) real = NEXT_FN(cuLaunchKernel);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
    launch_args_t a;
    before_launch(f, stream, params, extra, &a);
    return after_launch(real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra), &a,
                        "cuLaunchKernel");
}

VG_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                    unsigned int gz, unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int shmem, CUstream stream,
                                    void **params, void **extra) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream ? stream : CU_STREAM_PER_THREAD,
                          params, extra);
}

/* CUDA 12's launch with a configuration struct: cudaLaunchKernelEx, and the cluster
 * launches of Hopper kernels (CUTLASS, cuBLAS, FlashAttention 3). */
VG_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                 void **extra) {
    __typeof__(&cuLaunchKernelEx) real = NEXT_FN(cuLaunchKernelEx);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready() || !config)
        return real(config, f, params, extra);
    launch_args_t a;
    before_launch(f, config->hStream, params, extra, &a);
    return after_launch(real(config, f, params, extra), &a, "cuLaunchKernelEx");
}

VG_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                      void **params, void **extra) {
    if (!config || config->hStream)
        return cuLaunchKernelEx(config, f, params, extra);
    CUlaunchConfig c = *config;
    c.hStream = CU_STREAM_PER_THREAD;
    return cuLaunchKernelEx(&c, f, params, extra);
}

/* A cooperative launch (grid-wide synchronisation: cudaLaunchCooperativeKernel). */
VG_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                          unsigned int gz, unsigned int bx, unsigned int by,
                                          unsigned int bz, unsigned int shmem, CUstream stream,
                                          void **params) {
    __typeof__(&cuLaunchCooperativeKernel) real = NEXT_FN(cuLaunchCooperativeKernel);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return real(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
    launch_args_t a;
    before_launch(f, stream, params, NULL, &a);
    return after_launch(real(f, gx, gy, gz, bx, by, bz, shmem, stream, params), &a,
                        "cuLaunchCooperativeKernel");
}

VG_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                               unsigned int gz, unsigned int bx,
                                               unsigned int by, unsigned int bz,
                                               unsigned int shmem, CUstream stream,
                                               void **params) {
    return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem,
                                     stream ? stream : CU_STREAM_PER_THREAD, params);
}

/* ---------------------------------------------------------------------------------------
 * Synchronisation
 * ------------------------------------------------------------------------------------- */

VG_API CUresult cuStreamSynchronize(CUstream stream) {
    __typeof__(&cuStreamSynchronize) real = NEXT_FN(cuStreamSynchronize);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return real(stream);
    vg__guard_flush_stream(stream);
    vg_sync_t t;
    vg__sync_begin(&t, false, NULL, stream);
    CUresult r = real(stream);
    vg__sync_end(&t, r == CUDA_SUCCESS);
    return vgp_check(r, "cuStreamSynchronize");
}

VG_API CUresult cuStreamSynchronize_ptsz(CUstream stream) {
    return cuStreamSynchronize(stream ? stream : CU_STREAM_PER_THREAD);
}

/* A context synchronisation, by either ABI version: the guard work waiting on any stream
 * goes first (the legacy stream flushes all), and a success completes ctx's streams. */
static CUresult ctx_sync(CUresult (*real_v1)(void), CUresult (*real_v2)(CUcontext),
                         CUcontext ctx) {
    if (!vgp_ready())
        return real_v1 ? real_v1() : real_v2(ctx);
    vg__guard_flush_stream(NULL);
    vg_sync_t t;
    vg__sync_begin(&t, true, ctx, NULL);
    CUresult r = real_v1 ? real_v1() : real_v2(ctx);
    vg__sync_end(&t, r == CUDA_SUCCESS);
    return vgp_check(r, "cuCtxSynchronize");
}

VG_API CUresult cuCtxSynchronize(void) {
    __typeof__(&cuCtxSynchronize) real = NEXT_FN(cuCtxSynchronize);
    return real ? ctx_sync(real, NULL, NULL) : CUDA_ERROR_NOT_INITIALIZED;
}

/* CUDA 13's cuCtxSynchronize, what the runtime's cudaDeviceSynchronize calls: the driver
 * answers cuGetProcAddress("cuCtxSynchronize", 13000) with it. */
VG_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    __typeof__(&cuCtxSynchronize_v2) real = NEXT_FN(cuCtxSynchronize_v2);
    /* (a driver before CUDA 13 has no such function) */
    return real ? ctx_sync(NULL, real, ctx) : CUDA_ERROR_NOT_FOUND;
}

VG_API CUresult cuEventSynchronize(CUevent event) {
    __typeof__(&cuEventSynchronize) real = NEXT_FN(cuEventSynchronize);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(event);
    if (!vgp_ready())
        return r;
    if (r == CUDA_SUCCESS)
        vg__order_event_done(event);
    return vgp_check(r, "cuEventSynchronize");
}

/* Queries that say "complete" order the host after the work, as a synchronisation does
 * (a program may poll instead of waiting): for guard mode's check of frees (G7). */
/* memcheck mode starts vramguard at cuInit, before the program loads any module: the
 * Compute Sanitizer API patches only modules loaded after its subscriber (docs/memcheck.md).
 * Other modes start at the first call they need. */
VG_API CUresult cuInit(unsigned int flags) {
    __typeof__(&cuInit) real = NEXT_FN(cuInit);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(flags);
    const char *opts = getenv("VRAMGUARD_OPTIONS");
    if (r == CUDA_SUCCESS && opts && strstr(opts, "mode=memcheck"))
        vgp_ready();
    return r;
}

VG_API CUresult cuStreamQuery(CUstream stream) {
    __typeof__(&cuStreamQuery) real = NEXT_FN(cuStreamQuery);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(stream);
    if (r == CUDA_SUCCESS && vgp_ready())
        vg__order_stream_done(stream);
    return r;
}

VG_API CUresult cuStreamQuery_ptsz(CUstream stream) {
    return cuStreamQuery(stream ? stream : CU_STREAM_PER_THREAD);
}

VG_API CUresult cuEventQuery(CUevent event) {
    __typeof__(&cuEventQuery) real = NEXT_FN(cuEventQuery);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(event);
    if (r == CUDA_SUCCESS && vgp_ready())
        vg__order_event_done(event);
    return r;
}

VG_API CUresult cuStreamDestroy_v2(CUstream stream) {
    __typeof__(&cuStreamDestroy_v2) real = NEXT_FN(cuStreamDestroy_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgp_ready()) {
        vg__guard_flush_stream(stream);
        vg_forget_stream(stream); /* its handle may be reused by a new stream */
    }
    return real(stream);
}

/* ---------------------------------------------------------------------------------------
 * Other ordering points: whatever enqueues work on a stream, or captures its order for
 * another stream, first launches the guard work waiting there (docs/decisions.md G3).
 * ------------------------------------------------------------------------------------- */

/* An event records what its stream has queued so far; a stream that waits on it comes
 * after that (G7). Captured records and waits are graph edges, not tracked. */
static void event_recorded(CUresult r, CUevent event, CUstream stream) {
    if (r == CUDA_SUCCESS && !vg__stream_capturing(stream))
        vg__order_event_record(event, stream);
}

VG_API CUresult cuEventRecord(CUevent event, CUstream stream) {
    __typeof__(&cuEventRecord) real = NEXT_FN(cuEventRecord);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return real(event, stream);
    vg__guard_flush_stream(stream);
    CUresult r = real(event, stream);
    event_recorded(r, event, stream);
    return r;
}

VG_API CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) {
    return cuEventRecord(event, stream ? stream : CU_STREAM_PER_THREAD);
}

VG_API CUresult cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned int flags) {
    __typeof__(&cuEventRecordWithFlags) real = NEXT_FN(cuEventRecordWithFlags);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return real(event, stream, flags);
    vg__guard_flush_stream(stream);
    CUresult r = real(event, stream, flags);
    event_recorded(r, event, stream);
    return r;
}

VG_API CUresult cuEventRecordWithFlags_ptsz(CUevent event, CUstream stream,
                                            unsigned int flags) {
    return cuEventRecordWithFlags(event, stream ? stream : CU_STREAM_PER_THREAD, flags);
}

VG_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
    __typeof__(&cuStreamWaitEvent) real = NEXT_FN(cuStreamWaitEvent);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(stream, event, flags);
    if (r == CUDA_SUCCESS && vgp_ready() && !vg__stream_capturing(stream))
        vg__order_stream_wait(stream, event);
    return r;
}

VG_API CUresult cuStreamWaitEvent_ptsz(CUstream stream, CUevent event, unsigned int flags) {
    return cuStreamWaitEvent(stream ? stream : CU_STREAM_PER_THREAD, event, flags);
}

VG_API CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data) {
    __typeof__(&cuLaunchHostFunc) real = NEXT_FN(cuLaunchHostFunc);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgp_ready())
        vg__guard_flush_stream(stream);
    return real(stream, fn, data);
}

VG_API CUresult cuLaunchHostFunc_ptsz(CUstream stream, CUhostFn fn, void *data) {
    return cuLaunchHostFunc(stream ? stream : CU_STREAM_PER_THREAD, fn, data);
}

/* A context the program destroys: guard mode's final check of its allocations runs now,
 * while the context can still run it; afterwards vramguard launches nothing there. Its
 * allocations the program did not free are reported as leaks at exit. */
VG_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
    __typeof__(&cuCtxDestroy_v2) real = NEXT_FN(cuCtxDestroy_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgp_ready())
        vg__context_destroying(ctx);
    return real(ctx);
}

/* cudaDeviceReset: the primary context's heap goes, as with cuCtxDestroy. */
VG_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    __typeof__(&cuDevicePrimaryCtxReset_v2) real = NEXT_FN(cuDevicePrimaryCtxReset_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgp_ready())
        vg__primary_resetting(dev);
    return real(dev);
}

/* A CUDA graph capture begins: from now on vramguard asks whether a stream is being
 * captured before it queues guard work on it or waits for it (docs/decisions.md A7), and
 * the guard work already waiting on this stream runs first, outside the graph. */
VG_API CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
    __typeof__(&cuStreamBeginCapture_v2) real = NEXT_FN(cuStreamBeginCapture_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgp_ready())
        vg__guard_flush_stream(stream);
    CUresult r = real(stream, mode);
    if (r == CUDA_SUCCESS)
        vg__capture_began();
    return r;
}

VG_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
    return cuStreamBeginCapture_v2(stream ? stream : CU_STREAM_PER_THREAD, mode);
}

/* A CUDA graph runs the kernels captured into it: a launch like any other for the reports
 * (the kernels themselves were noted when captured, with their arguments), and an
 * ordering point for the guard work waiting on the stream (docs/decisions.md G3). */
VG_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    __typeof__(&cuGraphLaunch) real = NEXT_FN(cuGraphLaunch);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready())
        return real(exec, stream);
    char name[96];
    snprintf(name, sizeof name, "CUDA graph %p (cuGraphLaunch)", (void *)exec);
    vg__launch_note_args(name, stream, vg__opt.stack_depth ? vg__site_here(1) : 0, NULL, NULL, 0,
                         -1);
    vg__guard_flush_stream(stream);
    return vgp_check(real(exec, stream), "cuGraphLaunch");
}

VG_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
    return cuGraphLaunch(exec, stream ? stream : CU_STREAM_PER_THREAD);
}

VG_API CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
    __typeof__(&cuStreamEndCapture) real = NEXT_FN(cuStreamEndCapture);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    bool was = vg__stream_capturing(stream);
    CUresult r = real(stream, graph);
    if (was && !vg__stream_capturing(stream)) /* (a failed end may leave it capturing) */
        vg__capture_ended();
    return r;
}

VG_API CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph *graph) {
    return cuStreamEndCapture(stream ? stream : CU_STREAM_PER_THREAD, graph);
}
