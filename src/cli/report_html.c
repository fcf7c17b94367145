/* report_html.c — `vramguard report --html OUT`: one self-contained HTML file (no network,
 * no external assets). The page (report_page.html, compiled in) draws, per rank and
 * device, an interactive memory timeline stacked by allocation site with the errors
 * marked, the segment map, and the error list, from the data this file writes into it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report_model.h"
#include "report_page_html.h" /* generated from report_page.html: report_page_html[] */

#define PLACEHOLDER "/*VRAMGUARD_DATA*/"

/* A JSON string that is also safe inside <script> ('<' escaped). */
static void jstr(FILE *o, const char *s) {
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&')
            fprintf(o, "\\u%04x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
}

static void site_text(const rp_file_t *f, int64_t site, char *out, size_t n) {
    const json_t *fr = rp_site_frames(f, site);
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; fr && i < fr->n && i < 3 && used + 1 < n; i++) {
        char sh[160];
        rp_frame_short(fr->kids[i]->type == J_STR ? fr->kids[i]->str : "?", sh, sizeof sh);
        int w = snprintf(out + used, n - used, "%s%s", i ? " < " : "allocated at ", sh);
        used = w > 0 ? used + (size_t)w : used;
    }
}

static void segments_json(FILE *o, const rp_file_t *f, const rp_device_t *d) {
    const json_t *segs = json_get(d->j, "segments"); /* (none for pinned host memory) */
    fprintf(o, "[");
    for (size_t i = 0; segs && i < segs->n; i++) {
        const json_t *s = segs->kids[i];
        fprintf(o, "%s{\"address\":", i ? "," : "");
        jstr(o, json_str(s, "address", "?"));
        const json_t *small = json_get(s, "small");
        fprintf(o, ",\"size\":%lld,\"small\":%s,\"blocks\":[", (long long)json_int(s, "size", 0),
                small && small->type == J_BOOL && small->b ? "true" : "false");
        const json_t *blocks = json_get(s, "blocks");
        for (size_t k = 0; k < blocks->n; k++) {
            const json_t *b = blocks->kids[k];
            const char *st = json_str(b, "state", "?");
            char label[600] = "";
            if (strcmp(st, "pooled") == 0) {
                snprintf(label, sizeof label, "freed, kept for a CUDA graph");
            } else if (strcmp(st, "free") != 0) {
                char where[480];
                site_text(f, json_int(b, "site", 0), where, sizeof where);
                snprintf(label, sizeof label, "#%lld, %lld bytes requested at %s%s%s",
                         (long long)json_int(b, "id", 0), (long long)json_int(b, "requested", 0),
                         json_str(b, "address", "?"), *where ? "; " : "", where);
            }
            fprintf(o, "%s[%lld,%lld,", k ? "," : "", (long long)json_int(b, "offset", 0),
                    (long long)json_int(b, "size", 0));
            jstr(o, st);
            fputc(',', o);
            jstr(o, label);
            fputc(']', o);
        }
        fprintf(o, "],\"unmapped\":[");
        const json_t *un = json_get(s, "unmapped");
        for (size_t k = 0; un && k < un->n; k++) {
            const json_t *r = un->kids[k];
            if (r->type != J_ARR || r->n != 2)
                continue;
            fprintf(o, "%s[%lld,%lld]", k ? "," : "", (long long)r->kids[0]->i, (long long)r->kids[1]->i);
        }
        fprintf(o, "]}");
    }
    fprintf(o, "]");
}

static void panel_json(FILE *o, const rp_file_t *f, const rp_device_t *d) {
    char rk[32], title[448], sub[256], b1[32], b2[32];
    rp_rank_label(f, rk, sizeof rk);
    char dl[400];
    rp_device_label(d, dl, sizeof dl);
    snprintf(title, sizeof title, "%s, %s", rk, dl);
    snprintf(sub, sizeof sub, "%s (pid %d%s%s), %s mode; peak live %s, peak reserved %s in the "
                              "events kept%s",
             f->path, f->pid, *f->host ? " on " : "", f->host, f->mode, rp_bytes(b1, d->peak_live),
             rp_bytes(b2, d->peak_reserved), d->events_dropped ? " (older events were dropped)" : "");
    fprintf(o, "{\"title\":");
    jstr(o, title);
    fprintf(o, ",\"subtitle\":");
    jstr(o, sub);
    fprintf(o, ",\"by_size\":%s,\"events\":%zu,\"series\":[", d->by_size ? "true" : "false",
            d->nevents);
    for (int s = 0; s < d->nseries; s++) {
        fprintf(o, "%s{\"label\":", s ? "," : "");
        jstr(o, d->series[s].label);
        fprintf(o, ",\"peak\":%llu}", (unsigned long long)d->series[s].peak);
    }
    fprintf(o, "],\"seq\":[");
    for (int i = 0; i < d->nsamples; i++)
        fprintf(o, "%s%llu", i ? "," : "", (unsigned long long)d->sample_seq[i]);
    fprintf(o, "],\"live\":[");
    for (int i = 0; i < d->nsamples; i++) {
        fprintf(o, "%s[", i ? "," : "");
        for (int s = 0; s < d->nseries; s++)
            fprintf(o, "%s%.0f", s ? "," : "", d->live[(size_t)i * RP_MAX_SERIES + s]);
        fputc(']', o);
    }
    fprintf(o, "],\"reserved\":[");
    for (int i = 0; i < d->nsamples; i++)
        fprintf(o, "%s%.0f", i ? "," : "", d->reserved[i]);
    fprintf(o, "],\"markers\":[");
    for (int m = 0; m < d->nmarkers; m++) {
        fprintf(o, "%s{\"sample\":%d,\"kind\":", m ? "," : "", d->markers[m].sample);
        jstr(o, d->markers[m].kind);
        fprintf(o, ",\"message\":");
        jstr(o, d->markers[m].message);
        fputc('}', o);
    }
    fprintf(o, "],\"segments\":");
    segments_json(o, f, d);
    fprintf(o, ",\"errors\":[");
    bool first = true;
    for (size_t i = 0; i < f->errors->n; i++) {
        const json_t *e = f->errors->kids[i];
        int64_t dev = json_int(e, "device", d->device);
        if (dev != d->device && dev >= 0)
            continue;
        char line[600];
        const json_t *a = json_get(e, "allocation");
        if (a)
            snprintf(line, sizeof line, "%s: %lld-byte allocation #%lld at %s",
                     json_str(e, "message", "?"), (long long)json_int(a, "size", 0),
                     (long long)json_int(a, "id", 0), json_str(a, "address", "?"));
        else
            snprintf(line, sizeof line, "%s", json_str(e, "message", "?"));
        fprintf(o, "%s", first ? "" : ",");
        first = false;
        jstr(o, line);
    }
    fprintf(o, "]}");
}

int rp_write_html(const char *path, rp_file_t *files, int n) {
    const char *cut = strstr(report_page_html, PLACEHOLDER);
    FILE *o = fopen(path, "w");
    if (!o || !cut) {
        fprintf(stderr, "vramguard: cannot write '%s': %s\n", path,
                o ? "the page template has no data placeholder" : strerror(errno));
        if (o)
            fclose(o);
        return 2;
    }
    char *summary = NULL;
    size_t slen = 0;
    FILE *mem = open_memstream(&summary, &slen);
    if (mem) {
        rp_write_text(mem, files, n);
        fclose(mem);
    }
    fwrite(report_page_html, 1, (size_t)(cut - report_page_html), o);
    fprintf(o, "{\"files\":[");
    for (int i = 0; i < n; i++) {
        fprintf(o, "%s", i ? "," : "");
        jstr(o, files[i].path);
    }
    fprintf(o, "],\"summary\":");
    jstr(o, summary ? summary : "");
    free(summary);
    fprintf(o, ",\"panels\":[");
    bool first = true;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < files[i].ndevices; k++) {
            fprintf(o, "%s", first ? "" : ",\n");
            first = false;
            panel_json(o, &files[i], &files[i].devices[k]);
        }
    fprintf(o, "]}");
    fputs(cut + strlen(PLACEHOLDER), o);
    if (fclose(o) != 0) {
        fprintf(stderr, "vramguard: cannot write '%s': %s\n", path, strerror(errno));
        return 2;
    }
    return 0;
}
