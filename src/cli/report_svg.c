/* report_svg.c — `vramguard report --svg OUT`: a static picture of the memory timeline,
 * one panel per rank and device: live memory stacked by allocation site (or size class),
 * the reserved memory as a dashed line, errors as red markers, and a legend. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_model.h"

#define W 960
#define PANEL_H 250
#define LEFT 80
#define RIGHT 24
#define TOP 44
#define LEGEND_LINE 18

static const char *const palette[RP_MAX_SERIES] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                   "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                                                   "#bab0ac"};

static void xml(FILE *o, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '&': fputs("&amp;", o); break;
        case '"': fputs("&quot;", o); break;
        default: fputc(*s, o);
        }
    }
}

/* A "nice" axis maximum and step for values up to v. */
static void nice_axis(double v, double *max, double *step) {
    if (v <= 0)
        v = 1;
    double raw = v / 5, mag = pow(10, floor(log10(raw)));
    double m = raw / mag;
    double s = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
    *step = s * mag;
    *max = ceil(v / *step) * *step;
}

static int panel_height(const rp_device_t *d) {
    return TOP + PANEL_H + 36 + LEGEND_LINE * (d->nseries + 2) + 10;
}

static void panel(FILE *o, const rp_file_t *f, const rp_device_t *d, int y0) {
    char rk[32], b1[32], b2[32];
    rp_rank_label(f, rk, sizeof rk);
    int pw = W - LEFT - RIGHT;
    fprintf(o, "<g transform=\"translate(0,%d)\">\n", y0);
    fprintf(o, "<text x=\"%d\" y=\"18\" class=\"title\">", LEFT);
    xml(o, rk);
    char dl[400];
    rp_device_label(d, dl, sizeof dl);
    fprintf(o, ", ");
    xml(o, dl);
    fprintf(o, "</text>\n<text x=\"%d\" y=\"34\" class=\"axis\">peak live %s, peak reserved %s"
               "</text>\n", LEFT, rp_bytes(b1, d->peak_live), rp_bytes(b2, d->peak_reserved));
    /* Live memory far below what is reserved (a small program holds one 2 MiB page for a
     * few KiB) would be a line along the floor: the axis then fits live memory, and the
     * reserved line runs along the top, marked as off the scale. */
    bool off_scale = d->peak_live > 0 && d->peak_live * RP_OFF_SCALE < d->peak_reserved;
    double top = off_scale || d->peak_live > d->peak_reserved ? d->peak_live : d->peak_reserved;
    const char *unit = top >= (1ull << 30) ? "GiB" : top >= (1u << 20) ? "MiB" : "KiB";
    double div = top >= (1ull << 30) ? (double)(1ull << 30) : top >= (1u << 20) ? (double)(1u << 20) : 1024.0;
    double ymax, step;
    nice_axis(top / div, &ymax, &step);
    ymax *= div;
    step *= div;
#define XP(i) (LEFT + (d->nsamples > 1 ? (double)(i) * pw / (d->nsamples - 1) : 0))
#define YP(v) (TOP + PANEL_H - (v) / ymax * PANEL_H)
    /* grid and axis labels */
    for (double v = 0; v <= ymax * 1.0001; v += step) {
        fprintf(o, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", LEFT,
                LEFT + pw, YP(v), YP(v));
        fprintf(o, "<text x=\"%d\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%g %s</text>\n",
                LEFT - 6, YP(v) + 4, v / div, unit);
    }
    if (d->nsamples == 0)
        fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"axis\">no allocator events recorded</text>\n",
                LEFT + 10, TOP + PANEL_H / 2);
    /* stacked areas, bottom series first */
    for (int s = 0; s < d->nseries && d->nsamples > 0; s++) {
        fprintf(o, "<polygon fill=\"%s\" fill-opacity=\"0.9\" points=\"", palette[s % RP_MAX_SERIES]);
        for (int i = 0; i < d->nsamples; i++) { /* upper edge, left to right */
            double up = 0;
            for (int k = 0; k <= s; k++)
                up += d->live[(size_t)i * RP_MAX_SERIES + k];
            fprintf(o, "%.1f,%.1f ", XP(i), YP(up));
        }
        for (int i = d->nsamples - 1; i >= 0; i--) { /* lower edge, back */
            double lo = 0;
            for (int k = 0; k < s; k++)
                lo += d->live[(size_t)i * RP_MAX_SERIES + k];
            fprintf(o, "%.1f,%.1f ", XP(i), YP(lo));
        }
        fprintf(o, "\"><title>");
        xml(o, d->series[s].label);
        fprintf(o, "</title></polygon>\n");
    }
    if (d->nsamples > 0) {
        fprintf(o, "<polyline class=\"reserved\" points=\"");
        for (int i = 0; i < d->nsamples; i++)
            fprintf(o, "%.1f,%.1f ", XP(i), YP(d->reserved[i] < ymax ? d->reserved[i] : ymax));
        fprintf(o, "\"><title>reserved</title></polyline>\n");
        if (off_scale)
            fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"axis\" text-anchor=\"end\">reserved: %s, "
                       "above this scale (the axis fits live memory)</text>\n",
                    LEFT + pw - 6, TOP + 14, rp_bytes(b1, d->peak_reserved));
    }
    for (int m = 0; m < d->nmarkers; m++) {
        double x = XP(d->markers[m].sample);
        fprintf(o, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"error\"><title>", x, x,
                TOP, TOP + PANEL_H);
        xml(o, d->markers[m].message);
        fprintf(o, "</title></line><path d=\"M%.1f,%d l-5,-8 h10 z\" class=\"errmark\"/>\n", x, TOP);
    }
    fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", LEFT, TOP,
            pw, PANEL_H);
    fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"axis\">allocator events (%zu)%s</text>\n", LEFT,
            TOP + PANEL_H + 16, d->nevents, d->events_dropped ? ", older ones dropped" : "");
    /* legend */
    int ly = TOP + PANEL_H + 36;
    fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"axis\">live memory by %s:</text>\n", LEFT, ly,
            d->by_size ? "size class" : "allocation site");
    for (int s = 0; s < d->nseries; s++) {
        int y = ly + LEGEND_LINE * (s + 1);
        fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", LEFT, y - 10,
                palette[s % RP_MAX_SERIES]);
        fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"legend\">", LEFT + 18, y);
        xml(o, d->series[s].label);
        if (d->series[s].peak)
            fprintf(o, " (peak %s)", rp_bytes(b1, (double)d->series[s].peak));
        fprintf(o, "</text>\n");
    }
    int y = ly + LEGEND_LINE * (d->nseries + 1);
    fprintf(o, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" class=\"reserved\"/>", LEFT, LEFT + 12,
            y - 4, y - 4);
    fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"legend\">reserved (device memory vramguard holds)%s</text>\n",
            LEFT + 18, y, d->nmarkers ? "; red: errors" : "");
    fprintf(o, "</g>\n");
#undef XP
#undef YP
}

int rp_write_svg(const char *path, rp_file_t *files, int n) {
    FILE *o = fopen(path, "w");
    if (!o) {
        fprintf(stderr, "vramguard: cannot write '%s': %s\n", path, strerror(errno));
        return 2;
    }
    int h = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < files[i].ndevices; k++)
            h += panel_height(&files[i].devices[k]);
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
            W, h + 8, W, h + 8);
    fprintf(o, "<style>.title{font-size:15px;font-weight:bold}.axis{font-size:11px;fill:#444}"
               ".legend{font-size:12px;fill:#222}.grid{stroke:#e3e3e3}.frame{fill:none;stroke:#888}"
               ".reserved{fill:none;stroke:#222;stroke-width:1.5;stroke-dasharray:5 3}"
               ".error{stroke:#d00;stroke-width:1.5}.errmark{fill:#d00}</style>\n");
    fprintf(o, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    int y = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < files[i].ndevices; k++) {
            panel(o, &files[i], &files[i].devices[k], y);
            y += panel_height(&files[i].devices[k]);
        }
    fprintf(o, "</svg>\n");
    if (fclose(o) != 0) {
        fprintf(stderr, "vramguard: cannot write '%s': %s\n", path, strerror(errno));
        return 2;
    }
    return 0;
}
