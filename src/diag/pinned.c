/* pinned.c — pinned host memory: records, counters, the cap and the warning (S11).
 *
 * Every range the driver pinned for the program is one record in an array kept sorted by
 * address, so that a pointer's record, or the range holding a copy's host side, is a
 * binary search; adding or removing one moves the records above it (a process pins
 * hundreds to thousands of ranges, rarely). The counters follow PyTorch's HostStats
 * (vramguard.h); each record's bytes are also counted on its allocation site (sites.h),
 * for the leak and growth reports (leaks.c) and the explanations below. One mutex guards
 * it all; no driver call is made under it.
 *
 * The cap (pinned_limit) admits a request before the driver sees it: its bytes count from
 * then, so that threads pinning at once cannot pass it together, and go again if the
 * driver refuses. The warning (pinned_warn) is given when the total first passes its
 * threshold, and again only after the total has fallen below half of it (a loader's
 * total that wavers around the threshold is said once).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/events.h"
#include "alloc/stats.h"
#include "base/options.h"
#include "oom.h"
#include "pinned.h"
#include "report.h"
#include "sites.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static vg_pinned_rec_t *g_recs; /* sorted by base */
static size_t g_n, g_cap;
static uint64_t g_next_id = 1;
static vg_host_stats_t g_stats;
static int64_t g_admitted; /* bytes admitted whose driver call has not returned */
static bool g_warned;      /* the total is past pinned_warn, and it was said */
static vg_events_t g_events; /* pinnings, frees and refusals, for snapshots' timelines */

/* The host's RAM (MemTotal). */
static uint64_t host_total(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* pinned_warn in bytes (0: never). */
static uint64_t warn_threshold(void) {
    const vg_limit_t *w = &vg__opt.pinned_warn;
    return w->fraction > 0 ? (uint64_t)(w->fraction * (double)host_total()) : w->bytes;
}

/* The first record whose base is >= p (g_lock held). */
static size_t lower_bound(uintptr_t p) {
    size_t lo = 0, hi = g_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g_recs[mid].base < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void duration_add(vg_duration_stat_t *d, uint64_t ns) {
    int64_t us = (int64_t)(ns / 1000);
    d->total += us;
    d->max = d->count == 0 || us > d->max ? us : d->max;
    d->min = d->count == 0 || us < d->min ? us : d->min;
    d->count++;
}

/* ---------------------------------------------------------------------------------------
 * Explanations: a request the cap or the driver refused; the warning
 * ------------------------------------------------------------------------------------- */

/* What is pinned now, and by whom, for an explanation (g_lock not held). */
static void holders(vg_buf_t *b) {
    vg_host_stats_t s = {.size = sizeof s};
    vg__pinned_stats(&s);
    char a[32], p[32], t[32];
    vg__buf_printf(b, "  this process has %s of pinned host memory in %lld allocation%s (peak "
                      "%s); the host has %s of RAM\n",
                   vg__fmt_bytes(a, (uint64_t)s.allocated_bytes.current),
                   (long long)s.allocations.current, s.allocations.current == 1 ? "" : "s",
                   vg__fmt_bytes(p, (uint64_t)s.allocated_bytes.peak),
                   vg__fmt_bytes(t, s.host_total));
    vg__buf_printf(b, "  top holders of pinned host memory by allocation site:\n");
    vg__sites_top(b, 5, "    ", true);
}

/* Say why a request of n bytes at `site` could not be pinned: `why` completes "why: ". */
static void explain(uint64_t n, uint32_t site, const char *call, const char *why) {
    vg_buf_t b = {0};
    char sz[32];
    vg__buf_printf(&b, "out of pinned host memory: %s cannot pin %s (%llu bytes)\n", call,
                   vg__fmt_bytes(sz, n), (unsigned long long)n);
    vg__buf_printf(&b, "  (pinned memory is page-locked host RAM, not device memory: it stays "
                       "in RAM for the device's copies and cannot be swapped out)\n");
    holders(&b);
    vg__buf_printf(&b, "  why: %s", why);
    vg__error(VG_ERR_OUT_OF_MEMORY, "%s", b.data ? b.data : "out of pinned host memory");
    vg__buf_free(&b);
    if (vg__opt.mode == VG_MODE_GUARD) {
        vg_report_t r = {.kind = VG_REPORT_OUT_OF_MEMORY, .device = -1, .call_site = site,
                         .clean_seq = UINT64_MAX, .pinned = true,
                         .headline = "out of pinned host memory"};
        snprintf(r.detail, sizeof r.detail, "%s", vg_last_error());
        vg__report(&r);
    } else {
        vg__log("%s", vg_last_error());
    }
}

/* The total just passed pinned_warn: say so once, with the holders. */
static void warn(uint64_t total, uint64_t threshold) {
    vg_buf_t b = {0};
    char t[32], w[32];
    const vg_limit_t *opt = &vg__opt.pinned_warn;
    vg__buf_printf(&b, "warning: the process has pinned %s of host memory, past pinned_warn=",
                   vg__fmt_bytes(t, total));
    if (opt->fraction > 0)
        vg__buf_printf(&b, "%g%% of the host's RAM (%s)", opt->fraction * 100.0,
                       vg__fmt_bytes(w, threshold));
    else
        vg__buf_printf(&b, "%s", vg__fmt_bytes(w, threshold));
    vg__buf_printf(&b, ": pinned pages cannot be swapped out, so the rest of the host (other "
                       "processes, the page cache) must make do with what is left\n");
    holders(&b);
    if (b.data) {
        if (b.len && b.data[b.len - 1] == '\n')
            b.data[--b.len] = '\0';
        vg__log("%s", b.data);
    }
    vg__buf_free(&b);
}

/* ---------------------------------------------------------------------------------------
 * The hooks' calls
 * ------------------------------------------------------------------------------------- */

bool vg__pinned_admit(uint64_t n, uint32_t site, const char *call) {
    uint64_t limit = vg__opt.pinned_limit;
    pthread_mutex_lock(&g_lock);
    uint64_t held = (uint64_t)(g_stats.allocated_bytes.current + g_admitted);
    bool ok = !limit || (n <= limit && held <= limit - n);
    if (ok) {
        g_admitted += (int64_t)n;
    } else {
        g_stats.num_ooms++;
        vg__event_in(&g_events, VG_EV_OOM, 0, n, NULL, site);
    }
    pthread_mutex_unlock(&g_lock);
    if (!ok) {
        char l[32], h[32];
        char why[256];
        snprintf(why, sizeof why, "pinned_limit=%s, and %s is pinned already: this request "
                                  "would take the process past it",
                 vg__fmt_bytes(l, limit), vg__fmt_bytes(h, held));
        explain(n, site, call, why);
    }
    return ok;
}

/* Insert record r (g_lock held): false if it could not be kept. */
static bool insert(const vg_pinned_rec_t *r) {
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 256;
        vg_pinned_rec_t *a = realloc(g_recs, cap * sizeof *a);
        if (!a)
            return false;
        g_recs = a;
        g_cap = cap;
    }
    size_t at = lower_bound(r->base);
    memmove(&g_recs[at + 1], &g_recs[at], (g_n - at) * sizeof *g_recs);
    g_recs[at] = *r;
    g_n++;
    vg__stat_add(&g_stats.allocations, 1);
    vg__stat_add(&g_stats.allocated_bytes, (int64_t)r->size);
    if (r->registered)
        vg__stat_add(&g_stats.registered_bytes, (int64_t)r->size);
    return true;
}

/* Count r's bytes on its site (add: +1 or -1; `again`: a removal undone). */
static void site_count(const vg_pinned_rec_t *r, int add, bool again) {
    vg_site_t *s = vg__site(r->site);
    if (!s)
        return;
    int64_t now = atomic_fetch_add_explicit(&s->pinned_bytes, add * (int64_t)r->size,
                                            memory_order_relaxed) + add * (int64_t)r->size;
    atomic_fetch_add_explicit(&s->pinned_count, add, memory_order_relaxed);
    if (add < 0 || again)
        return;
    atomic_fetch_add_explicit(&s->pinned_total, 1, memory_order_relaxed);
    int64_t peak = atomic_load_explicit(&s->pinned_peak, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(&s->pinned_peak, &peak, now,
                                                                memory_order_relaxed,
                                                                memory_order_relaxed)) {
    }
}

void vg__pinned_added(const void *p, uint64_t n, uint32_t site, bool registered,
                      const char *cache, uint64_t elapsed_ns) {
    uint64_t threshold = warn_threshold(), total;
    bool say = false;
    pthread_mutex_lock(&g_lock);
    vg_pinned_rec_t r = {(uintptr_t)p, n, site, registered, cache, g_next_id++};
    g_admitted -= (int64_t)n;
    g_stats.num_host_alloc++;
    duration_add(&g_stats.host_alloc_time, elapsed_ns);
    bool kept = insert(&r); /* (not counted if it could not be kept) */
    if (kept)
        vg__event_in(&g_events, VG_EV_ALLOC, r.base, n, NULL, site);
    total = (uint64_t)g_stats.allocated_bytes.current;
    if (threshold && total >= threshold && !g_warned)
        say = g_warned = true;
    pthread_mutex_unlock(&g_lock);
    if (kept)
        site_count(&r, 1, false);
    if (say)
        warn(total, threshold);
}

/* Take back the totals of a removal that did not happen (g_lock held). */
static void untotal(vg_stat_t *st, int64_t d) {
    st->allocated -= d;
    st->freed -= d;
}

void vg__pinned_restore(const vg_pinned_rec_t *r) {
    pthread_mutex_lock(&g_lock);
    bool kept = insert(r);
    if (kept) {
        vg__event_in(&g_events, VG_EV_ALLOC, r->base, r->size, NULL, r->site);
        untotal(&g_stats.allocations, 1);
        untotal(&g_stats.allocated_bytes, (int64_t)r->size);
        if (r->registered)
            untotal(&g_stats.registered_bytes, (int64_t)r->size);
    }
    g_stats.num_host_free--; /* (vg__pinned_remove counted a free that did not happen) */
    pthread_mutex_unlock(&g_lock);
    if (kept)
        site_count(r, 1, true);
}

void vg__pinned_failed(uint64_t n, uint32_t site, const char *call, int result) {
    pthread_mutex_lock(&g_lock);
    g_admitted -= (int64_t)n;
    if (result == CUDA_ERROR_OUT_OF_MEMORY) {
        g_stats.num_ooms++;
        vg__event_in(&g_events, VG_EV_OOM, 0, n, NULL, site);
    }
    pthread_mutex_unlock(&g_lock);
    if (result == CUDA_ERROR_OUT_OF_MEMORY)
        explain(n, site, call, "the driver could not pin it (CUDA_ERROR_OUT_OF_MEMORY): the "
                               "host's RAM is short, or other processes pin it, or the "
                               "limit on locked memory (ulimit -l) is reached");
}

bool vg__pinned_remove(const void *p, bool registered, vg_pinned_rec_t *out) {
    uint64_t threshold = warn_threshold();
    pthread_mutex_lock(&g_lock);
    size_t at = lower_bound((uintptr_t)p);
    bool found = at < g_n && g_recs[at].base == (uintptr_t)p && g_recs[at].registered == registered;
    vg_pinned_rec_t r = found ? g_recs[at] : (vg_pinned_rec_t){0};
    if (found) {
        memmove(&g_recs[at], &g_recs[at + 1], (g_n - at - 1) * sizeof *g_recs);
        g_n--;
        vg__stat_add(&g_stats.allocations, -1);
        vg__stat_add(&g_stats.allocated_bytes, -(int64_t)r.size);
        if (registered)
            vg__stat_add(&g_stats.registered_bytes, -(int64_t)r.size);
        g_stats.num_host_free++;
        vg__event_in(&g_events, VG_EV_FREE, r.base, r.size, NULL, r.site);
        if (g_warned && (uint64_t)g_stats.allocated_bytes.current < threshold / 2)
            g_warned = false; /* (said again if it passes the threshold again) */
    }
    pthread_mutex_unlock(&g_lock);
    if (found)
        site_count(&r, -1, false);
    if (out)
        *out = r;
    return found;
}

void vg__pinned_free_time(uint64_t elapsed_ns) {
    pthread_mutex_lock(&g_lock);
    duration_add(&g_stats.host_free_time, elapsed_ns);
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------------------------------
 * Queries
 * ------------------------------------------------------------------------------------- */

bool vg__pinned_contains(uintptr_t lo, uintptr_t hi) {
    pthread_mutex_lock(&g_lock);
    size_t at = lower_bound(lo + 1); /* the first record starting after lo */
    bool in = at > 0 && lo >= g_recs[at - 1].base && hi <= g_recs[at - 1].base + g_recs[at - 1].size;
    pthread_mutex_unlock(&g_lock);
    return in;
}

void vg__pinned_each(void (*fn)(const vg_pinned_rec_t *r, void *arg), void *arg) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++)
        fn(&g_recs[i], arg);
    pthread_mutex_unlock(&g_lock);
}

void vg__pinned_stats(vg_host_stats_t *out) {
    uint32_t size = out->size < sizeof *out ? out->size : (uint32_t)sizeof *out;
    pthread_mutex_lock(&g_lock);
    vg_host_stats_t s = g_stats;
    pthread_mutex_unlock(&g_lock);
    s.size = size;
    s.limit = vg__opt.pinned_limit;
    s.warn_at = warn_threshold();
    s.host_total = host_total();
    memcpy(out, &s, size);
}

bool vg__pinned_events(vg_events_t *out) {
    *out = (vg_events_t){.cap = UINT64_MAX}; /* (none kept) */
    pthread_mutex_lock(&g_lock);
    bool kept = g_events.ring && g_events.cap != UINT64_MAX;
    vg_event_t *copy = kept ? malloc((size_t)g_events.cap * sizeof *copy) : NULL;
    if (copy) {
        memcpy(copy, g_events.ring, (size_t)g_events.cap * sizeof *copy);
        *out = g_events;
        out->ring = copy;
    }
    bool any = g_stats.num_host_alloc || g_stats.num_ooms;
    pthread_mutex_unlock(&g_lock);
    return any;
}

void vg__pinned_describe_exit(void) {
    vg_host_stats_t s = {.size = sizeof s};
    vg__pinned_stats(&s);
    if (!s.num_host_alloc && !s.num_ooms)
        return; /* (nothing pinned that vramguard saw) */
    char peak[32], now[32], lim[32] = "none";
    if (s.limit)
        vg__fmt_bytes(lim, s.limit);
    vg__log("pinned host memory at exit: peak %s (at most %lld allocation%s at once; "
            "pinned_limit: %s); %s still pinned in %lld; %llu pinned, %llu freed or "
            "unregistered, %llu refused",
            vg__fmt_bytes(peak, (uint64_t)s.allocated_bytes.peak), (long long)s.allocations.peak,
            s.allocations.peak == 1 ? "" : "s", lim,
            vg__fmt_bytes(now, (uint64_t)s.allocated_bytes.current),
            (long long)s.allocations.current, (unsigned long long)s.num_host_alloc,
            (unsigned long long)s.num_host_free, (unsigned long long)s.num_ooms);
}
