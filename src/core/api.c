/* api.c — the public allocation API: vg_malloc, vg_free and friends.
 *
 * Each call: make sure vramguard is initialised, find the heap (the current context's,
 * or a device's), capture the allocation site outside the lock, then do the work under
 * the heap's lock. Bad frees are classified here, off the fast path: a pointer that is
 * not live in any heap is looked up in the live blocks (interior pointer), then in each
 * heap's history of recent frees (double free); anything else was never allocated.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "guard.h"
#include "heap.h"
#include "init.h"
#include "options.h"
#include "sites.h"
#include "trace.h"

vg_status_t vg__modules_init(void) {
    vg__sites_init();
    return vg__trace_open();
}

void vg__modules_shutdown(void) { vg__trace_close(); }

/* ---------------------------------------------------------------------------------------
 * Allocation
 * ------------------------------------------------------------------------------------- */

__attribute__((noinline)) static vg_status_t alloc_in(vg_heap_t *h, void **ptr, size_t size,
                                                      CUstream stream) {
    uint32_t site = vg__opt.stack_depth ? vg__site_here(2) : 0;
    pthread_mutex_lock(&h->lock);
    vg_block_t *b;
    vg_status_t st = vg__heap_alloc(h, size, size, stream, &b);
    if (st == VG_OK) {
        b->site = site;
        vg__site_account(site, (int64_t)b->size, 1);
        *ptr = (void *)(uintptr_t)b->user;
        vg__trace_event(true, b->user, size, stream);
    }
    pthread_mutex_unlock(&h->lock);
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

static void record_free(vg_heap_t *h, const vg_block_t *b, uint32_t free_site) {
    if (!h->history) {
        h->history = calloc(VG_FREE_HISTORY, sizeof *h->history);
        if (!h->history)
            return;
    }
    h->history[h->nhistory++ % VG_FREE_HISTORY] =
        (vg_free_rec_t){b->user, b->requested, b->id, b->site, free_site};
}

static void describe_site(const char *what, uint32_t site) {
    vg_site_t *s = vg__site(site);
    if (!s || !s->nframes)
        return;
    vg__error_append("\n  %s at:", what);
    vg__symbolize_batch(s->frames, (int)s->nframes);
    for (uint32_t i = 0; i < s->nframes && i < 8; i++)
        vg__error_append("\n    #%u %s", i, vg__symbolize(s->frames[i]));
}

/* Find a live (or quarantined) block containing p in h (lock held). */
static vg_block_t *block_containing(vg_heap_t *h, uint64_t p) {
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next) {
        if (p < seg->base || p >= seg->base + seg->size)
            continue;
        for (vg_block_t *b = seg->first; b; b = b->next)
            if (p >= b->addr && p < b->addr + b->size)
                return b;
    }
    return NULL;
}

static vg_status_t bad_free(uint64_t p, uint32_t free_site) {
    int n = vg__heap_count();
    for (int i = 0; i < n; i++) { /* inside a live allocation? */
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_block_t *b = block_containing(h, p);
        if (b && b->state == VG_BLOCK_ALLOCATED) {
            uint64_t user = b->user, req = b->requested;
            uint32_t site = b->site;
            pthread_mutex_unlock(&h->lock);
            vg__error(VG_ERR_INTERIOR_FREE,
                      "invalid free of %#llx: it points %llu bytes into a %llu-byte allocation "
                      "at %#llx on device %d, not at its start",
                      (unsigned long long)p, (unsigned long long)(p - user),
                      (unsigned long long)req, (unsigned long long)user, h->device);
            describe_site("the allocation was made", site);
            return VG_ERR_INTERIOR_FREE;
        }
        pthread_mutex_unlock(&h->lock);
    }
    for (int i = 0; i < n; i++) { /* freed before? newest record first */
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        uint64_t have = VG_MIN(h->nhistory, (uint64_t)VG_FREE_HISTORY);
        for (uint64_t k = 0; h->history && k < have; k++) {
            vg_free_rec_t r = h->history[(h->nhistory - 1 - k) % VG_FREE_HISTORY];
            if (r.user != p)
                continue;
            pthread_mutex_unlock(&h->lock);
            vg__error(VG_ERR_DOUBLE_FREE,
                      "double free of %#llx: a %llu-byte allocation (#%llu) on device %d that "
                      "was already freed",
                      (unsigned long long)p, (unsigned long long)r.requested,
                      (unsigned long long)r.id, h->device);
            describe_site("the allocation was made", r.alloc_site);
            describe_site("it was first freed", r.free_site);
            describe_site("and freed again", free_site);
            return VG_ERR_DOUBLE_FREE;
        }
        pthread_mutex_unlock(&h->lock);
    }
    vg__error(VG_ERR_INVALID_FREE,
              "invalid free of %#llx: vramguard never allocated this pointer (or freed it "
              "more than %d frees ago)",
              (unsigned long long)p, VG_FREE_HISTORY);
    describe_site("the free was", free_site);
    return VG_ERR_INVALID_FREE;
}

__attribute__((noinline)) static vg_status_t free_in(void *ptr, int device, CUstream stream) {
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    vg_block_t *b;
    vg_heap_t *h = vg__heap_owner_locked(p, &b);
    uint32_t free_site = vg__opt.mode == VG_MODE_GUARD && vg__opt.stack_depth ? vg__site_here(2) : 0;
    if (!h)
        return bad_free(p, free_site ? free_site : vg__site_here(2));
    if (device >= 0 && h->device != device) {
        int owner = h->device;
        uint64_t req = b->requested;
        uint32_t site = b->site;
        pthread_mutex_unlock(&h->lock);
        vg__error(VG_ERR_WRONG_DEVICE,
                  "free of %#llx on device %d, but it is a %llu-byte allocation of device %d",
                  (unsigned long long)p, device, (unsigned long long)req, owner);
        describe_site("the allocation was made", site);
        return VG_ERR_WRONG_DEVICE;
    }
    vg__site_account(b->site, -(int64_t)b->size, -1);
    record_free(h, b, free_site);
    vg__trace_event(false, b->user, b->requested, stream);
    vg__heap_free(h, b, stream);
    pthread_mutex_unlock(&h->lock);
    return VG_OK;
}

VG_API vg_status_t vg_free(void *ptr, void *stream) {
    if (!ptr)
        return VG_OK;
    vg_status_t st = vg__ensure_init();
    return st != VG_OK ? st : free_in(ptr, -1, (CUstream)stream);
}

VG_API vg_status_t vg_free_device(void *ptr, int device, void *stream) {
    if (!ptr)
        return VG_OK;
    vg_status_t st = vg__ensure_init();
    return st != VG_OK ? st : free_in(ptr, device, (CUstream)stream);
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
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg__heap_stream_synced(h, (CUstream)stream);
        pthread_mutex_unlock(&h->lock);
    }
    return VG_OK;
}

VG_API vg_status_t vg_forget_stream(void *stream) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
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
    return vg__stats_summary(&s, dev);
}

VG_API char *vg_memory_stats_json(int device) {
    vg_stats_t s;
    if (snapshot(device, &s, NULL) != VG_OK)
        return NULL;
    return vg__stats_json(&s);
}

VG_API void vg_free_string(char *s) { free(s); }
