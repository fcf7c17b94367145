/* context.c — the context a heap's driver calls run in, and the CUDA graph captures
 * that change what those calls may do: whether one is running, and which graph pool a
 * request made during one goes to (graphpool.c, docs/decisions.md A7); and how a heap
 * learns that a stream's frees have completed (its events).
 */
#define _GNU_SOURCE
#include "heap.h"

#include <stdatomic.h>
#include <time.h>

#include "base/common.h"

/* ---------------------------------------------------------------------------------------
 * Streams: what a heap knows of their completion
 * ------------------------------------------------------------------------------------- */

/* Learn whether s's frees have completed. Without `wait`: query its outstanding event,
 * and record one if frees remain unconfirmed (then query it: an idle stream's completes
 * at once). With `wait`: wait for them. Returns whether some epoch completed. */
bool vg__stream_refresh(vg_stream_t *s, bool wait) {
    bool progressed = false;
    if (s->forgotten)
        return false;
    if (s->event_pending) {
        CUresult r = wait ? vg__cuEventSynchronize(s->event) : vg__cuEventQuery(s->event);
        if (r == CUDA_SUCCESS) {
            if (s->event_epoch > s->done)
                s->done = s->event_epoch;
            s->event_pending = false;
            progressed = true;
        } else if (r != CUDA_ERROR_NOT_READY) {
            s->event_pending = false; /* the context is failing: nothing completes */
        }
    }
    if (s->last_free_epoch <= s->done || s->event_pending)
        return progressed;
    if (s->handle == CU_STREAM_PER_THREAD && s->key != vg__stream_key(CU_STREAM_PER_THREAD))
        return progressed; /* another thread's per-thread stream: only its thread records */
    if (vg__stream_capturing(s->handle))
        return progressed; /* its frees complete after the capture (an event now would be
                              the graph's, and could not be queried) */
    if (!s->event && vg__cuEventCreate(&s->event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        s->event = NULL;
        return progressed;
    }
    s->event_epoch = s->epoch;
    if (vg__cuEventRecord(s->event, s->handle) != CUDA_SUCCESS)
        return progressed;
    s->epoch++;
    s->event_pending = true;
    if (wait ? vg__cuEventSynchronize(s->event) == CUDA_SUCCESS
             : vg__cuEventQuery(s->event) == CUDA_SUCCESS) {
        s->done = s->event_epoch;
        s->event_pending = false;
        progressed = true;
    }
    return progressed;
}

bool vg__stream_refresh_within(vg_stream_t *s, uint64_t max_ns) {
    bool progressed = vg__stream_refresh(s, false);
    struct timespec ts = {0, 20000};
    for (uint64_t t = 0; s->last_free_epoch > s->done && s->event_pending && t < max_ns;
         t += 20000) { /* (until every free so far is known complete) */
        nanosleep(&ts, NULL);
        progressed |= vg__stream_refresh(s, false);
    }
    return progressed;
}

/* ---------------------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------------------- */

/* While a CUDA graph capture routes requests into a pool, vramguard's own driver calls
 * (mapping pages, events) run in relaxed capture mode, as PyTorch's allocator runs its
 * cudaMalloc: a global-mode capture would otherwise fail on them (conformance
 * cumemalloc_during_a_global_capture_needs_relaxed_mode). Outermost enter/leave only. */
_Atomic int vg__gpool_routes_open;
static __thread int t_enter_depth;
static __thread bool t_relaxed;
static __thread CUstreamCaptureMode t_mode_before;

static void relax_enter(void) {
    if (t_enter_depth++ > 0 || !atomic_load_explicit(&vg__gpool_routes_open, memory_order_relaxed))
        return;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    /* (These bookkeeping calls go straight to the driver, outside fault injection.) */
    if (vg__drv_has(cuThreadExchangeStreamCaptureMode) &&
        vg__drv.cuThreadExchangeStreamCaptureMode(&m) == CUDA_SUCCESS) {
        t_mode_before = m;
        t_relaxed = true;
    }
}

static void relax_leave(void) {
    if (--t_enter_depth > 0 || !t_relaxed)
        return;
    CUstreamCaptureMode m = t_mode_before;
    vg__drv.cuThreadExchangeStreamCaptureMode(&m);
    t_relaxed = false;
}

/* Make the heap's context current for driver calls; returns whether it pushed. */
bool vg__heap_ctx_enter(vg_heap_t *h) {
    relax_enter();
    CUcontext cur = NULL;
    if (vg__cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == h->ctx)
        return false;
    return vg__cuCtxPushCurrent(h->ctx) == CUDA_SUCCESS;
}

void vg__heap_ctx_leave(bool pushed) {
    if (pushed) {
        CUcontext popped;
        vg__cuCtxPopCurrent(&popped);
    }
    relax_leave();
}

/* Is the stream being captured into a graph? Work queued on it now would become part of
 * the program's graph, and waiting for it would break the capture. Asked of the driver
 * only once a capture was seen to begin (the interposer's hook, a graph pool), so a
 * program that never captures pays nothing. */
static _Atomic bool g_captures_seen;
static _Atomic int g_captures_running; /* begun and not ended, as the interposer saw them */

void vg__captures_seen_set(void) {
    if (!atomic_load_explicit(&g_captures_seen, memory_order_relaxed))
        atomic_store(&g_captures_seen, true);
}

void vg__capture_began(void) {
    vg__captures_seen_set();
    atomic_fetch_add(&g_captures_running, 1);
}

void vg__capture_ended(void) {
    int n = atomic_load(&g_captures_running);
    while (n > 0 && !atomic_compare_exchange_weak(&g_captures_running, &n, n - 1)) {
    }
}

bool vg__stream_capturing(CUstream stream) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!atomic_load_explicit(&g_captures_seen, memory_order_relaxed) ||
        !vg__drv_has(cuStreamIsCapturing) || stream == NULL || stream == CU_STREAM_LEGACY)
        return false;
    return vg__drv.cuStreamIsCapturing(stream, &st) == CUDA_SUCCESS &&
           st != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool vg__heap_capturing(vg_heap_t *h) {
    if (h->nroutes > 0 || atomic_load_explicit(&g_captures_running, memory_order_relaxed) > 0)
        return true;
    for (vg_stream_t *s = h->streams; s; s = s->next)
        if (!s->forgotten && vg__stream_capturing(s->handle))
            return true;
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Where a request made during a capture goes
 * ------------------------------------------------------------------------------------- */

vg_gpool_t *vg__gpool_route(vg_heap_t *h, CUstream stream) {
    for (int i = 0; i < h->nroutes; i++) {
        const vg_gpool_route_t *r = &h->routes[i];
        if (r->filter ? r->filter((void *)stream, r->arg) != 0 : vg__stream_capturing(stream))
            return r->pool;
    }
    return NULL;
}
