/* report_model.c — loading and checking snapshots, and the timeline (see report_model.h). */
#define _GNU_SOURCE
#include "report_model.h"

#include "readfile.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT_VERSION 1

rp_group_t rp_group = RP_GROUP_AUTO;

/* ---------------------------------------------------------------------------------------
 * Checking against the documented format
 * ------------------------------------------------------------------------------------- */

typedef struct checker {
    const char *file;
    char *err;
    size_t errlen;
    bool failed;
} checker_t;

static void bad(checker_t *c, const char *path, const char *fmt, ...) {
    if (c->failed)
        return;
    c->failed = true;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s: not a vramguard snapshot: %s%s%s", c->file, path,
             *path ? ": " : "", what);
}

static const char *type_name(json_type_t t) {
    static const char *const n[] = {"null", "true/false", "a number", "a string", "an array",
                                     "an object"};
    return n[t];
}

/* obj[key] of type t (J_NUM: an integer), or NULL after reporting what is wrong. */
static const json_t *need(checker_t *c, const json_t *obj, const char *path, const char *key,
                          json_type_t t) {
    if (c->failed)
        return NULL;
    const json_t *v = json_get(obj, key);
    const char *want = t == J_NUM ? "an integer" : type_name(t);
    if (!v) {
        bad(c, path, "'%s' is missing (expected %s)", key, want);
        return NULL;
    }
    if (v->type != t || (t == J_NUM && (double)v->i != v->num)) {
        bad(c, path, "'%s' is %s, expected %s", key, type_name(v->type), want);
        return NULL;
    }
    return v;
}

static bool one_of(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static void check_segment(checker_t *c, const json_t *seg, const char *path) {
    char p[256];
    need(c, seg, path, "address", J_STR);
    need(c, seg, path, "size", J_NUM);
    need(c, seg, path, "vmm", J_BOOL);
    need(c, seg, path, "unmapped", J_ARR);
    const json_t *blocks = need(c, seg, path, "blocks", J_ARR);
    static const char *const states[] = {"free",        "allocated", "deferred",
                                         "quarantined", "pooled",    NULL};
    for (size_t i = 0; blocks && i < blocks->n && !c->failed; i++) {
        const json_t *b = blocks->kids[i];
        snprintf(p, sizeof p, "%s.blocks[%zu]", path, i);
        if (b->type != J_OBJ) {
            bad(c, p, "expected an object");
            break;
        }
        need(c, b, p, "offset", J_NUM);
        need(c, b, p, "size", J_NUM);
        const json_t *st = need(c, b, p, "state", J_STR);
        if (st && !one_of(st->str, states))
            bad(c, p, "unknown state '%s'", st->str);
        if (st && strcmp(st->str, "free") != 0 && strcmp(st->str, "pooled") != 0) {
            need(c, b, p, "address", J_STR);
            need(c, b, p, "requested", J_NUM);
            need(c, b, p, "site", J_NUM);
        }
    }
}

static void check_events(checker_t *c, const json_t *d, const char *path);

static void check_device(checker_t *c, const json_t *d, const char *path) {
    char p[160];
    need(c, d, path, "device", J_NUM);
    need(c, d, path, "name", J_STR);
    need(c, d, path, "total_bytes", J_NUM);
    need(c, d, path, "stats", J_OBJ);
    need(c, d, path, "events_dropped", J_NUM);
    const json_t *segs = need(c, d, path, "segments", J_ARR);
    for (size_t i = 0; segs && i < segs->n && !c->failed; i++) {
        snprintf(p, sizeof p, "%s.segments[%zu]", path, i);
        if (segs->kids[i]->type != J_OBJ)
            bad(c, p, "expected an object");
        else
            check_segment(c, segs->kids[i], p);
    }
    check_events(c, d, path);
}

/* The process's pinned host memory: a device's figures and events, no segments. */
static void check_pinned(checker_t *c, const json_t *d, const char *path) {
    need(c, d, path, "name", J_STR);
    need(c, d, path, "total_bytes", J_NUM);
    need(c, d, path, "stats", J_OBJ);
    need(c, d, path, "allocations", J_ARR);
    need(c, d, path, "events_dropped", J_NUM);
    check_events(c, d, path);
}

static void check_events(checker_t *c, const json_t *d, const char *path) {
    char p[160];
    const json_t *evs = need(c, d, path, "events", J_ARR);
    static const char *const actions[] = {"alloc", "free", "map", "unmap", "oom", NULL};
    int64_t last = 0;
    for (size_t i = 0; evs && i < evs->n && !c->failed; i++) {
        const json_t *e = evs->kids[i];
        snprintf(p, sizeof p, "%s.events[%zu]", path, i);
        if (e->type != J_OBJ) {
            bad(c, p, "expected an object");
            break;
        }
        const json_t *seq = need(c, e, p, "seq", J_NUM);
        need(c, e, p, "t_ns", J_NUM);
        const json_t *a = need(c, e, p, "action", J_STR);
        need(c, e, p, "address", J_STR);
        need(c, e, p, "size", J_NUM);
        need(c, e, p, "site", J_NUM);
        if (a && !one_of(a->str, actions))
            bad(c, p, "unknown action '%s'", a->str);
        if (seq && seq->i <= last)
            bad(c, p, "events are out of order (seq %lld after %lld)", (long long)seq->i,
                (long long)last);
        if (seq)
            last = seq->i;
    }
}

static void check_root(checker_t *c, const json_t *r) {
    char p[64];
    if (r->type != J_OBJ) {
        bad(c, "", "the document is %s, expected an object", type_name(r->type));
        return;
    }
    const json_t *fmt = need(c, r, "", "format", J_STR);
    if (fmt && strcmp(fmt->str, "vramguard-snapshot") != 0)
        bad(c, "", "'format' is \"%s\", expected \"vramguard-snapshot\"", fmt->str);
    const json_t *v = need(c, r, "", "version", J_NUM);
    if (v && v->i != FORMAT_VERSION)
        bad(c, "", "format version %lld; this vramguard reads version %d%s", (long long)v->i,
            FORMAT_VERSION, v->i > FORMAT_VERSION ? " (the file is from a newer vramguard)" : "");
    need(c, r, "", "pid", J_NUM);
    need(c, r, "", "rank", J_NUM);
    const json_t *devs = need(c, r, "", "devices", J_ARR);
    for (size_t i = 0; devs && i < devs->n && !c->failed; i++) {
        snprintf(p, sizeof p, "devices[%zu]", i);
        if (devs->kids[i]->type != J_OBJ)
            bad(c, p, "expected an object");
        else
            check_device(c, devs->kids[i], p);
    }
    const json_t *pinned = json_get(r, "pinned_host");
    if (pinned && pinned->type != J_OBJ)
        bad(c, "pinned_host", "expected an object");
    else if (pinned && !c->failed)
        check_pinned(c, pinned, "pinned_host");
    const json_t *sites = need(c, r, "", "sites", J_ARR);
    for (size_t i = 0; sites && i < sites->n && !c->failed; i++) {
        snprintf(p, sizeof p, "sites[%zu]", i);
        need(c, sites->kids[i], p, "id", J_NUM);
        need(c, sites->kids[i], p, "frames", J_ARR);
    }
    const json_t *errs = need(c, r, "", "errors", J_ARR);
    for (size_t i = 0; errs && i < errs->n && !c->failed; i++) {
        snprintf(p, sizeof p, "errors[%zu]", i);
        need(c, errs->kids[i], p, "kind", J_STR);
        need(c, errs->kids[i], p, "message", J_STR);
    }
}

/* ---------------------------------------------------------------------------------------
 * The timeline
 * ------------------------------------------------------------------------------------- */

/* Live allocations: address -> (group, bytes), open addressing with tombstones. */
typedef struct live {
    uint64_t *addr; /* 0: empty, 1: deleted */
    uint32_t *group;
    uint64_t *bytes;
    size_t cap, used;
} live_t;

static size_t slot_of(uint64_t a, size_t cap) {
    return (size_t)((a * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static bool live_init(live_t *l, size_t n) {
    l->cap = 1024;
    while (l->cap < n * 2 + 16)
        l->cap *= 2;
    l->addr = calloc(l->cap, sizeof *l->addr);
    l->group = calloc(l->cap, sizeof *l->group);
    l->bytes = calloc(l->cap, sizeof *l->bytes);
    l->used = 0;
    return l->addr && l->group && l->bytes;
}

static void live_free(live_t *l) {
    free(l->addr);
    free(l->group);
    free(l->bytes);
}

static void live_put(live_t *l, uint64_t a, uint32_t g, uint64_t bytes) {
    if (a < 2)
        return;
    size_t i = slot_of(a, l->cap);
    while (l->addr[i] > 1 && l->addr[i] != a)
        i = (i + 1) & (l->cap - 1);
    l->addr[i] = a;
    l->group[i] = g;
    l->bytes[i] = bytes;
}

static bool live_take(live_t *l, uint64_t a, uint32_t *g, uint64_t *bytes) {
    size_t i = slot_of(a, l->cap);
    for (size_t k = 0; k < l->cap && l->addr[i]; k++, i = (i + 1) & (l->cap - 1)) {
        if (l->addr[i] == a) {
            *g = l->group[i];
            *bytes = l->bytes[i];
            l->addr[i] = 1;
            return true;
        }
    }
    return false;
}

static const char *const size_classes[] = {"allocations under 1 MiB", "1 to 16 MiB",
                                           "16 to 128 MiB", "128 MiB and more"};

static uint32_t size_class(uint64_t bytes) {
    return bytes < (1u << 20) ? 0 : bytes < (16u << 20) ? 1 : bytes < (128u << 20) ? 2 : 3;
}

/* The group (site id, or size class) of every alloc event, and whether sites are used. */
static bool use_sites(const json_t *evs) {
    int64_t first = -1;
    for (size_t i = 0; i < evs->n; i++) {
        const json_t *e = evs->kids[i];
        if (strcmp(json_str(e, "action", ""), "alloc") != 0)
            continue;
        int64_t s = json_int(e, "site", 0);
        if (first < 0)
            first = s;
        else if (s != first)
            return true;
    }
    return false;
}

/* Group ids are site ids or size classes; the series are the largest RP_MAX_SERIES - 1
 * groups by peak, then one for the rest. Map group -> series with a small table. */
typedef struct gmap {
    uint64_t *key;
    uint64_t *cur, *peak;
    size_t n, cap;
} gmap_t;

static size_t gmap_find(gmap_t *m, uint64_t key) {
    for (size_t i = 0; i < m->n; i++)
        if (m->key[i] == key)
            return i;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        uint64_t *k = realloc(m->key, cap * sizeof *k), *c = realloc(m->cur, cap * sizeof *c),
                 *p = realloc(m->peak, cap * sizeof *p);
        if (k)
            m->key = k;
        if (c)
            m->cur = c;
        if (p)
            m->peak = p;
        if (!k || !c || !p)
            return SIZE_MAX;
        m->cap = cap;
    }
    m->key[m->n] = key;
    m->cur[m->n] = m->peak[m->n] = 0;
    return m->n++;
}

static void series_label(const rp_file_t *f, rp_device_t *d, uint64_t key, char *out,
                         size_t n) {
    if (d->by_size) {
        snprintf(out, n, "%s", size_classes[key]);
        return;
    }
    const json_t *frames = rp_site_frames(f, (int64_t)key);
    if (!frames || frames->n == 0) {
        snprintf(out, n, "site %llu (no backtrace)", (unsigned long long)key);
        return;
    }
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < frames->n && i < 3 && used + 1 < n; i++) {
        char fr[160];
        rp_frame_short(frames->kids[i]->type == J_STR ? frames->kids[i]->str : "?", fr, sizeof fr);
        int w = snprintf(out + used, n - used, "%s%s", i ? " < " : "", fr);
        used = w > 0 ? used + (size_t)w : used;
    }
}

/* An event as the timeline needs it, decoded once: what it does to live or reserved
 * memory, and for allocations and frees, which group (site or size class) it counts in. */
typedef enum { D_NONE, D_LIVE, D_RESERVED, D_OLDER } delta_kind_t;
typedef struct decoded {
    delta_kind_t kind;
    double bytes;     /* + allocated / mapped, - freed / unmapped */
    uint32_t group;   /* D_LIVE */
} decoded_t;

static bool build_timeline(const rp_file_t *f, rp_device_t *d) {
    const json_t *evs = json_get(d->j, "events");
    size_t n = evs->n;
    d->nevents = n;
    d->by_size = rp_group == RP_GROUP_SIZE || (rp_group == RP_GROUP_AUTO && !use_sites(evs));
    live_t live;
    gmap_t gm = {0};
    decoded_t *dec = calloc(n + 1, sizeof *dec);
    if (!dec || !live_init(&live, n)) {
        free(dec);
        return false;
    }
    /* Pass 1: decode every event, matching frees to their allocations, and find the peak
     * of every group. */
    bool ok = true;
    double net_live = 0, net_reserved = 0; /* what the events kept add up to */
    for (size_t i = 0; i < n && ok; i++) {
        const json_t *e = evs->kids[i];
        const char *a = json_str(e, "action", "");
        uint64_t addr = json_addr(e, "address"), size = (uint64_t)json_int(e, "size", 0);
        if (strcmp(a, "alloc") == 0) {
            uint64_t key = d->by_size ? size_class(size) : (uint64_t)json_int(e, "site", 0);
            size_t g = gmap_find(&gm, key);
            if (g == SIZE_MAX) {
                ok = false;
                break;
            }
            gm.cur[g] += size;
            if (gm.cur[g] > gm.peak[g])
                gm.peak[g] = gm.cur[g];
            live_put(&live, addr, (uint32_t)g, size);
            dec[i] = (decoded_t){D_LIVE, (double)size, (uint32_t)g};
            net_live += (double)size;
        } else if (strcmp(a, "free") == 0) {
            uint32_t g;
            uint64_t b;
            if (live_take(&live, addr, &g, &b)) {
                gm.cur[g] -= b;
                dec[i] = (decoded_t){D_LIVE, -(double)b, g};
                net_live -= (double)b;
            } else { /* an allocation older than the events kept */
                dec[i] = (decoded_t){D_OLDER, -(double)size, 0};
                net_live -= (double)size;
            }
        } else if (strcmp(a, "map") == 0) {
            dec[i] = (decoded_t){D_RESERVED, (double)size, 0};
            net_reserved += (double)size;
        } else if (strcmp(a, "unmap") == 0) {
            dec[i] = (decoded_t){D_RESERVED, -(double)size, 0};
            net_reserved -= (double)size;
        }
    }
    /* When older events were dropped, the memory already allocated and reserved when the
     * events kept begin is what the statistics say now, less what the events add. */
    double older = 0, reserved0 = 0;
    if (d->events_dropped > 0) {
        const json_t *st = json_get(d->j, "stats");
        int64_t alloc_now = json_int(st, d->pinned ? "allocated_bytes.current"
                                                   : "allocated_bytes.all.current", -1);
        int64_t res_now = json_int(st, "reserved_bytes.all.current", -1);
        if (alloc_now >= 0 && (double)alloc_now > net_live)
            older = (double)alloc_now - net_live;
        if (res_now >= 0 && (double)res_now > net_reserved)
            reserved0 = (double)res_now - net_reserved;
    }
    live_free(&live);
    /* The largest groups get series; the others share the last one. */
    uint32_t *series_of = calloc(gm.n + 1, sizeof *series_of);
    int top = RP_MAX_SERIES - (older > 0 ? 2 : 1);
    d->nseries = 0;
    for (int s = 0; s < top && series_of; s++) {
        size_t best = SIZE_MAX;
        for (size_t g = 0; g < gm.n; g++)
            if (!series_of[g] && gm.peak[g] > 0 && (best == SIZE_MAX || gm.peak[g] > gm.peak[best]))
                best = g;
        if (best == SIZE_MAX)
            break;
        series_of[best] = (uint32_t)s + 1;
        series_label(f, d, gm.key[best], d->series[s].label, sizeof d->series[s].label);
        d->series[s].peak = gm.peak[best];
        d->nseries++;
    }
    bool rest = false;
    for (size_t g = 0; g < gm.n && series_of; g++)
        if (!series_of[g] && gm.peak[g] > 0)
            rest = true;
    int rest_at = -1, older_at = -1;
    if (rest) {
        snprintf(d->series[d->nseries].label, sizeof d->series[0].label, "%s",
                 d->by_size ? "other sizes" : "all other sites");
        rest_at = d->nseries++;
    }
    if (older > 0) {
        snprintf(d->series[d->nseries].label, sizeof d->series[0].label,
                 "allocated before the events kept");
        d->series[d->nseries].peak = (uint64_t)older;
        older_at = d->nseries++;
    }
    /* Pass 2: samples, each the state at the largest total within its stretch of events
     * (so no peak is lost however many events there are). */
    int ns = n < RP_MAX_SAMPLES ? (int)n : RP_MAX_SAMPLES;
    d->nsamples = ns;
    d->sample_seq = calloc((size_t)ns + 1, sizeof *d->sample_seq);
    d->sample_t_ns = calloc((size_t)ns + 1, sizeof *d->sample_t_ns);
    d->live = calloc(((size_t)ns + 1) * RP_MAX_SERIES, sizeof *d->live);
    d->reserved = calloc((size_t)ns + 1, sizeof *d->reserved);
    ok = ok && series_of && d->sample_seq && d->sample_t_ns && d->live && d->reserved;
    double cur[RP_MAX_SERIES] = {0}, reserved = reserved0, best_total = -1;
    if (older_at >= 0)
        cur[older_at] = older;
    int sample = 0;
    for (size_t i = 0; i < n && ok; i++) {
        const decoded_t *x = &dec[i];
        if (x->kind == D_LIVE) {
            int at = series_of[x->group] ? (int)series_of[x->group] - 1 : rest_at;
            if (at >= 0) /* (a group whose peak is 0, zero-byte allocations: no series) */
                cur[at] += x->bytes;
        } else if (x->kind == D_OLDER && older_at >= 0) {
            cur[older_at] = cur[older_at] + x->bytes > 0 ? cur[older_at] + x->bytes : 0;
        } else if (x->kind == D_RESERVED) {
            reserved = reserved + x->bytes > 0 ? reserved + x->bytes : 0;
        }
        double total = 0;
        for (int s = 0; s < d->nseries; s++)
            total += cur[s];
        if (total > best_total) { /* the stretch's sample so far */
            best_total = total;
            memcpy(&d->live[(size_t)sample * RP_MAX_SERIES], cur, sizeof cur);
            d->reserved[sample] = reserved;
            d->sample_seq[sample] = (uint64_t)json_int(evs->kids[i], "seq", 0);
            d->sample_t_ns[sample] = (uint64_t)json_int(evs->kids[i], "t_ns", 0);
        }
        if (reserved > d->reserved[sample])
            d->reserved[sample] = reserved;
        if (total > d->peak_live)
            d->peak_live = total;
        if (reserved > d->peak_reserved)
            d->peak_reserved = reserved;
        size_t end = (size_t)(((uint64_t)sample + 1) * n / (uint64_t)ns);
        if (i + 1 >= end && sample < ns) {
            sample++;
            best_total = -1;
        }
    }
    if (d->pinned) { /* (every range the driver pins is its own: reserved is what is pinned) */
        for (int k = 0; k < d->nsamples && ok; k++)
            for (int x = 0; x < d->nseries; x++)
                d->reserved[k] += d->live[(size_t)k * RP_MAX_SERIES + x];
        d->peak_reserved = d->peak_live;
    }
    free(dec);
    free(series_of);
    free(gm.key);
    free(gm.cur);
    free(gm.peak);
    return ok;
}

/* Error markers: each error at the first sample at or after its event number. */
static void place_markers(const rp_file_t *f, rp_device_t *d) {
    const json_t *errs = f->errors;
    d->markers = calloc(errs->n + 1, sizeof *d->markers);
    if (!d->markers)
        return;
    for (size_t i = 0; i < errs->n; i++) {
        const json_t *e = errs->kids[i];
        int64_t dev = json_int(e, "device", d->device);
        if (dev != d->device && dev >= 0) /* (errors of no device show on every panel) */
            continue;
        uint64_t at = (uint64_t)json_int(e, "at_event", 0);
        int s = 0;
        while (s + 1 < d->nsamples && d->sample_seq[s] < at)
            s++;
        d->markers[d->nmarkers++] = (rp_marker_t){s, json_str(e, "kind", "?"),
                                                  json_str(e, "message", "?"), at};
    }
}

/* ---------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------- */

bool rp_load(const char *path, rp_file_t *out, char *err, size_t errlen) {
    size_t len;
    char *text = cli_read_file(path, &len, err, errlen);
    if (!text) {
        memset(out, 0, sizeof *out);
        return false;
    }
    bool ok = rp_load_text(path, text, len, out, err, errlen);
    free(text);
    return ok;
}

bool rp_load_text(const char *path, const char *text, size_t len, rp_file_t *out, char *err,
                  size_t errlen) {
    memset(out, 0, sizeof *out);
    out->path = path;
    if (len == 0) {
        snprintf(err, errlen, "%s: the file is empty", path);
        return false;
    }
    char perr[300];
    out->doc = json_parse(text, len, perr, sizeof perr);
    if (!out->doc) {
        snprintf(err, errlen, "%s: not valid JSON: %s", path, perr);
        return false;
    }
    out->root = json_root(out->doc);
    checker_t c = {path, err, errlen, false};
    check_root(&c, out->root);
    if (c.failed) {
        rp_free(out);
        return false;
    }
    out->rank = (int)json_int(out->root, "rank", -1);
    out->local_rank = (int)json_int(out->root, "local_rank", -1);
    out->pid = (int)json_int(out->root, "pid", 0);
    out->host = json_str(out->root, "host", "");
    out->mode = json_str(out->root, "mode", "?");
    out->reason = json_str(out->root, "reason", "?");
    out->sites = json_get(out->root, "sites");
    out->errors = json_get(out->root, "errors");
    out->kernels = json_get(out->root, "kernels");
    const json_t *devs = json_get(out->root, "devices");
    const json_t *pinned = json_get(out->root, "pinned_host");
    out->devices = calloc(devs->n + 2, sizeof *out->devices);
    if (!out->devices) {
        snprintf(err, errlen, "%s: out of memory", path);
        rp_free(out);
        return false;
    }
    for (size_t i = 0; i < devs->n + (pinned ? 1 : 0); i++) {
        rp_device_t *d = &out->devices[out->ndevices++];
        d->pinned = i == devs->n; /* (after the devices) */
        d->j = d->pinned ? pinned : devs->kids[i];
        d->device = (int)json_int(d->j, "device", -1);
        d->name = json_str(d->j, "name", "?");
        const json_t *m = json_get(d->j, "managed");
        if (m && m->type == J_BOOL && m->b) {
            snprintf(d->name_buf, sizeof d->name_buf, "%s, managed memory", d->name);
            d->name = d->name_buf;
        }
        d->total = (uint64_t)json_int(d->j, "total_bytes", 0);
        d->events_dropped = json_int(d->j, "events_dropped", 0);
        if (!build_timeline(out, d)) {
            snprintf(err, errlen, "%s: out of memory for the timeline", path);
            rp_free(out);
            return false;
        }
        place_markers(out, d);
    }
    return true;
}

void rp_free(rp_file_t *f) {
    for (int i = 0; i < f->ndevices; i++) {
        rp_device_t *d = &f->devices[i];
        free(d->sample_seq);
        free(d->sample_t_ns);
        free(d->live);
        free(d->reserved);
        free(d->markers);
    }
    free(f->devices);
    json_free(f->doc);
    memset(f, 0, sizeof *f);
}

const json_t *rp_site_frames(const rp_file_t *f, int64_t id) {
    for (size_t i = 0; f->sites && i < f->sites->n; i++)
        if (json_int(f->sites->kids[i], "id", -1) == id)
            return json_get(f->sites->kids[i], "frames");
    return NULL;
}

void rp_frame_short(const char *frame, char *out, size_t n) {
    /* "fn (/long/path/file.c:12)" -> "fn (file.c:12)" */
    const char *open = strchr(frame, '(');
    const char *slash = open ? strrchr(open, '/') : NULL;
    if (open && slash)
        snprintf(out, n, "%.*s%s", (int)(open - frame + 1), frame, slash + 1);
    else
        snprintf(out, n, "%s", frame);
}

void rp_device_label(const rp_device_t *d, char *out, size_t n) {
    if (d->pinned)
        snprintf(out, n, "%s", d->name);
    else
        snprintf(out, n, "device %d: %s", d->device, d->name);
}

void rp_rank_label(const rp_file_t *f, char *out, size_t n) {
    if (f->rank >= 0)
        snprintf(out, n, "rank %d", f->rank);
    else
        snprintf(out, n, "pid %d", f->pid);
}

const char *rp_bytes(char out[32], double b) {
    const char *u[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4)
        b /= 1024, i++;
    if (i == 0)
        snprintf(out, 32, "%.0f bytes", b);
    else
        snprintf(out, 32, "%.2f %s", b, u[i]);
    return out;
}
