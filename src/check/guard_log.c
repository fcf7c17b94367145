/* guard_log.c — guard mode's device work: its kernels launched over ranges of
 * allocations, and what they found read back from the error log (see guard.c for the
 * layout of an allocation and the life of a block, guard_check.c for check points).
 *
 * The kernels launched at allocations, frees, quarantine exits and check points all write
 * to one log: vg__guard_poll() turns its new records into reports, once per damaged range
 * of an allocation, naming the allocation and what the check saw.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/options.h"
#include "diag/order.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "guard_impl.h"
#include "memcheck.h"
#include "nvtx.h"

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
    if (vg__memcheck_saw(e->tag, base == VG_RANGE_LEFT ? 0 : base == VG_RANGE_RIGHT ? 1 : 2))
        return; /* (memcheck named the kernel that did it) */
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
    vg__memcheck_poll(h);
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
 * Launches
 * ------------------------------------------------------------------------------------- */

/* The fills or poison of a launch that failed (or could not be ordered) never happened:
 * the blocks it named hold no pattern, and checking them would report damage that is not
 * there. They are never checked again (as if every range had been reported). */
void vg__guard_forget_batch(vg_heap_t *h, const vg_guard_batch_t *batch, const char *why) {
    vg_guard_t *g = h->guard;
    for (unsigned i = 0; i < batch->n; i++) {
        vg_block_t *b = vg__guard_find_block(h, batch->d[i].user, batch->d[i].tag);
        if (b)
            b->flags |= REP_LEFT | REP_RIGHT | REP_POISON;
    }
    if (!g->dead && !g->warned_launch) {
        g->warned_launch = true;
        vg__log("guard mode: %s: the allocations it was for are not checked (reported once)",
                why);
    }
}

CUresult vg__guard_launch_ranges(vg_heap_t *h, vg_guard_batch_t *batch, CUstream s) {
    vg_guard_t *g = h->guard;
    CUresult r = CUDA_ERROR_LAUNCH_FAILED;
    if (vg__nvtx_attached()) /* (an NVTX memory checker checks the accesses: G12) */
        return CUDA_SUCCESS;
    if (!g->dead) {
        g->launches++;
        batch->poison_max = (uint32_t)vg__opt.poison_bytes; /* (block descriptors: they fit) */
        batch->poison_end = (uint32_t)vg__opt.poison_ends;
        void *params[] = {(void *)batch, &g->log_dev};
        r = vg__cuLaunchKernel(g->fn_ranges, batch->n, 1, 1, 256, 1, 1, 0, s, params, NULL);
    }
    if (r != CUDA_SUCCESS) {
        char why[96];
        snprintf(why, sizeof why, "a launch of the checker kernels failed (%s)",
                 vg__cu_error_name(r));
        vg__guard_forget_batch(h, batch, why);
    }
    return r;
}

/* The poisoned ranges of a freed block: all of it, or its two ends. */
int vg__guard_poison_ranges(const vg_block_t *b, uint64_t *a, uint64_t *n) {
    return (int)vg_guard_poison_split(b->user, b->requested, vg__opt.poison_bytes,
                                      vg__opt.poison_ends, a, n);
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

