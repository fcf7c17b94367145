/* readfile.c — see readfile.h. */
#define _GNU_SOURCE
#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* `prefix` (bytes already read) and then all of f; NULL with errno set (ENOMEM: too
 * large). */
static char *read_all(FILE *f, const unsigned char *prefix, size_t nprefix, size_t *len) {
    char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            char *d = cap < ((size_t)1 << 40) ? realloc(data, cap = cap ? cap * 2 : 1 << 20) : NULL;
            if (!d) {
                free(data);
                errno = ENOMEM;
                return NULL;
            }
            data = d;
            if (n == 0 && nprefix) { /* (cap >= 1 MiB > nprefix) */
                memcpy(data, prefix, nprefix);
                n = nprefix;
            }
        }
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        int why = errno;
        free(data);
        errno = why;
        return NULL;
    }
    *len = n;
    return data;
}

/* Start `gzip -dcq` reading fd and writing to out, its messages dropped (the caller says
 * what went wrong in one line). 0, or the error number. */
static int spawn_gzip(int fd, int out, pid_t *pid) {
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0)
        return rc;
    char *argv[] = {"gzip", "-dcq", NULL};
    if ((rc = posix_spawn_file_actions_adddup2(&fa, fd, STDIN_FILENO)) == 0 &&
        (rc = posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO)) == 0 &&
        (rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0)) == 0)
        rc = posix_spawnp(pid, "gzip", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* What gzip makes of the file open at fd (at its start), or NULL with the reason in err. */
static char *gunzip(int fd, const char *path, size_t *len, char *err, size_t errlen) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot decompress '%s': %s", path, strerror(errno));
        return NULL;
    }
    pid_t pid;
    int rc = spawn_gzip(fd, out[1], &pid);
    close(out[1]);
    if (rc != 0) {
        close(out[0]);
        snprintf(err, errlen, "'%s' is compressed, and gzip cannot be run to read it: %s", path,
                 strerror(rc));
        return NULL;
    }
    FILE *f = fdopen(out[0], "rb");
    char *data = f ? read_all(f, NULL, 0, len) : NULL;
    int why = errno;
    if (f)
        fclose(f);
    else
        close(out[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    /* gzip exits 1 on an error, 2 on a warning (trailing bytes it ignored). */
    bool ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 2);
    if (data && !ok) {
        free(data);
        data = NULL;
        snprintf(err, errlen, "'%s' is not a whole gzip file (gzip -dc failed)", path);
    } else if (!data) {
        snprintf(err, errlen, "cannot decompress '%s': %s", path,
                 why == ENOMEM ? "too large to hold in memory" : strerror(why));
    }
    return data;
}

char *cli_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    /* The first two bytes say whether it is gzip. A pipe cannot go back over them: they
     * are kept and given back in front of the rest. */
    unsigned char magic[2];
    size_t nm = 0;
    while (nm < sizeof magic) {
        ssize_t r = read(fd, magic + nm, sizeof magic - nm);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        nm += (size_t)r;
    }
    if (nm == 2 && magic[0] == 0x1f && magic[1] == 0x8b) { /* gzip */
        char *data = NULL;
        if (lseek(fd, 0, SEEK_SET) == 0)
            data = gunzip(fd, path, len, err, errlen);
        else
            snprintf(err, errlen, "'%s' is gzip-compressed and not a file that can be read "
                     "twice: decompress it first (gzip -dc)", path);
        close(fd);
        return data;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *data = read_all(f, magic, nm, len);
    int why = errno;
    fclose(f);
    if (!data) {
        if (why == ENOMEM)
            snprintf(err, errlen, "'%s' is too large to read", path);
        else
            snprintf(err, errlen, "cannot read '%s': %s", path,
                     why == EISDIR ? "it is a folder; name a file in it" : strerror(why));
        return NULL;
    }
    return data;
}
