/* report_text.c — `vramguard report FILE...`: the text summary. One section per snapshot
 * (top sites by live bytes, peaks, fragmentation, errors); with several snapshots, first a
 * table with a row per rank and device. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "report_model.h"

static int64_t stat_of(const rp_device_t *d, const char *key) {
    return json_int(json_get(d->j, "stats"), key, 0);
}

/* Live bytes per allocation site from the blocks of the segment map (the state when the
 * snapshot was taken). */
typedef struct site_sum {
    int64_t site;
    uint64_t bytes, count;
} site_sum_t;

static int by_bytes(const void *a, const void *b) {
    const site_sum_t *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

typedef struct site_sums {
    site_sum_t *s;
    size_t n, cap;
    bool failed;
} site_sums_t;

static void sums_add(site_sums_t *m, int64_t site, uint64_t bytes) {
    size_t j = 0;
    while (j < m->n && m->s[j].site != site)
        j++;
    if (j == m->n) {
        if (m->n == m->cap) {
            size_t cap = m->cap ? 2 * m->cap : 64;
            site_sum_t *ns = realloc(m->s, cap * sizeof *ns);
            if (!ns) {
                m->failed = true;
                return;
            }
            m->s = ns;
            m->cap = cap;
        }
        m->s[m->n++] = (site_sum_t){site, 0, 0};
    }
    m->s[j].bytes += bytes;
    m->s[j].count++;
}

/* The five sites with the most live bytes (`what`: "allocation", done: "allocated"). */
static void sums_print(FILE *out, const rp_file_t *f, site_sums_t *m, const char *what,
                       const char *done) {
    char b1[32];
    if (m->n == 0) {
        fprintf(out, "    nothing %s when the snapshot was taken\n", done);
        return;
    }
    qsort(m->s, m->n, sizeof *m->s, by_bytes);
    fprintf(out, "    top %s sites by live bytes:\n", what);
    for (size_t i = 0; i < m->n && i < 5; i++) {
        fprintf(out, "      %10s in %llu allocation%s from ", rp_bytes(b1, (double)m->s[i].bytes),
                (unsigned long long)m->s[i].count, m->s[i].count == 1 ? "" : "s");
        const json_t *fr = rp_site_frames(f, m->s[i].site);
        if (!fr || fr->n == 0)
            fprintf(out, "(no backtrace)\n");
        for (size_t k = 0; fr && k < fr->n && k < 4; k++) {
            char sh[200];
            rp_frame_short(fr->kids[k]->type == J_STR ? fr->kids[k]->str : "?", sh, sizeof sh);
            fprintf(out, "%s%s\n", k ? "                  " : "", sh);
        }
    }
    if (m->n > 5)
        fprintf(out, "      ... and %zu more sites\n", m->n - 5);
}

static void top_sites(FILE *out, const rp_file_t *f, const rp_device_t *d) {
    site_sums_t m = {0};
    const json_t *segs = json_get(d->j, "segments");
    for (size_t i = 0; i < segs->n && !m.failed; i++) {
        const json_t *blocks = json_get(segs->kids[i], "blocks");
        for (size_t k = 0; k < blocks->n; k++) {
            const json_t *b = blocks->kids[k];
            if (strcmp(json_str(b, "state", ""), "allocated") == 0)
                sums_add(&m, json_int(b, "site", 0), (uint64_t)json_int(b, "requested", 0));
        }
    }
    char b1[32];
    int64_t cached = stat_of(d, "reserved_bytes.all.current") - stat_of(d, "allocated_bytes.all.current");
    fprintf(out, "    cached and free (reserved, not allocated): %s\n",
            rp_bytes(b1, (double)(cached > 0 ? cached : 0)));
    sums_print(out, f, &m, "allocation", "allocated");
    free(m.s);
}

/* The process's pinned host memory (docs/snapshot-format.md, pinned_host). */
static void pinned_text(FILE *out, const rp_file_t *f, const rp_device_t *d) {
    char b1[32], b2[32], b3[32];
    fprintf(out, "  %s (the host has %s of RAM", d->name, rp_bytes(b1, (double)d->total));
    int64_t limit = json_int(d->j, "limit_bytes", 0);
    if (limit > 0)
        fprintf(out, "; pinned_limit %s", rp_bytes(b2, (double)limit));
    fprintf(out, ")\n    pinned: %s now in %lld allocations, peak %s; %lld pinned, %lld freed or "
                 "unregistered, %lld refused\n",
            rp_bytes(b2, (double)stat_of(d, "allocated_bytes.current")),
            (long long)stat_of(d, "allocations.current"),
            rp_bytes(b3, (double)stat_of(d, "allocated_bytes.peak")),
            (long long)stat_of(d, "num_host_alloc"), (long long)stat_of(d, "num_host_free"),
            (long long)stat_of(d, "num_ooms"));
    site_sums_t m = {0};
    const json_t *all = json_get(d->j, "allocations");
    for (size_t i = 0; i < all->n && !m.failed; i++)
        sums_add(&m, json_int(all->kids[i], "site", 0), (uint64_t)json_int(all->kids[i], "size", 0));
    sums_print(out, f, &m, "pinning", "pinned");
    free(m.s);
}

static void timeline_text(FILE *out, const rp_device_t *d) {
    char b1[32];
    if (d->nevents == 0) {
        if (stat_of(d, d->pinned ? "allocations.allocated" : "allocation.all.allocated") == 0 &&
            d->events_dropped == 0)
            fprintf(out, "    timeline: nothing was allocated here\n");
        else
            fprintf(out, "    timeline: no allocator events were recorded (they are "
                         "with snapshot=PATH, or snapshot_events=N)\n");
        return;
    }
    fprintf(out, "    timeline: %zu events kept", d->nevents);
    if (d->events_dropped > 0)
        fprintf(out, " (%lld earlier ones dropped: raise snapshot_events)",
                (long long)d->events_dropped);
    fprintf(out, ", peak live %s in them\n", rp_bytes(b1, d->peak_live));
}

static void errors_text(FILE *out, const rp_file_t *f) {
    size_t n = f->errors->n;
    if (n == 0) {
        fprintf(out, "  errors: none\n");
        return;
    }
    fprintf(out, "  errors: %zu\n", n);
    for (size_t i = 0; i < n && i < 20; i++) {
        const json_t *e = f->errors->kids[i];
        const json_t *a = json_get(e, "allocation");
        fprintf(out, "    %s", json_str(e, "message", "?"));
        if (a)
            fprintf(out, ": %lld-byte allocation #%lld at %s", (long long)json_int(a, "size", 0),
                    (long long)json_int(a, "id", 0), json_str(a, "address", "?"));
        const json_t *dmg = json_get(e, "damage");
        if (dmg)
            fprintf(out, ", offsets %lld to %lld", (long long)json_int(dmg, "first_offset", 0),
                    (long long)json_int(dmg, "last_offset", 0));
        fputc('\n', out);
    }
    if (n > 20)
        fprintf(out, "    ... and %zu more (the JSON has them all)\n", n - 20);
}

static void ranks_table(FILE *out, rp_file_t *files, int n) {
    char b1[32], b2[32], b3[32], rk[32];
    fprintf(out, "%-10s %-7s %14s %14s %10s %14s %7s\n", "process", "device", "peak allocated",
            "peak reserved", "res/alloc", "allocated now", "errors");
    for (int i = 0; i < n; i++) {
        rp_rank_label(&files[i], rk, sizeof rk);
        for (int k = 0; k < files[i].ndevices; k++) {
            const rp_device_t *d = &files[i].devices[k];
            if (d->pinned) /* (a device's figures: the pinned memory is in each rank's part) */
                continue;
            double pa = (double)stat_of(d, "allocated_bytes.all.peak");
            double pr = (double)stat_of(d, "reserved_bytes.all.peak");
            fprintf(out, "%-10s %-7d %14s %14s %10.4f %14s %7zu\n", rk, d->device, rp_bytes(b1, pa),
                    rp_bytes(b2, pr), pa > 0 ? pr / pa : 0.0,
                    rp_bytes(b3, (double)stat_of(d, "allocated_bytes.all.current")),
                    files[i].errors->n);
        }
    }
    fputc('\n', out);
}

int rp_write_text(FILE *out, rp_file_t *files, int n) {
    if (n > 1)
        ranks_table(out, files, n);
    for (int i = 0; i < n; i++) {
        const rp_file_t *f = &files[i];
        char rk[32], b1[32], b2[32], b3[32], b4[32];
        rp_rank_label(f, rk, sizeof rk);
        char who[96];
        if (f->rank >= 0)
            snprintf(who, sizeof who, "%s (pid %d", rk, f->pid);
        else
            snprintf(who, sizeof who, "process %d (no rank", f->pid);
        fprintf(out, "%s: %s%s%s), %s mode, snapshot taken %s\n", f->path, who,
                *f->host ? ", on " : "", f->host, f->mode,
                strcmp(f->reason, "exit") == 0       ? "at exit"
                : strcmp(f->reason, "oom") == 0      ? "at an out-of-memory error"
                : strcmp(f->reason, "error") == 0    ? "at the first error"
                                                     : "on request");
        for (int k = 0; k < f->ndevices; k++) {
            const rp_device_t *d = &f->devices[k];
            if (d->pinned) {
                pinned_text(out, f, d);
                timeline_text(out, d);
                continue;
            }
            double pa = (double)stat_of(d, "allocated_bytes.all.peak");
            double pr = (double)stat_of(d, "reserved_bytes.all.peak");
            fprintf(out, "  device %d (%s, %s)\n", d->device, d->name, rp_bytes(b1, (double)d->total));
            fprintf(out, "    allocated: %s now, peak %s;  reserved: %s now, peak %s\n",
                    rp_bytes(b1, (double)stat_of(d, "allocated_bytes.all.current")), rp_bytes(b2, pa),
                    rp_bytes(b3, (double)stat_of(d, "reserved_bytes.all.current")), rp_bytes(b4, pr));
            /* Memory is mapped in 2 MiB pages: a program that allocates a few KiB holds one
             * page, a high ratio that says nothing about fragmentation. */
            fprintf(out, "    fragmentation: reserved / allocated at peak = %.4f%s\n",
                    pa > 0 ? pr / pa : 0.0,
                    !(pa > 0 && pr / pa > 1.05) ? ""
                    : pr - pa <= 2.0 * 1024 * 1024
                        ? " (less than one 2 MiB page unused: memory is mapped in 2 MiB pages)"
                        : " (more than 5% of reserved memory is unused)");
            fprintf(out, "    out-of-memory errors: %lld, device allocations: %lld\n",
                    (long long)stat_of(d, "num_ooms"), (long long)stat_of(d, "num_device_alloc"));
            top_sites(out, f, d);
            timeline_text(out, d);
        }
        errors_text(out, f);
        if (i + 1 < n)
            fputc('\n', out);
    }
    return 0;
}
