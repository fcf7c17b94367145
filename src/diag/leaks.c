/* leaks.c — leak and growth reports (scenario S5).
 *
 * Both work per allocation site, from the live counters every site keeps (sites.h):
 *  - at exit, every allocation still live is reported, grouped by site, largest first;
 *    pinned host memory the program pinned and never freed (pinned.h) the same way, apart;
 *  - vg_step() marks the end of an iteration; a site whose live bytes grew at each of the
 *    last `growth_steps` steps is reported once (again if it stops growing and restarts),
 *    with the growth per step and the total: the "tensors kept in a list" bug (and its
 *    pinned twin: a staging buffer pinned per batch and kept).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "alloc/heap.h"
#include "leaks.h"
#include "base/options.h"
#include "pinned.h"
#include "report.h"
#include "sites.h"

#define MAX_LEAK_REPORTS 20
#define MERGE_SITES 2048

typedef struct leak_site {
    uint32_t site;
    uint64_t bytes, count;
    uint64_t example_user, example_size, example_id;
    int device;
} leak_site_t;

static int by_bytes_desc(const void *a, const void *b) {
    const leak_site_t *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* Sites compare by their stacks as printed: an unrolled loop or an inlined helper gives
 * several call instructions on one source line, which a user reads as one place. */
static int by_printed_stack(const void *a, const void *b) {
    const vg_site_t *x = vg__site(((const leak_site_t *)a)->site);
    const vg_site_t *y = vg__site(((const leak_site_t *)b)->site);
    uint32_t nx = x ? x->nframes : 0, ny = y ? y->nframes : 0;
    for (uint32_t i = 0; i < nx && i < ny; i++) {
        int c = strcmp(vg__symbolize(x->frames[i]), vg__symbolize(y->frames[i]));
        if (c)
            return c;
    }
    return nx < ny ? -1 : nx > ny;
}

/* Merge the sites (the first n of per[], all with live memory) whose printed stacks are
 * the same; returns the new count. */
static uint32_t merge_same_stacks(leak_site_t *per, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) { /* one addr2line run per module for them all */
        vg_site_t *s = vg__site(per[i].site);
        if (s && s->nframes)
            vg__symbolize_batch(s->frames, (int)s->nframes);
    }
    qsort(per, n, sizeof *per, by_printed_stack);
    uint32_t out = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (out && per[i].site && per[out - 1].site && by_printed_stack(&per[out - 1], &per[i]) == 0) {
            leak_site_t *m = &per[out - 1];
            m->bytes += per[i].bytes;
            m->count += per[i].count;
            if (per[i].example_id < m->example_id) { /* the oldest allocation as example */
                m->example_user = per[i].example_user;
                m->example_size = per[i].example_size;
                m->example_id = per[i].example_id;
                m->device = per[i].device;
            }
        } else {
            per[out++] = per[i];
        }
    }
    return out;
}

/* Caching allocators known by a frame of their stacks: memory such an allocator holds at
 * exit is its cache (PyTorch never gives its cache back), not a leak of the program's. Only
 * leaks=auto leaves them out. */
typedef struct known_cache {
    const char *frame, *name;
} known_cache_t;
static const known_cache_t g_device_caches[] = {
    {"CUDACachingAllocator", "PyTorch's CUDA caching allocator"},
    {"BFCAllocator", "XLA's BFC allocator"},
    {"SingleDeviceMemoryPool", "CuPy's memory pool"},
}, g_host_caches[] = { /* (PyTorch's CachingHostAllocatorImpl, CUDACachingHostAllocatorImpl) */
    {"CachingHostAllocator", "PyTorch's host caching allocator"},
    {"PinnedMemoryPool", "CuPy's pinned memory pool"},
};

/* The cache whose frame `text` is (a frame of device or host memory's caches), or NULL. */
static const char *cache_of_frame(const char *text, bool pinned) {
    const known_cache_t *k = pinned ? g_host_caches : g_device_caches;
    size_t n = pinned ? VG_ARRAY_LEN(g_host_caches) : VG_ARRAY_LEN(g_device_caches);
    for (size_t i = 0; text && i < n; i++)
        if (strstr(text, k[i].frame))
            return k[i].name;
    return NULL;
}

/* The caching allocator a site allocated for, if its stack goes through one. */
static const char *caching_allocator(uint32_t site, bool pinned) {
    const vg_site_t *s = vg__site(site);
    for (uint32_t i = 0; s && i < s->nframes; i++) {
        const char *c = cache_of_frame(vg__symbolize(s->frames[i]), pinned);
        if (c)
            return c;
    }
    return NULL;
}

const char *vg__host_cache_here(void) {
    uintptr_t frames[32];
    int n = vg__capture_stack(frames, 32, 1);
    for (int i = 0; i < n; i++) {
        char text[512];
        vg__symbolize_quick(frames[i], text, sizeof text); /* (dladdr: no symbolizer run) */
        const char *c = cache_of_frame(text, true);
        if (c)
            return c;
    }
    return NULL;
}

bool vg__leaks_wanted(void) {
    return vg__opt.leaks == VG_LEAKS_ON || (vg__opt.leaks == VG_LEAKS_AUTO && vg__opt.mode >= VG_MODE_GUARD);
}

typedef struct {
    leak_site_t *per;
    uint32_t nsites;
    int device;
    uint64_t cached, ncached; /* pinned ranges a host cache made (leaks=auto) */
    const char *cache;
} live_t;

/* Count a live allocation (or pinned range) under its site; the first is the example. */
static void tally(live_t *v, uint32_t site, uint64_t bytes, uint64_t user, uint64_t id,
                  int device) {
    if (site >= v->nsites)
        return;
    leak_site_t *l = &v->per[site];
    l->site = site;
    l->bytes += bytes;
    if (l->count++ == 0) {
        l->example_user = user;
        l->example_size = bytes;
        l->example_id = id;
        l->device = device;
    }
}

/* Count block b, if live, under its site. */
static bool count_live(vg_block_t *b, void *arg) {
    live_t *v = arg;
    if (b->state == VG_BLOCK_ALLOCATED)
        tally(v, b->site, b->requested, b->user, b->id, v->device);
    return true;
}

/* Count pinned range r under its site. */
static void count_pinned(const vg_pinned_rec_t *r, void *arg) {
    live_t *v = arg;
    if (r->cache && vg__opt.leaks == VG_LEAKS_AUTO) { /* (a cache's, seen when pinned) */
        v->cached += r->size;
        v->ncached++;
        v->cache = r->cache;
        return;
    }
    tally(v, r->site, r->size, r->base, r->id, -1);
}

/* Report the sites of live->per[] (live->nsites of them, counted), largest first: device
 * memory or (pinned) pinned host memory; live->cached is a cache's already. */
static void report_sites(const live_t *lv, const char *found, bool pinned) {
    leak_site_t *per = lv->per;
    uint32_t nsites = lv->nsites;
    qsort(per, nsites, sizeof *per, by_bytes_desc);
    uint32_t live = 0;
    while (live < nsites && per[live].count)
        live++;
    /* Symbolizing is bounded: the sites beyond the largest MERGE_SITES stay as they are. */
    uint32_t merged = merge_same_stacks(per, live < MERGE_SITES ? live : MERGE_SITES);
    if (live > MERGE_SITES)
        memmove(per + merged, per + MERGE_SITES, (live - MERGE_SITES) * sizeof *per);
    live = merged + (live > MERGE_SITES ? live - MERGE_SITES : 0);
    nsites = live;
    qsort(per, nsites, sizeof *per, by_bytes_desc);
    uint64_t total = 0, count = 0, sites = 0, cached = lv->cached, ncached = lv->ncached;
    const char *cache = lv->cache;
    for (uint32_t i = 0; i < nsites && per[i].count; i++) {
        const char *c = vg__opt.leaks == VG_LEAKS_AUTO ? caching_allocator(per[i].site, pinned) : NULL;
        if (c) {
            cache = c;
            cached += per[i].bytes;
            ncached += per[i].count;
            continue;
        }
        total += per[i].bytes;
        count += per[i].count;
        sites++;
        if (sites > MAX_LEAK_REPORTS)
            continue;
        vg_report_t r = {.kind = VG_REPORT_LEAK, .device = per[i].device, .alloc_site = per[i].site,
                         .bytes = per[i].bytes, .count = per[i].count, .clean_seq = UINT64_MAX,
                         .found = found, .pinned = pinned};
        if (pinned && strcmp(found, "at exit") == 0)
            r.headline = "pinned host memory still allocated at exit";
        snprintf(r.detail, sizeof r.detail, "for example 0x%llx, %llu bytes (%s #%llu)",
                 (unsigned long long)per[i].example_user, (unsigned long long)per[i].example_size,
                 pinned ? "pinned host allocation" : "allocation",
                 (unsigned long long)per[i].example_id);
        vg__report(&r);
    }
    const char *what = pinned ? " of pinned host memory" : "";
    if (cached) {
        char b[32];
        vg__log("%s%s in %llu allocations %s belongs to %s: its cache, not a leak (leaks=on "
                "reports it)", vg__fmt_bytes(b, cached), what, (unsigned long long)ncached,
                found, cache);
    }
    if (sites > MAX_LEAK_REPORTS) {
        char b[32];
        vg__log("%llu more allocation sites hold live memory%s %s; in all %s in %llu "
                "allocations from %llu sites",
                (unsigned long long)(sites - MAX_LEAK_REPORTS), what, found,
                vg__fmt_bytes(b, total), (unsigned long long)count, (unsigned long long)sites);
    }
}

void vg__leak_report(vg_heap_t *only, const char *found) {
    uint32_t nsites = vg__site_count();
    leak_site_t *per = calloc(nsites ? nsites : 1, sizeof *per);
    if (!per)
        return;
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (only && h != only)
            continue;
        pthread_mutex_lock(&h->lock);
        live_t live = {per, nsites, h->device, 0, 0, NULL};
        vg__heap_each_block(h, count_live, &live);
        pthread_mutex_unlock(&h->lock);
    }
    report_sites(&(live_t){per, nsites, -1, 0, 0, NULL}, found, false);
    free(per);
}

void vg__pinned_leak_report(void) {
    uint32_t nsites = vg__site_count();
    leak_site_t *per = calloc(nsites ? nsites : 1, sizeof *per);
    if (!per)
        return;
    live_t live = {per, nsites, -1, 0, 0, NULL};
    vg__pinned_each(count_pinned, &live);
    report_sites(&live, "at exit", true);
    free(per);
}

static pthread_mutex_t g_growth_lock = PTHREAD_MUTEX_INITIALIZER;

/* One step of site id's counter `now` (g_growth_lock held): report it once it has grown
 * at each of the last growth_steps steps. */
static void growth_of(uint32_t id, vg_growth_t *g, int64_t now, int64_t count, bool pinned) {
    if (now > g->step_bytes) {
        if (g->run_steps == 0)
            g->run_start_bytes = g->step_bytes;
        g->run_steps++;
    } else {
        g->run_steps = 0;
        g->reported = false;
    }
    g->step_bytes = now;
    if ((long)g->run_steps < vg__opt.growth_steps || g->reported)
        return;
    g->reported = true;
    vg_report_t r = {.kind = VG_REPORT_GROWTH, .device = -1, .alloc_site = id,
                     .bytes = (uint64_t)now, .count = (uint64_t)count,
                     .growth_per_step = (now - g->run_start_bytes) / (int64_t)g->run_steps,
                     .steps = g->run_steps, .clean_seq = UINT64_MAX, .found = "at vg_step()",
                     .pinned = pinned,
                     .headline = pinned ? "pinned host memory from one allocation site grows "
                                          "every step"
                                        : NULL};
    char a[32], b[32];
    snprintf(r.detail, sizeof r.detail, "grew by %s in total over those steps (from %s)",
             vg__fmt_bytes(a, (uint64_t)(now - g->run_start_bytes)),
             vg__fmt_bytes(b, (uint64_t)g->run_start_bytes));
    vg__report(&r);
}

void vg__growth_step(void) {
    if (vg__opt.growth_steps <= 0)
        return;
    pthread_mutex_lock(&g_growth_lock);
    uint32_t n = vg__site_count();
    for (uint32_t id = 0; id < n; id++) {
        vg_site_t *s = vg__site(id);
        if (!s)
            continue;
        growth_of(id, &s->growth, atomic_load(&s->live_bytes), atomic_load(&s->live_count),
                  false);
        growth_of(id, &s->pinned_growth, atomic_load(&s->pinned_bytes),
                  atomic_load(&s->pinned_count), true);
    }
    pthread_mutex_unlock(&g_growth_lock);
}
