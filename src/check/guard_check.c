/* guard_check.c — guard mode's check points and its error log (see guard.c for the
 * layout of an allocation and the life of a block).
 *
 * A check point (vg_check(), a synchronisation vramguard sees, exit) is one launch of the
 * checker kernel over every live allocation's redzones, every quarantined block and the
 * redzones of CUDA graphs' allocations, on the guard's own stream after the work queued
 * on the program's streams; then the host waits for it and reads the log. The kernels
 * launched at allocations, frees and quarantine exits (guard.c) write to the same log:
 * vg__guard_poll() turns its new records into reports, once per damaged range of an
 * allocation, naming the allocation and what the check saw.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "guard_impl.h"
#include "nvtx.h"
#include "base/options.h"
#include "diag/report.h"
#include "diag/sites.h"

/* ---------------------------------------------------------------------------------------
 * Reading the log
 * ------------------------------------------------------------------------------------- */

/* A live or quarantined block (both are in the live map), if it is still that one. */
vg_block_t *vg__guard_find_block(vg_heap_t *h, uint64_t user, uint64_t id) {
    vg_block_t *b = vg__ptrmap_get(&h->live, user);
    return b && b->id == id ? b : NULL;
}

/* What a log record says of the damage, in a report about its allocation. */
static vg_report_t damage_report(const vg_heap_t *h, const vg_guard_error_t *e) {
    vg_report_t r = {0};
    r.device = h->device;
    r.managed = h->managed;
    r.has_block = true;
    r.has_damage = true;
    r.user = e->user;
    r.id = e->tag;
    r.off_first = (int64_t)(e->addr + e->first_bad) - (int64_t)e->user;
    r.off_last = (int64_t)(e->addr + e->last_bad) - (int64_t)e->user;
    r.bad_bytes = e->bad_bytes;
    r.damage_word = e->first_word;
    r.clean_seq = UINT64_MAX;
    return r;
}

/* A redzone of a CUDA graph's allocation was written: after the end of a tensor the
 * capture allocated (freed since, perhaps: in the graph it is live at each replay). */
static void graph_error(vg_heap_t *h, const vg_guard_error_t *e, const char *origin) {
    vg_gpool_rz_t *z = vg__gpool_rz_find(h, e->tag, e->addr);
    if (!z || z->state != VG_RZ_FILLED)
        return; /* (reported already, or no longer checked) */
    z->state = VG_RZ_DEAD;
    vg_report_t r = damage_report(h, e);
    r.size = z->requested;
    r.stream = z->stream;
    r.alloc_site = z->site;
    r.clean_seq = z->seq;
    r.kind = z->side == VG_RANGE_LEFT ? VG_REPORT_OOB_BEFORE : VG_REPORT_OOB_AFTER;
    r.in_graph = true;
    r.found = origin;
    vg__report(&r);
}

static void handle_error(vg_heap_t *h, const vg_guard_error_t *e, const char *origin) {
    if (e->kind & AT_GRAPH) {
        graph_error(h, e, origin);
        return;
    }
    vg_block_t *b = vg__guard_find_block(h, e->user, e->tag);
    uint32_t base = e->kind & 0xff;
    bool by_free = e->kind & AT_FREE;
    int flag = base == VG_RANGE_LEFT ? REP_LEFT : base == VG_RANGE_RIGHT ? REP_RIGHT : REP_POISON;
    vg_report_t r = damage_report(h, e);
    bool freed;
    if (b) {
        if (b->flags & flag)
            return; /* already reported */
        b->flags |= flag;
        r.size = b->requested;
        r.stream = b->stream ? b->stream->handle : NULL;
        r.alloc_site = b->site;
        freed = b->state != VG_BLOCK_ALLOCATED;
        r.free_site = freed ? b->free_site : 0;
        r.clean_seq = b->clean_seq;
    } else { /* the block is gone (its memory reused): what the free history knows */
        const vg_free_rec_t *rec = vg__heap_history_find(h, e->user, e->tag);
        r.size = rec ? rec->requested : 0;
        r.alloc_site = rec ? rec->alloc_site : 0;
        r.free_site = rec ? rec->free_site : 0;
        freed = true;
    }
    if (base == VG_RANGE_POISON || (freed && !by_free))
        r.kind = VG_REPORT_USE_AFTER_FREE;
    else
        r.kind = base == VG_RANGE_LEFT ? VG_REPORT_OOB_BEFORE : VG_REPORT_OOB_AFTER;
    if (r.kind != VG_REPORT_USE_AFTER_FREE && !by_free)
        r.free_site = 0;
    r.found = by_free ? "by the check run (in stream order) when the allocation was freed"
              : (e->kind & AT_EXIT) ? "when the freed block left the quarantine (before its "
                                      "memory is reused)"
                                    : origin;
    vg__report(&r);
}

static int error_order(const void *pa, const void *pb) {
    const vg_guard_error_t *a = pa, *b = pb;
    uint64_t x = a->addr + a->first_bad, y = b->addr + b->first_bad;
    if (a->tag != b->tag)
        return a->tag < b->tag ? -1 : 1;
    return x < y ? -1 : x > y;
}

void vg__guard_poll(vg_heap_t *h, const char *origin) {
    vg_guard_t *g = h->guard;
    if (!g || !g->log) /* (released: the heap retired) */
        return;
    vg_guard_log_t *log = g->log;
    uint32_t count = __atomic_load_n(&log->count, __ATOMIC_ACQUIRE);
    if (count - g->log_read > LOG_CAPACITY) { /* more errors than the ring holds */
        vg__log("guard mode: %u error records were lost (more than %d between two checks)",
                count - g->log_read - LOG_CAPACITY, LOG_CAPACITY);
        g->log_read = count - LOG_CAPACITY;
    }
    /* Thread blocks append in no order, so records are sorted (block, then address)
     * before they are reported: the first damage of a block is the one its report
     * names, on a GPU as on vgsim. */
    vg_guard_error_t batch[64];
    for (;;) {
        size_t n = 0;
        while (g->log_read != count && n < 64) {
            const vg_guard_error_t *slot = &log->errors[g->log_read % LOG_CAPACITY];
            if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != (uint64_t)g->log_read + 1)
                break; /* still being written: read it next time */
            batch[n++] = *slot;
            g->log_read++;
        }
        if (n == 0)
            return;
        qsort(batch, n, sizeof batch[0], error_order);
        for (size_t i = 0; i < n; i++)
            handle_error(h, &batch[i], origin);
    }
}

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
    if (b->d)
        vg__cuMemFreeHost(b->d);
    b->d = p;
    b->dev = dp;
    b->cap = cap;
    return true;
}

/* Append the descriptors that check block b (live or quarantined). */
size_t vg__guard_block_checks(const vg_block_t *b, vg_guard_desc_t *d) {
    size_t n = 0;
    if (b->flags & VG_BF_UNGUARDED)
        return 0;
    if (!(b->flags & REP_LEFT))
        d[n++] = desc(b->addr, b->user - b->addr, b, VG_PATTERN_CANARY, VG_GUARD_CHECK,
                      VG_RANGE_LEFT);
    uint64_t end = b->user + b->requested;
    if (!(b->flags & REP_RIGHT))
        d[n++] = desc(end, b->addr + b->size - end, b, VG_PATTERN_CANARY, VG_GUARD_CHECK,
                      VG_RANGE_RIGHT);
    if (b->state == VG_BLOCK_QUARANTINED && !(b->flags & REP_POISON)) {
        uint64_t a[2], len[2];
        int k = vg__guard_poison_ranges(b, a, len);
        for (int i = 0; i < k; i++)
            d[n++] = desc(a[i], len[i], b, VG_PATTERN_POISON, VG_GUARD_CHECK, VG_RANGE_POISON);
    }
    return n;
}

/* Make the guard stream wait for the work queued so far on stream s (or, if the driver
 * will not, wait for it here); false if neither worked: what the guard stream runs next
 * may then see that work undone, and must not be trusted. */
bool vg__guard_wait_for(vg_guard_t *g, CUstream s) {
    if (vg__stream_capturing(s))
        return false; /* the guard stream would join the capture (A7) */
    if (vg__cuEventRecord(g->event, s) == CUDA_SUCCESS &&
        vg__cuStreamWaitEvent(g->stream, g->event, 0) == CUDA_SUCCESS)
        return true;
    return vg__cuStreamSynchronize(s) == CUDA_SUCCESS;
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
