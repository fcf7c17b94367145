/* text.c — the texts vramguard hands back and builds: the thread's last error, growable
 * buffers (vg_buf_t), sizes and times as people read them.
 *
 * The bottom of the base: it calls nothing of vramguard's (docs/architecture.md). Nothing
 * here allocates except vg_buf_t and a thread's own text buffers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

VG_TLS_FAST bool vg__in_signal_handler;

/* ---------------------------------------------------------------------------------------
 * Status texts and the last error
 * ------------------------------------------------------------------------------------- */

static VG_TLS_FAST vg_thread_buf_t *t_buf;
static vg_thread_buf_t g_shared_buf; /* when a thread's own cannot be allocated */
static pthread_key_t g_buf_key;
static pthread_once_t g_buf_once = PTHREAD_ONCE_INIT;

static void buf_release(void *p) {
    if (p != &g_shared_buf)
        free(p);
}

static void buf_key_init(void) {
    if (pthread_key_create(&g_buf_key, buf_release) != 0)
        g_buf_key = (pthread_key_t)-1;
}

vg_thread_buf_t *vg__tbuf(void) {
    if (__builtin_expect(t_buf != NULL, 1))
        return t_buf;
    pthread_once(&g_buf_once, buf_key_init);
    vg_thread_buf_t *b = calloc(1, sizeof *b);
    if (!b || g_buf_key == (pthread_key_t)-1 || pthread_setspecific(g_buf_key, b) != 0) {
        free(b);
        b = &g_shared_buf;
    }
    t_buf = b;
    return b;
}

VG_API const char *vg_last_error(void) { return vg__tbuf()->last_error; }

vg_status_t vg__error(vg_status_t st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(vg__tbuf()->last_error, VG_LAST_ERROR_MAX, fmt, ap);
    va_end(ap);
    return st;
}

void vg__error_append(const char *fmt, ...) {
    char *t_last_error = vg__tbuf()->last_error;
    size_t len = strlen(t_last_error);
    if (len + 1 >= VG_LAST_ERROR_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error + len, VG_LAST_ERROR_MAX - len, fmt, ap);
    va_end(ap);
}

void vg__error_clear(void) { vg__tbuf()->last_error[0] = '\0'; }

/* ---------------------------------------------------------------------------------------
 * Growable buffers
 * ------------------------------------------------------------------------------------- */

static bool buf_reserve(vg_buf_t *b, size_t extra) {
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void vg__buf_append(vg_buf_t *b, const char *s, size_t n) {
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void vg__buf_putc(vg_buf_t *b, char c) { vg__buf_append(b, &c, 1); }

void vg__buf_vprintf(vg_buf_t *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void vg__buf_printf(vg_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vg__buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void vg__buf_free(vg_buf_t *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

void vg__buf_json_str(vg_buf_t *b, const char *s) {
    vg__buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': vg__buf_append(b, "\\\"", 2); break;
        case '\\': vg__buf_append(b, "\\\\", 2); break;
        case '\n': vg__buf_append(b, "\\n", 2); break;
        case '\r': vg__buf_append(b, "\\r", 2); break;
        case '\t': vg__buf_append(b, "\\t", 2); break;
        default:
            if (*p < 0x20)
                vg__buf_printf(b, "\\u%04x", *p);
            else
                vg__buf_putc(b, (char)*p);
        }
    }
    vg__buf_putc(b, '"');
}

/* ---------------------------------------------------------------------------------------
 * Small formatting helpers
 * ------------------------------------------------------------------------------------- */

const char *vg__fmt_bytes(char out[32], uint64_t bytes) {
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(out, 32, "%llu bytes", (unsigned long long)bytes);
        return out;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 3) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, 32, "%.2f %s", v, units[u]);
    return out;
}

uint64_t vg__now_coarse_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t vg__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
