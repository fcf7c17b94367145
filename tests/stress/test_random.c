/* test_random.c — long random sequences of allocator operations on vgsim.
 *
 * Every step is checked two ways: the invariant checker (vg_validate) and the data. Each
 * live allocation is filled with its own pattern on its stream when made, and its first
 * and last words are read back before it is freed: if two live allocations ever overlap,
 * or memory is handed out while another stream still writes to it, a pattern breaks.
 * Seeds are fixed (VG_SEED overrides) so a failure replays.
 */
#define _GNU_SOURCE /* memmem */
#include <stdatomic.h>
#include <string.h>

#include "vgtest.h"

typedef struct live {
    void *p;
    size_t size;
    uint32_t pattern;
    int stream;
} live_t;

static uint64_t g_rng;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void seed(uint64_t s) {
    const char *e = getenv("VG_SEED");
    g_rng = e ? strtoull(e, NULL, 0) : s;
    if (!g_rng)
        g_rng = 1;
}

/* Sizes spread like a training step's: many small, some medium, a few large. */
static size_t random_size(size_t max_large) {
    uint64_t r = rnd() % 100;
    if (r < 50)
        return 1 + rnd() % 65536;
    if (r < 85)
        return 65536 + rnd() % (4 << 20);
    return (4 << 20) + rnd() % max_large;
}

/* Fill an allocation with its pattern: whole in a plain build, where a fill over another
 * live allocation's first or last word is what verify() catches; only its first and last
 * 64 KiB under a sanitizer, which checks every byte a fill writes (each byte of vgsim's
 * device memory cost TSan shadow-page faults: two thirds of random_vmm's time). */
static void fill(const live_t *l, CUstream s) {
    enum { END = 64 << 10 };
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)l->p;
    size_t words = l->size / 4;
    if (VGT_SANITIZED && words > 2 * END / 4) {
        CHECK_CU(vg__cuMemsetD32Async(p, l->pattern, END / 4, s));
        CHECK_CU(vg__cuMemsetD32Async(p + (words - END / 4) * 4, l->pattern, END / 4, s));
    } else if (words > 0) {
        CHECK_CU(vg__cuMemsetD32Async(p, l->pattern, words, s));
    }
}

static void verify(const live_t *l, CUstream s) {
    if (l->size < 4)
        return;
    uint32_t h[2] = {0, 0};
    size_t last = (l->size / 4 - 1) * 4;
    CHECK_CU(vg__cuMemcpyDtoHAsync(&h[0], (CUdeviceptr)(uintptr_t)l->p, 4, s));
    CHECK_CU(vg__cuMemcpyDtoHAsync(&h[1], (CUdeviceptr)(uintptr_t)l->p + last, 4, s));
    CHECK_CU(vg__cuStreamSynchronize(s));
    CHECK_MSG(h[0] == l->pattern && h[1] == l->pattern,
              "allocation %p (%zu bytes) holds %08x/%08x, not its pattern %08x: memory was "
              "shared or reused too early",
              l->p, l->size, h[0], h[1], l->pattern);
}

static void random_run(int steps, size_t max_large, bool expect_ooms) {
    enum { NS = 4, MAXLIVE = 512 };
    CUstream streams[NS] = {NULL, vgt_stream(), vgt_stream(), vgt_stream()};
    live_t live[MAXLIVE];
    int n = 0;
    uint32_t next_pattern = 0x1000;
    int64_t live_bytes_requested = 0;
    uint64_t ooms = 0;
    for (int step = 0; step < steps; step++) {
        uint64_t r = rnd() % 1000;
        if ((r < 550 || n == 0) && n < MAXLIVE) { /* allocate */
            live_t l = {.size = random_size(max_large), .pattern = next_pattern++,
                        .stream = (int)(rnd() % NS)};
            vg_status_t st = vg_malloc(&l.p, l.size, streams[l.stream]);
            if (st == VG_ERR_OUT_OF_MEMORY) {
                ooms++;
                CHECK(l.p == NULL);
                CHECK_CONTAINS(vg_last_error(), "out of memory: cannot allocate");
            } else {
                CHECK_VG(st);
                fill(&l, streams[l.stream]);
                live[n++] = l;
                live_bytes_requested += (int64_t)l.size;
            }
        } else if (r < 950 && n > 0) { /* free, on its own stream or another */
            int i = (int)(rnd() % (uint64_t)n);
            verify(&live[i], streams[live[i].stream]);
            int fs = rnd() % 4 == 0 ? (int)(rnd() % NS) : live[i].stream;
            if (fs != live[i].stream) { /* the freeing stream must first wait for the user */
                CHECK_CU(vg__cuStreamSynchronize(streams[live[i].stream]));
            }
            CHECK_VG(vg_free(live[i].p, streams[fs]));
            live_bytes_requested -= (int64_t)live[i].size;
            live[i] = live[--n];
        } else if (r < 970 && n > 0) { /* another stream uses it, after its own stream */
            int i = (int)(rnd() % (uint64_t)n);
            int us = (int)(rnd() % NS);
            CHECK_CU(vg__cuStreamSynchronize(streams[live[i].stream]));
            CHECK_VG(vg_record_stream(live[i].p, streams[us]));
            fill(&live[i], streams[us]);
            CHECK_CU(vg__cuStreamSynchronize(streams[us]));
        } else if (r < 985) { /* the program synchronised a stream */
            int s = (int)(rnd() % NS);
            CHECK_CU(vg__cuStreamSynchronize(streams[s]));
            CHECK_VG(vg_stream_synchronized(streams[s]));
        } else if (r < 990) {
            CHECK_VG(vg_empty_cache());
        } else if (n > 0) { /* a bad free: reported, nothing changes */
            int i = (int)(rnd() % (uint64_t)n);
            if (live[i].size > 512) /* p + 512 lies inside this allocation */
                CHECK_EQ(vg_free((char *)live[i].p + 512, NULL), VG_ERR_INTERIOR_FREE);
        }
        if (vg_validate() != VG_OK)
            vgt_fail(__FILE__, __LINE__, "step %d (operation %llu of 1000): %s", step,
                     (unsigned long long)r, vg_last_error());
        vg_stats_t s = vgt_stats();
        CHECK_EQ(s.allocation[VG_POOL_ALL].current, n);
        CHECK_EQ(s.requested_bytes[VG_POOL_ALL].current, live_bytes_requested);
    }
    for (int i = 0; i < n; i++) {
        verify(&live[i], streams[live[i].stream]);
        CHECK_VG(vg_free(live[i].p, streams[live[i].stream]));
    }
    CHECK_VALID();
    CHECK_VG(vg_empty_cache());
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, 0);
    if (expect_ooms)
        CHECK_MSG(ooms > 0, "the limit was never reached: the test did not test OOMs");
}

VG_TEST(random_vmm) {
    seed(0x9e3779b97f4a7c15ull);
    vgt_init("");
    random_run(VGT_STEPS(6000), 32 << 20, false);
}

VG_TEST(random_vmm_under_a_tight_limit) {
    seed(0x2545f4914f6cdd1dull);
    vgt_init("limit=256M");
    random_run(VGT_STEPS(6000), 64 << 20, true);
}

VG_TEST(random_cumemalloc_segments) {
    seed(0xda942042e4dd58b5ull);
    vgt_init("vmm=off,limit=512M");
    random_run(VGT_STEPS(6000), 48 << 20, true);
}

/* Guard mode on the same random programs, which never write outside their allocations:
 * any report of damage is false. No quarantine and small poisoned blocks, so that freed
 * memory (pattern at its ends only) comes back at once, split and joined with its
 * neighbours in every way, on four streams. */
static _Atomic int g_damage;

static void count_damage(const char *text, size_t len, void *arg) {
    (void)arg;
    if (memmem(text, len, "ERROR: out-of-bounds", 20) ||
        memmem(text, len, "ERROR: write to freed memory", 28)) {
        atomic_fetch_add(&g_damage, 1);
        fprintf(stderr, "%.*s", (int)len, text);
    }
}

VG_TEST(random_guard_mode_reports_no_damage) {
    seed(0x5851f42d4c957f2dull);
    vgt_init("mode=guard,quarantine=0,poison_bytes=16K,poison_ends=1K");
    vg_set_output_callback(count_damage, NULL);
    random_run(2000, 8 << 20, false);
    CHECK_VG(vg_check());
    CHECK_EQ(atomic_load(&g_damage), 0);
}

/* ---------------------------------------------------------------------------------------
 * Many threads at once (D10); run under TSan too.
 * ------------------------------------------------------------------------------------- */

typedef struct worker {
    int id, ops;
    CUstream stream;
    _Atomic int *errors;
} worker_t;

static void *worker_main(void *arg) {
    worker_t *w = arg;
    CUcontext ctx;
    CUdevice dev;
    vg__cuDeviceGet(&dev, 0);
    vg__cuDevicePrimaryCtxRetain(&ctx, dev);
    vg__cuCtxSetCurrent(ctx);
    uint64_t rng = 0x1234567ull * (uint64_t)(w->id + 1);
    void *mine[64];
    int n = 0;
    for (int i = 0; i < w->ops; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        if ((rng % 3 != 0 || n == 0) && n < 64) {
            size_t size = 1 + rng % (rng % 7 == 0 ? (8 << 20) : 65536);
            if (vg_malloc(&mine[n], size, w->stream) == VG_OK)
                n++;
            else
                atomic_fetch_add(w->errors, 1);
        } else {
            int k = (int)(rng % (uint64_t)n);
            if (vg_free(mine[k], w->stream) != VG_OK)
                atomic_fetch_add(w->errors, 1);
            mine[k] = mine[--n];
        }
        if (i % 500 == 0) { /* (true when said, but perhaps not for work queued since by
                              * other threads: vramguard's own is its to check, G8) */
            vg__cuStreamSynchronize(w->stream);
            vg_stream_synchronized(w->stream);
        }
    }
    for (int k = 0; k < n; k++)
        if (vg_free(mine[k], w->stream) != VG_OK)
            atomic_fetch_add(w->errors, 1);
    return NULL;
}

/* Workers allocate, free and record streams while the main thread synchronises, checks,
 * takes snapshots and summaries and empties the cache — in `mode`. */
static void threads_at_once(const char *mode) {
    vgt_init(mode);
    enum { T = 4 };
    pthread_t th[T];
    worker_t w[T];
    _Atomic int errors = 0;
    for (int i = 0; i < T; i++) {
        w[i] = (worker_t){i, 4000, i % 2 ? vgt_stream() : NULL, &errors};
        CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
    }
    for (int k = 0; k < 20; k++) {
        CHECK_VALID();
        char *s = vg_memory_summary(0);
        CHECK(s != NULL);
        vg_free_string(s);
        char *snap = vg_snapshot_json();
        CHECK(snap != NULL && strstr(snap, "\"segments\""));
        vg_free_string(snap);
        vg__cuStreamSynchronize(NULL);
        vg_stream_synchronized(NULL);
        vg_check();
        if (k % 5 == 4)
            vg_empty_cache();
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(atomic_load(&errors), 0);
    CHECK_VALID();
    CHECK_EQ(vgt_stats().allocation[VG_POOL_ALL].current, 0);
    CHECK_EQ(vg_error_count(), 0);
}

VG_TEST(threads_allocate_and_free_at_once) { threads_at_once("snapshot_events=10000"); }

VG_TEST(threads_at_once_in_guard_mode) { threads_at_once("mode=guard,snapshot_events=10000"); }
