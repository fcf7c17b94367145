/* trace.c — the allocation trace (option `trace=PATH`), in RMM's log format exactly as
 * rmm::mr::logging_resource_adaptor writes it, so that RMM's replay benchmark reads it and
 * `vramguard replay` reads RMM's logs (src/cli/trace_csv.h):
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   2342727,15:47:02.841961,allocate,0x10012400000,1048576,0
 *
 * Thread is the OS thread id (spdlog's %t), Time the local clock time of day with
 * microseconds (%H:%M:%S.%f: the day's midnight is found once, at the trace's start, so a
 * change of daylight-saving time during a run does not move it), Pointer hex, Size bytes,
 * Stream 0 for the default stream and hex otherwise (a cudaStream_t as libstdc++ prints
 * it). Lines are formatted into a 64 KiB buffer under a mutex and written when it fills
 * and at exit.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/options.h"

bool vg__trace_on;
static int g_fd = -1;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_buf[65536];
static size_t g_len;
static int64_t g_midnight_us; /* local midnight of the trace's first day, in epoch µs */

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
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    time_t secs = now.tv_sec;
    localtime_r(&secs, &tm);
    g_midnight_us = ((int64_t)now.tv_sec - (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec)) *
                    1000000;
    vg__trace_on = true;
    return VG_OK;
}

void vg__trace_write(bool alloc, uint64_t ptr, uint64_t size, CUstream stream) {
    long tid = (long)syscall(SYS_gettid); /* (not cached: a forked child's is its own) */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t us = ((int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000 - g_midnight_us) %
                 (86400ll * 1000000); /* (the time of day: past midnight it starts again) */
    if (us < 0)
        us = 0;
    char st[24] = "0";
    if (stream)
        snprintf(st, sizeof st, "0x%llx", (unsigned long long)(uintptr_t)stream);
    pthread_mutex_lock(&g_lock);
    if (g_len + 128 > sizeof g_buf)
        flush_locked();
    g_len += (size_t)snprintf(g_buf + g_len, sizeof g_buf - g_len,
                              "%ld,%02d:%02d:%02d.%06d,%s,0x%llx,%llu,%s\n", tid,
                              (int)(us / 3600000000ll), (int)(us / 60000000 % 60),
                              (int)(us / 1000000 % 60), (int)(us % 1000000),
                              alloc ? "allocate" : "free", (unsigned long long)ptr,
                              (unsigned long long)size, st);
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
