/* trace.c — the allocation trace (option `trace=PATH`, RMM log format).
 *
 * Lines are formatted into a 64 KiB buffer under a mutex and written when it fills and at
 * exit. Time is microseconds since the first event; Thread is a small per-thread number.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/options.h"

bool vg__trace_on;
static int g_fd = -1;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_buf[65536];
static size_t g_len;
static uint64_t g_t0;
static _Atomic int g_next_thread;
static VG_TLS_FAST int t_thread = -1;

int vg__open_output_file(const char *pattern);

static void flush_locked(void) {
    size_t off = 0;
    while (off < g_len) {
        ssize_t w = write(g_fd, g_buf + off, g_len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* a trace that cannot be written is lost, the program is not */
        off += (size_t)w;
    }
    g_len = 0;
}

vg_status_t vg__trace_open(void) {
    if (!vg__opt.trace[0])
        return VG_OK;
    g_fd = vg__open_output_file(vg__opt.trace);
    if (g_fd < 0)
        return vg__error(VG_ERR_IO, "cannot open the trace file '%s' (option trace): %s",
                         vg__opt.trace, strerror(errno));
    g_len = (size_t)snprintf(g_buf, sizeof g_buf, "Thread,Time,Action,Pointer,Size,Stream\n");
    g_t0 = vg__now_ns();
    vg__trace_on = true;
    return VG_OK;
}

void vg__trace_write(bool alloc, uint64_t ptr, uint64_t size, CUstream stream) {
    if (t_thread < 0)
        t_thread = atomic_fetch_add(&g_next_thread, 1);
    uint64_t us = (vg__now_ns() - g_t0) / 1000;
    pthread_mutex_lock(&g_lock);
    if (g_len + 128 > sizeof g_buf)
        flush_locked();
    g_len += (size_t)snprintf(g_buf + g_len, sizeof g_buf - g_len, "%d,%llu,%s,0x%llx,%llu,%llu\n",
                              t_thread, (unsigned long long)us, alloc ? "allocate" : "free",
                              (unsigned long long)ptr, (unsigned long long)size,
                              (unsigned long long)(uintptr_t)stream);
    pthread_mutex_unlock(&g_lock);
}

void vg__trace_close(void) {
    if (!vg__trace_on)
        return;
    pthread_mutex_lock(&g_lock);
    flush_locked();
    vg__trace_on = false;
    close(g_fd);
    g_fd = -1;
    pthread_mutex_unlock(&g_lock);
}
