/* output.c — logging and report output (the thread's last error and text buffers are
 * text.c's).
 *
 * Sinks: the log sink (vramguard: ... lines) is stderr unless the `log` option names a
 * file; the report sink is the `report` option's file if set, else the log sink. Files
 * are opened with O_APPEND|O_CLOEXEC|O_NOFOLLOW. A user callback set with
 * vg_set_output_callback() receives everything instead.
 *
 * Nothing here allocates; a thread-local flag drops nested messages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "options.h"

/* ---------------------------------------------------------------------------------------
 * Sinks
 * ------------------------------------------------------------------------------------- */

static int g_log_fd = 2;
static int g_report_fd = -1; /* -1: same as the log sink */
static void (*g_callback)(const char *text, size_t len, void *arg);
static void *g_callback_arg;
static VG_TLS_FAST int t_in_output;

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* a sink that cannot be written loses the text, never the program */
        }
        p += w;
        n -= (size_t)w;
    }
}

static void sink_write(int fd, const char *p, size_t n) {
    if (g_callback)
        g_callback(p, n, g_callback_arg);
    else
        write_all(fd, p, n);
}

int vg__open_output_file(const char *path); /* files.c */

void vg__output_open(void) {
    if (vg__opt.log[0]) {
        int fd = vg__open_output_file(vg__opt.log);
        if (fd >= 0)
            g_log_fd = fd;
        else
            vg__log("cannot open log file '%s' (%s); logging to standard error", vg__opt.log,
                    strerror(errno));
    }
    if (vg__opt.report[0]) {
        int fd = vg__open_output_file(vg__opt.report);
        if (fd >= 0)
            g_report_fd = fd;
        else
            vg__log("cannot open report file '%s' (%s); reports go to the log", vg__opt.report,
                    strerror(errno));
    }
}

void vg__output_set_report_fd(int fd) { g_report_fd = fd; }

void vg__output_close(void) {
    if (g_report_fd > 2) {
        close(g_report_fd);
        g_report_fd = -1;
    }
    if (g_log_fd > 2) {
        close(g_log_fd);
        g_log_fd = 2;
    }
}

VG_API void vg_set_output_callback(void (*fn)(const char *text, size_t len, void *arg),
                                   void *arg) {
    g_callback_arg = arg;
    g_callback = fn;
}

void vg__vlog(const char *fmt, va_list ap) {
    if (t_in_output)
        return;
    t_in_output = 1;
    char line[2048];
    int n = snprintf(line, sizeof line, "vramguard: ");
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    size_t len = VG_MIN((size_t)n + (size_t)m, sizeof line - 2);
    line[len++] = '\n';
    sink_write(g_log_fd, line, len);
    t_in_output = 0;
}

void vg__log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vg__vlog(fmt, ap);
    va_end(ap);
}

void vg__report_write(const char *text, size_t len) {
    if (t_in_output)
        return;
    t_in_output = 1;
    sink_write(g_report_fd >= 0 ? g_report_fd : g_log_fd, text, len);
    t_in_output = 0;
}
