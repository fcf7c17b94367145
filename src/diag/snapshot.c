/* snapshot.c — snapshot JSON (docs/snapshot-format.md): the state of every device's heap,
 * the last allocator events, the allocation sites they name, statistics and errors, and
 * the process's pinned host memory.
 *
 * Written on request (vg_snapshot_json, vg_write_snapshot), and with `snapshot=PATH` at
 * exit, at the first out-of-memory and at the first error. Those two happen with heap
 * locks held, so they only raise a flag; the snapshot is written by the next API call that
 * holds no lock (vg__snapshot_maybe) or at exit.
 */
#define _GNU_SOURCE
#include "snapshot.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "alloc/heap.h"
#include "base/options.h"
#include "alloc/stats.h"
#include "pinned.h"
#include "report.h"
#include "sites.h"

#define SNAPSHOT_VERSION 1

static const char *state_name(int s) {
    switch (s) {
    case VG_BLOCK_FREE: return "free";
    case VG_BLOCK_ALLOCATED: return "allocated";
    case VG_BLOCK_DEFERRED: return "deferred";
    case VG_BLOCK_QUARANTINED: return "quarantined";
    case VG_BLOCK_POOLED: return "pooled";
    default: return "?";
    }
}

/* Sites named by the snapshot: a bitmap over site ids. */
typedef struct site_set {
    uint8_t *bits;
    uint32_t n;
} site_set_t;

static void site_mark(site_set_t *s, uint32_t id) {
    if (id && id < s->n)
        s->bits[id / 8] |= (uint8_t)(1u << (id % 8));
}

typedef struct {
    vg_buf_t *b;
    const vg_heap_t *h;
    const vg_segment_t *seg;
    site_set_t *sites;
    bool first;
} seg_json_t;

static bool block_json(vg_block_t *k, void *arg) {
    seg_json_t *a = arg;
    vg__buf_printf(a->b, "%s{\"offset\":%llu,\"size\":%llu,\"state\":\"%s\"",
                   a->first ? "" : ",", (unsigned long long)(k->addr - a->seg->base),
                   (unsigned long long)k->size, state_name(k->state));
    a->first = false;
    if (k->state != VG_BLOCK_FREE && k->state != VG_BLOCK_POOLED) { /* (those hold none) */
        vg__buf_printf(a->b, ",\"address\":\"0x%llx\",\"requested\":%llu,\"id\":%llu,"
                             "\"site\":%u,\"stream\":\"0x%llx\"",
                       (unsigned long long)k->user, (unsigned long long)k->requested,
                       (unsigned long long)k->id, k->site,
                       (unsigned long long)(uintptr_t)(k->stream ? k->stream->handle : NULL));
        site_mark(a->sites, k->site);
    }
    vg__buf_putc(a->b, '}');
    return true;
}

static bool unmapped_json(uint64_t offset, uint64_t bytes, void *arg) {
    seg_json_t *a = arg;
    vg__buf_printf(a->b, "%s[%llu,%llu]", a->first ? "" : ",", (unsigned long long)offset,
                   (unsigned long long)bytes);
    a->first = false;
    return true;
}

static bool segment_json(vg_segment_t *seg, void *arg) {
    seg_json_t *a = arg;
    if (!a->first)
        vg__buf_putc(a->b, ',');
    vg__buf_printf(a->b, "{\"address\":\"0x%llx\",\"size\":%llu,\"vmm\":%s,\"small\":%s,"
                         "\"blocks\":[",
                   (unsigned long long)seg->base, (unsigned long long)seg->size,
                   seg->vmm ? "true" : "false", seg->small ? "true" : "false");
    seg_json_t in = {a->b, a->h, seg, a->sites, true};
    vg__segment_each_block(seg, block_json, &in);
    vg__buf_printf(a->b, "],\"unmapped\":[");
    in.first = true; /* runs of pages with no memory */
    vg__segment_each_unmapped(seg, a->h->page, unmapped_json, &in);
    vg__buf_printf(a->b, "]}");
    a->first = false;
    return true;
}

static bool stream_json(vg_stream_t *s, void *arg) {
    seg_json_t *a = arg;
    vg__buf_printf(a->b, "%s\"0x%llx\"", a->first ? "" : ",",
                   (unsigned long long)(uintptr_t)s->handle);
    a->first = false;
    return true;
}

static void events_json(vg_buf_t *b, const vg_events_t *e, site_set_t *sites) {
    uint64_t have = e->ring && e->cap != UINT64_MAX ? VG_MIN(e->n, e->cap) : 0;
    vg__buf_printf(b, ",\"events_dropped\":%llu,\"events\":[",
                   (unsigned long long)(e->n - have));
    for (uint64_t i = e->n - have; i < e->n; i++) {
        const vg_event_t *ev = &e->ring[i % e->cap];
        vg__buf_printf(b, "%s{\"seq\":%llu,\"t_ns\":%llu,\"action\":\"%s\",\"address\":\"0x%llx\","
                          "\"size\":%llu,\"stream\":\"0x%llx\",\"site\":%u}",
                       i == e->n - have ? "" : ",", (unsigned long long)ev->seq,
                       (unsigned long long)ev->t_ns, vg__event_name((vg_event_kind_t)ev->kind),
                       (unsigned long long)ev->addr, (unsigned long long)ev->size,
                       (unsigned long long)(uintptr_t)ev->stream, ev->site);
        site_mark(sites, ev->site);
    }
    vg__buf_putc(b, ']');
}

static void device_json(vg_buf_t *b, vg_heap_t *h, site_set_t *sites) {
    char name[256] = "";
    CUdevice dev;
    if (vg__cuDeviceGet(&dev, h->device) != CUDA_SUCCESS ||
        vg__cuDeviceGetName(name, sizeof name, dev) != CUDA_SUCCESS)
        snprintf(name, sizeof name, "device %d", h->device);
    pthread_mutex_lock(&h->lock);
    vg_stats_t st;
    vg__stats_snapshot(h, &st); /* (this heap's: a context of its own, or managed memory) */
    char *stats = vg__stats_json(&st);
    vg__buf_printf(b, "{\"device\":%d,\"name\":", h->device);
    vg__buf_json_str(b, name);
    if (h->managed)
        vg__buf_printf(b, ",\"managed\":true");
    vg__buf_printf(b, ",\"total_bytes\":%llu,\"limit_bytes\":%llu,\"page_bytes\":%llu,\"stats\":%s",
                   (unsigned long long)h->device_total, (unsigned long long)h->limit,
                   (unsigned long long)h->page, stats ? stats : "{}");
    vg__buf_printf(b, ",\"streams\":[");
    seg_json_t a = {b, h, NULL, sites, true};
    vg__heap_each_stream(h, stream_json, &a);
    vg__buf_printf(b, "],\"segments\":[");
    a.first = true;
    vg__heap_each_segment(h, segment_json, &a);
    vg__buf_putc(b, ']');
    events_json(b, &h->events, sites);
    pthread_mutex_unlock(&h->lock);
    vg__buf_putc(b, '}');
    free(stats);
}

typedef struct {
    vg_buf_t *b;
    site_set_t *sites;
    bool first;
} pinned_json_t;

static void pinned_rec_json(const vg_pinned_rec_t *r, void *arg) {
    pinned_json_t *a = arg;
    vg__buf_printf(a->b, "%s{\"address\":\"0x%llx\",\"size\":%llu,\"id\":%llu,\"site\":%u%s}",
                   a->first ? "" : ",", (unsigned long long)r->base,
                   (unsigned long long)r->size, (unsigned long long)r->id, r->site,
                   r->registered ? ",\"registered\":true" : "");
    site_mark(a->sites, r->site);
    a->first = false;
}

/* The process's pinned host memory (pinned.h), shaped as a device is, when it pinned any. */
static void pinned_json(vg_buf_t *b, site_set_t *sites) {
    vg_events_t ev;
    if (!vg__pinned_events(&ev)) {
        free(ev.ring);
        return;
    }
    vg_host_stats_t st = {.size = sizeof st};
    vg__pinned_stats(&st);
    char *stats = vg__host_stats_json(&st);
    vg__buf_printf(b, ",\"pinned_host\":{\"name\":\"pinned host memory\",\"total_bytes\":%llu,"
                      "\"limit_bytes\":%llu,\"stats\":%s,\"allocations\":[",
                   (unsigned long long)st.host_total, (unsigned long long)st.limit,
                   stats ? stats : "{}");
    pinned_json_t a = {b, sites, true};
    vg__pinned_each(pinned_rec_json, &a);
    vg__buf_printf(b, "],\"sites\":[");
    a.first = true;
    for (uint32_t id = 0; id < vg__site_count(); id++) { /* every site that pinned */
        vg_site_t *s = vg__site(id);
        if (!s || !atomic_load(&s->pinned_total))
            continue;
        vg__buf_printf(b, "%s{\"site\":%u,\"bytes\":%lld,\"count\":%lld,\"peak_bytes\":%lld,"
                          "\"total_count\":%llu}",
                       a.first ? "" : ",", id, (long long)atomic_load(&s->pinned_bytes),
                       (long long)atomic_load(&s->pinned_count),
                       (long long)atomic_load(&s->pinned_peak),
                       (unsigned long long)atomic_load(&s->pinned_total));
        site_mark(sites, id);
        a.first = false;
    }
    vg__buf_putc(b, ']');
    events_json(b, &ev, sites);
    vg__buf_putc(b, '}');
    free(stats);
    free(ev.ring);
}

static void sites_json(vg_buf_t *b, const site_set_t *sites) {
    vg__buf_printf(b, ",\"sites\":[");
    bool first = true;
    for (uint32_t id = 1; id < sites->n; id++) {
        if (!(sites->bits[id / 8] & (1u << (id % 8))))
            continue;
        vg_site_t *s = vg__site(id);
        if (!s)
            continue;
        vg__buf_printf(b, "%s{\"id\":%u,\"frames\":[", first ? "" : ",", id);
        first = false;
        uint32_t shown = vg__site_symbolize(s);
        for (uint32_t i = 0; i < shown; i++) {
            if (i)
                vg__buf_putc(b, ',');
            vg__buf_json_str(b, vg__symbolize(s->frames[i]));
        }
        vg__buf_printf(b, "]}");
    }
    vg__buf_putc(b, ']');
}

static int env_int(const char *name) {
    const char *v = secure_getenv(name);
    return v && *v ? atoi(v) : -1;
}

char *vg__snapshot_build(const char *reason) {
    vg_buf_t b = {0};
    site_set_t sites = {.n = vg__site_count() + 1};
    sites.bits = calloc(sites.n / 8 + 1, 1);
    if (!sites.bits)
        return NULL;
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    vg__buf_printf(&b, "{\"format\":\"vramguard-snapshot\",\"version\":%d,\"reason\":",
                   SNAPSHOT_VERSION);
    vg__buf_json_str(&b, reason);
    vg__buf_printf(&b, ",\"pid\":%d,\"rank\":%d,\"local_rank\":%d,\"host\":", (int)getpid(),
                   vg__rank(), env_int("LOCAL_RANK"));
    vg__buf_json_str(&b, host);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    const char *mode = vg__opt.mode == VG_MODE_MEMCHECK ? "memcheck"
                       : vg__opt.mode == VG_MODE_GUARD  ? "guard"
                                                        : "fast";
    vg__buf_printf(&b, ",\"time_ns\":%llu,\"unix_ns\":%llu,\"mode\":\"%s\",\"last_event\":%llu,"
                   "\"devices\":[",
                   (unsigned long long)vg__now_ns(),
                   (unsigned long long)wall.tv_sec * 1000000000ull + (unsigned long long)wall.tv_nsec,
                   mode, (unsigned long long)vg__event_seq());
    for (int i = 0; i < vg__heap_count(); i++) {
        if (i)
            vg__buf_putc(&b, ',');
        device_json(&b, vg__heap_at(i), &sites);
    }
    vg__buf_putc(&b, ']');
    pinned_json(&b, &sites);
    sites_json(&b, &sites);
    char *errors = vg__reports_json();
    vg__buf_printf(&b, ",\"errors\":%s,\"kernels\":", errors ? errors : "[]");
    vg__launches_json(&b, 0, 1024, false);
    vg__buf_printf(&b, "}\n");
    free(errors);
    free(sites.bits);
    return b.data;
}

vg_status_t vg__snapshot_write(const char *pattern, const char *reason) {
    char *json = vg__snapshot_build(reason);
    if (!json)
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for a snapshot");
    vg_status_t st = vg__write_file(pattern, json, strlen(json));
    free(json);
    return st;
}

static _Atomic int g_done; /* the reasons written (report.c's bits): once each */

void vg__snapshot_maybe(void) {
    int want = vg__snapshot_wanted_take();
    if (!want)
        return;
    int done = atomic_fetch_or(&g_done, want);
    if (want & ~done & 1)
        vg__snapshot_write(vg__opt.snapshot, "oom");
    else if (want & ~done & 2)
        vg__snapshot_write(vg__opt.snapshot, "error");
}

void vg__snapshot_at_exit(void) {
    if (vg__opt.snapshot[0] && vg__snapshot_write(vg__opt.snapshot, "exit") != VG_OK)
        vg__log("could not write the snapshot: %s", vg_last_error());
}
