/* guard_check.c — guard mode's check points (see guard.c for the layout of an allocation
 * and the life of a block, guard_log.c for the launches and the error log).
 *
 * A check point (vg_check(), a synchronisation vramguard sees, exit) is one launch of the
 * checker kernel over every live allocation's redzones, every quarantined block and the
 * redzones of CUDA graphs' allocations, on the guard's own stream after the work queued
 * on the program's streams; then the host waits for it and reads the log
 * (vg__guard_poll).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "guard_impl.h"
#include "nvtx.h"
#include "base/options.h"
#include "diag/order.h"
#include "diag/report.h"
#include "diag/sites.h"

/* ---------------------------------------------------------------------------------------
 * Checks of many blocks: one launch, then wait and read the log.
 * ------------------------------------------------------------------------------------- */

static bool descs_reserve(desc_buf_t *b, size_t n) {
    if (n <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < n)
        cap *= 2;
    void *p = NULL;
    CUdeviceptr dp;
    if (vg__cuMemHostAlloc(&p, cap * sizeof(vg_guard_desc_t), CU_MEMHOSTALLOC_DEVICEMAP) ||
        vg__cuMemHostGetDevicePointer(&dp, p, 0)) {
        if (p)
            vg__cuMemFreeHost(p);
        return false;
    }
    if (b->d && b->noutgrown < VG_DESC_OUTGROWN)
        b->outgrown[b->noutgrown++] = b->d; /* (freed with the heap: see desc_buf_t) */
    else if (b->d)
        vg__cuMemFreeHost(b->d);
    b->d = p;
    b->dev = dp;
    b->cap = cap;
    return true;
}

/* A check's launch or wait failed with r: the context has most likely failed, and nothing
 * more is launched there. Returns whether r was a success. */
static bool check_ok(vg_guard_t *g, CUresult r, const char *what) {
    if (r == CUDA_SUCCESS)
        return true;
    g->dead = true;
    vg__log("guard mode: a check %s (%s): no more checks in this CUDA context (it has most "
            "likely failed)", what, vg__cu_error_name(r));
    return false;
}

/* Launch the descriptors of buf on the guard stream; false if the context is dead. */
static bool launch_check(vg_heap_t *h, desc_buf_t *buf, size_t n) {
    vg_guard_t *g = h->guard;
    if (g->dead)
        return false;
    if (n == 0 || vg__nvtx_attached()) /* (an NVTX memory checker checks them: G12) */
        return true;
    g->launches++;
    unsigned grid = n < 4096 ? (unsigned)n : 4096;
    unsigned nn = (unsigned)n;
    void *params[] = {&buf->dev, &nn, &g->log_dev};
    return check_ok(g, vg__cuLaunchKernel(g->fn_check, grid, 1, 1, 256, 1, 1, 0, g->stream,
                                          params, NULL),
                    "could not be launched");
}

/* Run the descriptors of buf on the guard stream and wait for them. */
static bool run_check(vg_heap_t *h, desc_buf_t *buf, size_t n) {
    vg_guard_t *g = h->guard;
    return launch_check(h, buf, n) &&
           check_ok(g, vg__cuStreamSynchronize(g->stream), "did not complete");
}

void vg__guard_graph_fill(vg_heap_t *h) {
    vg_guard_t *g = h->guard;
    size_t n = 0;
    for (vg_gpool_t *p = g ? h->gpools : NULL; p; p = p->next)
        for (size_t i = 0; i < p->nrz; i++)
            n += p->rz[i].state == VG_RZ_NEW;
    if (n == 0 || g->dead)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    /* What had those bytes before the pool (or a replay already launched) is done. */
    bool ok = vg__cuCtxSynchronize() == CUDA_SUCCESS;
    vg_guard_batch_t batch = {0};
    for (vg_gpool_t *p = h->gpools; p && ok; p = p->next) {
        for (size_t i = 0; i < p->nrz && ok; i++) {
            vg_gpool_rz_t *z = &p->rz[i];
            if (z->state != VG_RZ_NEW)
                continue;
            z->state = VG_RZ_FILLED;
            batch.d[batch.n++] = (vg_guard_desc_t){z->lo, z->hi - z->lo, z->id, z->user,
                                                   VG_PATTERN_CANARY, VG_GUARD_FILL, z->side};
            if (batch.n == VG_GUARD_BATCH) {
                ok = vg__guard_launch_ranges(h, &batch, g->stream) == CUDA_SUCCESS;
                batch.n = 0;
            }
        }
    }
    if (ok && batch.n)
        ok = vg__guard_launch_ranges(h, &batch, g->stream) == CUDA_SUCCESS;
    ok = ok && vg__cuStreamSynchronize(g->stream) == CUDA_SUCCESS;
    vg__heap_ctx_leave(pushed);
    if (!ok) /* (a fill may not have run: never check those redzones) */
        for (vg_gpool_t *p = h->gpools; p; p = p->next)
            for (size_t i = 0; i < p->nrz; i++)
                p->rz[i].state = VG_RZ_DEAD;
}

/* Append the checks of the graphs' filled redzones. */
static size_t graph_checks(vg_heap_t *h, vg_guard_desc_t *d) {
    size_t n = 0;
    for (vg_gpool_t *p = h->gpools; p; p = p->next)
        for (size_t i = 0; i < p->nrz; i++) {
            const vg_gpool_rz_t *z = &p->rz[i];
            if (z->state == VG_RZ_FILLED)
                d[n++] = (vg_guard_desc_t){z->lo, z->hi - z->lo, z->id, z->user,
                                           VG_PATTERN_CANARY, VG_GUARD_CHECK,
                                           (uint16_t)(z->side | AT_GRAPH)};
        }
    return n;
}

static size_t graph_rz_count(const vg_heap_t *h) {
    size_t n = 0;
    for (const vg_gpool_t *p = h->gpools; p; p = p->next)
        n += p->nrz;
    return n;
}

/* May a check that waits for no stream read block b now? Its last fill, poison or check
 * ran on its stream (the allocation's, or the one that freed it), or on the guard stream,
 * which the check follows. A block whose stream has work still queued (a host function
 * the host has yet to release, cuStreamWaitValue, a long kernel) waits for a later check
 * point: reading it now could race its fill or poison. */
static bool checkable_now(const vg_block_t *b) {
    return !b->stream || !b->stream->busy;
}

/* Order the check after the program's work: with `wait`, after the work queued so far on
 * every stream (the guard stream waits for an event on each, and on the legacy stream,
 * which follows every blocking stream, for the per-thread ones); else mark the streams
 * whose work has not completed (each busy stream's blocks are left out) and give up if
 * the guard stream itself has work queued. False: no check now. */
static bool order_check(vg_heap_t *h, bool wait) {
    vg_guard_t *g = h->guard;
    if (wait) {
        bool ordered = true;
        for (vg_stream_t *s = h->streams; s; s = s->next)
            if (!s->forgotten && s->handle != CU_STREAM_PER_THREAD)
                ordered &= vg__guard_wait_for(g, s->handle);
        return ordered & vg__guard_wait_for(g, NULL);
    }
    for (vg_stream_t *s = h->streams; s; s = s->next)
        s->busy = !s->forgotten && !vg__guard_stream_idle(h, s);
    return vg__cuStreamQuery(g->stream) == CUDA_SUCCESS;
}

/* A stream synchronisation returns when that stream's work is done, whatever other
 * streams are waiting for. If its check waited for every stream, a stream the program
 * holds back until after the synchronisation (a host function waiting for the host) would
 * hold the synchronisation forever: so it checks only what has completed (`wait` false). */
void vg__guard_check_all(vg_heap_t *h, const char *origin, bool wait) {
    vg_guard_t *g = h->guard;
    if (!g)
        return;
    vg__guard_poll(h, origin);
    if (g->dead)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    vg__guard_flush_streams(h);
    size_t n = 0, nrz = graph_rz_count(h), need = 4 * (h->live.n + g->q_count) + nrz;
    if (!descs_reserve(&g->check_buf, need)) {
        vg__log("guard mode: no memory for the descriptors of a check");
        vg__heap_ctx_leave(pushed);
        return;
    }
    bool ordered = order_check(h, wait), all = true;
    for (vg_segment_t *seg = h->segments; ordered && seg; seg = seg->next)
        for (vg_block_t *b = seg->first; b; b = b->next)
            if (b->state == VG_BLOCK_ALLOCATED || b->state == VG_BLOCK_QUARANTINED) {
                if (wait || checkable_now(b))
                    n += vg__guard_block_checks(b, g->check_buf.d + n);
                else
                    all = false;
            }
    if (ordered && nrz > 0 && all) /* (a graph may be replaying on a busy stream) */
        n += graph_checks(h, g->check_buf.d + n);
    uint64_t seq = vg__launch_seq();
    bool ran = ordered && run_check(h, &g->check_buf, n); /* (else the next check point) */
    vg__heap_ctx_leave(pushed);
    vg__guard_poll(h, origin);
    if (ran) /* blocks without a new report are clean as of now */
        for (vg_segment_t *seg = h->segments; seg; seg = seg->next)
            for (vg_block_t *b = seg->first; b; b = b->next)
                if (b->state == VG_BLOCK_ALLOCATED && (wait || checkable_now(b)))
                    b->clean_seq = seq;
}

void vg__guard_heap_shutdown(vg_heap_t *h) {
    vg_guard_t *g = h->guard;
    if (!g)
        return;
    vg__guard_check_all(h, "at exit", true);
    if (g->unguarded)
        vg__log("guard mode: %llu allocation%s and free%s made while a CUDA graph was captured "
                "on device %d: of their checks, only those of redzones that no other "
                "allocation of the graph reuses ran (after the replays); the others would "
                "have become part of the program's graph",
                (unsigned long long)g->unguarded, g->unguarded == 1 ? "" : "s",
                g->unguarded == 1 ? "" : "s", h->device);
    if (secure_getenv("VG_DEBUG_GUARD"))
        vg__log("guard: %llu redzone fills needed, %llu skipped (layout already filled); "
                "%llu launches; %llu quarantine exits",
                (unsigned long long)g->fills_launched, (unsigned long long)g->fills_skipped,
                (unsigned long long)g->launches, (unsigned long long)g->exits);
}
