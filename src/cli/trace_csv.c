/* trace_csv.c — the RMM log format reader (see trace_csv.h). */
#define _GNU_SOURCE
#include "trace_csv.h"

#include "readfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_SIZE (1ull << 50) /* 1 PiB: anything larger is a corrupt trace */
#define VG_CLAMP_LEN(n) ((n) > 40 ? 40 : (n))

static int fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Pointer -> live slot, open addressing (deletions by backward shift). */
typedef struct live_map {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, n;
} live_map_t;

static size_t home(uint64_t k, size_t cap) {
    return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static bool live_grow(live_map_t *m) {
    size_t cap = m->cap ? m->cap * 2 : 4096;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t s = home(m->keys[i], cap);
        while (keys[s])
            s = (s + 1) & (cap - 1);
        keys[s] = m->keys[i];
        vals[s] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

/* Keys are stored +1 so that pointer 0 is representable. */
static int live_find(const live_map_t *m, uint64_t key, size_t *slot) {
    if (!m->cap)
        return 0;
    size_t s = home(key + 1, m->cap);
    while (m->keys[s]) {
        if (m->keys[s] == key + 1) {
            *slot = s;
            return 1;
        }
        s = (s + 1) & (m->cap - 1);
    }
    *slot = s;
    return 0;
}

static void live_erase(live_map_t *m, size_t s) {
    m->keys[s] = 0;
    m->n--;
    for (size_t i = (s + 1) & (m->cap - 1); m->keys[i]; i = (i + 1) & (m->cap - 1)) {
        size_t h = home(m->keys[i], m->cap);
        bool in_range = s <= i ? (h > s && h <= i) : (h > s || h <= i);
        if (!in_range) {
            m->keys[s] = m->keys[i];
            m->vals[s] = m->vals[i];
            m->keys[i] = 0;
            s = i;
        }
    }
}

/* Field [s, e) without the blanks around it, as a C string in buf (false: too long). */
static bool field_text(const char *s, const char *e, char *buf, size_t n) {
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if ((size_t)(e - s) >= n)
        return false;
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = '\0';
    return true;
}

static bool parse_u64(const char *s, const char *e, int base, uint64_t *out) {
    char tmp[40];
    if (!field_text(s, e, tmp, sizeof tmp) || !tmp[0] || tmp[0] == '-' || tmp[0] == '+')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(tmp, &end, base);
    if (errno || *end != '\0' || end == tmp)
        return false;
    *out = v;
    return true;
}

static bool field_is(const char *s, const char *e, const char *word) {
    char tmp[40];
    return field_text(s, e, tmp, sizeof tmp) && strcasecmp(tmp, word) == 0;
}

/* RMM's Time: the clock time of day as spdlog writes it, HH:MM:SS.ffffff (before 2021
 * HH:MM:SS:ffffff), or a whole number (vramguard's own traces before 2026-11-26, and
 * traces converted from PyTorch). */
static bool parse_time(const char *s, const char *e) {
    uint64_t v;
    char tmp[40];
    if (parse_u64(s, e, 10, &v))
        return true;
    unsigned h, m, sec, frac;
    char d1, d2, d3;
    int used = 0;
    return field_text(s, e, tmp, sizeof tmp) &&
           sscanf(tmp, "%2u%c%2u%c%2u%c%6u%n", &h, &d1, &m, &d2, &sec, &d3, &frac, &used) == 7 &&
           used == (int)strlen(tmp) && d1 == ':' && d2 == ':' && (d3 == '.' || d3 == ':') &&
           h < 24 && m < 60 && sec < 61;
}

/* RMM's Pointer: hex (glibc's %p: 0x7f...), "(nil)" for the null pointer of a failure. */
static bool parse_pointer(const char *s, const char *e, uint64_t *out) {
    if (field_is(s, e, "(nil)")) {
        *out = 0;
        return true;
    }
    return parse_u64(s, e, 16, out);
}

/* RMM's Stream: a cudaStream_t as libstdc++ prints a pointer, 0 for the default stream
 * and hex otherwise (0x1 the legacy stream, 0x2 the per-thread one); before 2024 always
 * hex (0x0). A decimal number is taken too (vramguard's own traces before 2026-11-26). */
static bool parse_stream(const char *s, const char *e, uint64_t *out) {
    char tmp[40];
    bool hex = field_text(s, e, tmp, sizeof tmp) && tmp[0] == '0' && (tmp[1] | 0x20) == 'x';
    return parse_u64(s, e, hex ? 16 : 10, out);
}

int vg_trace_parse(const char *data, size_t len, vg_trace_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    live_map_t live = {0};
    size_t cap = 0;
    uint32_t capstreams = 4;
    out->streams = calloc(capstreams, sizeof *out->streams);
    if (!out->streams)
        return fail(err, errlen, "out of memory");
    out->nstreams = 1; /* stream 0, the default stream */
    const char *p = data, *end = data + len;
    size_t lineno = 0;
    bool header_seen = false;
    int rc = 0;
    while (p < end && rc == 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        const char *ls = p;
        p = nl ? nl + 1 : end;
        if (le > ls && le[-1] == '\r')
            le--;
        const char *t = ls;
        while (t < le && isspace((unsigned char)*t))
            t++;
        if (t == le)
            continue; /* blank line */
        if (memchr(ls, '\0', (size_t)(le - ls))) {
            rc = fail(err, errlen, "line %zu: binary data (is this a CSV trace?)", lineno);
            break;
        }
        const char *f[7];
        int nf = 0;
        f[nf++] = ls;
        for (const char *c = ls; c < le && nf < 7; c++)
            if (*c == ',')
                f[nf++] = c + 1;
        if (nf != 6) {
            rc = fail(err, errlen,
                      "line %zu: expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), "
                      "found %d",
                      lineno, nf > 6 ? 7 : nf);
            break;
        }
        const char *fe[6];
        for (int i = 0; i < 5; i++)
            fe[i] = f[i + 1] - 1;
        fe[5] = le;
        if (!header_seen) {
            header_seen = true;
            if (field_is(f[0], fe[0], "Thread") && field_is(f[2], fe[2], "Action"))
                continue;
            rc = fail(err, errlen,
                      "line %zu: the first line must be the header "
                      "Thread,Time,Action,Pointer,Size,Stream",
                      lineno);
            break;
        }
        bool is_alloc = field_is(f[2], fe[2], "allocate");
        bool is_failure = !is_alloc && field_is(f[2], fe[2], "allocate failure");
        if (!is_alloc && !is_failure && !field_is(f[2], fe[2], "free")) {
            rc = fail(err, errlen,
                      "line %zu: action must be 'allocate', 'free' or 'allocate failure', "
                      "found '%.*s'",
                      lineno, (int)VG_CLAMP_LEN(fe[2] - f[2]), f[2]);
            break;
        }
        uint64_t ptr, size, stream, tid;
        if (!parse_u64(f[0], fe[0], 10, &tid)) {
            rc = fail(err, errlen, "line %zu: bad thread '%.*s' (expected a whole number)",
                      lineno, (int)VG_CLAMP_LEN(fe[0] - f[0]), f[0]);
            break;
        }
        if (!parse_time(f[1], fe[1])) {
            rc = fail(err, errlen,
                      "line %zu: bad time '%.*s' (expected HH:MM:SS.ffffff, as RMM writes it, "
                      "or a whole number)",
                      lineno, (int)VG_CLAMP_LEN(fe[1] - f[1]), f[1]);
            break;
        }
        if (!parse_pointer(f[3], fe[3], &ptr)) {
            rc = fail(err, errlen, "line %zu: bad pointer '%.*s' (expected hex such as 0x7f00)",
                      lineno, (int)VG_CLAMP_LEN(fe[3] - f[3]), f[3]);
            break;
        }
        if (!parse_u64(f[4], fe[4], 10, &size) || size > MAX_SIZE) {
            rc = fail(err, errlen,
                      "line %zu: bad size '%.*s' (expected a byte count from 0 to 2^50)", lineno,
                      (int)VG_CLAMP_LEN(fe[4] - f[4]), f[4]);
            break;
        }
        if (!parse_stream(f[5], fe[5], &stream)) {
            rc = fail(err, errlen, "line %zu: bad stream '%.*s' (expected 0, or hex such as 0x1)",
                      lineno, (int)VG_CLAMP_LEN(fe[5] - f[5]), f[5]);
            break;
        }
        if (is_failure) { /* the program's allocation failed there: nothing to replay */
            out->failures++;
            continue;
        }
        uint32_t ti = 0;
        while (ti < out->nthreads && out->threads[ti] != tid)
            ti++;
        if (ti == out->nthreads) {
            if (out->nthreads == VG_TRACE_THREADS) {
                rc = fail(err, errlen, "line %zu: more than %d threads", lineno, VG_TRACE_THREADS);
                break;
            }
            out->threads[out->nthreads++] = tid;
        }
        uint32_t si = 0;
        while (si < out->nstreams && out->streams[si] != stream)
            si++;
        if (si == out->nstreams) {
            if (out->nstreams == 1024) {
                rc = fail(err, errlen, "line %zu: more than 1024 streams", lineno);
                break;
            }
            if (out->nstreams == capstreams) {
                capstreams *= 2;
                uint64_t *ns = realloc(out->streams, capstreams * sizeof *ns);
                if (!ns) {
                    rc = fail(err, errlen, "out of memory");
                    break;
                }
                out->streams = ns;
            }
            out->streams[out->nstreams++] = stream;
        }
        if ((live.n + 1) * 2 > live.cap && !live_grow(&live)) {
            rc = fail(err, errlen, "out of memory");
            break;
        }
        size_t s = 0;
        bool found = live_find(&live, ptr, &s);
        vg_trace_op_t op = {.alloc = is_alloc, .stream = si, .thread = (uint16_t)ti, .size = size};
        if (is_alloc) {
            if (found) {
                rc = fail(err, errlen,
                          "line %zu: 0x%llx is allocated again while still live (no free since "
                          "its allocation)",
                          lineno, (unsigned long long)ptr);
                break;
            }
            if (out->nslots >= UINT32_MAX) {
                rc = fail(err, errlen, "line %zu: too many allocations", lineno);
                break;
            }
            live.keys[s] = ptr + 1;
            live.vals[s] = (uint32_t)out->nslots;
            live.n++;
            op.slot = (uint32_t)out->nslots++;
        } else {
            if (!found) {
                rc = fail(err, errlen,
                          "line %zu: free of 0x%llx, which is not allocated at that point of "
                          "the trace",
                          lineno, (unsigned long long)ptr);
                break;
            }
            op.slot = live.vals[s];
            live_erase(&live, s);
        }
        if (out->nops == cap) {
            cap = cap ? cap * 2 : 4096;
            vg_trace_op_t *ops = realloc(out->ops, cap * sizeof *ops);
            if (!ops) {
                rc = fail(err, errlen, "out of memory");
                break;
            }
            out->ops = ops;
        }
        out->ops[out->nops++] = op;
    }
    if (rc == 0 && !header_seen)
        rc = fail(err, errlen, "the trace is empty (expected the header "
                               "Thread,Time,Action,Pointer,Size,Stream)");
    out->live_at_end = live.n;
    free(live.keys);
    free(live.vals);
    if (rc != 0)
        vg_trace_free(out);
    return rc;
}

int vg_trace_load(const char *path, vg_trace_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t len;
    char *data = cli_read_file(path, &len, err, errlen);
    if (!data)
        return -1;
    int rc = vg_trace_parse(data, len, out, err, errlen);
    free(data);
    if (rc != 0) { /* prefix the file name */
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s: %s", path, err);
        snprintf(err, errlen, "%s", tmp);
    }
    return rc;
}

void vg_trace_free(vg_trace_t *t) {
    free(t->ops);
    free(t->streams);
    memset(t, 0, sizeof *t);
}
