/* fuzz_suppress.c — suppression files (option `suppressions=FILE`): any bytes as a file
 * either load or give an error naming the problem, and nothing crashes or overflows; and
 * the wildcard matcher agrees with fnmatch(3).
 *
 * The input is read two ways. Whole, it is a suppression file. Split at its first
 * newline, it is a pattern and a text: a rule `leak:PATTERN` must suppress a leak report
 * whose stack holds TEXT exactly when fnmatch("*PATTERN*", TEXT) matches, with fnmatch's
 * own specials ([, ], \) escaped, since suppression patterns know only `*` and `?`. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "diag/suppress.h"
#include "vramguard.h"

/* A file holding data[0..size), as a path (/proc/self/fd/N); *fd to close. */
static bool as_file(const uint8_t *data, size_t size, char *path, size_t n, int *fd) {
    *fd = memfd_create("vg-suppressions", 0);
    if (*fd < 0)
        return false;
    if (size && write(*fd, data, size) != (ssize_t)size) {
        close(*fd);
        return false;
    }
    snprintf(path, n, "/proc/self/fd/%d", *fd);
    return true;
}

static void load(const uint8_t *data, size_t size) {
    char path[64];
    int fd;
    if (!as_file(data, size, path, sizeof path, &fd))
        return;
    vg_status_t checked = vg__suppressions_check(path);
    if (checked != VG_OK && vg_last_error()[0] == '\0')
        abort(); /* an error must say what was wrong */
    if (vg__suppressions_load(path, false) != checked)
        abort(); /* checking and loading must agree */
    close(fd);
    const char *texts[] = {"main (app.c:12)", "libfoo.so", "kernel_name", ""};
    vg__suppressed(VG_REPORT_LEAK, texts, 4); /* (any answer; it must not crash) */
    char summary[512];
    vg__suppressions_summary(summary, sizeof summary);
    vg__suppressions_load(NULL, false);
}

/* The rule as the parser keeps it: fnmatch's pattern for "anywhere in the text". */
static bool oracle_pattern(const char *p, char *out, size_t n) {
    size_t o = 0;
    out[o++] = '*';
    for (; *p; p++) {
        if (o + 4 >= n)
            return false;
        if (*p == '[' || *p == ']' || *p == '\\')
            out[o++] = '\\';
        out[o++] = *p;
    }
    out[o++] = '*';
    out[o] = '\0';
    return true;
}

static void differential(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl || memchr(data, '\0', size))
        return;
    size_t plen = (size_t)(nl - data);
    char pattern[256], text[1024];
    if (plen == 0 || plen >= 200 || size - plen - 1 >= sizeof text)
        return;
    memcpy(pattern, data, plen);
    pattern[plen] = '\0';
    memcpy(text, nl + 1, size - plen - 1);
    text[size - plen - 1] = '\0';
    /* Keep to patterns the parser takes as they are: no comment, no blank ends, not all
     * stars (the parser refuses those), no line breaks in the text's way. */
    if (strpbrk(pattern, "#\r\n") || strchr(" \t", pattern[0]) ||
        strchr(" \t", pattern[plen - 1]) || strspn(pattern, "*") == plen)
        return;
    uint8_t file[300];
    int n = snprintf((char *)file, sizeof file, "leak:%s\n", pattern);
    char path[64];
    int fd;
    if (!as_file(file, (size_t)n, path, sizeof path, &fd))
        return;
    vg_status_t st = vg__suppressions_load(path, false);
    close(fd);
    if (st != VG_OK)
        abort(); /* a well-formed rule was refused */
    char fp[600];
    if (oracle_pattern(pattern, fp, sizeof fp)) {
        const char *texts[] = {text};
        bool got = vg__suppressed(VG_REPORT_LEAK, texts, 1);
        bool want = fnmatch(fp, text, 0) == 0;
        if (got != want) {
            fprintf(stderr, "pattern '%s' text '%s': suppressed %d, fnmatch %d\n", pattern, text,
                    got, want);
            abort();
        }
        if (vg__suppressed(VG_REPORT_GROWTH, texts, 1))
            abort(); /* a leak rule suppressed another kind */
    }
    vg__suppressions_load(NULL, false);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load(data, size);
    differential(data, size);
    return 0;
}
