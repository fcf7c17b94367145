/* guard.c — guard mode (D6): redzones, poison, quarantine and checks.
 *
 * Layout of an allocation of N bytes:
 *     [ left redzone L | user bytes N | right redzone (>= `redzone`, and the slack) ]
 * L is `redzone` rounded up to 512 so the user pointer keeps the allocator's alignment.
 *
 * Every device-side step is one launch of guard mode's kernels (kernels/guard.cu), in
 * stream order, never a copy per allocation:
 *   allocation   fill both redzones with the canary, on the allocation's stream;
 *   free         check both redzones (an overrun while the block was live) and poison the
 *                user bytes, on the freeing stream; the block enters the quarantine.
 *                These ride on the next allocation's launch on the same stream (one
 *                launch per allocation/free pair), or are flushed when too many wait and
 *                before any check, quarantine exit or synchronisation; the interposer also
 *                flushes them before it forwards a program's own launch, so they always
 *                precede the program's next kernel on that stream;
 *   deferred     when vramguard sees every launch (`guard_defer`: under vramguard run),
 *                the fills wait too: everything waits in the stream's queue until the
 *                program's next launch, copy, memset, event record or synchronisation on
 *                that stream (or 56 descriptors), and goes in one launch. The device then
 *                runs the same work in the same stream order as if it had been launched
 *                at each call, in a fraction of the launches (docs/decisions.md G3);
 *   quarantine   when it holds more than `quarantine` bytes, its oldest blocks leave: a
 *                last check of their redzones and poison on the stream that freed them
 *                (repairing what it finds damaged), and they go back to the heap at once,
 *                reusable in stream order like any free (docs/decisions.md G6); when
 *                memory runs short the quarantine shrinks (G5);
 *   check point  vg_check(), synchronisations seen by vramguard, exit: one launch checks
 *                every live allocation's redzones and every quarantined block.
 * Blocks up to `poison_bytes` are poisoned whole; larger ones (and checked) only at their
 * first and last `poison_ends` bytes: a kernel writing a freed tensor writes its first
 * elements (thread block 0) and its last, so these catch the common cases at a bounded
 * cost in bandwidth and memory (docs/decisions.md G4).
 *
 * Errors come back through a log in pinned host memory mapped for the device, read with
 * plain loads (guard_abi.h), so what a kernel found can be reported even after a sticky
 * error has killed the context. A damaged range is reported once per allocation. The
 * kernels' launches and the reading of the log are in guard_log.c, check points in
 * guard_check.c.
 */
#define _GNU_SOURCE
#include "guard.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "guard_impl.h"
#include "memcheck.h"
#include "nvtx.h"
#include "base/options.h"
#include "diag/order.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "guard_ptx.h" /* generated from kernels/guard.ptx: vg_guard_ptx[] */

#define PENDING_MAX 56 /* descriptors of frees waiting for a launch, per stream */
#define QUARANTINE_FLOOR (32ull << 20) /* memory pressure shrinks the quarantine to this */
#define PENDING_AGE_NS 200000 /* and the longest the oldest of them waits (checked at calls) */

/* The checks and poison of frees on one stream, not yet launched. They go with the next
 * allocation's launch on that stream (which has room for VG_GUARD_BATCH - 2), or are
 * flushed when too many wait, or before anything that needs them done. */
#define PENDING_CAP 64 /* a power of two above PENDING_MAX + what one free adds */
typedef struct pending {
    vg_guard_desc_t d[PENDING_CAP]; /* a ring: the oldest at head */
    unsigned head, n;
    uint32_t added;                 /* descriptors ever added (wraps): the newest is added-1 */
    unsigned frees;                 /* frees with descriptors here */
    uint64_t oldest_ns;             /* when the oldest was added */
} pending_t;

bool vg__guard_on(void) { return vg__opt.mode >= VG_MODE_GUARD; }

static _Atomic bool g_launches_seen; /* the interposer forwards the program's launches */

void vg__guard_launches_seen(void) { g_launches_seen = true; }

/* Hold fills and checks until the stream's next observed operation (G3)? */
static bool deferring(void) {
    return vg__opt.guard_defer == VG_DEFER_ON ||
           (vg__opt.guard_defer == VG_DEFER_AUTO &&
            atomic_load_explicit(&g_launches_seen, memory_order_relaxed));
}

uint64_t vg__guard_left(void) { return vg__align_up(vg__opt.redzone, VG_ALIGN); }

bool vg__guard_total(uint64_t n, uint64_t *total) {
    uint64_t l = vg__guard_left();
    if (n > UINT64_MAX / 2)
        return false;
    *total = vg__align_up(l + n + vg__opt.redzone, VG_ALIGN);
    return true;
}

/* ---------------------------------------------------------------------------------------
 * Set-up
 * ------------------------------------------------------------------------------------- */

static vg_status_t cu_fail(CUresult r, const char *what) {
    return vg__error(vg__cu_status(r), "guard mode: %s failed: %s (%s)", what,
                     vg__cu_error_name(r), vg__cu_error_text(r));
}

vg_status_t vg__guard_heap_init(vg_heap_t *h) {
    if (!vg__guard_on())
        return VG_OK;
    if (vg__opt.redzone < 16 || vg__opt.redzone > (1u << 20))
        return vg__error(VG_ERR_INVALID_OPTION,
                         "bad value %llu for option 'redzone': expected 16 to 1M bytes",
                         (unsigned long long)vg__opt.redzone);
    vg_guard_t *g = calloc(1, sizeof *g);
    if (!g)
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for guard mode");
    vg__memcheck_own_module(true);
    CUresult r = vg__cuModuleLoadData(&g->module, vg_guard_ptx);
    vg__memcheck_own_module(false);
    if (r != CUDA_SUCCESS) {
        free(g);
        return cu_fail(r, "loading the checker kernels (cuModuleLoadData)");
    }
    if ((r = vg__cuModuleGetFunction(&g->fn_check, g->module, "vg_guard_check")) ||
        (r = vg__cuModuleGetFunction(&g->fn_ranges, g->module, "vg_guard_ranges")) ||
        (r = vg__cuModuleGetFunction(&g->fn_shadow, g->module, "vg_guard_shadow"))) {
        vg__cuModuleUnload(g->module);
        free(g);
        return cu_fail(r, "finding the checker kernels");
    }
    size_t bytes = sizeof(vg_guard_log_t) + (LOG_CAPACITY - 1) * sizeof(vg_guard_error_t);
    void *log = NULL;
    r = vg__cuMemHostAlloc(&log, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
        memset(log, 0, bytes);
        r = vg__cuMemHostGetDevicePointer(&g->log_dev, log, 0);
    }
    if (r == CUDA_SUCCESS)
        r = vg__cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS)
        r = vg__cuStreamCreate(&g->fill_stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS)
        r = vg__cuEventCreate(&g->event, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        if (g->stream)
            vg__cuStreamDestroy(g->stream);
        if (g->fill_stream)
            vg__cuStreamDestroy(g->fill_stream);
        if (log)
            vg__cuMemFreeHost(log);
        vg__cuModuleUnload(g->module);
        free(g);
        return cu_fail(r, "setting up the error log");
    }
    g->log = log;
    g->log->capacity = LOG_CAPACITY;
    g->q_limit = vg__opt.quarantine;
    h->guard = g;
    return vg__memcheck_heap_init(h, g->fn_shadow);
}

/* ---------------------------------------------------------------------------------------
 * Launches
 * ------------------------------------------------------------------------------------- */

/* One descriptor for all the guard work of block b at its allocation or free, when its
 * fields fit (the right redzone and poison_bytes in 32 bits; poison_ends always does) and
 * no part of it was reported already (whose check must then be left out). */
static bool block_desc(const vg_block_t *b, uint16_t op, uint16_t flags, vg_guard_desc_t *d) {
    uint64_t right = b->addr + b->size - (b->user + b->requested);
    if (right > UINT32_MAX || vg__opt.poison_bytes > UINT32_MAX ||
        (b->flags & (REP_LEFT | REP_RIGHT)))
        return false;
    *d = desc(b->addr, b->size, b, (uint32_t)right, op, flags);
    return true;
}

/* A block checked as it leaves the quarantine: how many of its first and last bytes hold
 * the pattern (the canary is the poison word: redzones and poisoned ends alike). */
static void pattern_left(const vg_block_t *b, uint64_t *head, uint64_t *tail) {
    uint64_t a[2], n[2];
    int k = (b->flags & REP_POISON) ? 0 : vg__guard_poison_ranges(b, a, n);
    uint64_t left = b->user - b->addr, right = b->addr + b->size - (b->user + b->requested);
    *head = (b->flags & REP_LEFT) ? 0 : left + (k > 0 ? n[0] : 0);
    *tail = (b->flags & REP_RIGHT) ? 0 : right + (k == 2 ? n[1] : k == 1 ? n[0] : 0);
    if (k == 1 && !(b->flags & (REP_LEFT | REP_RIGHT)))
        *head = *tail = b->size; /* poisoned whole */
}

static void stream_ctx(vg_heap_t *h, bool *pushed) { *pushed = vg__heap_ctx_enter(h); }

static pending_t *pending_of(vg_stream_t *s) {
    if (!s->guard_pending)
        s->guard_pending = calloc(1, sizeof(pending_t));
    return s->guard_pending;
}

/* Is d part of a free's work (its checks and poison), rather than an allocation's fill? */
static bool at_free(const vg_guard_desc_t *d) {
    return d->op == VG_GUARD_BLOCK_FREED || (d->kind & AT_FREE);
}

/* The descriptors of one launch run at the same time on a GPU (a thread block each, in no
 * order), so a launch never holds both an allocation's fill and the same block's free:
 * the free's check would race the fill (false reports, seen on an H100). `seen` is a
 * 64-bit filter of the block numbers in the batch, by event, so the scan is rare. */
static bool conflicts(const vg_guard_batch_t *batch, const vg_guard_desc_t *d,
                      uint64_t seen[2]) {
    bool freed = at_free(d);
    uint64_t bit = 1ull << (d->tag & 63);
    seen[freed] |= bit;
    if (!(seen[!freed] & bit))
        return false;
    for (unsigned i = 0; i < batch->n; i++)
        if (batch->d[i].tag == d->tag && at_free(&batch->d[i]) != freed)
            return true;
    return false;
}

/* Move up to `room` pending descriptors of stream s (oldest first) into the batch; it
 * stops early before one that must run after a descriptor already in the batch. */
static void take_pending(vg_stream_t *s, vg_guard_batch_t *batch, unsigned room) {
    pending_t *p = s->guard_pending;
    if (!p)
        return;
    uint64_t seen[2] = {0, 0};
    for (unsigned i = 0; i < batch->n; i++)
        seen[at_free(&batch->d[i])] |= 1ull << (batch->d[i].tag & 63);
    while (p->n > 0 && room-- > 0) {
        if (conflicts(batch, &p->d[p->head], seen))
            break; /* (the next launch takes it, in stream order) */
        batch->d[batch->n++] = p->d[p->head];
        p->head = (p->head + 1) % PENDING_CAP;
        p->n--;
    }
    if (p->n == 0)
        p->frees = 0;
}

static void add_pending(pending_t *p, vg_guard_desc_t d, uint64_t now) {
    if (p->n == 0)
        p->oldest_ns = now;
    p->d[(p->head + p->n) % PENDING_CAP] = d;
    p->n++;
    p->added++;
}

/* Launch everything pending on stream s (context current). Not while s is captured into
 * a graph: the launch would become part of the program's graph (A7); it waits. */
static void flush_stream(vg_heap_t *h, vg_stream_t *s) {
    pending_t *p = s->guard_pending;
    if (p && p->n > 0 && vg__stream_capturing(s->handle))
        return;
    while (p && p->n > 0) {
        vg_guard_batch_t batch = {0};
        take_pending(s, &batch, VG_GUARD_BATCH);
        vg__guard_launch_ranges(h, &batch, vg__stream_handle_here(s));
    }
}

void vg__guard_flush(vg_heap_t *h, CUstream stream) {
    vg_guard_t *g = h->guard;
    if (!g)
        return;
    if (stream == NULL || stream == CU_STREAM_LEGACY) { /* orders after every blocking stream */
        vg__guard_flush_all(h);
        return;
    }
    vg_stream_t *s = vg__heap_stream_find(h, stream);
    bool own = s && s->guard_pending && ((pending_t *)s->guard_pending)->n > 0;
    /* A blocking stream's next work waits for the legacy stream's: the work waiting in the
     * legacy stream's queue must be launched before it too (a fill launched later would
     * land after the program's kernel on the blocking stream and hide its overrun). Not
     * during a capture, which the legacy stream may not join. */
    vg_stream_t *legacy = vg__heap_stream_find(h, NULL);
    bool before = legacy && legacy != s && legacy->guard_pending &&
                  ((pending_t *)legacy->guard_pending)->n > 0 && !vg__heap_capturing(h) &&
                  !vg__stream_capturing(stream) && vg__stream_blocking(stream);
    if (!own && !before)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    if (before)
        flush_stream(h, legacy);
    if (own)
        flush_stream(h, s);
    vg__heap_ctx_leave(pushed);
}

bool vg__guard_claim_holds(vg_heap_t *h, CUstream stream) {
    vg_stream_t *s = h->guard ? vg__heap_stream_find(h, stream) : NULL;
    if (!s)
        return true;
    bool pushed = vg__heap_ctx_enter(h);
    bool idle = vg__guard_stream_idle(h, s);
    vg__heap_ctx_leave(pushed);
    return idle;
}

void vg__guard_flush_streams(vg_heap_t *h) {
    for (vg_stream_t *s = h->streams; s; s = s->next)
        flush_stream(h, s);
}

/* Has everything queued on stream s completed, vramguard's work for it included? (Asked
 * where a query may name it.) Another thread launches a per-thread stream's guard work on
 * the legacy stream (flush_stream), so for one that must be done too; the legacy stream is
 * not asked while a capture runs (it may be one of the capture's implicit joins). */
bool vg__guard_stream_idle(vg_heap_t *h, const vg_stream_t *s) {
    CUstream here = vg__stream_handle_here(s);
    if (here != s->handle || vg__stream_capturing(here) ||
        vg__cuStreamQuery(here) != CUDA_SUCCESS)
        return false;
    return here != CU_STREAM_PER_THREAD ||
           (!vg__heap_capturing(h) && vg__cuStreamQuery(NULL) == CUDA_SUCCESS);
}

/* A free on another stream than the allocation's, or of a block record_stream gave other
 * streams: the allocation's redzone fill may still wait on its stream (deferred, or behind
 * slow work), and the recorded streams' queued kernels may still write the block legally
 * (that is what record_stream says), so the free's checks and poison run on the guard's
 * own stream, after the work queued on all of them and on the freeing stream (see
 * vg__guard_quarantine). The program's streams get no new dependency. Then the freeing
 * stream's next kernels are not ordered after the poison, and one that writes the block
 * at once may be overwritten by it, unseen. So where no such wait is needed, the free's
 * work is queued on the freeing stream as usual: a stream whose work has all completed
 * by now, and the allocation's stream if the freeing stream waited for an event recorded
 * there since the allocation (its record launched the fill first: G3). That is the block
 * handed from stream to stream and freed by its last user. */
void vg__guard_before_free(vg_heap_t *h, vg_block_t *b, vg_stream_t *s) {
    vg_guard_t *g = h->guard;
    if (!g || g->dead || (b->flags & VG_BF_UNGUARDED))
        return;
    vg_stream_t *other[1 + VG_MAX_USES];
    int n = 0; /* (a destroyed stream's work completed before it went: skipped) */
    if (b->stream && b->stream != s && !b->stream->forgotten)
        other[n++] = b->stream;
    for (int i = 0; i < b->nuses; i++) {
        vg_stream_t *u = b->uses[i];
        bool seen = !u || u == s || u->forgotten;
        for (int k = 0; k < n && !seen; k++)
            seen = other[k] == u;
        if (!seen)
            other[n++] = u;
    }
    if (n == 0)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    if (s) /* (the allocation's deferred fill may wait there: the check must follow it) */
        flush_stream(h, s);
    bool cross = false;
    for (int k = 0; k < n; k++) {
        if (s && other[k] == b->stream &&
            vg__order_waited_after(s->handle, b->stream->handle, b->alloc_tick))
            continue;
        flush_stream(h, other[k]);
        if (vg__guard_stream_idle(h, other[k]))
            continue;
        cross = true;
        if (!vg__guard_wait_for(g, vg__stream_handle_here(other[k])))
            b->flags |= UNORDERED;
    }
    vg__heap_ctx_leave(pushed);
    if (cross)
        b->flags |= CROSS_FREE;
}

/* Queue the redzone fill of b on stream s until the stream's next observed operation;
 * false if there is no memory for the queue (the caller launches it now). */
static bool defer_fill(vg_heap_t *h, vg_block_t *b, vg_stream_t *s) {
    pending_t *p = s ? pending_of(s) : NULL;
    if (!p)
        return false;
    vg_guard_desc_t d;
    if (block_desc(b, VG_GUARD_BLOCK_NEW, 0, &d)) {
        b->fill_at = p->added;
        add_pending(p, d, 0);
    } else {
        add_pending(p, desc(b->addr, b->user - b->addr, b, VG_PATTERN_CANARY, VG_GUARD_FILL,
                            VG_RANGE_LEFT), 0);
        uint64_t end = b->user + b->requested;
        add_pending(p, desc(end, b->addr + b->size - end, b, VG_PATTERN_CANARY, VG_GUARD_FILL,
                            VG_RANGE_RIGHT), 0);
    }
    if (p->n > PENDING_MAX) {
        bool pushed = vg__heap_ctx_enter(h);
        flush_stream(h, s);
        vg__heap_ctx_leave(pushed);
    }
    return true;
}

/* The program's synchronous cuMemAlloc, cuMemAllocPitch and cuMemFree (the interposer
 * says so around them): any stream may use the memory as soon as the call returns, not
 * only the legacy stream's later work. So their guard work is not queued on the legacy
 * stream (G3) but launched at once, and the call waits for it (cuMemFree waits for the
 * device anyway). Queued, a kernel on another stream could overrun the allocation before
 * its fill ran, and the fill would erase the evidence. */
static VG_TLS_FAST bool t_sync_call;

void vg__guard_sync_call(bool on) { t_sync_call = on; }

static void sync_call_done(vg_heap_t *h, vg_stream_t *s) {
    if (!t_sync_call || vg__heap_capturing(h)) /* (a capture forbids waiting) */
        return;
    bool pushed = vg__heap_ctx_enter(h);
    if (s)
        flush_stream(h, s);
    if (vg__cuCtxSynchronize() == CUDA_SUCCESS) {
        vg__order_all_done(); /* (the program's cudaFree waits for the device too, G7) */
        vg__heap_all_synced(h); /* (exact: the heap lock is held across the wait) */
    }
    vg__heap_ctx_leave(pushed);
}

/* G7: is the use of stream t recorded on b (vg_record_stream)? Then the allocator itself
 * waits for t before reusing b. */
static bool recorded_use(CUstream t, void *arg) {
    const vg_block_t *b = arg;
    for (int i = 0; i < b->nuses; i++)
        if (b->uses[i] && !b->uses[i]->forgotten && b->uses[i]->handle == t)
            return true;
    return false;
}

bool vg__guard_unordered_free(vg_heap_t *h, const vg_block_t *b, CUstream stream,
                              struct vg_unordered *u) {
    uint64_t seq;
    int arg;
    /* Through the C API alone, vramguard sees no event, wait or synchronisation of the
     * program's: every cross-stream use would look unordered. */
    bool on = vg__opt.free_order == VG_ORDER_ON ||
              (vg__opt.free_order == VG_ORDER_AUTO &&
               atomic_load_explicit(&g_launches_seen, memory_order_relaxed));
    if (!on || !h->guard || t_sync_call || (b->flags & (VG_BF_UNGUARDED | VG_BF_USES_OVERFLOW)) ||
        vg__launch_seq() <= b->alloc_launch || vg__stream_capturing(stream) ||
        !vg__order_may_race(stream, b->alloc_launch) ||
        !vg__launch_find_unordered(stream, b->user, b->user + b->requested, b->alloc_launch,
                                   recorded_use, (void *)b, &seq, &arg))
        return false;
    *u = (vg_unordered_t){.device = h->device, .stream = b->stream ? b->stream->handle : stream,
                          .free_stream = stream, .user = b->user, .size = b->requested,
                          .id = b->id, .alloc_site = b->site, .free_site = b->free_site,
                          .kernel_seq = seq, .kernel_arg = arg};
    return true;
}

vg_status_t vg__guard_after_alloc(vg_heap_t *h, vg_block_t *b, CUstream stream) {
    vg_guard_t *g = h->guard;
    b->clean_seq = vg__launch_seq();
    b->alloc_launch = b->clean_seq;
    b->alloc_tick = vg__order_tick();
    vg__memcheck_alloc(h, b, stream, t_sync_call || b->gpool);
    if (b->gpool || vg__stream_capturing(stream)) { /* a graph's: no kernel may join it */
        if (b->gpool) /* (its redzones are filled once the capture is over) */
            vg__gpool_guard_note(b, vg__launch_seq());
        b->flags |= VG_BF_UNGUARDED;
        g->unguarded++;
        return VG_OK;
    }
    bool defer = deferring() && !t_sync_call;
    if (b->flags & VG_BF_READY) { /* its redzones already hold the canary */
        g->fills_skipped++;
        if (t_sync_call) /* (the pattern may come from work still queued) */
            sync_call_done(h, vg__heap_stream(h, stream));
        if (defer || t_sync_call)
            return VG_OK;
        vg_stream_t *s = vg__heap_stream(h, stream);
        pending_t *p = s ? s->guard_pending : NULL;
        if (p && p->n > 0 && vg__now_coarse_ns() - p->oldest_ns > PENDING_AGE_NS) {
            bool pushed = vg__heap_ctx_enter(h); /* frees waited long enough: launch them */
            flush_stream(h, s);
            vg__heap_ctx_leave(pushed);
        }
        return VG_OK;
    }
    g->fills_launched++;
    if (defer && defer_fill(h, b, vg__heap_stream(h, stream)))
        return VG_OK;
    vg_guard_batch_t batch = {.n = 2};
    batch.d[0] = desc(b->addr, b->user - b->addr, b, VG_PATTERN_CANARY, VG_GUARD_FILL,
                      VG_RANGE_LEFT);
    uint64_t end = b->user + b->requested;
    batch.d[1] = desc(end, b->addr + b->size - end, b, VG_PATTERN_CANARY, VG_GUARD_FILL,
                      VG_RANGE_RIGHT);
    vg_stream_t *s = vg__heap_stream(h, stream);
    /* The program's cuMemAlloc (A9): its memory is complete, so the fill may run on a
     * stream of vramguard's and be waited for alone. Behind the program's work on the
     * legacy stream, and a context synchronisation, the call waited for every kernel
     * queued (a PyTorch cudaMalloc behind a long kernel took 54 ms instead of 17 on the
     * H100, and the copy race after it never happened). The legacy stream's pending
     * work stays on that stream: it must follow the program's kernels there. */
    bool own = t_sync_call && g->fill_stream && !vg__heap_capturing(h);
    if (s && !own)
        take_pending(s, &batch, VG_GUARD_BATCH - 2);
    bool pushed;
    stream_ctx(h, &pushed);
    CUresult r = vg__guard_launch_ranges(h, &batch, own ? g->fill_stream : stream);
    if (own && r == CUDA_SUCCESS)
        r = vg__cuStreamSynchronize(g->fill_stream);
    vg__heap_ctx_leave(pushed);
    if (r == CUDA_SUCCESS && !own)
        sync_call_done(h, s);
    return r == CUDA_SUCCESS ? VG_OK : cu_fail(r, "filling the redzones");
}

/* ---------------------------------------------------------------------------------------
 * Quarantine
 * ------------------------------------------------------------------------------------- */

/* Room for one more block in the quarantine ring. */
static bool q_reserve(vg_guard_t *g) {
    if (g->q_count < g->q_cap)
        return true;
    size_t cap = g->q_cap ? 2 * g->q_cap : 1024;
    vg_block_t **q = malloc(cap * sizeof *q);
    if (!q)
        return false;
    for (size_t i = 0; i < g->q_count; i++) /* unwrapped: the oldest first */
        q[i] = g->q[(g->q_head + i) & (g->q_cap - 1)];
    free(g->q);
    g->q = q;
    g->q_cap = cap;
    g->q_head = 0;
    return true;
}

static void q_push(vg_guard_t *g, vg_block_t *b) { /* (after q_reserve) */
    g->q[(g->q_head + g->q_count) & (g->q_cap - 1)] = b;
    g->q_bytes += b->size;
    g->q_count++;
}

static vg_block_t *q_pop(vg_guard_t *g) {
    if (g->q_count == 0)
        return NULL;
    vg_block_t *b = g->q[g->q_head];
    g->q_head = (g->q_head + 1) & (g->q_cap - 1);
    g->q_bytes -= b->size;
    g->q_count--;
    return b;
}

/* The exit check of one stream's leaving blocks, by value: launched when full. */
typedef struct exit_batch {
    vg_stream_t *s;
    vg_guard_batch_t batch;
} exit_batch_t;

/* Where block b's exit check runs: after its free's own check and poison, so on the
 * stream that ran those — the freeing stream, or the guard's own stream for a free on
 * another stream than the allocation's (see vg__guard_before_free) or one destroyed
 * since (its work, those checks with it, completed before it went). */
static vg_stream_t *exit_stream(vg_heap_t *h, const vg_block_t *b) {
    if ((b->flags & CROSS_FREE) || (b->stream && b->stream->forgotten))
        return vg__heap_stream(h, ((vg_guard_t *)h->guard)->stream);
    return b->stream ? b->stream : vg__heap_stream(h, NULL);
}

static bool exit_launch(vg_heap_t *h, exit_batch_t *x) {
    bool ok = x->batch.n == 0 ||
              vg__guard_launch_ranges(h, &x->batch, x->s ? vg__stream_handle_here(x->s) : NULL) ==
                  CUDA_SUCCESS;
    x->batch.n = 0;
    return ok;
}

/* Release the oldest quarantined blocks until at most `target` bytes remain. Each one's
 * last check (its redzones and poisoned bytes: a write since the free is a write to freed
 * memory) runs in stream order on the stream that freed it, and rewrites the pattern
 * where it finds damage; the block goes back to the heap at once, stamped with that
 * stream's epoch after the check. So the freeing stream may reuse it right away (its
 * next work comes after the check) and other streams once the check has completed, as
 * with any free — the host never waits for the device here. */
static void evict(vg_heap_t *h, uint64_t target) {
    vg_guard_t *g = h->guard;
    if (g->q_bytes <= target)
        return;
    g->exits++;
    bool pushed = vg__heap_ctx_enter(h);
    exit_batch_t xs[4];
    int nx = 0;
    bool ok = !g->dead;
    size_t first = g->q_head, nb = 0; /* the leaving blocks: the ring's oldest nb */
    for (uint64_t left = g->q_bytes; left > target && nb < g->q_count; nb++) {
        vg_block_t *b = g->q[(first + nb) & (g->q_cap - 1)];
        vg_stream_t *s = exit_stream(h, b);
        int k = 0;
        while (k < nx && xs[k].s != s)
            k++;
        if (k == nx && s && vg__stream_capturing(s->handle))
            break; /* its exit check cannot run now (A7): it stays, with those after it */
        left -= b->size;
        if (s) { /* reusable by other streams only once its check has run: the epoch is
                  * the one after the launches below (epochs end only at event records) */
            b->stream = s;
            b->epoch = s->epoch;
            s->last_free_epoch = s->epoch;
        }
        if (k == nx) {
            if (nx == (int)VG_ARRAY_LEN(xs)) { /* (many streams: make room) */
                ok &= exit_launch(h, &xs[0]);
                xs[0] = xs[--nx];
            }
            k = nx++;
            xs[k].s = s;
            xs[k].batch.n = 0;
            if (s)
                flush_stream(h, s); /* the frees' own checks and poison go first */
        }
        if (xs[k].batch.n + 4 > VG_GUARD_BATCH)
            ok &= exit_launch(h, &xs[k]);
        vg_guard_batch_t *x = &xs[k].batch;
        if (!(b->flags & REP_POISON) &&
            block_desc(b, VG_GUARD_BLOCK_EXIT, AT_EXIT | VG_KIND_REPAIR, &x->d[x->n])) {
            x->n++; /* (one descriptor for the whole block) */
        } else {
            unsigned n0 = x->n;
            x->n += (unsigned)vg__guard_block_checks(b, x->d + n0);
            for (unsigned i = n0; i < x->n; i++)
                x->d[i].kind |= AT_EXIT | VG_KIND_REPAIR;
        }
    }
    for (int k = 0; k < nx; k++)
        ok &= exit_launch(h, &xs[k]);
    vg__heap_ctx_leave(pushed);
    vg__guard_poll(h, "by a check that ran after the allocation was freed");
    for (size_t i = 0; i < nb; i++) {
        vg_block_t *b = q_pop(g);
        if (i + 4 < nb) { /* these blocks went cold in the quarantine: fetch ahead */
            const vg_block_t *ahead = g->q[(g->q_head + 3) & (g->q_cap - 1)];
            __builtin_prefetch(ahead->prev); /* (its neighbours, to merge with) */
            __builtin_prefetch(ahead->next);
            vg__ptrmap_prefetch(&h->live, ahead->user);
        }
        /* Checked and repaired (if the launches went out): its redzones hold the pattern,
         * and if it was poisoned whole, so does every other byte. */
        uint64_t head = 0, tail = 0;
        if (ok)
            pattern_left(b, &head, &tail);
        vg__heap_unquarantine(h, b, head, tail);
    }
}

/* The checks and poison of a freed block: one block descriptor, or separate ranges. */
static void descs_at_free(pending_t *p, const vg_block_t *b) {
    vg_guard_desc_t d;
    if (block_desc(b, VG_GUARD_BLOCK_FREED, AT_FREE, &d)) {
        add_pending(p, d, b->free_ns);
        return;
    }
    uint64_t end = b->user + b->requested;
    if (!(b->flags & REP_LEFT))
        add_pending(p, desc(b->addr, b->user - b->addr, b, VG_PATTERN_CANARY, VG_GUARD_CHECK,
                            VG_RANGE_LEFT | AT_FREE), b->free_ns);
    if (!(b->flags & REP_RIGHT))
        add_pending(p, desc(end, b->addr + b->size - end, b, VG_PATTERN_CANARY, VG_GUARD_CHECK,
                            VG_RANGE_RIGHT | AT_FREE), b->free_ns);
    uint64_t a[2], len[2];
    int k = vg__guard_poison_ranges(b, a, len);
    for (int i = 0; i < k; i++)
        add_pending(p, desc(a[i], len[i], b, VG_PATTERN_POISON, VG_GUARD_FILL, VG_RANGE_POISON),
                    b->free_ns);
}

/* Block b is freed on the stream it was allocated on, and its redzone fill may still be
 * waiting in that stream's queue: then no operation of the stream came between the
 * allocation and the free, so nothing can have written the block yet. The queued fill
 * becomes the block's whole guard work (fill its redzones, poison its bytes): one
 * descriptor instead of a fill and a check that could not share a launch. */
static bool fold_into_fill(pending_t *p, vg_block_t *b) {
    /* fill_at is where it was queued if it was (else stale): the tag check settles it. */
    uint32_t i = b->fill_at - (p->added - p->n); /* its place from the oldest waiting */
    if (i >= p->n) /* (launched since, or never queued) */
        return false;
    vg_guard_desc_t *d = &p->d[(p->head + i) % PENDING_CAP];
    if (d->tag != b->id || d->op != VG_GUARD_BLOCK_NEW)
        return false;
    d->op = VG_GUARD_BLOCK_DEAD;
    return true;
}

bool vg__guard_quarantine(vg_heap_t *h, vg_block_t *b, CUstream stream) {
    vg_guard_t *g = h->guard;
    if (!g || (b->flags & VG_BF_UNGUARDED))
        return false;
    if (vg__stream_capturing(stream)) { /* its checks would join the program's graph */
        g->unguarded++;
        return false;
    }
    vg_stream_t *s = vg__heap_stream(h, stream);
    pending_t *p = s ? pending_of(s) : NULL;
    if (!p || !q_reserve(g))
        return false; /* no memory to track it: let the heap reuse it normally */
    b->state = VG_BLOCK_QUARANTINED;
    vg__memcheck_free(h, b, stream);
    bool defer = deferring() && !t_sync_call;
    b->free_ns = defer ? 0 : vg__now_coarse_ns(); /* (the age of eager frees' work) */
    if (b->flags & CROSS_FREE) { /* at once, on the guard stream, after both streams */
        bool unordered = b->flags & UNORDERED;
        b->flags &= (uint8_t)~UNORDERED; /* (CROSS_FREE stays: its exit runs there too) */
        pending_t one = {0};
        descs_at_free(&one, b);
        vg_guard_batch_t batch = {0};
        memcpy(batch.d, one.d, one.n * sizeof one.d[0]);
        batch.n = one.n;
        bool pushed = vg__heap_ctx_enter(h);
        if (!unordered && vg__guard_wait_for(g, stream)) /* (else its poison could race) */
            vg__guard_launch_ranges(h, &batch, g->stream);
        else
            vg__guard_forget_batch(h, &batch, "a free could not be ordered after its "
                                              "allocation's stream (the driver refused an "
                                              "event)");
        vg__heap_ctx_leave(pushed);
    } else {
        if (!fold_into_fill(p, b))
            descs_at_free(p, b);
        p->frees++;
    }
    if (p->n > PENDING_MAX ||
        (!defer && (p->frees >= (unsigned)vg__opt.free_batch ||
                          b->free_ns - p->oldest_ns > PENDING_AGE_NS))) {
        bool pushed;
        stream_ctx(h, &pushed);
        flush_stream(h, s);
        vg__heap_ctx_leave(pushed);
    }
    q_push(g, b);
    sync_call_done(h, s);
    if (g->q_bytes > g->q_limit)
        evict(h, g->q_limit / 2);
    return true;
}

void vg__guard_context_failed(vg_heap_t *h) {
    vg_guard_t *g = h->guard;
    if (g)
        g->dead = true; /* no more launches: they would only fail */
}

void vg__guard_flush_all(vg_heap_t *h) {
    if (!h->guard)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    vg__guard_flush_streams(h);
    vg__heap_ctx_leave(pushed);
}

bool vg__guard_shrink_quarantine(vg_heap_t *h) {
    vg_guard_t *g = h->guard;
    if (!g || g->q_bytes == 0 ||
        (g->q_limit <= QUARANTINE_FLOOR && g->q_bytes <= QUARANTINE_FLOOR))
        return false; /* (small already: the heap moves pages as without guard mode) */
    /* Keeping the quarantine full would make every later allocation move pages (each a
     * driver call) to make room: it shrinks instead, and stays smaller. */
    uint64_t was = g->q_limit;
    g->q_limit = VG_MAX(VG_MIN(g->q_limit, g->q_bytes) / 2,
                        VG_MIN(QUARANTINE_FLOOR, g->q_limit));
    evict(h, 0);
    if (was > g->q_limit && (was == vg__opt.quarantine || g->q_limit <= QUARANTINE_FLOOR)) {
        char a[32], b[32], why[64] = "its memory is full";
        if (h->limit)
            snprintf(why, sizeof why, "the limit is %s", vg__fmt_bytes(a, h->limit));
        vg__log("guard mode: device %d is short of memory (%s): the quarantine of freed "
                "blocks shrinks to %s (freed memory is reused sooner, so a kernel writing "
                "freed memory is caught less often)",
                h->device, why, vg__fmt_bytes(b, g->q_limit));
    }
    return true;
}

void vg__guard_flush_quarantine(vg_heap_t *h) {
    if (h->guard)
        evict(h, 0);
}

vg_block_t *vg__guard_quarantined(vg_heap_t *h, uint64_t user) {
    vg_block_t *b = vg__ptrmap_get(&h->live, user);
    return b && b->state == VG_BLOCK_QUARANTINED ? b : NULL;
}

void vg__guard_heap_release(vg_heap_t *h) {
    vg_guard_t *g = h->guard;
    if (!g || !g->log)
        return;
    vg__memcheck_heap_release(h); /* (before the module of its shadow kernel goes) */
    bool pushed = vg__heap_ctx_enter(h);
    if (g->stream) { /* (its last check has run: heap shutdown waited for it) */
        vg__cuStreamSynchronize(g->stream);
        vg__cuStreamDestroy(g->stream);
    }
    if (g->fill_stream) { /* (its fills were waited for by their allocations) */
        vg__cuStreamDestroy(g->fill_stream);
        g->fill_stream = NULL;
    }
    if (g->event)
        vg__cuEventDestroy(g->event);
    if (g->check_buf.d)
        vg__cuMemFreeHost(g->check_buf.d);
    for (int i = 0; i < g->check_buf.noutgrown; i++)
        vg__cuMemFreeHost(g->check_buf.outgrown[i]);
    vg__cuMemFreeHost(g->log);
    vg__cuModuleUnload(g->module);
    vg__heap_ctx_leave(pushed);
    g->stream = NULL;
    g->event = NULL;
    g->check_buf = (desc_buf_t){0};
    g->log = NULL;
    g->module = NULL;
    g->dead = true;
}
