/* harness.c — the test registry and runner (see harness.h). */
#define _GNU_SOURCE
#include "harness.h"

#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CASES 512

static struct {
    const char *name;
    vgt_fn fn;
} g_cases[MAX_CASES];
static int g_ncases;
static const char *g_current;

void vgt_register(const char *name, vgt_fn fn) {
    if (g_ncases == MAX_CASES) {
        fprintf(stderr, "harness: more than %d cases in one binary\n", MAX_CASES);
        abort();
    }
    g_cases[g_ncases].name = name;
    g_cases[g_ncases].fn = fn;
    g_ncases++;
}

void vgt_fail(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "FAIL %s\n  %s:%d: ", g_current ? g_current : "?", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(NULL);
    _exit(1);
}

void vgt_skip(const char *fmt, ...) {
    fprintf(stderr, "SKIP %s: ", g_current ? g_current : "?");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(NULL);
    _exit(77);
}

unsigned char *vgt_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        vgt_fail(__FILE__, __LINE__, "cannot open %s", path);
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            unsigned char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (!buf)
        vgt_fail(__FILE__, __LINE__, "no memory to read %s", path);
    *size = n;
    return buf;
}

void vgt_scribble(unsigned char *p, size_t size, unsigned *seed, size_t base, size_t span) {
    *seed = *seed * 1103515245u + 12345u;
    size_t pos = base + (*seed >> 8) % span;
    *seed = *seed * 1103515245u + 12345u;
    if (pos < size)
        p[pos] = (unsigned char)(*seed >> 16);
}

static int run_one(int i) {
    g_current = g_cases[i].name;
    g_cases[i].fn();
    fprintf(stderr, "PASS %s\n", g_current);
    fflush(NULL);
    return 0;
}

int vgt_main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < g_ncases; i++)
            printf("%s\n", g_cases[i].name);
        return 0;
    }
    if (argc > 1) {
        for (int i = 0; i < g_ncases; i++)
            if (strcmp(g_cases[i].name, argv[1]) == 0)
                return run_one(i);
        fprintf(stderr, "harness: no case named '%s' (try --list)\n", argv[1]);
        return 2;
    }
    /* All cases, each in a child process so that one dead context cannot spill over. */
    int failed = 0, skipped = 0;
    for (int i = 0; i < g_ncases; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(run_one(i));
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
            skipped++;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
            if (WIFSIGNALED(status))
                fprintf(stderr, "FAIL %s (signal %d)\n", g_cases[i].name, WTERMSIG(status));
        }
    }
    printf("%d passed, %d failed, %d skipped\n", g_ncases - failed - skipped, failed, skipped);
    return failed ? 1 : 0;
}

int main(int argc, char **argv) { return vgt_main(argc, argv); }
