/* report_chrome.c — `vramguard report --chrome-trace OUT`: Chrome trace-event JSON, which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open. Per process (rank) and device: a
 * counter track of allocated and reserved bytes, an instant event per allocation and
 * free, the kernel launches vramguard saw, and the errors (global instants).
 *
 * Timestamps are microseconds since the earliest event of all files. Snapshots record a
 * coarse clock, so events within one tick share a timestamp; they are spread 1 ns apart
 * to keep their order in the viewer. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report_model.h"

static void jstr(FILE *o, const char *s) {
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c < 0x20)
            fprintf(o, "\\u%04x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
}

typedef struct clock_map {
    uint64_t t0;
    double last; /* last timestamp written, per process */
} clock_map_t;

static double ts_of(clock_map_t *c, uint64_t t_ns) {
    double t = t_ns >= c->t0 ? (double)(t_ns - c->t0) / 1000.0 : 0;
    if (t <= c->last)
        t = c->last + 0.001;
    c->last = t;
    return t;
}

static uint64_t earliest(rp_file_t *files, int n) {
    uint64_t t0 = UINT64_MAX;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < files[i].ndevices; k++) {
            const json_t *evs = json_get(files[i].devices[k].j, "events");
            if (evs->n) {
                uint64_t t = (uint64_t)json_int(evs->kids[0], "t_ns", 0);
                if (t < t0)
                    t0 = t;
            }
        }
    return t0 == UINT64_MAX ? 0 : t0;
}

static void site_name(const rp_file_t *f, int64_t site, char *out, size_t n) {
    const json_t *fr = rp_site_frames(f, site);
    if (fr && fr->n && fr->kids[0]->type == J_STR)
        rp_frame_short(fr->kids[0]->str, out, n);
    else
        snprintf(out, n, "site %lld", (long long)site);
}

int rp_write_chrome(const char *path, rp_file_t *files, int n) {
    FILE *o = fopen(path, "w");
    if (!o) {
        fprintf(stderr, "vramguard: cannot write '%s': %s\n", path, strerror(errno));
        return 2;
    }
    uint64_t t0 = earliest(files, n);
    fprintf(o, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"vramguard report\"},"
               "\"traceEvents\":[\n");
    bool first = true;
#define SEP() (first ? (first = false, "") : ",\n")
    for (int i = 0; i < n; i++) {
        rp_file_t *f = &files[i];
        int pid = f->rank >= 0 ? f->rank : f->pid;
        char rk[32], name[96];
        rp_rank_label(f, rk, sizeof rk);
        snprintf(name, sizeof name, "%s (pid %d%s%s)", rk, f->pid, *f->host ? " on " : "", f->host);
        fprintf(o, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", SEP(), pid);
        jstr(o, name);
        fprintf(o, "}}");
        clock_map_t clk = {t0, -1};
        for (int k = 0; k < f->ndevices; k++) {
            const rp_device_t *d = &f->devices[k];
            fprintf(o, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
                    SEP(), pid, d->device);
            char dn[400];
            rp_device_label(d, dn, sizeof dn);
            jstr(o, dn);
            fprintf(o, "}}");
            const json_t *evs = json_get(d->j, "events");
            double allocated = 0, reserved = 0;
            clk.last = -1;
            for (size_t e = 0; e < evs->n; e++) {
                const json_t *ev = evs->kids[e];
                const char *a = json_str(ev, "action", "");
                double size = (double)json_int(ev, "size", 0);
                double ts = ts_of(&clk, (uint64_t)json_int(ev, "t_ns", 0));
                if (strcmp(a, "alloc") == 0)
                    allocated += size;
                else if (strcmp(a, "free") == 0)
                    allocated = allocated > size ? allocated - size : 0;
                else if (strcmp(a, "map") == 0)
                    reserved += size;
                else if (strcmp(a, "unmap") == 0)
                    reserved = reserved > size ? reserved - size : 0;
                char b[32], sn[200];
                site_name(f, json_int(ev, "site", 0), sn, sizeof sn);
                fprintf(o, "%s{\"name\":\"%s %s\",\"cat\":\"memory\",\"ph\":\"i\",\"s\":\"t\","
                           "\"ts\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{\"address\":\"%s\",\"bytes\":%.0f",
                        SEP(), a, rp_bytes(b, size), ts, pid, d->device, json_str(ev, "address", "?"), size);
                if (strcmp(a, "alloc") == 0 || strcmp(a, "free") == 0) {
                    fprintf(o, ",\"site\":");
                    jstr(o, sn);
                }
                fprintf(o, "}}");
                if (d->pinned) /* (its own counter track: what the driver pinned) */
                    fprintf(o, "%s{\"name\":\"pinned host memory\",\"ph\":\"C\",\"ts\":%.3f,"
                               "\"pid\":%d,\"args\":{\"pinned\":%.0f}}",
                            SEP(), ts, pid, allocated);
                else
                    fprintf(o, "%s{\"name\":\"device %d memory\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,"
                               "\"args\":{\"allocated\":%.0f,\"reserved\":%.0f}}",
                            SEP(), d->device, ts, pid, allocated, reserved);
            }
        }
        clock_map_t kclk = {t0, -1}, eclk = {t0, -1}; /* their own orders */
        for (size_t k = 0; f->kernels && k < f->kernels->n; k++) {
            const json_t *kr = f->kernels->kids[k];
            double ts = ts_of(&kclk, (uint64_t)json_int(kr, "t_ns", 0));
            fprintf(o, "%s{\"name\":", SEP());
            jstr(o, json_str(kr, "name", "kernel"));
            fprintf(o, ",\"cat\":\"kernel\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,"
                       "\"tid\":1000,\"args\":{\"stream\":\"%s\"}}",
                    ts, pid, json_str(kr, "stream", "?"));
        }
        for (size_t k = 0; k < f->errors->n; k++) {
            const json_t *er = f->errors->kids[k];
            double ts = ts_of(&eclk, (uint64_t)json_int(er, "t_ns", 0));
            fprintf(o, "%s{\"name\":", SEP());
            jstr(o, json_str(er, "message", "error"));
            fprintf(o, ",\"cat\":\"error\",\"ph\":\"i\",\"s\":\"g\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d,"
                       "\"args\":{\"kind\":\"%s\"}}",
                    ts, pid, (int)json_int(er, "device", 0), json_str(er, "kind", "?"));
        }
        if (f->kernels && f->kernels->n)
            fprintf(o, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1000,"
                       "\"args\":{\"name\":\"kernel launches\"}}", SEP(), pid);
    }
#undef SEP
    fprintf(o, "\n]}\n");
    if (fclose(o) != 0) {
        fprintf(stderr, "vramguard: cannot write '%s': %s\n", path, strerror(errno));
        return 2;
    }
    return 0;
}
