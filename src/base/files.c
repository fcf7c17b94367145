/* files.c — creating the files vramguard writes (logs, reports, snapshots, traces).
 *
 * vramguard runs inside other people's processes, so its files must never clobber or
 * follow anything unexpected: paths are expanded (%p: pid, %r: rank from RANK or
 * LOCAL_RANK, %%: a percent sign), then opened with O_NOFOLLOW (a symlink planted at
 * the path is refused) and O_CLOEXEC (children do not inherit them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

int vg__rank(void) {
    const char *r = secure_getenv("RANK");
    if (!r || !*r)
        r = secure_getenv("LOCAL_RANK");
    if (!r || !*r)
        return -1;
    char *end;
    long v = strtol(r, &end, 10);
    return (*end == '\0' && v >= 0 && v < 1 << 24) ? (int)v : -1;
}

/* Expand %p, %r and %% into out; returns false if the result does not fit. */
bool vg__expand_path(const char *pattern, char *out, size_t n) {
    size_t o = 0;
    for (const char *p = pattern; *p; p++) {
        char tmp[24];
        const char *ins = NULL;
        if (*p == '%' && p[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%d", (int)getpid());
            ins = tmp;
            p++;
        } else if (*p == '%' && p[1] == 'r') {
            snprintf(tmp, sizeof tmp, "%d", vg__rank() < 0 ? 0 : vg__rank());
            ins = tmp;
            p++;
        } else if (*p == '%' && p[1] == '%') {
            ins = "%";
            p++;
        }
        if (ins) {
            size_t k = strlen(ins);
            if (o + k >= n)
                return false;
            memcpy(out + o, ins, k);
            o += k;
        } else {
            if (o + 1 >= n)
                return false;
            out[o++] = *p;
        }
    }
    out[o] = '\0';
    return true;
}

/* Open an output file for appending (logs). Returns the fd or -1 with errno set. */
int vg__open_output_file(const char *pattern) {
    char path[4096];
    if (!vg__expand_path(pattern, path, sizeof path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
}

/* Write all of data to fd; 0, or the errno of the failure. */
static int write_all(int fd, const char *data, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        done += (size_t)w;
    }
    return 0;
}

/* Write a whole file (reports, snapshots): written to a temporary file beside it and
 * renamed into place, so a reader never sees half a file and a crash leaves the old one.
 * A destination that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO)
 * is written as it is: renamed over, /dev/null became a regular file for the whole
 * machine when a report_json=/dev/null run had the rights (2026-11-24).
 * Returns VG_OK or VG_ERR_IO with the reason in vg_last_error(). */
vg_status_t vg__write_file(const char *pattern, const char *data, size_t len) {
    char path[4096], tmp[4200];
    if (!vg__expand_path(pattern, path, sizeof path))
        return vg__error(VG_ERR_IO, "path '%s' is too long", pattern);
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return vg__error(VG_ERR_IO, "cannot write '%s': it is a directory", path);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return vg__error(VG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        int e = write_all(fd, data, len);
        if (close(fd) != 0 && !e)
            e = errno;
        return e ? vg__error(VG_ERR_IO, "cannot write '%s': %s", path, strerror(e)) : VG_OK;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return vg__error(VG_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    int e = write_all(fd, data, len);
    if (e) {
        close(fd);
        unlink(tmp);
        return vg__error(VG_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return vg__error(VG_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    /* Refuse to replace a symlink at the destination (rename would replace the link
     * itself, which is safe, but a planted link is a sign of trouble worth reporting). */
    char target[8];
    if (readlink(path, target, sizeof target) >= 0) {
        unlink(tmp);
        return vg__error(VG_ERR_IO, "refusing to replace '%s': it is a symbolic link", path);
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return vg__error(VG_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    return VG_OK;
}
