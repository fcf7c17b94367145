/* demo_scenarios.c — the scenarios of `vramguard demo`. Each plants one bug the way a
 * program would (through vramguard's C API and the driver), lets guard mode report it,
 * and then reads the report back from vg_errors_json() to check that it names the right
 * allocation, size and offset. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../driver/driver.h"
#include "demo.h"
#include "vramguard.h"

/* ---------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------- */

/* Launch fn on stream s with `params`, and tell vramguard about it (its name, and the
 * pointer arguments, so that reports can name the allocations a kernel was given). A
 * macro, so that the launch site recorded is the scenario's own line. */
#define LAUNCH(fn, s, grid, params, ptrs, nptrs)                                            \
    (vg_kernel_launched_args(kernel_name(fn), (s), (ptrs), (nptrs)),                        \
     vg__cuLaunchKernel((fn), (grid), 1, 1, 256, 1, 1, 0, (s), (params), NULL))

static const char *kernel_name(CUfunction fn) {
    const char *name = "?";
    vg__cuFuncGetName(&name, fn);
    return name;
}

/* The first report at index >= `from` of `kind`, as its JSON text (caller frees), or NULL.
 * Reports are vramguard's own JSON objects: braces inside strings are skipped. */
static char *report_since(uint64_t from, const char *kind) {
    char *all = vg_errors_json();
    if (!all)
        return NULL;
    char want[64];
    snprintf(want, sizeof want, "{\"kind\":\"%s\"", kind);
    char *found = NULL;
    uint64_t index = 0;
    int depth = 0;
    bool in_str = false;
    const char *start = NULL;
    for (const char *p = all; *p && !found; p++) {
        if (in_str) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_str = false;
            continue;
        }
        if (*p == '"')
            in_str = true;
        else if (*p == '{' && depth++ == 0)
            start = p;
        else if (*p == '}' && --depth == 0) {
            if (index++ >= from && strncmp(start, want, strlen(want)) == 0)
                found = strndup(start, (size_t)(p - start + 1));
        }
    }
    vg_free_string(all);
    return found;
}

/* The number after "key": in obj (the first one), or `fallback`. */
static long long json_num(const char *obj, const char *key, long long fallback) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = obj ? strstr(obj, pat) : NULL;
    return p ? strtoll(p + strlen(pat), NULL, 10) : fallback;
}

#define EXPECT(cond, ...)                                                                   \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            snprintf(why, n, __VA_ARGS__);                                                  \
            goto out;                                                                       \
        }                                                                                   \
    } while (0)

static unsigned blocks_for(unsigned long long count) { return (unsigned)((count + 255) / 256); }

/* ---------------------------------------------------------------------------------------
 * S1: a kernel writes past the end of a tensor
 * ------------------------------------------------------------------------------------- */

static bool s1_overrun(demo_t *d, char *why, size_t n) {
    enum { ROWS = 4, COLS = 250 };
    bool ok = false;
    uint64_t before = vg_error_count();
    float *x = NULL;
    char *rep = NULL;
    EXPECT(vg_malloc((void **)&x, ROWS * COLS * sizeof(float), d->main) == VG_OK,
           "vg_malloc failed: %s", vg_last_error());
    unsigned long long count = ROWS * (COLS + 1); /* the bug: one column too many */
    void *params[] = {&x, &count};
    const void *ptrs[] = {x};
    EXPECT(LAUNCH(d->iota, d->main, blocks_for(count), params, ptrs, 1) == CUDA_SUCCESS,
           "the kernel could not be launched");
    vg_check(); /* a check point: a synchronisation, or the next free of the tensor */
    rep = report_since(before, "out_of_bounds_after");
    EXPECT(rep, "no out-of-bounds report");
    EXPECT(json_num(rep, "size", -1) == 4000, "the report gives size %lld, not 4000",
           json_num(rep, "size", -1));
    EXPECT(json_num(rep, "first_offset", -1) == 4000 && json_num(rep, "bytes", -1) == 16,
           "the report gives offset %lld and %lld bytes, not 4000 and 16",
           json_num(rep, "first_offset", -1), json_num(rep, "bytes", -1));
    EXPECT(strstr(rep, "demo_iota"), "the report does not name the kernel demo_iota");
    ok = true;
out:
    free(rep);
    vg_free(x, d->main);
    return ok;
}

/* ---------------------------------------------------------------------------------------
 * S2: a tensor freed while a side stream still uses it
 * ------------------------------------------------------------------------------------- */

static atomic_int g_gate; /* the side stream's work waits until the host opens it */

static void wait_gate(void *arg) {
    (void)arg;
    struct timespec ts = {0, 200000};
    while (!atomic_load(&g_gate))
        nanosleep(&ts, NULL);
}

static bool s2_use_after_free(demo_t *d, char *why, size_t n) {
    const unsigned long long count = 256 * 1024; /* a 1 MiB float tensor */
    bool ok = false;
    uint64_t before = vg_error_count();
    float *x = NULL;
    char *rep = NULL;
    EXPECT(vg_malloc((void **)&x, count * sizeof(float), d->main) == VG_OK,
           "vg_malloc failed: %s", vg_last_error());
    void *p1[] = {&x, (void *)&count};
    const void *ptrs[] = {x};
    EXPECT(LAUNCH(d->iota, d->main, blocks_for(count), p1, ptrs, 1) == CUDA_SUCCESS,
           "the kernel could not be launched");
    /* The side stream is still busy (a long kernel, here a gate) and will write x later. */
    atomic_store(&g_gate, 0);
    float v = 2.0f;
    void *p2[] = {&x, &v, (void *)&count};
    EXPECT(vg__cuLaunchHostFunc(d->side, wait_gate, NULL) == CUDA_SUCCESS,
           "cuLaunchHostFunc failed");
    EXPECT(LAUNCH(d->fill, d->side, blocks_for(count), p2, ptrs, 1) == CUDA_SUCCESS,
           "the kernel could not be launched");
    /* The bug: x is freed on the main stream without vg_record_stream(x, side). */
    vg_free(x, d->main);
    vg__cuStreamSynchronize(d->main); /* the main stream moves on ... */
    atomic_store(&g_gate, 1);         /* ... while the side stream's kernel writes x */
    vg_check();
    rep = report_since(before, "use_after_free");
    EXPECT(rep, "no use-after-free report");
    EXPECT(json_num(rep, "size", -1) == (long long)(count * sizeof(float)),
           "the report gives size %lld, not %llu", json_num(rep, "size", -1),
           count * sizeof(float));
    EXPECT(json_num(rep, "first_offset", -1) == 0, "the report gives offset %lld, not 0",
           json_num(rep, "first_offset", -1));
    EXPECT(strstr(rep, "\"freed_at\""), "the report has no free backtrace");
    free(rep); /* and the free itself, reported before the kernel ran (G7) */
    rep = report_since(before, "unordered_free");
    EXPECT(rep && strstr(rep, "\"name\":\"demo_fill\""),
           "the free was not reported as unordered after the side stream's demo_fill");
    ok = true;
out:
    atomic_store(&g_gate, 1);
    vg__cuStreamSynchronize(d->side);
    free(rep);
    return ok;
}

/* ---------------------------------------------------------------------------------------
 * S5: tensors kept in a list inside a training loop
 * ------------------------------------------------------------------------------------- */

#define S5_STEPS 6

/* One "training step": a temporary that is freed, and an activation kept by mistake. */
static __attribute__((noinline)) vg_status_t s5_step(demo_t *d, void **kept) {
    void *tmp;
    vg_status_t st = vg_malloc(&tmp, 8u << 20, d->main);
    if (st != VG_OK)
        return st;
    st = vg_malloc(kept, 2u << 20, d->main); /* appended to a list, never released */
    vg_free(tmp, d->main);
    return st;
}

static bool s5_growth(demo_t *d, char *why, size_t n) {
    bool ok = false;
    uint64_t before = vg_error_count();
    void *kept[S5_STEPS] = {0};
    char *rep = NULL;
    for (int i = 0; i < S5_STEPS; i++) {
        EXPECT(s5_step(d, &kept[i]) == VG_OK, "vg_malloc failed: %s", vg_last_error());
        vg_step();
    }
    rep = report_since(before, "growth");
    EXPECT(rep, "no growth report after %d steps", S5_STEPS);
    EXPECT(json_num(rep, "growth_per_step", -1) == 2 << 20,
           "the report gives %lld bytes per step, not 2 MiB", json_num(rep, "growth_per_step", -1));
    EXPECT(strstr(rep, "s5_step"), "the report does not name the allocation site s5_step");
    ok = true;
out:
    for (int i = 0; i < S5_STEPS; i++) /* the fix: release the list */
        vg_free(kept[i], d->main);
    free(rep);
    return ok;
}

/* ---------------------------------------------------------------------------------------
 * S8: double free, interior free, free of a pointer never allocated
 * ------------------------------------------------------------------------------------- */

static bool s8_bad_frees(demo_t *d, char *why, size_t n) {
    bool ok = false;
    uint64_t before = vg_error_count();
    char *dbl = NULL, *inner = NULL, *wild = NULL;
    void *p = NULL, *q = NULL;
    EXPECT(vg_malloc(&p, 512, d->main) == VG_OK && vg_malloc(&q, 4096, d->main) == VG_OK,
           "vg_malloc failed: %s", vg_last_error());
    vg_free(p, d->main);
    EXPECT(vg_free(p, d->main) != VG_OK, "the double free was accepted");
    EXPECT(vg_free((char *)q + 256, d->main) != VG_OK, "the interior free was accepted");
    EXPECT(vg_free((void *)(uintptr_t)0xdead0000, d->main) != VG_OK,
           "the free of a wild pointer was accepted");
    dbl = report_since(before, "double_free");
    inner = report_since(before, "interior_free");
    wild = report_since(before, "invalid_free");
    EXPECT(dbl && json_num(dbl, "size", -1) == 512 && strstr(dbl, "\"freed_at\""),
           "no double-free report naming the 512-byte allocation and its first free");
    EXPECT(inner && json_num(inner, "size", -1) == 4096,
           "no interior-free report naming the 4096-byte allocation");
    EXPECT(wild, "no invalid-free report");
    EXPECT(vg_validate() == VG_OK, "the allocator's state was damaged: %s", vg_last_error());
    EXPECT(vg_free(q, d->main) == VG_OK, "the real free after the bad ones failed");
    q = NULL;
    ok = true;
out:
    if (q)
        vg_free(q, d->main);
    free(dbl);
    free(inner);
    free(wild);
    return ok;
}

/* ---------------------------------------------------------------------------------------
 * S9: an illegal address, reported asynchronously at an unrelated line
 * ------------------------------------------------------------------------------------- */

static bool s9_illegal_address(demo_t *d, char *why, size_t n) {
    bool ok = false;
    uint64_t before = vg_error_count();
    float *x = NULL;
    long long *idx = NULL;
    char *rep = NULL;
    EXPECT(vg_malloc((void **)&x, 1000 * sizeof(float), d->main) == VG_OK &&
               vg_malloc((void **)&idx, 2 * sizeof(long long), d->main) == VG_OK,
           "vg_malloc failed: %s", vg_last_error());
    /* Indices from a corrupted table: one just past the end, one 4 GiB away. */
    long long bad[2] = {1000, 1ll << 30};
    EXPECT(vg__cuMemcpyHtoD((CUdeviceptr)(uintptr_t)idx, bad, sizeof bad) == CUDA_SUCCESS,
           "the copy of the indices failed");
    unsigned cnt = 2;
    float v = 1.0f;
    void *params[] = {&x, &idx, &cnt, &v};
    const void *ptrs[] = {x, idx};
    EXPECT(LAUNCH(d->scatter, d->main, 1, params, ptrs, 2) == CUDA_SUCCESS,
           "the kernel could not be launched");
    /* The program carries on; the failure surfaces at the next call that waits. */
    vg_check();
    rep = report_since(before, "cuda_error");
    EXPECT(rep, "no CUDA error report");
    EXPECT(strstr(rep, "CUDA_ERROR_ILLEGAL_ADDRESS"), "the report is not about an illegal address");
    EXPECT(strstr(rep, "demo_scatter") && strstr(rep, "(4000 bytes"),
           "the report does not name the kernel and the 4000-byte allocation it was given");
    ok = true;
out:
    free(rep);
    return ok; /* the context is dead now: x and idx stay where they are */
}

const demo_scenario_t demo_scenarios[] = {
    {"S1", "a kernel writes past the end of a tensor",
     "demo_iota fills a 4x250 float tensor (4000 bytes) as if it were 4x251",
     "the report names the 4000-byte tensor, the 16 bytes past its end (offsets "
     "4000-4015) and the kernel demo_iota",
     s1_overrun},
    {"S2", "a tensor is freed while a side stream still uses it",
     "a 1 MiB tensor is freed on the main stream without vg_record_stream while a kernel "
     "on the side stream is still queued to write it",
     "the free is reported as not ordered after demo_fill on the side stream, then the "
     "late write at offset 0 of the freed 1 MiB tensor, with where it was freed",
     s2_use_after_free},
    {"S5", "tensors kept in a list inside a training loop",
     "each step allocates an 8 MiB temporary (freed) and a 2 MiB activation that is kept",
     "the report gives 2 MiB of growth per step from one allocation site, s5_step",
     s5_growth},
    {"S8", "bad frees", "a double free, a free inside an allocation, a free of a wild pointer",
     "the reports name the 512-byte allocation freed twice (and its first free) and the "
     "4096-byte one freed from inside; the free of a wild pointer too; the allocator's state "
     "is intact",
     s8_bad_frees},
    {"S9", "an illegal address, reported at an unrelated line",
     "demo_scatter stores through a corrupted index 4 GiB past a 4000-byte tensor",
     "the report names CUDA_ERROR_ILLEGAL_ADDRESS, the kernel demo_scatter among the last "
     "launches and the 4000-byte tensor it was given",
     s9_illegal_address},
};
const int demo_nscenarios = (int)(sizeof demo_scenarios / sizeof demo_scenarios[0]);
