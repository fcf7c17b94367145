/* access.c — the ranges of copies and memsets, and the pointer arguments of launches,
 * checked against vramguard's allocations (access.h; docs/decisions.md G11).
 *
 * A range is looked up by its first byte in each heap's address index (O(levels)), and
 * by its last byte when the first is not vramguard's. What holds it decides:
 *   a live allocation      fine if the range ends inside its bytes, else out of bounds;
 *   a quarantined block    freed memory (guard mode), with where it was allocated and freed;
 *   no block (free space)  freed memory if the heap's free history has an allocation there
 *                          (the newest one), else past the end of the allocation below, if
 *                          any, else memory no allocation holds.
 * Reports are made with no heap lock held, from copies of what the lookup found.
 */
#include "access.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "guard.h"
#include "alloc/heap.h"
#include "base/options.h"
#include "diag/report.h"
#include "diag/sites.h"

/* ---------------------------------------------------------------------------------------
 * Looking a range up (heap lock held)
 * ------------------------------------------------------------------------------------- */

/* The allocation a fault is about: a block (allocated, or quarantined: freed) or a
 * record of the free history. */
static void from_rec(vg_access_fault_t *f, const vg_heap_t *h, const vg_free_rec_t *r,
                     CUstream stream) {
    f->has_block = true;
    f->user = r->user;
    f->size = r->requested;
    f->id = r->id;
    f->alloc_site = r->alloc_site;
    f->free_site = r->free_site;
    f->alloc_stream = stream;
    f->device = h->device;
    f->managed = h->managed;
}

static void from_block(vg_access_fault_t *f, const vg_heap_t *h, const vg_block_t *b) {
    vg_free_rec_t r = {b->user, b->requested, b->id, b->site,
                       b->state == VG_BLOCK_QUARANTINED ? b->free_site : 0};
    from_rec(f, h, &r, b->stream ? b->stream->handle : NULL);
}

/* Is p one past the end of a live allocation (a begin/end pair's end)? */
static bool end_of_live(vg_heap_t *h, uint64_t p) {
    vg_block_t *b;
    return vg__heap_block_at(h, p - 1, &b) == VG_AT_BLOCK && b->state == VG_BLOCK_ALLOCATED &&
           b->user + b->requested == p;
}

/* What holds p in heap h (lock held): 1 and *f filled for freed memory (or, with `gap`,
 * for memory no allocation holds), 0 for a live allocation (*live) or nothing to say,
 * -1 when p is not h's. */
static int classify(vg_heap_t *h, uint64_t p, vg_access_fault_t *f, vg_block_t **live) {
    vg_block_t *b = NULL;
    *live = NULL;
    switch (vg__heap_block_at(h, p, &b)) {
    case VG_AT_NOT_OURS: return -1;
    case VG_AT_UNKNOWN: return 0; /* (no index for this segment: no verdict) */
    case VG_AT_BLOCK:
        if (b->state == VG_BLOCK_QUARANTINED) {
            from_block(f, h, b);
            f->what = VG_FAULT_FREED;
            return 1;
        }
        *live = b;
        return 0;
    case VG_AT_GAP: break;
    }
    const vg_free_rec_t *r = vg__heap_history_containing(h, p);
    if (r) {
        from_rec(f, h, r, NULL);
        f->what = VG_FAULT_FREED;
        return 1;
    }
    f->what = VG_FAULT_NOWHERE;
    f->device = h->device;
    vg_block_t *below = vg__heap_block_below(h, p);
    if (below && below->state == VG_BLOCK_ALLOCATED) {
        from_block(f, h, below); /* (p lies past its end: "N bytes past the end of") */
        f->what = VG_FAULT_BOUNDS;
    }
    return 1;
}

int vg__access_classify_locked(vg_heap_t *h, uint64_t p, uint64_t bytes, vg_access_fault_t *f) {
    memset(f, 0, sizeof *f);
    vg_block_t *b;
    int c = classify(h, p, f, &b);
    if (c != 0 || !b)
        return c;
    from_block(f, h, b);
    bool inside = p >= b->user && p - b->user + bytes <= b->requested;
    f->what = inside ? 0 : VG_FAULT_BOUNDS;
    return inside ? 0 : 1;
}

bool vg__access_check(const vg_access_t *a, vg_access_fault_t *f) {
    if (a->bytes == 0 || !vg__addrindex_maybe_ours(a->first, a->bytes))
        return true;
    uint64_t last = a->first + a->bytes - 1 >= a->first ? a->first + a->bytes - 1 : UINT64_MAX;
    memset(f, 0, sizeof *f);
    f->a = *a;
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_block_t *b;
        int c = classify(h, a->first, f, &b);
        if (c < 0) { /* not this heap's: does the range run into it from below? */
            c = classify(h, last, f, &b);
            if (c == 0 && b && b->state == VG_BLOCK_ALLOCATED) {
                from_block(f, h, b);
                f->what = VG_FAULT_BOUNDS;
                c = 1;
            }
            pthread_mutex_unlock(&h->lock);
            if (c > 0)
                return false;
            continue;
        }
        bool ok = c == 0 && (!b || (a->first >= b->user && last < b->user + b->requested));
        if (!ok && c == 0) {
            from_block(f, h, b);
            f->what = VG_FAULT_BOUNDS;
        }
        pthread_mutex_unlock(&h->lock);
        return ok;
    }
    return true;
}

/* ---------------------------------------------------------------------------------------
 * Reports
 * ------------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t a, uint64_t b) {
    return (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull;
}

void vg__access_fill_report(vg_report_t *r, const vg_access_fault_t *f) {
    r->device = f->device;
    r->stream = f->alloc_stream;
    r->has_block = f->has_block;
    r->user = f->user;
    r->size = f->size;
    r->id = f->id;
    r->alloc_site = f->alloc_site;
    r->free_site = f->free_site;
    r->managed = f->managed;
}

/* "its source", or "the source of copy 3 of 8" */
static const char *role_text(char out[64], const vg_access_t *a) {
    if (a->count > 1)
        snprintf(out, 64, "the %s of copy %u of %u", a->role, a->index + 1, a->count);
    else
        snprintf(out, 64, "its %s", a->role);
    return out;
}

void vg__access_where(char *out, size_t n, const vg_access_fault_t *f, uint64_t first,
                      uint64_t bytes) {
    int64_t lo = (int64_t)(first - f->user), hi = lo + (int64_t)bytes; /* vs the user */
    if (f->what == VG_FAULT_NOWHERE || !f->has_block)
        snprintf(out, n, "%llu bytes at 0x%llx, in vramguard's memory on device %d, which no "
                 "allocation holds (never allocated, or freed long ago)",
                 (unsigned long long)bytes, (unsigned long long)first, f->device);
    else if (f->what == VG_FAULT_FREED)
        snprintf(out, n, "%llu bytes at the freed allocation %s %llu", (unsigned long long)bytes,
                 lo < 0 ? "-" : "+", (unsigned long long)(lo < 0 ? -lo : lo));
    else if (lo < 0)
        snprintf(out, n, "%llu bytes starting %llu bytes before the start of a %llu-byte "
                 "allocation%s",
                 (unsigned long long)bytes, (unsigned long long)-lo, (unsigned long long)f->size,
                 hi > (int64_t)f->size ? " and running past its end" : "");
    else if (lo >= (int64_t)f->size)
        snprintf(out, n, "%llu bytes starting %llu bytes past the end of a %llu-byte allocation",
                 (unsigned long long)bytes, (unsigned long long)(lo - (int64_t)f->size),
                 (unsigned long long)f->size);
    else
        snprintf(out, n, "bytes %lld to %lld of a %llu-byte allocation, %llu of them past its "
                 "end",
                 (long long)lo, (long long)hi - 1, (unsigned long long)f->size,
                 (unsigned long long)(hi - (int64_t)f->size));
}

void vg__access_report(const vg_access_fault_t *f, uint32_t site) {
    const vg_access_t *a = &f->a;
    if (!vg__report_first_time(mix(mix(site, f->alloc_site), (uint64_t)f->what << 1 | a->write)))
        return;
    bool memset = strstr(a->call, "Memset") != NULL;
    const char *op = memset ? "memset" : "copy", *verb = a->write ? "writes" : "reads";
    vg_report_t r = {.kind = VG_REPORT_OOB_COPY, .clean_seq = UINT64_MAX, .call_site = site};
    vg__access_fill_report(&r, f);
    char head[96], role[64];
    int64_t lo = (int64_t)(a->first - f->user), hi = lo + (int64_t)a->bytes; /* vs the user */
    int64_t past = hi - (int64_t)f->size, before = -lo;
    role_text(role, a);
    if (f->what == VG_FAULT_FREED) {
        r.kind = VG_REPORT_USE_AFTER_FREE;
        snprintf(head, sizeof head, "%s %s freed memory", op, verb);
    } else if (f->what == VG_FAULT_NOWHERE || !f->has_block) {
        snprintf(head, sizeof head, "%s %s memory no allocation holds", op, verb);
    } else if (lo < 0) {
        snprintf(head, sizeof head, "%s %s before the start of an allocation", op, verb);
    } else {
        snprintf(head, sizeof head, "%s %s past the end of an allocation", op, verb);
    }
    char where[300];
    vg__access_where(where, sizeof where, f, a->first, a->bytes);
    snprintf(r.lead, sizeof r.lead, "%s %s %s: %s", a->call, verb, role, where);
    r.headline = head;
    snprintf(r.detail, sizeof r.detail,
             "vramguard refused the call with CUDA_ERROR_INVALID_VALUE, as the driver refuses "
             "a %s\noutside its own allocations: nothing was queued",
             op);
    snprintf(r.json, sizeof r.json,
             ",\"access\":{\"call\":\"%s\",\"operation\":\"%s\",\"range\":\"%s\",\"copy\":%u,"
             "\"copies\":%u,\"address\":\"0x%llx\",\"bytes\":%llu,\"offset\":%lld,"
             "\"past_end\":%lld,\"before_start\":%lld,\"refused\":true}",
             a->call, a->write ? "write" : "read", a->role, a->index, a->count ? a->count : 1,
             (unsigned long long)a->first, (unsigned long long)a->bytes,
             f->has_block ? (long long)lo : 0LL,
             f->has_block && past > 0 ? (long long)past : 0LL,
             f->has_block && before > 0 ? (long long)before : 0LL);
    r.found = "by the check of the call's ranges against the allocations";
    vg__report(&r);
}

/* ---------------------------------------------------------------------------------------
 * Launch arguments
 * ------------------------------------------------------------------------------------- */

/* Does word p point into freed memory? *f filled then. */
static bool freed_pointer(uint64_t p, vg_access_fault_t *f) {
    if (!vg__addrindex_maybe_ours(p, 1))
        return false;
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_block_t *b;
        int c = classify(h, p, f, &b);
        bool freed = c > 0 && f->what == VG_FAULT_FREED && !end_of_live(h, p);
        if (c == 0 && b && vg__opt.verbose && (p < b->user || p > b->user + b->requested))
            vg__log("note: a kernel was given a pointer %llu bytes %s allocation #%llu (in its "
                    "redzone): no error by itself; a report about the allocation will name it",
                    (unsigned long long)(p < b->user ? b->user - p : p - b->user - b->requested),
                    p < b->user ? "before" : "past the end of", (unsigned long long)b->id);
        pthread_mutex_unlock(&h->lock);
        if (c >= 0)
            return freed;
    }
    return false;
}

void vg__access_check_args(const char *name, CUstream stream, uint32_t site,
                           const uint64_t *ptrs, const uint16_t *where, int n) {
    for (int i = 0; i < n; i++) {
        vg_access_fault_t f;
        memset(&f, 0, sizeof f);
        if (!ptrs[i] || !freed_pointer(ptrs[i], &f))
            continue;
        unsigned index = where ? where[i] >> 8 : (unsigned)i;
        unsigned byte = where ? (where[i] & 0xffu) * 8u : 0;
        uint64_t kernel = 1469598103934665603ull; /* (a site may launch many kernels) */
        for (const char *c = name; *c; c++)
            kernel = (kernel ^ (unsigned char)*c) * 1099511628211ull;
        uint64_t key = mix(mix(site, f.alloc_site), mix(f.free_site, index << 8 | byte));
        if (!vg__report_first_time(mix(key, kernel)))
            continue;
        key = mix(mix(vg__site_text_key(site), vg__site_text_key(f.alloc_site)),
                  mix(vg__site_text_key(f.free_site), index << 8 | byte));
        if (!vg__report_first_time(mix(key, kernel) ^ 0x7e47)) /* (the same text: a site */
            continue;                                         /*  of an unrolled loop) */
        vg_report_t r = {.kind = VG_REPORT_FREED_ARG, .clean_seq = UINT64_MAX,
                         .call_site = site, .kernel = name};
        vg__access_fill_report(&r, &f);
        char arg[48], st[48];
        if (byte)
            snprintf(arg, sizeof arg, "argument %u (bytes %u-%u)", index, byte, byte + 7);
        else
            snprintf(arg, sizeof arg, "argument %u", index);
        if (stream == NULL || stream == CU_STREAM_LEGACY)
            snprintf(st, sizeof st, "the default stream");
        else if (stream == CU_STREAM_PER_THREAD)
            snprintf(st, sizeof st, "the per-thread default stream");
        else
            snprintf(st, sizeof st, "stream %p", (void *)stream);
        int64_t off = (int64_t)(ptrs[i] - f.user);
        char short_name[VG_KERNEL_SHORT + 1];
        snprintf(r.lead, sizeof r.lead, "%s on %s was given a pointer to freed memory: its %s "
                 "points to the freed allocation %s %llu",
                 vg__kernel_name_short(vg__kernel_name(name), short_name, sizeof short_name), st, arg, off < 0 ? "-" : "+", (unsigned long long)(off < 0 ? -off : off));
        snprintf(r.detail, sizeof r.detail,
                 "A kernel that uses it reads or writes memory that may already be another\n"
                 "tensor's (guard mode's quarantine holds it back for now). A library that "
                 "passes a\npointer it never uses can be silenced with a suppression "
                 "(launch_with_freed_pointer:KERNEL).");
        vg_buf_t j = {0}; /* (the name escaped as JSON) */
        vg__buf_printf(&j, ",\"kernel\":{\"name\":");
        vg__buf_json_str(&j, name);
        vg__buf_printf(&j, ",\"argument\":%u,\"argument_byte\":%u,\"offset\":%lld}", index,
                       byte, (long long)off);
        if (j.data && j.len < sizeof r.json)
            memcpy(r.json, j.data, j.len + 1);
        vg__buf_free(&j);
        r.found = "at the launch, from its arguments (whether or not the kernel uses the pointer)";
        vg__report(&r);
    }
}
