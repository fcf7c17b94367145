/* readfile.c — see readfile.h. */
#define _GNU_SOURCE
#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* All of f; NULL with errno set (ENOMEM: too large). */
static char *read_all(FILE *f, size_t *len) {
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

/* The output of `gzip -dc -- path`, or NULL with the reason in err. */
static char *gunzip(const char *path, size_t *len, char *err, size_t errlen) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot decompress '%s': %s", path, strerror(errno));
        return NULL;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    char *argv[] = {"gzip", "-dc", "--", (char *)path, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "gzip", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        snprintf(err, errlen, "'%s' is compressed, and gzip cannot be run to read it: %s", path,
                 strerror(rc));
        return NULL;
    }
    FILE *f = fdopen(fd[0], "rb");
    char *data = f ? read_all(f, len) : NULL;
    int why = errno;
    if (f)
        fclose(f);
    else
        close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (data && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
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
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    unsigned char magic[2] = {0, 0};
    size_t nm = fread(magic, 1, 2, f);
    if (nm == 2 && magic[0] == 0x1f && magic[1] == 0x8b) { /* gzip */
        fclose(f);
        return gunzip(path, len, err, errlen);
    }
    rewind(f);
    char *data = read_all(f, len);
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
