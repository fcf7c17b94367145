/* stats.c — statistics snapshots, PyTorch's summary table and memory_stats() keys.
 *
 * The counters are kept by heap.c and segment.c as blocks change state. Two figures are
 * computed here when read, because keeping them exact on every operation would cost the
 * fast path: inactive_split (free blocks next to live ones) and inactive_split_bytes
 * (reserved memory that is neither active nor releasable).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "heap.h"
#include "plan.h"
#include "stats.h"

typedef struct split_ctx {
    int64_t n[VG_POOLS];
} split_ctx_t;

static bool count_split(vg_block_t *b, void *arg) {
    split_ctx_t *c = arg;
    bool split = (b->prev && b->prev->state != VG_BLOCK_FREE) ||
                 (b->next && b->next->state != VG_BLOCK_FREE);
    if (split) {
        c->n[VG_POOL_ALL]++;
        c->n[vg__pool_of(b->size)]++;
    }
    return true;
}

static void set_computed(vg_stat_t *s, int64_t v) {
    s->current = v;
    if (v > s->peak)
        s->peak = v;
}

void vg__stats_snapshot(vg_heap_t *h, vg_stats_t *out) {
    split_ctx_t c = {{0}};
    vg__tlsf_each_desc(&h->index, count_split, &c);
    for (int p = 0; p < VG_POOLS; p++)
        set_computed(&h->stats.inactive_split[p], c.n[p]);
    int64_t idle = (int64_t)vg__segment_idle_bytes(h);
    int64_t nonrel = h->stats.reserved_bytes[VG_POOL_ALL].current -
                     h->stats.active_bytes[VG_POOL_ALL].current - idle;
    if (nonrel < 0)
        nonrel = 0;
    set_computed(&h->stats.inactive_split_bytes[VG_POOL_ALL], nonrel);
    /* Attribute by the pools' share of active memory (VMM pages have no pool). */
    int64_t act = h->stats.active_bytes[VG_POOL_ALL].current;
    int64_t small = act ? nonrel * h->stats.active_bytes[VG_POOL_SMALL].current / act : 0;
    set_computed(&h->stats.inactive_split_bytes[VG_POOL_SMALL], small);
    set_computed(&h->stats.inactive_split_bytes[VG_POOL_LARGE], nonrel - small);
    h->stats.largest_free_block = vg__heap_largest_free_block(h);
    h->stats.largest_servable = vg__heap_largest_servable(h);
    h->stats.device_total = h->device_total;
    h->stats.limit = h->limit;
    if (h->plan) {
        vg_plan_report_t r;
        vg__plan_get(h->plan, &r);
        h->stats.step_requests = r.period;
        h->stats.step_found_at = r.found_at;
        h->stats.long_lived_bytes = r.long_lived;
        h->stats.plan_bytes = r.height;
        h->stats.plan_peak_bytes = r.planned_peak;
        h->stats.step_since = r.since;
        h->stats.step_repeated = r.repeated;
        h->stats.steps_found = r.found;
        h->stats.plan_placed = r.placed;
        h->stats.plan_missed = r.missed;
        h->stats.plan_tensors = r.items;
        h->stats.plan_beside_long_lived = r.in_holes;
        h->stats.plan_resumed = r.resumed;
    }
    h->stats.version = VG_STATS_VERSION;
    h->stats.size = sizeof(vg_stats_t);
    *out = h->stats;
}

/* ---------------------------------------------------------------------------------------
 * PyTorch's memory_summary() table (torch/cuda/memory.py), cell for cell.
 * ------------------------------------------------------------------------------------- */

static void fmt_size(char out[16], int64_t sz, double pref) {
    static const char *prefixes[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int p = 0;
    for (int i = 1; i < 6; i++) {
        if (pref < 768 * 1024)
            break;
        p = i;
        sz /= 1024;
        pref /= 1024;
    }
    snprintf(out, 16, "%6lld %s", (long long)sz, prefixes[p]);
}

static void fmt_count(char out[16], int64_t cnt, double pref) {
    static const char *prefixes[] = {" ", "K", "M"};
    int p = 0;
    for (int i = 1; i < 3; i++) {
        if (pref < 750 * 1000)
            break;
        p = i;
        cnt /= 1000;
        pref /= 1000;
    }
    snprintf(out, 16, "%7lld %s ", (long long)cnt, prefixes[p]);
}

static void row(vg_buf_t *b, const char *name, const vg_stat_t *v, const vg_stat_t *pref,
                bool bytes) {
    char c[4][16];
    int64_t vals[4] = {v->current, v->peak, v->allocated, v->freed};
    int64_t prefs[4] = {pref->current, pref->peak, pref->allocated, pref->freed};
    for (int i = 0; i < 4; i++) {
        if (bytes)
            fmt_size(c[i], vals[i], (double)prefs[i]);
        else
            fmt_count(c[i], vals[i], (double)prefs[i]);
    }
    vg__buf_printf(b, "| %-21s | %s | %s | %s | %s |\n", name, c[0], c[1], c[2], c[3]);
}

static void rule(vg_buf_t *b, char ch) {
    vg__buf_putc(b, '|');
    for (int i = 0; i < 75; i++)
        vg__buf_putc(b, ch);
    vg__buf_append(b, "|\n", 2);
}

/* The pinned host memory rows under the device's (nothing if none was ever pinned). */
static void host_rows(vg_buf_t *b, const vg_host_stats_t *h) {
    if (!h || (!h->num_host_alloc && !h->num_ooms))
        return;
    rule(b, '=');
    vg__buf_printf(b, "| %14s pinned host memory (this process) %-24s |\n", "", "");
    rule(b, '-');
    row(b, "Pinned memory", &h->allocated_bytes, &h->allocated_bytes, true);
    row(b, "      registered", &h->registered_bytes, &h->allocated_bytes, true);
    rule(b, '-');
    row(b, "Pinned allocs", &h->allocations, &h->allocations, false);
}

char *vg__stats_summary(const vg_stats_t *s, int device, const vg_host_stats_t *host) {
    vg_buf_t b = {0};
    rule(&b, '=');
    vg__buf_printf(&b, "| %14s vramguard CUDA memory summary, device ID %-17d |\n", "", device);
    rule(&b, '-');
    vg__buf_printf(&b, "|  %9s CUDA OOMs: %-12llu | %6s cudaMalloc retries: %-8llu  |\n", "",
                   (unsigned long long)s->num_ooms, "", (unsigned long long)s->num_alloc_retries);
    rule(&b, '=');
    vg__buf_printf(&b, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");
#define VG_X(f, key, name, bytes)                                                           \
    rule(&b, '-');                                                                          \
    row(&b, name, &s->f[VG_POOL_ALL], &s->f[VG_POOL_ALL], bytes);                           \
    row(&b, "      from large pool", &s->f[VG_POOL_LARGE], &s->f[VG_POOL_ALL], bytes);      \
    row(&b, "      from small pool", &s->f[VG_POOL_SMALL], &s->f[VG_POOL_ALL], bytes);
    VG_STATS_POOLED(VG_X)
#undef VG_X
#define VG_X(f, key, name)                                                                  \
    rule(&b, '-');                                                                          \
    row(&b, name, &s->f, &s->f, false);
    VG_STATS_SINGLE(VG_X)
#undef VG_X
    host_rows(&b, host);
    rule(&b, '=');
    return b.failed ? (vg__buf_free(&b), NULL) : b.data;
}

char *vg__stats_json(const vg_stats_t *s) {
    static const char *pools[VG_POOLS] = {"all", "small_pool", "large_pool"};
    vg_buf_t b = {0};
    vg__buf_putc(&b, '{');
    const char *sep = "";
#define VG_X(f, key, name, bytes)                                                           \
    for (int p = 0; p < VG_POOLS; p++) {                                                    \
        vg__buf_printf(&b,                                                                  \
                       "%s\"" key ".%s.current\":%lld,\"" key ".%s.peak\":%lld,\"" key      \
                       ".%s.allocated\":%lld,\"" key ".%s.freed\":%lld",                    \
                       sep, pools[p], (long long)s->f[p].current, pools[p],                 \
                       (long long)s->f[p].peak, pools[p], (long long)s->f[p].allocated,     \
                       pools[p], (long long)s->f[p].freed);                                 \
        sep = ",";                                                                          \
    }
    VG_STATS_POOLED(VG_X)
#undef VG_X
#define VG_X(f, key, name)                                                                  \
    vg__buf_printf(&b, ",\"" key ".current\":%lld,\"" key ".peak\":%lld,\"" key             \
                       ".allocated\":%lld,\"" key ".freed\":%lld",                          \
                   (long long)s->f.current, (long long)s->f.peak, (long long)s->f.allocated, \
                   (long long)s->f.freed);
    VG_STATS_SINGLE(VG_X)
#undef VG_X
#define VG_X(f, key) vg__buf_printf(&b, ",\"" key "\":%llu", (unsigned long long)s->f);
    VG_STATS_EVENTS(VG_X)
#undef VG_X
    vg__buf_printf(&b, ",\"max_split_size\":-1,\"largest_free_block\":%llu,"
                       "\"largest_servable\":%llu,\"device_total\":%llu,\"limit\":%llu}",
                   (unsigned long long)s->largest_free_block,
                   (unsigned long long)s->largest_servable, (unsigned long long)s->device_total,
                   (unsigned long long)s->limit);
    return b.failed ? (vg__buf_free(&b), NULL) : b.data;
}

/* One counter's four keys, PyTorch's way ("allocated_bytes.current": ...). */
static void stat_json(vg_buf_t *b, const char *key, const vg_stat_t *v) {
    vg__buf_printf(b, ",\"%s.current\":%lld,\"%s.peak\":%lld,\"%s.allocated\":%lld,"
                      "\"%s.freed\":%lld",
                   key, (long long)v->current, key, (long long)v->peak, key,
                   (long long)v->allocated, key, (long long)v->freed);
}

char *vg__host_stats_json(const vg_host_stats_t *h) {
    vg_buf_t b = {0};
    vg__buf_printf(&b, "{\"num_host_alloc\":%llu,\"num_host_free\":%llu",
                   (unsigned long long)h->num_host_alloc, (unsigned long long)h->num_host_free);
#define VG_X(f, key, alias)                                                                 \
    stat_json(&b, key, &h->f);                                                              \
    if (alias[0])                                                                           \
        stat_json(&b, alias, &h->f);
    VG_HOST_STATS_COUNTERS(VG_X)
#undef VG_X
#define VG_X(f, key)                                                                        \
    vg__buf_printf(&b, ",\"" key ".total\":%lld,\"" key ".max\":%lld,\"" key              \
                       ".min\":%lld,\"" key ".count\":%lld,\"" key ".avg\":%lld",          \
                   (long long)h->f.total, (long long)h->f.max, (long long)h->f.min,          \
                   (long long)h->f.count, (long long)(h->f.count ? h->f.total / h->f.count : 0));
    VG_HOST_STATS_TIMES(VG_X)
#undef VG_X
    vg__buf_printf(&b, ",\"num_ooms\":%llu,\"limit\":%llu,\"warn_at\":%llu,\"host_total\":%llu}",
                   (unsigned long long)h->num_ooms, (unsigned long long)h->limit,
                   (unsigned long long)h->warn_at, (unsigned long long)h->host_total);
    return b.failed ? (vg__buf_free(&b), NULL) : b.data;
}
