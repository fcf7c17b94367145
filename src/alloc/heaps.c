/* heaps.c — the heaps: one per device context, found from a device number or the current
 * context (and cached per thread). The context a heap's driver calls run in, and the
 * captures, are context.c's; the allocator itself is heap.c.
 */
#define _GNU_SOURCE
#include "heap.h"
#include "hooks.h"
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/options.h"

#define VG_MAX_HEAPS 128 /* live contexts, and in guard mode their managed memory (G9) */

static vg_heap_t *g_heaps[VG_MAX_HEAPS];
static _Atomic int g_nheaps;
static pthread_mutex_t g_heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_primary[VG_MAX_HEAPS];
static _Atomic uint64_t g_retired; /* heaps retired so far: a thread's cached heap is valid
                                      only if none was retired since it was cached */
static VG_TLS_FAST CUcontext t_last_ctx;
static VG_TLS_FAST vg_heap_t *t_last_heap;
static VG_TLS_FAST uint64_t t_last_retired;

int vg__heap_count(void) { return atomic_load(&g_nheaps); }
vg_heap_t *vg__heap_at(int i) {
    return i < atomic_load(&g_nheaps) ? __atomic_load_n(&g_heaps[i], __ATOMIC_ACQUIRE) : NULL;
}

static bool cached(CUcontext ctx) {
    return ctx == t_last_ctx && t_last_heap &&
           t_last_retired == atomic_load_explicit(&g_retired, memory_order_acquire);
}

/* A LIMIT option's bytes on a device with `total` bytes. */
static uint64_t bytes_for(vg_limit_t l, uint64_t total) {
    if (l.fraction > 0)
        return vg__align_down((uint64_t)(l.fraction * (double)total), VG_ALIGN);
    return l.bytes;
}

/* verbose=1: what vramguard made of a device when it first used it. */
static void describe_heap(const vg_heap_t *h) {
    char name[128] = "", total[32], a[32], b[32], c[32];
    if (vg__cuDeviceGetName(name, sizeof name, h->device) != CUDA_SUCCESS)
        snprintf(name, sizeof name, "?");
    char limit[64] = "no limit";
    if (h->limit)
        snprintf(limit, sizeof limit, "limit %s (option limit)", vg__fmt_bytes(a, h->limit));
    vg__log("device %d (%s, %s), %s", h->device, name, vg__fmt_bytes(total, h->device_total),
            limit);
    if (h->vmm)
        vg__log("  virtual-memory segments in %s pages; requests up to %s in a range of their "
                "own; requests from %s that need new memory keep their range (slots)",
                vg__fmt_bytes(a, h->page), h->small_max ? vg__fmt_bytes(b, h->small_max) : "0",
                h->slot_min ? vg__fmt_bytes(c, h->slot_min) : "(never)");
    else
        vg__log("  cuMemAlloc segments (%s): a block never spans two, and free memory joins "
                "only within a segment", vg__opt.vmm == VG_VMM_OFF ? "vmm=off"
                : vg__opt.mode == VG_MODE_MEMCHECK && vg__opt.vmm == VG_VMM_AUTO
                    ? "memcheck mode keeps a shadow per cuMemAlloc segment (G13)"
                : vg__alloc_plain_segments()
                    ? "an NVTX tool is named, and compute-sanitizer takes no pool in virtual "
                      "memory (G12)"
                    : "the driver or device offers no virtual-memory management");
}

/* The layers above learn of a new heap (guard mode sets up its state there). */
static vg_status_t heap_created(vg_heap_t *h) {
    return vg__alloc_hooks.heap_created ? vg__alloc_hooks.heap_created(h) : VG_OK;
}

static vg_status_t heap_create(CUcontext ctx, int device, bool managed, vg_heap_t **out) {
    vg_heap_t *h = calloc(1, sizeof *h);
    if (!h)
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
    pthread_mutex_init(&h->lock, NULL);
    h->ctx = ctx;
    h->device = device;
    h->managed = managed;
    size_t total = 0;
    CUresult r = vg__cuDeviceTotalMem(&total, device);
    if (r != CUDA_SUCCESS) {
        free(h);
        return vg__error(vg__cu_status(r), "cuDeviceTotalMem failed: %s", vg__cu_error_name(r));
    }
    h->device_total = total;
    h->limit = managed ? 0 : bytes_for(vg__opt.limit, total); /* (managed memory may
                                                                  oversubscribe the device) */
    bool pushed = vg__heap_ctx_enter(h);
    vg_status_t st = vg__heap_init_segments(h);
    if (st == VG_OK && (st = heap_created(h)) != VG_OK)
        vg__segment_release_all(h);
    vg__heap_ctx_leave(pushed);
    if (st != VG_OK) {
        free(h);
        return st;
    }
    if (h->vmm) {
        h->slot_min = bytes_for(vg__opt.slot_min, total);
        h->small_max = vg__opt.small_max;
    }
    if (vg__opt.plan != VG_PLAN_OFF && !managed) {
        /* plan=on places by the plan in fast mode, on virtual memory (an arena whose pages
         * are mapped as the plan needs them); elsewhere it learns, as plan=learn. Guard
         * mode's redzones and quarantine change every block's size and lifetime. */
        bool follow = vg__opt.plan == VG_PLAN_ON && vg__opt.mode == VG_MODE_FAST && h->vmm;
        h->plan = vg__plan_new(follow); /* (NULL, no memory for its log: nothing is learnt) */
        h->plan_moves = follow && h->plan;
    }
    if (vg__opt.verbose && !managed)
        describe_heap(h);
    *out = h;
    return VG_OK;
}

/* verbose=1 with plan=learn or on: the step found, what a plan of two would reserve, and
 * with plan=on what it placed and the pages moved. */
static void describe_plan(vg_heap_t *h) {
    vg_plan_report_t r;
    char a[32], b[32], c[32];
    vg__plan_get(h->plan, &r);
    if (!r.period && r.found) {
        vg__log("device %d: no training step followed at exit; %llu found, each dropped "
                "when the program stopped repeating it (steps are looked for up to %d "
                "requests; %s gradient accumulation's whole step, up to %d, once its "
                "micro-batch's plan was dropped at two optimizer steps)",
                h->device, (unsigned long long)r.found, VG_PLAN_MAX_PERIOD,
                h->plan_moves ? "also" : "with plan=on, also", VG_PLAN_LONG_PERIOD);
    } else if (!r.period) {
        vg__log("device %d: no training step found in its %llu allocations (plan=%s: a "
                "step is a period of the sizes asked for, %d to %d requests long, after "
                "which live memory comes back)",
                h->device, (unsigned long long)h->stats.allocation[VG_POOL_ALL].allocated,
                h->plan_moves ? "on" : "learn", VG_PLAN_MIN_PERIOD, VG_PLAN_MAX_PERIOD);
    } else {
    vg__log("device %d: a training step of %llu requests, found at allocation %llu; %.1f%% "
            "of the %llu since repeated it. A plan of two steps needs %s for their tensors "
            "(peak live %s), beside %s that live across steps",
            h->device, (unsigned long long)r.period, (unsigned long long)r.found_at,
            r.since ? 100.0 * (double)r.repeated / (double)r.since : 100.0,
            (unsigned long long)r.since, vg__fmt_bytes(a, r.height),
            vg__fmt_bytes(b, r.planned_peak), vg__fmt_bytes(c, r.long_lived));
    }
    char last[128] = ""; /* (none when no plan is followed at exit) */
    if (r.items)
        snprintf(last, sizeof last, " (the last puts %llu of its %llu tensors on the pages of "
                 "those that live across steps)", (unsigned long long)r.in_holes,
                 (unsigned long long)r.items);
    if (h->plan_moves)
        vg__log("device %d: plan=on placed %llu requests where a plan put them%s, %llu missed "
                "their place; %llu pages moved, after %llu waits for a stream",
                h->device, (unsigned long long)r.placed, last, (unsigned long long)r.missed,
                (unsigned long long)h->stats.pages_moved,
                (unsigned long long)h->stats.page_move_waits);
    if (h->plan_moves && r.resumed)
        vg__log("device %d: plan=on took its plan up again %llu time%s, when the step came back "
                "after an interruption (an evaluation, a checkpoint)", h->device,
                (unsigned long long)r.resumed, r.resumed == 1 ? "" : "s");
    if (h->plan_moves && vg__heap_settling(h, 0)) /* (a step found at the end: not yet) */
        vg__log("device %d: plan=on %s settled: requests that would map pages go where "
                "pages are mapped, after %llu pages moved without a plan (docs/allocator.md)",
                h->device,
                r.period ? "had not followed the step found at the end yet, and"
                         : "found no step to follow and",
                (unsigned long long)h->moved_unplanned);
}

void vg__heaps_describe_exit(void) {
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        char a[32], b[32];
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        const vg_stats_t *st = &h->stats;
        uint64_t alloc = (uint64_t)st->allocated_bytes[VG_POOL_ALL].peak;
        uint64_t res = (uint64_t)st->reserved_bytes[VG_POOL_ALL].peak;
        vg__log("device %d%s at exit: peak allocated %s, peak reserved %s (reserved / "
                "allocated %.4f); "
                "%llu allocations, %llu driver allocations or mappings, %llu out of memory",
                h->device, h->managed ? " (managed memory)" : "", vg__fmt_bytes(a, alloc),
                vg__fmt_bytes(b, res),
                alloc ? (double)res / (double)alloc : 0.0,
                (unsigned long long)st->allocation[VG_POOL_ALL].allocated,
                (unsigned long long)st->num_device_alloc, (unsigned long long)st->num_ooms);
        if (h->plan)
            describe_plan(h);
        pthread_mutex_unlock(&h->lock);
    }
}

static vg_heap_t *find_heap(CUcontext ctx, bool managed) {
    int n = atomic_load(&g_nheaps);
    for (int i = 0; i < n; i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (__atomic_load_n(&h->ctx, __ATOMIC_ACQUIRE) == ctx && h->managed == managed)
            return h;
    }
    return NULL;
}

/* Where a new heap goes (g_heaps_lock held): the next place, else a retired heap's (that
 * heap's struct stays allocated: another thread may still be looking at it). -1: full. */
static int free_place(void) {
    int n = atomic_load(&g_nheaps);
    if (n < VG_MAX_HEAPS)
        return n;
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&g_heaps[i]->retired, __ATOMIC_ACQUIRE))
            return i;
    return -1;
}

/* Find or create ctx's heap of device memory, or (managed) of managed memory. */
static vg_status_t find_or_create(CUcontext ctx, int device, bool managed, vg_heap_t **out) {
    vg_heap_t *h = find_heap(ctx, managed);
    if (!h) {
        pthread_mutex_lock(&g_heaps_lock);
        h = find_heap(ctx, managed);
        vg_status_t st = VG_OK;
        int at = h ? -1 : free_place();
        if (!h && at < 0)
            st = vg__error(VG_ERR_NOT_SUPPORTED, "more than %d heaps at once (one per CUDA "
                           "context, and one more for its managed memory in guard mode)",
                           VG_MAX_HEAPS);
        else if (!h && (st = heap_create(ctx, device, managed, &h)) == VG_OK) {
            __atomic_store_n(&g_heaps[at], h, __ATOMIC_RELEASE);
            if (at == atomic_load(&g_nheaps))
                atomic_fetch_add(&g_nheaps, 1);
        }
        pthread_mutex_unlock(&g_heaps_lock);
        if (st != VG_OK)
            return st;
    }
    *out = h;
    return VG_OK;
}

static vg_status_t heap_for_ctx(CUcontext ctx, int device, vg_heap_t **out) {
    if (cached(ctx)) {
        *out = t_last_heap;
        return VG_OK;
    }
    uint64_t retired = atomic_load_explicit(&g_retired, memory_order_acquire);
    vg_heap_t *h;
    vg_status_t st = find_or_create(ctx, device, false, &h);
    if (st != VG_OK)
        return st;
    t_last_ctx = ctx;
    t_last_heap = h;
    t_last_retired = retired;
    *out = h;
    return VG_OK;
}

vg_block_t *vg__heap_block_containing(vg_heap_t *h, uint64_t p) {
    vg_block_t *b = NULL;
    vg_at_t at = vg__heap_block_at(h, p, &b); /* (the address index: O(levels)) */
    if (at != VG_AT_UNKNOWN)
        return at == VG_AT_BLOCK ? b : NULL;
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next) /* (no index: a scan) */
        for (b = seg->first; b; b = b->next)
            if (p >= b->addr && p - b->addr < b->size)
                return b->state == VG_BLOCK_ALLOCATED || b->state == VG_BLOCK_QUARANTINED
                           ? b
                           : NULL;
    return NULL;
}

void vg__segment_each_block(vg_segment_t *seg, bool (*fn)(vg_block_t *b, void *arg), void *arg) {
    for (vg_block_t *b = seg->first, *next; b; b = next) {
        next = b->next;
        if (!fn(b, arg))
            return;
    }
}

void vg__heap_each_segment(vg_heap_t *h, bool (*fn)(vg_segment_t *seg, void *arg), void *arg) {
    for (vg_segment_t *seg = h->segments, *next; seg; seg = next) {
        next = seg->next;
        if (!fn(seg, arg))
            return;
    }
}

void vg__heap_each_block(vg_heap_t *h, bool (*fn)(vg_block_t *b, void *arg), void *arg) {
    for (vg_segment_t *seg = h->segments; seg; seg = seg->next)
        for (vg_block_t *b = seg->first, *next; b; b = next) {
            next = b->next;
            if (!fn(b, arg))
                return;
        }
}

void vg__heap_each_stream(vg_heap_t *h, bool (*fn)(vg_stream_t *s, void *arg), void *arg) {
    for (vg_stream_t *s = h->streams; s; s = s->next)
        if (!fn(s, arg))
            return;
}

void vg__heap_retire(vg_heap_t *h) {
    if (vg__alloc_hooks.heap_retiring) /* (its live blocks: leaks; guard mode's state) */
        vg__alloc_hooks.heap_retiring(h);
    bool pushed = vg__heap_ctx_enter(h);
    for (vg_stream_t *s = h->streams; s; s = s->next) {
        if (s->event)
            vg__cuEventDestroy(s->event);
        s->event = NULL;
        s->event_pending = false;
        s->forgotten = true;
    }
    vg__segment_release_all(h); /* (cuMemAlloc segments too, before the driver would) */
    vg__heap_ctx_leave(pushed);
    /* Nothing refers to the blocks any more but the guard's dead state: their structs,
     * and the heap's, stay allocated (a few bytes each). */
    h->small_seg = NULL;
    h->deferred = NULL;
    h->gpools = NULL;
    h->nroutes = 0;
    memset(&h->index, 0, sizeof h->index);
    vg__ptrmap_free(&h->live);
    free(h->history);
    h->history = NULL;
    vg__plan_free(h->plan);
    h->plan = NULL;
    h->arena = NULL; /* (released with the segments) */
    free(h->arena_hint);
    h->arena_hint = NULL;
    h->arena_hints = 0;
    h->plan_moves = false;
    h->nhistory = 0;
#define VG_X(f, key, row, bytes)                                                            \
    for (int p = 0; p < VG_POOLS; p++) {                                                    \
        h->stats.f[p].freed += h->stats.f[p].current;                                       \
        h->stats.f[p].current = 0;                                                          \
    }
    VG_STATS_POOLED(VG_X)
#undef VG_X
    pthread_mutex_lock(&g_heaps_lock);
    __atomic_store_n(&h->ctx, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&h->retired, true, __ATOMIC_RELEASE);
    atomic_fetch_add_explicit(&g_retired, 1, memory_order_release);
    pthread_mutex_unlock(&g_heaps_lock);
}

vg_status_t vg__heap_for_device(int device, vg_heap_t **out) {
    int count = 0;
    CUresult r = vg__cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return vg__error(vg__cu_status(r), "cuDeviceGetCount failed: %s", vg__cu_error_name(r));
    if (device < 0 || device >= count || device >= VG_MAX_HEAPS)
        return vg__error(VG_ERR_INVALID_ARGUMENT, "device %d does not exist (%d device%s)",
                         device, count, count == 1 ? "" : "s");
    pthread_mutex_lock(&g_heaps_lock);
    CUcontext ctx = g_primary[device];
    if (!ctx) {
        CUdevice dev;
        r = vg__cuDeviceGet(&dev, device);
        if (r == CUDA_SUCCESS)
            r = vg__cuDevicePrimaryCtxRetain(&ctx, dev);
        if (r == CUDA_SUCCESS)
            g_primary[device] = ctx;
    }
    pthread_mutex_unlock(&g_heaps_lock);
    if (!ctx)
        return vg__error(vg__cu_status(r), "cannot get the primary context of device %d: %s",
                         device, vg__cu_error_name(r));
    return heap_for_ctx(ctx, device, out);
}

vg_status_t vg__heap_current(vg_heap_t **out) {
    CUcontext ctx = NULL;
    CUresult r = vg__cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS)
        return vg__error(vg__cu_status(r), "cuCtxGetCurrent failed: %s", vg__cu_error_name(r));
    if (!ctx) { /* as the runtime does: device 0's primary context becomes current */
        vg_status_t st = vg__heap_for_device(0, out);
        if (st == VG_OK)
            vg__cuCtxSetCurrent((*out)->ctx);
        return st;
    }
    if (cached(ctx)) {
        *out = t_last_heap;
        return VG_OK;
    }
    CUdevice dev = 0;
    r = vg__cuCtxGetDevice(&dev);
    if (r != CUDA_SUCCESS)
        return vg__error(vg__cu_status(r), "cuCtxGetDevice failed: %s", vg__cu_error_name(r));
    return heap_for_ctx(ctx, dev, out);
}

vg_status_t vg__heap_managed_current(vg_heap_t **out) {
    vg_heap_t *dh;
    vg_status_t st = vg__heap_current(&dh); /* (the context current, and its device) */
    if (st != VG_OK)
        return st;
    if ((*out = find_heap(dh->ctx, true)))
        return VG_OK;
    int concurrent = 0;
    if (!vg__drv_has(cuMemAllocManaged) ||
        vg__cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                                 dh->device) != CUDA_SUCCESS || !concurrent)
        return VG_ERR_NOT_SUPPORTED; /* (the host may not touch managed memory while
                                        vramguard's kernels run: the driver's memory) */
    return find_or_create(dh->ctx, dh->device, true, out);
}

vg_heap_t *vg__heap_owner_locked(uint64_t p, vg_block_t **block) {
    int n = atomic_load(&g_nheaps);
    for (int i = 0; i < n; i++) {
        vg_heap_t *h = g_heaps[i];
        pthread_mutex_lock(&h->lock);
        vg_block_t *b = vg__ptrmap_get(&h->live, p);
        if (b && b->state == VG_BLOCK_ALLOCATED) {
            *block = b;
            return h;
        }
        pthread_mutex_unlock(&h->lock);
    }
    return NULL;
}

vg_heap_t *vg__heap_containing_seg(uint64_t p, uint64_t *seg_base) {
    int n = atomic_load(&g_nheaps);
    for (int i = 0; i < n; i++) {
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_segment_t *seg = h->segments;
        while (seg && !(p >= seg->base && p < seg->base + seg->size))
            seg = seg->next;
        if (seg && seg_base)
            *seg_base = seg->base;
        pthread_mutex_unlock(&h->lock);
        if (seg)
            return h;
    }
    return NULL;
}

vg_heap_t *vg__heap_containing(uint64_t p) { return vg__heap_containing_seg(p, NULL); }

/* The device and context of the memory at p, and its heap if it is vramguard's (else the
 * driver's, found through the pointer's attributes). */
static bool side_of(uint64_t p, int *device, CUcontext *ctx, vg_heap_t **heap) {
    if ((*heap = vg__heap_containing(p))) {
        *device = (*heap)->device;
        *ctx = (*heap)->ctx;
        return true;
    }
    unsigned type = 0;
    return vg__drv_has(cuPointerGetAttribute) &&
           vg__cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) ==
               CUDA_SUCCESS &&
           type == CU_MEMORYTYPE_DEVICE &&
           vg__cuPointerGetAttribute(device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) ==
               CUDA_SUCCESS &&
           vg__cuPointerGetAttribute(ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p) == CUDA_SUCCESS;
}

/* May device `dev` reach h's pages? (Memory from cuMemAlloc segments: as the driver
 * decides; vramguard's VMM pages: if their access list names dev, A11.) */
static bool heap_reaches(vg_heap_t *h, int dev) {
    pthread_mutex_lock(&h->lock);
    bool reached = !h->vmm;
    for (int k = 0; k < h->naccess && !reached; k++)
        reached = h->access[k].location.id == dev;
    pthread_mutex_unlock(&h->lock);
    return reached;
}

bool vg__copy_needs_peer(uint64_t dst, uint64_t src, CUcontext *dctx, CUcontext *sctx) {
    int dd, sd;
    vg_heap_t *dh, *sh;
    if (atomic_load(&g_nheaps) < 2 || !vg__drv_has(cuMemcpyPeer) ||
        !side_of(dst, &dd, dctx, &dh) || !side_of(src, &sd, sctx, &sh) || dd == sd)
        return false;
    /* As PyTorch's expandable segments decide: either side out of the other device's
     * reach, and the plain copy is not one the driver makes. */
    return (dh && !heap_reaches(dh, sd)) || (sh && !heap_reaches(sh, dd));
}
