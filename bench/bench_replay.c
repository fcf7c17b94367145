/* bench_replay.c — replay each trace through four allocators, side by side, in one run:
 *
 *   vramguard   vg_malloc / vg_free (fast mode, VMM segments) on vgsim
 *   guard       vramguard in guard mode (redzones, poison, quarantine)
 *   glibc       malloc / free of the same sizes (host memory; glibc never touches it)
 *   cuMemAlloc  cuMemAlloc / cuMemFree on vgsim: no caching at all
 *
 * Each allocator runs the trace's events REPEAT times; after each repeat the allocations
 * the trace leaves live are freed, untimed. Times are the median over repeats of
 * loop time / events, so ratios compare like with like on a noisy machine. Memory: the
 * peak reserved of vramguard against PyTorch's recorded figure (the .json beside each
 * trace). Prints a Markdown table (bench/RESULTS.md takes it as is).
 *
 * usage: bench_replay VGSIM_DIR TRACE.csv [TRACE.csv ...]   (env REPEAT, default 7)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/cli/trace_csv.h"
#include "../src/driver/driver.h"
#include "vramguard.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef enum { A_VRAMGUARD, A_GLIBC, A_CUMEMALLOC } alloc_kind_t;

/* One repeat; returns the loop's nanoseconds. */
static uint64_t run(alloc_kind_t k, const vg_trace_t *t, void **ptrs, uint64_t *fails) {
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < t->nops; i++) {
        const vg_trace_op_t *op = &t->ops[i];
        void **p = &ptrs[op->slot];
        if (op->alloc) {
            switch (k) {
            case A_VRAMGUARD:
                if (vg_malloc(p, op->size, NULL) != VG_OK)
                    (*fails)++, *p = NULL;
                break;
            case A_GLIBC:
                *p = malloc(op->size ? op->size : 1);
                break;
            case A_CUMEMALLOC: {
                CUdeviceptr d = 0;
                if (vg__cuMemAlloc(&d, op->size ? op->size : 1) != CUDA_SUCCESS)
                    (*fails)++;
                *p = (void *)(uintptr_t)d;
                break;
            }
            }
        } else if (*p) {
            switch (k) {
            case A_VRAMGUARD: vg_free(*p, NULL); break;
            case A_GLIBC: free(*p); break;
            case A_CUMEMALLOC: vg__cuMemFree((CUdeviceptr)(uintptr_t)*p); break;
            }
            *p = NULL;
        }
    }
    uint64_t dt = now_ns() - t0;
    for (size_t i = 0; i < t->nslots; i++) { /* untimed: back to an empty state */
        if (!ptrs[i])
            continue;
        if (k == A_VRAMGUARD)
            vg_free(ptrs[i], NULL);
        else if (k == A_GLIBC)
            free(ptrs[i]);
        else
            vg__cuMemFree((CUdeviceptr)(uintptr_t)ptrs[i]);
        ptrs[i] = NULL;
    }
    return dt;
}

static double median_ns_per_op(alloc_kind_t k, const vg_trace_t *t, void **ptrs, int repeats,
                               uint64_t *fails) {
    uint64_t *v = calloc((size_t)repeats, sizeof *v);
    for (int r = 0; r < repeats; r++)
        v[r] = run(k, t, ptrs, fails);
    qsort(v, (size_t)repeats, sizeof *v, cmp_u64);
    double m = (double)v[repeats / 2] / (double)t->nops;
    free(v);
    return m;
}

static double json_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    char *p = strstr(buf, pat);
    return p ? strtod(strchr(p, ':') + 1, NULL) : 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s VGSIM_DIR TRACE.csv [TRACE.csv ...]\n", argv[0]);
        return 2;
    }
    int repeats = getenv("REPEAT") ? atoi(getenv("REPEAT")) : 7;
    if (repeats < 1)
        repeats = 1;
    setenv("VGSIM_MEMORY", "80G", 1);
    char opts[4200];
    snprintf(opts, sizeof opts, "driver=%s/libcuda.so.1", argv[1]);
    if (vg_init(opts) != VG_OK) {
        fprintf(stderr, "vg_init: %s\n", vg_last_error());
        return 1;
    }
    printf("| trace | events | vramguard ns/op | glibc ns/op | cuMemAlloc ns/op | vramguard / glibc "
           "| cuMemAlloc / vramguard | vramguard reserved/allocated | PyTorch reserved/allocated |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 2; i < argc; i++) {
        vg_trace_t t;
        char err[1024];
        if (vg_trace_load(argv[i], &t, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        void **ptrs = calloc(t.nslots, sizeof *ptrs);
        uint64_t fails = 0, cfails = 0, g = 0;
        vg_reset_peak_stats(0);
        /* vramguard first (one warm-up repeat, then the measured ones), its statistics, then
         * its cache emptied so that the uncached cuMemAlloc run has the device to itself. */
        run(A_VRAMGUARD, &t, ptrs, &fails);
        double vg = median_ns_per_op(A_VRAMGUARD, &t, ptrs, repeats, &fails);
        vg_stats_t s = {.size = sizeof s};
        vg_get_stats(0, &s);
        double ratio = (double)s.reserved_bytes[0].peak / (double)s.allocated_bytes[0].peak;
        vg_empty_cache();
        run(A_GLIBC, &t, ptrs, &g);
        double gl = median_ns_per_op(A_GLIBC, &t, ptrs, repeats, &g);
        double cu = median_ns_per_op(A_CUMEMALLOC, &t, ptrs, 3, &cfails);
        char jpath[4096];
        size_t n = strlen(argv[i]); /* NAME.csv or NAME.csv.gz: NAME.json */
        n -= n > 3 && strcmp(argv[i] + n - 3, ".gz") == 0 ? 7 : 4;
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)n, argv[i]);
        double pt = json_number(jpath, "pytorch_reserved_over_allocated");
        const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        printf("| %s | %zu | %.0f | %.0f | %.0f | %.2f | %.1f | %.4f | %.4f |\n", name, t.nops, vg,
               gl, cu, vg / gl, cu / vg, ratio, pt);
        if (fails || cfails)
            printf("(failures: vramguard %llu, cuMemAlloc %llu)\n", (unsigned long long)fails,
                   (unsigned long long)cfails);
        free(ptrs);
        vg_trace_free(&t);
    }
    return 0;
}
