/* api.c — the public allocation API: vg_malloc, vg_free and friends.
 *
 * Each call: make sure vramguard is initialised, find the heap (the current context's,
 * or a device's), capture the allocation site outside the lock, then do the work under
 * the heap's lock. Bad frees are classified here, off the fast path: a pointer that is
 * not live in any heap is looked up in the live blocks (interior pointer), then in each
 * heap's history of recent frees (double free); anything else was never allocated.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/access.h"
#include "base/common.h"
#include "check/guard.h"
#include "alloc/heap.h"
#include "alloc/hooks.h"
#include "init.h"
#include "diag/leaks.h"
#include "diag/pinned.h"
#include "check/nvtx.h"
#include "diag/report.h"
#include "base/options.h"
#include "diag/order.h"
#include "diag/sites.h"
#include "diag/snapshot.h"
#include "diag/trace.h"

/* ---------------------------------------------------------------------------------------
 * Allocation
 * ------------------------------------------------------------------------------------- */

/* `stream` may be VG_STREAM_SYNC (vg__malloc_synchronous): only the heap tells it from
 * the legacy stream. */
__attribute__((noinline)) static vg_status_t alloc_in(vg_heap_t *h, void **ptr, size_t size,
                                                      CUstream heap_stream) {
    CUstream stream = heap_stream == VG_STREAM_SYNC ? NULL : heap_stream;
    uint32_t site = vg__opt.stack_depth ? vg__site_here(2) : 0;
    uint64_t total = size, left = 0;
    bool guard = vg__guard_on();
    if (guard || vg__nvtx_pads()) { /* (redzones; padding under an NVTX tool, G12) */
        if (!vg__guard_total(size, &total))
            total = UINT64_MAX; /* absurd: the heap explains it */
        left = vg__guard_left();
    }
    pthread_mutex_lock(&h->lock);
    vg_block_t *b;
    vg_status_t st = vg__heap_alloc(h, total, size, left, heap_stream, &b);
    if (st == VG_OK) {
        b->site = site;
        vg__tell_region_named(h, b);
        vg__site_account(site, (int64_t)size, 1);
        if (guard && (st = vg__guard_after_alloc(h, b, stream)) != VG_OK) {
            vg__site_account(site, -(int64_t)size, -1);
            vg__heap_free(h, b, stream, false); /* a dead context: give it back, say why */
        }
    }
    if (st == VG_OK) {
        *ptr = (void *)(uintptr_t)b->user;
        vg__trace_event(true, b->user, size, stream);
        vg__event(h, VG_EV_ALLOC, b->user, size, stream, site);
    } else if (st == VG_ERR_OUT_OF_MEMORY) {
        size_t dev_free = 0, dev_total = 0; /* (the event's address: as PyTorch's trace has it) */
        bool pushed = vg__heap_ctx_enter(h);
        if (vg__cuMemGetInfo(&dev_free, &dev_total) != CUDA_SUCCESS)
            dev_free = 0;
        vg__heap_ctx_leave(pushed);
        vg__event(h, VG_EV_OOM, dev_free, size, stream, site);
        vg__snapshot_on("oom"); /* written below, once the lock is released */
    }
    if (st == VG_ERR_OUT_OF_MEMORY && guard) {
        vg_report_t r = {.kind = VG_REPORT_OUT_OF_MEMORY, .device = h->device,
                         .stream = stream, .call_site = site, .clean_seq = UINT64_MAX};
        snprintf(r.detail, sizeof r.detail, "%s", vg_last_error());
        vg__report(&r);
    }
    pthread_mutex_unlock(&h->lock);
    vg__snapshot_maybe();
    return st;
}

VG_API vg_status_t vg_malloc(void **ptr, size_t size, void *stream) {
    if (!ptr)
        return vg__error(VG_ERR_INVALID_ARGUMENT, "vg_malloc: ptr is NULL");
    *ptr = NULL;
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    vg_heap_t *h;
    if ((st = vg__heap_current(&h)) != VG_OK)
        return st;
    return alloc_in(h, ptr, size, (CUstream)stream);
}

__attribute__((noinline)) vg_status_t vg__malloc_synchronous(void **ptr, size_t size,
                                                           bool managed) {
    *ptr = NULL;
    vg_status_t st = vg__ensure_init();
    vg_heap_t *h;
    if (st != VG_OK ||
        (st = managed ? vg__heap_managed_current(&h) : vg__heap_current(&h)) != VG_OK)
        return st;
    return alloc_in(h, ptr, size, VG_STREAM_SYNC);
}

VG_API vg_status_t vg_malloc_device(void **ptr, size_t size, int device, void *stream) {
    if (!ptr)
        return vg__error(VG_ERR_INVALID_ARGUMENT, "vg_malloc_device: ptr is NULL");
    *ptr = NULL;
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    vg_heap_t *h;
    if ((st = vg__heap_for_device(device, &h)) != VG_OK)
        return st;
    return alloc_in(h, ptr, size, (CUstream)stream);
}

/* ---------------------------------------------------------------------------------------
 * Free, and what a bad free was
 * ------------------------------------------------------------------------------------- */

static void describe_site(const char *what, uint32_t site) {
    vg_site_t *s = vg__site(site);
    if (!s || !s->nframes)
        return;
    vg__error_append("\n  %s at:", what);
    uint32_t shown = vg__site_symbolize(s);
    for (uint32_t i = 0; i < shown && i < 8; i++)
        vg__error_append("\n    #%u %s", i, vg__symbolize(s->frames[i]));
}

bool vg__is_ours(uint64_t p) { return vg__heap_containing(p) != NULL; }

bool vg__live_range(uint64_t p, uint64_t *base, uint64_t *size) {
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_block_t *b = vg__heap_block_containing(h, p);
        bool found = b && b->state == VG_BLOCK_ALLOCATED && p >= b->user &&
                     p < b->user + (b->requested ? b->requested : 1);
        if (found) {
            *base = b->user;
            *size = b->requested;
        }
        pthread_mutex_unlock(&h->lock);
        if (found)
            return true;
    }
    return false;
}

/* Which heaps a synchronisation covers: a context's (all), or the heaps that know the
 * stream (a legacy or per-thread stream is the current context's). */
static bool sync_covers(const vg_sync_t *t, vg_heap_t *h, CUcontext current) {
    CUcontext ctx = __atomic_load_n(&h->ctx, __ATOMIC_ACQUIRE); /* (NULL once retired) */
    if (t->all)
        return ctx == t->ctx;
    if (t->stream == NULL || t->stream == CU_STREAM_LEGACY || t->stream == CU_STREAM_PER_THREAD)
        return ctx == current;
    return ctx != NULL;
}

void vg__sync_begin(vg_sync_t *t, bool all, CUcontext ctx, CUstream stream) {
    memset(t, 0, sizeof *t);
    t->all = all;
    t->check = true;
    t->stream = stream;
    CUcontext current = NULL;
    if (vg__ensure_init() != VG_OK || vg__cuCtxGetCurrent(&current) != CUDA_SUCCESS)
        return;
    t->ctx = ctx ? ctx : current;
    if (!t->ctx)
        return;
    for (int i = 0; i < vg__heap_count() && t->n < VG_SYNC_HEAPS; i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        if (!sync_covers(t, h, current))
            continue;
        pthread_mutex_lock(&h->lock);
        t->marks[t->n] = vg__heap_sync_begin(h, all, stream);
        pthread_mutex_unlock(&h->lock);
        t->heap[t->n++] = h;
    }
}

void vg__sync_end(vg_sync_t *t, bool ok) {
    if (ok && t->ctx) {
        if (t->all)
            vg__order_all_done(); /* (every context's streams: fewer reports, never a false one) */
        else
            vg__order_stream_done(t->stream);
    }
    for (int i = 0; i < t->n; i++) {
        vg_heap_t *h = t->heap[i];
        pthread_mutex_lock(&h->lock);
        vg__heap_sync_end(h, t->marks[i], ok);
        if (ok && t->check && vg__opt.check_sync)
            vg__guard_check_all(h, t->all ? "by the check at a context synchronisation"
                                          : "by the check at a stream synchronisation",
                                t->all);
        pthread_mutex_unlock(&h->lock);
    }
    t->n = 0;
    if (ok && t->all)
        vg__snapshot_maybe();
}

/* The primary context of dev, found without creating one: *primary is NULL when it is
 * not active. False when the driver cannot say. */
static bool primary_of(CUdevice dev, CUcontext *primary) {
    unsigned int flags = 0;
    int active = 0;
    *primary = NULL;
    if (vg__cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS)
        return false;
    if (!active)
        return true;
    if (vg__cuDevicePrimaryCtxRetain(primary, dev) != CUDA_SUCCESS)
        return false;
    vg__cuDevicePrimaryCtxRelease(dev);
    return true;
}

/* Whether ctx is the primary context of `device` (cuCtxDestroy refuses those). In doubt,
 * yes: the heap is then kept. */
static bool is_primary(CUcontext ctx, int device) {
    CUdevice dev;
    CUcontext primary;
    return vg__cuDeviceGet(&dev, device) != CUDA_SUCCESS || !primary_of(dev, &primary) ||
           primary == ctx;
}

/* The program is about to destroy (or reset) ctx: guard mode's final check runs while the
 * context lives; then, unless it is a primary context and `keep_primary`, what the
 * program never freed is reported as leaked (`found` says when) and the heap retired. */
static void context_ending(CUcontext ctx, bool keep_primary, const char *found) {
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h) || __atomic_load_n(&h->ctx, __ATOMIC_ACQUIRE) != ctx)
            continue;
        pthread_mutex_lock(&h->lock);
        vg__guard_heap_shutdown(h);
        vg__guard_context_failed(h);
        bool retire = !keep_primary || !is_primary(ctx, h->device);
        pthread_mutex_unlock(&h->lock);
        if (!retire)
            continue;
        if (vg__leaks_wanted()) /* (the memory dies with the context: as at exit) */
            vg__leak_report(h, found);
        pthread_mutex_lock(&h->lock);
        vg__heap_retire(h);
        pthread_mutex_unlock(&h->lock);
    }
}

void vg__context_destroying(CUcontext ctx) {
    context_ending(ctx, true, "when its context was destroyed (cuCtxDestroy)");
}

void vg__primary_resetting(CUdevice dev) {
    CUcontext primary;
    if (vg__ensure_init() == VG_OK && primary_of(dev, &primary) && primary)
        context_ending(primary, false, "when its context was reset (cudaDeviceReset)");
}

void vg__guard_flush_stream(void *stream) {
    if (!vg__guard_on() || vg__ensure_init() != VG_OK)
        return;
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        vg__guard_flush(h, (CUstream)stream);
        pthread_mutex_unlock(&h->lock);
    }
}

/* Report a bad free in guard mode (fast mode only returns the error). */
static void report_bad_free(vg_report_kind_t kind, int device, uint64_t user, uint64_t size,
                            uint64_t id, uint32_t alloc_site, uint32_t free_site,
                            uint32_t call_site) {
    if (!vg__guard_on())
        return;
    vg_report_t r = {.kind = kind, .device = device, .has_block = user != 0, .user = user,
                     .size = size, .id = id, .alloc_site = alloc_site, .free_site = free_site,
                     .call_site = call_site, .clean_seq = UINT64_MAX};
    snprintf(r.detail, sizeof r.detail, "%s", vg_last_error());
    char *nl = strchr(r.detail, '\n'); /* the sites are printed by the report itself */
    if (nl)
        *nl = '\0';
    vg__report(&r);
}

static vg_status_t bad_free(uint64_t p, uint32_t call_site) {
    int n = vg__heap_count();
    for (int i = 0; i < n; i++) { /* freed and still in the quarantine (guard mode)? */
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_block_t *q = vg__guard_quarantined(h, p);
        if (q) {
            vg_block_t c = *q;
            pthread_mutex_unlock(&h->lock);
            vg__error(VG_ERR_DOUBLE_FREE,
                      "double free of %#llx: a %llu-byte allocation (#%llu) on device %d that "
                      "was already freed",
                      (unsigned long long)p, (unsigned long long)c.requested,
                      (unsigned long long)c.id, h->device);
            report_bad_free(VG_REPORT_DOUBLE_FREE, h->device, p, c.requested, c.id, c.site,
                            c.free_site, call_site);
            describe_site("the allocation was made", c.site);
            describe_site("it was first freed", c.free_site);
            describe_site("and freed again", call_site);
            return VG_ERR_DOUBLE_FREE;
        }
        pthread_mutex_unlock(&h->lock);
    }
    for (int i = 0; i < n; i++) { /* inside a live allocation? */
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_block_t *b = vg__heap_block_containing(h, p);
        if (b && b->state == VG_BLOCK_ALLOCATED) {
            vg_block_t c = *b;
            pthread_mutex_unlock(&h->lock);
            vg__error(VG_ERR_INTERIOR_FREE,
                      "invalid free of %#llx: it points %lld bytes into a %llu-byte allocation "
                      "at %#llx on device %d, not at its start",
                      (unsigned long long)p, (long long)(p - c.user),
                      (unsigned long long)c.requested, (unsigned long long)c.user, h->device);
            report_bad_free(VG_REPORT_INTERIOR_FREE, h->device, c.user, c.requested, c.id,
                            c.site, 0, call_site);
            describe_site("the allocation was made", c.site);
            return VG_ERR_INTERIOR_FREE;
        }
        pthread_mutex_unlock(&h->lock);
    }
    for (int i = 0; i < n; i++) { /* freed before? newest record first */
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        const vg_free_rec_t *rp = vg__heap_history_find(h, p, 0);
        if (rp) {
            vg_free_rec_t r = *rp;
            pthread_mutex_unlock(&h->lock);
            vg__error(VG_ERR_DOUBLE_FREE,
                      "double free of %#llx: a %llu-byte allocation (#%llu) on device %d that "
                      "was already freed",
                      (unsigned long long)p, (unsigned long long)r.requested,
                      (unsigned long long)r.id, h->device);
            report_bad_free(VG_REPORT_DOUBLE_FREE, h->device, p, r.requested, r.id,
                            r.alloc_site, r.free_site, call_site);
            describe_site("the allocation was made", r.alloc_site);
            describe_site("it was first freed", r.free_site);
            describe_site("and freed again", call_site);
            return VG_ERR_DOUBLE_FREE;
        }
        pthread_mutex_unlock(&h->lock);
    }
    vg__error(VG_ERR_INVALID_FREE,
              "invalid free of %#llx: vramguard never allocated this pointer (or freed it "
              "more than %d frees ago)",
              (unsigned long long)p, VG_FREE_HISTORY);
    report_bad_free(VG_REPORT_INVALID_FREE, -1, 0, 0, 0, 0, 0, call_site);
    describe_site("the free was", call_site);
    return VG_ERR_INVALID_FREE;
}

/* `synced`: the context was synchronised just before (the program's cuMemFree): the memory
 * is any stream's at once. */
__attribute__((noinline)) static vg_status_t free_in(void *ptr, int device, CUstream stream,
                                                     bool synced) {
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    bool guard = vg__guard_on();
    uint32_t free_site = guard && vg__opt.stack_depth ? vg__site_here(2) : 0;
    vg_block_t *b;
    vg_heap_t *h = vg__heap_owner_locked(p, &b);
    if (!h)
        return bad_free(p, free_site ? free_site : vg__site_here(2));
    if (device >= 0 && h->device != device) {
        vg_block_t c = *b;
        pthread_mutex_unlock(&h->lock);
        vg__error(VG_ERR_WRONG_DEVICE,
                  "free of %#llx on device %d, but it is a %llu-byte allocation of device %d",
                  (unsigned long long)p, device, (unsigned long long)c.requested, h->device);
        report_bad_free(VG_REPORT_WRONG_DEVICE, h->device, c.user, c.requested, c.id, c.site,
                        0, free_site ? free_site : vg__site_here(2));
        describe_site("the allocation was made", c.site);
        return VG_ERR_WRONG_DEVICE;
    }
    vg__site_account(b->site, -(int64_t)b->requested, -1);
    b->free_site = free_site;
    vg_unordered_t race;
    bool unordered = guard && vg__guard_unordered_free(h, b, stream, &race);
    vg__heap_history_add(h, b, free_site);
    vg__trace_event(false, b->user, b->requested, stream);
    vg__event(h, VG_EV_FREE, b->user, b->requested, stream, b->site);
    vg__heap_free(h, b, stream, synced);
    if (guard)
        vg__guard_poll(h, "by a check that ran after the allocation was freed");
    pthread_mutex_unlock(&h->lock);
    if (unordered)
        vg__report_unordered_free(&race);
    vg__snapshot_maybe();
    return VG_OK;
}

VG_API vg_status_t vg_free(void *ptr, void *stream) {
    if (!ptr)
        return VG_OK;
    vg_status_t st = vg__ensure_init();
    return st != VG_OK ? st : free_in(ptr, -1, (CUstream)stream, false);
}

VG_API vg_status_t vg_free_device(void *ptr, int device, void *stream) {
    if (!ptr)
        return VG_OK;
    vg_status_t st = vg__ensure_init();
    return st != VG_OK ? st : free_in(ptr, device, (CUstream)stream, false);
}

__attribute__((noinline)) vg_status_t vg__free_synchronous(void *ptr, CUresult *waited) {
    *waited = CUDA_SUCCESS;
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    vg_block_t *b;
    vg_heap_t *h = vg__heap_owner_locked((uint64_t)(uintptr_t)ptr, &b);
    bool wait = false; /* (not for a bad free; nor during a capture, which forbids it: the
                          block then waits on its stream, as any free does) */
    CUcontext ctx = NULL;
    if (h) {
        ctx = h->ctx;
        wait = !vg__heap_capturing(h);
        pthread_mutex_unlock(&h->lock);
    }
    bool synced = false;
    if (wait) {
        vg_sync_t t;
        vg__sync_begin(&t, true, ctx, NULL);
        t.check = false; /* (a free is not one of check_sync's check points) */
        bool pushed = vg__heap_ctx_enter(h);
        *waited = vg__cuCtxSynchronize();
        vg__heap_ctx_leave(pushed);
        synced = *waited == CUDA_SUCCESS;
        vg__sync_end(&t, synced);
    }
    return free_in(ptr, -1, NULL, synced);
}

/* ---------------------------------------------------------------------------------------
 * Streams
 * ------------------------------------------------------------------------------------- */

VG_API vg_status_t vg_record_stream(void *ptr, void *stream) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    vg_block_t *b;
    vg_heap_t *h = vg__heap_owner_locked((uint64_t)(uintptr_t)ptr, &b);
    if (!h)
        return vg__error(VG_ERR_INVALID_ARGUMENT,
                         "vg_record_stream: %p is not a live vramguard allocation", ptr);
    st = vg__heap_record_stream(h, b, (CUstream)stream);
    pthread_mutex_unlock(&h->lock);
    return st;
}

VG_API vg_status_t vg_stream_synchronized(void *stream) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    uint64_t before = vg__report_count();
    vg__order_stream_done((CUstream)stream);
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        if (vg__guard_claim_holds(h, (CUstream)stream)) /* (else its frees complete by
                                                           events, as without the call) */
            vg__heap_stream_synced(h, (CUstream)stream);
        if (vg__opt.check_sync)
            vg__guard_check_all(h, "by the check at a stream synchronisation", false);
        pthread_mutex_unlock(&h->lock);
    }
    return vg__report_count() > before ? VG_ERR_MEMORY_ERRORS : VG_OK;
}

/* ---------------------------------------------------------------------------------------
 * Guard mode: checks, errors, steps, kernels
 * ------------------------------------------------------------------------------------- */

VG_API vg_status_t vg_check(void) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    uint64_t before = vg__report_count();
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        vg__guard_flush_all(h);
        CUresult r = CUDA_SUCCESS;
        bool capturing = vg__heap_capturing(h); /* (then nothing may wait for the context) */
        if (!capturing) {
            bool pushed = vg__heap_ctx_enter(h);
            r = vg__cuCtxSynchronize(); /* a complete picture: every kernel has run */
            vg__heap_ctx_leave(pushed);
        }
        if (r != CUDA_SUCCESS) { /* S9: the context died; say which kernels ran last */
            pthread_mutex_unlock(&h->lock);
            vg__report_cuda_error(r, "cuCtxSynchronize (in vg_check)");
            pthread_mutex_lock(&h->lock);
        } else if (!capturing) {
            vg__heap_all_synced(h);
        }
        vg__guard_check_all(h, "by the check at vg_check()", true);
        pthread_mutex_unlock(&h->lock);
    }
    uint64_t after = vg__report_count();
    vg__snapshot_maybe();
    if (after > before)
        return vg__error(VG_ERR_MEMORY_ERRORS, "vg_check found %llu new error%s",
                         (unsigned long long)(after - before), after - before == 1 ? "" : "s");
    return VG_OK;
}

VG_API uint64_t vg_error_count(void) {
    return vg__ensure_init() == VG_OK ? vg__report_count() : 0;
}

VG_API char *vg_errors_json(void) {
    return vg__ensure_init() == VG_OK ? vg__reports_json() : NULL;
}

VG_API vg_status_t vg_step(void) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    vg__growth_step();
    return VG_OK;
}

VG_API void vg_kernel_launched(const char *name, void *stream) {
    if (vg__ensure_init() != VG_OK)
        return;
    vg__launch_note(name, (CUstream)stream, vg__opt.stack_depth ? vg__site_here(1) : 0);
}

VG_API void vg_kernel_launched_args(const char *name, void *stream, const void *const *ptrs,
                                    int nptrs) {
    if (vg__ensure_init() != VG_OK)
        return;
    uint64_t v[16];
    int n = nptrs < 0 ? 0 : nptrs > 16 ? 16 : nptrs;
    for (int i = 0; i < n; i++)
        v[i] = (uint64_t)(uintptr_t)ptrs[i];
    uint32_t site = vg__opt.stack_depth ? vg__site_here(1) : 0;
    vg__launch_note_args(name, (CUstream)stream, site, v, NULL, n, -1);
    if (vg__guard_on())
        vg__access_check_args(name && *name ? name : "(unnamed kernel)", (CUstream)stream, site,
                              v, NULL, n);
}

VG_API void vg_cuda_error(int result, const char *call) {
    if (vg__ensure_init() != VG_OK || result == 0)
        return;
    vg__report_cuda_error((CUresult)result, call && *call ? call : "a CUDA call");
    CUcontext cur = NULL;
    vg__cuCtxGetCurrent(&cur);
    for (int i = 0; i < vg__heap_count(); i++) { /* what the checks already found */
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        vg__guard_poll(h, "by a check that ran before the CUDA error");
        if (h->ctx == cur)
            vg__guard_context_failed(h);
        pthread_mutex_unlock(&h->lock);
    }
}

VG_API vg_status_t vg_forget_stream(void *stream) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    vg__order_stream_destroyed((CUstream)stream);
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        vg__heap_forget_stream(h, (CUstream)stream);
        pthread_mutex_unlock(&h->lock);
    }
    return VG_OK;
}

/* ---------------------------------------------------------------------------------------
 * Cache, limits, validation
 * ------------------------------------------------------------------------------------- */

VG_API vg_status_t vg_empty_cache(void) {
    vg_status_t st = vg__ensure_init();
    for (int i = 0; st == VG_OK && i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        st = vg__heap_trim(h, true);
        pthread_mutex_unlock(&h->lock);
    }
    return st;
}

static vg_status_t heap_of(int device, vg_heap_t **h) {
    return device < 0 ? vg__heap_current(h) : vg__heap_for_device(device, h);
}

VG_API vg_status_t vg_set_memory_limit(int device, size_t bytes) {
    vg_status_t st = vg__ensure_init();
    vg_heap_t *h;
    if (st != VG_OK || (st = heap_of(device, &h)) != VG_OK)
        return st;
    pthread_mutex_lock(&h->lock);
    h->limit = vg__align_down(bytes, VG_ALIGN);
    if (h->limit && (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].current > h->limit)
        st = vg__heap_trim(h, true);
    /* What is in use (or waits for its streams) stays: until it is freed, nothing grows. */
    uint64_t now = (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].current;
    h->limit_floor = h->limit && now > h->limit ? now : 0;
    pthread_mutex_unlock(&h->lock);
    return st;
}

VG_API vg_status_t vg_validate(void) {
    vg_status_t st = vg__ensure_init();
    for (int i = 0; st == VG_OK && i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        st = vg__heap_validate(h);
        pthread_mutex_unlock(&h->lock);
    }
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------------------- */

static vg_status_t snapshot(int device, vg_stats_t *out, int *dev_out) {
    vg_status_t st = vg__ensure_init();
    vg_heap_t *h;
    if (st != VG_OK || (st = heap_of(device, &h)) != VG_OK)
        return st;
    pthread_mutex_lock(&h->lock);
    vg__stats_snapshot(h, out);
    pthread_mutex_unlock(&h->lock);
    if (dev_out)
        *dev_out = h->device;
    return VG_OK;
}

VG_API vg_status_t vg_get_stats(int device, vg_stats_t *out) {
    if (!out || out->size < offsetof(vg_stats_t, allocated_bytes))
        return vg__error(VG_ERR_INVALID_ARGUMENT,
                         "vg_get_stats: set out->size = sizeof(vg_stats_t) first");
    vg_stats_t s;
    vg_status_t st = snapshot(device, &s, NULL);
    if (st != VG_OK)
        return st;
    uint32_t size = out->size < sizeof s ? out->size : (uint32_t)sizeof s;
    memcpy(out, &s, size);
    out->size = size;
    return VG_OK;
}

static vg_status_t each_stat(int device, void (*fn)(vg_stat_t *, void *), void *arg,
                             bool events) {
    vg_status_t st = vg__ensure_init();
    vg_heap_t *h;
    if (st != VG_OK || (st = heap_of(device, &h)) != VG_OK)
        return st;
    pthread_mutex_lock(&h->lock);
    vg_stats_t *s = &h->stats;
#define VG_X(f, key, row, bytes)                                                            \
    for (int p = 0; p < VG_POOLS; p++)                                                      \
        fn(&s->f[p], arg);
    VG_STATS_POOLED(VG_X)
#undef VG_X
#define VG_X(f, key, row) fn(&s->f, arg);
    VG_STATS_SINGLE(VG_X)
#undef VG_X
    if (events) {
#define VG_X(f, key) s->f = 0;
        VG_STATS_EVENTS(VG_X)
#undef VG_X
    }
    pthread_mutex_unlock(&h->lock);
    return VG_OK;
}

static void reset_peak(vg_stat_t *s, void *arg) {
    (void)arg;
    s->peak = s->current;
}

static void reset_accumulated(vg_stat_t *s, void *arg) {
    (void)arg;
    s->allocated = s->freed = 0;
}

VG_API vg_status_t vg_reset_peak_stats(int device) {
    return each_stat(device, reset_peak, NULL, false);
}

VG_API vg_status_t vg_reset_accumulated_stats(int device) {
    return each_stat(device, reset_accumulated, NULL, true);
}

VG_API char *vg_memory_summary(int device) {
    vg_stats_t s;
    int dev = 0;
    if (snapshot(device, &s, &dev) != VG_OK)
        return NULL;
    vg_host_stats_t host = {.size = sizeof host};
    vg__pinned_stats(&host);
    return vg__stats_summary(&s, dev, &host);
}

VG_API char *vg_memory_stats_json(int device) {
    vg_stats_t s;
    if (snapshot(device, &s, NULL) != VG_OK)
        return NULL;
    return vg__stats_json(&s);
}

VG_API vg_status_t vg_get_host_stats(vg_host_stats_t *out) {
    if (!out || out->size == 0)
        return vg__error(VG_ERR_INVALID_ARGUMENT, "vg_get_host_stats: out is NULL or its size is 0");
    vg__pinned_stats(out);
    return VG_OK;
}

VG_API char *vg_host_memory_stats_json(void) {
    vg_host_stats_t host = {.size = sizeof host};
    vg__pinned_stats(&host);
    return vg__host_stats_json(&host);
}

VG_API void vg_free_string(char *s) { free(s); }
