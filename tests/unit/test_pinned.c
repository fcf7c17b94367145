/* test_pinned.c — pinned host memory's accounting (diag/pinned.c, issue 34): records and
 * counters, the cap, the statistics' keys, the summary table, the snapshot and its
 * timeline. The ranges are made up: the accounting never touches the memory (the
 * interposer's tests, tests/cli pinned_*, pin real memory through vgsim).
 */
#include <string.h>

#include "../src/cli/json.h"
#include "../src/cli/report_model.h"
#include "diag/pinned.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "vgtest.h"

#define MiB (1ull << 20)

static uint32_t here(void) { return vg__site_here(0); }

/* Pin n bytes at p as the interposer's hooks do. */
static bool pin(uintptr_t p, uint64_t n, uint32_t site, bool registered) {
    if (!vg__pinned_admit(n, site, registered ? "cuMemHostRegister" : "cuMemHostAlloc"))
        return false;
    vg__pinned_added((void *)p, n, site, registered, NULL, 3000);
    return true;
}

static vg_host_stats_t stats(void) {
    vg_host_stats_t s = {.size = sizeof s};
    CHECK_VG(vg_get_host_stats(&s));
    return s;
}

VG_TEST(ranges_are_counted_by_kind_and_site) {
    vgt_init("");
    uint32_t site = here();
    CHECK(pin(0x10000000, 2 * MiB, site, false));
    CHECK(pin(0x20000000, 4 * MiB, site, true));
    CHECK(pin(0x08000000, 1 * MiB, 0, false));
    vg_host_stats_t s = stats();
    CHECK_EQ(s.allocations.current, 3);
    CHECK_EQ(s.allocated_bytes.current, (int64_t)(7 * MiB));
    CHECK_EQ(s.registered_bytes.current, (int64_t)(4 * MiB));
    CHECK_EQ(s.num_host_alloc, 3);
    CHECK_EQ(s.host_alloc_time.count, 3);
    CHECK_EQ(s.host_alloc_time.total, 9); /* microseconds */
    CHECK(s.host_total > 0);
    CHECK_EQ(atomic_load(&vg__site(site)->pinned_bytes), (int64_t)(6 * MiB));
    CHECK_EQ(atomic_load(&vg__site(site)->live_bytes), 0); /* (device memory's) */
    /* A copy's host side: inside one range, or not. */
    CHECK(vg__pinned_contains(0x10000000, 0x10000000 + 2 * MiB));
    CHECK(vg__pinned_contains(0x10000100, 0x10000200));
    CHECK(!vg__pinned_contains(0x10000100, 0x10000000 + 2 * MiB + 1));
    CHECK(!vg__pinned_contains(0x0ff00000, 0x10000010));
    CHECK(!vg__pinned_contains(0x30000000, 0x30000010));
    /* cuMemFreeHost of a registered range, or cuMemHostUnregister of an allocated one,
     * is the driver's error: the count keeps them. */
    CHECK(!vg__pinned_remove((void *)0x20000000, false, NULL));
    CHECK(!vg__pinned_remove((void *)0x10000000, true, NULL));
    CHECK(!vg__pinned_remove((void *)0x10000100, false, NULL));
    vg_pinned_rec_t r;
    CHECK(vg__pinned_remove((void *)0x20000000, true, &r));
    CHECK_EQ(r.size, 4 * MiB);
    CHECK(r.registered && r.site == site);
    vg__pinned_restore(&r); /* (the driver refused to unregister it) */
    CHECK_EQ(stats().registered_bytes.current, (int64_t)(4 * MiB));
    CHECK_EQ(stats().num_host_free, 0);
    CHECK(vg__pinned_remove((void *)0x20000000, true, NULL));
    vg__pinned_free_time(5000);
    s = stats();
    CHECK_EQ(s.allocations.current, 2);
    CHECK_EQ(s.allocated_bytes.current, (int64_t)(3 * MiB));
    CHECK_EQ(s.allocated_bytes.peak, (int64_t)(7 * MiB));
    CHECK_EQ(s.allocated_bytes.freed, (int64_t)(4 * MiB));
    CHECK_EQ(s.registered_bytes.current, 0);
    CHECK_EQ(s.num_host_free, 1);
    CHECK_EQ(s.host_free_time.max, 5);
    CHECK_EQ(atomic_load(&vg__site(site)->pinned_bytes), (int64_t)(2 * MiB));
    CHECK(!vg__pinned_contains(0x20000000, 0x20000010));
}

VG_TEST(the_cap_refuses_and_explains) {
    vgt_init("pinned_limit=16M");
    uint32_t site = here();
    CHECK(pin(0x10000000, 8 * MiB, site, false));
    CHECK(pin(0x20000000, 8 * MiB, site, false)); /* exactly the cap */
    CHECK(!pin(0x30000000, 1, site, false));
    CHECK_CONTAINS(vg_last_error(), "out of pinned host memory: cuMemHostAlloc cannot pin 1 byte");
    CHECK_CONTAINS(vg_last_error(), "not device memory");
    CHECK_CONTAINS(vg_last_error(), "why: pinned_limit=16.00 MiB, and 16.00 MiB is pinned already");
    CHECK_CONTAINS(vg_last_error(), "16.00 MiB in 2 allocations from:");
    CHECK_EQ(stats().num_ooms, 1);
    CHECK_EQ(stats().limit, 16 * MiB);
    /* Admitted bytes count until the driver answers: a refusal gives them back. */
    CHECK(vg__pinned_remove((void *)0x20000000, false, NULL));
    CHECK(vg__pinned_admit(8 * MiB, site, "cuMemHostAlloc"));
    CHECK(!vg__pinned_admit(1, site, "cuMemHostAlloc"));
    vg__pinned_failed(8 * MiB, site, "cuMemHostAlloc", CUDA_ERROR_INVALID_VALUE);
    CHECK(vg__pinned_admit(8 * MiB, site, "cuMemHostAlloc"));
    vg__pinned_failed(8 * MiB, site, "cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vg_last_error(), "the driver could not pin it (CUDA_ERROR_OUT_OF_MEMORY)");
    CHECK_EQ(stats().num_ooms, 3);
    CHECK_EQ(stats().allocated_bytes.current, (int64_t)(8 * MiB));
}

VG_TEST(guard_mode_reports_a_refusal) {
    vgt_init("mode=guard,pinned_limit=1M");
    CHECK(!pin(0x10000000, 2 * MiB, here(), false));
    CHECK_EQ(vg__report_count_kind(VG_REPORT_OUT_OF_MEMORY), 1);
    char *j = vg_errors_json();
    CHECK_CONTAINS(j, "\"message\":\"out of pinned host memory\"");
    CHECK_CONTAINS(j, "\"pinned_host\":true");
    vg_free_string(j);
}

VG_TEST(statistics_have_pytorchs_host_keys) {
    vgt_init("");
    CHECK(pin(0x10000000, 2 * MiB, here(), false));
    char *j = vg_host_memory_stats_json();
    CHECK(j != NULL);
    const char *keys[] = {"\"allocations.current\":1,", "\"allocated_bytes.current\":2097152,",
                          "\"allocated_bytes.peak\":2097152,", "\"segment.current\":1,",
                          "\"reserved_bytes.current\":2097152,", "\"num_host_alloc\":1,",
                          "\"num_host_free\":0,", "\"host_alloc_time.count\":1,",
                          "\"host_alloc_time.avg\":3,", "\"host_free_time.total\":0,"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_CONTAINS(j, keys[i]);
    char err[200];
    json_doc_t *d = json_parse(j, strlen(j), err, sizeof err);
    CHECK_MSG(d != NULL, "not JSON: %s", err);
    json_free(d);
    vg_free_string(j);
    /* The summary table's own rows, under the device's. */
    void *p;
    CHECK_VG(vg_malloc(&p, 1000, NULL));
    char *t = vg_memory_summary(0);
    CHECK_CONTAINS(t, "pinned host memory (this process)");
    CHECK_CONTAINS(t, "| Pinned memory         |   2048 KiB |   2048 KiB |");
    CHECK_CONTAINS(t, "| Pinned allocs         |");
    vg_free_string(t);
    vg_free(p, NULL);
}

VG_TEST(nothing_pinned_no_rows) {
    vgt_init("");
    char *t = vg_memory_summary(0);
    CHECK(strstr(t, "Pinned") == NULL);
    vg_free_string(t);
    char *s = vg_snapshot_json();
    CHECK(strstr(s, "\"pinned_host\"") == NULL);
    vg_free_string(s);
}

VG_TEST(snapshots_have_the_pinned_timeline) {
    vgt_init("snapshot_events=1000,pinned_limit=10M");
    uint32_t site = here();
    for (int i = 0; i < 6; i++) { /* a loader keeping every other buffer */
        CHECK(pin(0x10000000 + (uintptr_t)i * 0x400000, 2 * MiB, site, i % 2 == 1));
        if (i % 2 == 0)
            CHECK(vg__pinned_remove((void *)(0x10000000 + (uintptr_t)i * 0x400000), false, NULL));
    }
    CHECK(!pin(0x40000000, 8 * MiB, site, false)); /* over the cap: an oom event */
    char *snap = vg_snapshot_json();
    CHECK(snap != NULL);
    rp_file_t f;
    char err[600];
    CHECK_MSG(rp_load_text("pinned.json", snap, strlen(snap), &f, err, sizeof err), "%s", err);
    const rp_device_t *d = &f.devices[f.ndevices - 1];
    CHECK(d->pinned);
    CHECK_STREQ(d->name, "pinned host memory");
    CHECK_EQ(d->nevents, 10); /* 6 pinned, 3 freed, 1 refused */
    CHECK_EQ((uint64_t)d->peak_live, 6 * MiB); /* 2 kept + the one in use, then 3 kept */
    CHECK_EQ((uint64_t)d->peak_reserved, 6 * MiB);
    const json_t *all = json_get(d->j, "allocations");
    CHECK_EQ(all->n, 3);
    CHECK(json_get(all->kids[0], "registered") != NULL);
    CHECK_EQ(json_int(d->j, "limit_bytes", 0), (int64_t)(10 * MiB));
    CHECK_EQ(json_int(json_get(d->j, "stats"), "allocated_bytes.current", 0), (int64_t)(6 * MiB));
    const json_t *sites = json_get(d->j, "sites"); /* per site: now, its peak, ever */
    CHECK_EQ(sites->n, 1);
    CHECK_EQ(json_int(sites->kids[0], "site", -1), (int64_t)site);
    CHECK_EQ(json_int(sites->kids[0], "bytes", 0), (int64_t)(6 * MiB));
    CHECK_EQ(json_int(sites->kids[0], "count", 0), 3);
    CHECK_EQ(json_int(sites->kids[0], "peak_bytes", 0), (int64_t)(6 * MiB));
    CHECK_EQ(json_int(sites->kids[0], "total_count", 0), 6);
    char label[400];
    rp_device_label(d, label, sizeof label);
    CHECK_STREQ(label, "pinned host memory");
    rp_free(&f);
    vg_free_string(snap);
}

/* Data-loader threads pinning and freeing at once under the cap (DESIGN.md D10): the cap
 * is never passed, even between a request's admission and the driver's answer, and the
 * counters add up when they are done. */
#define THREADS 4
#define ROUNDS 2000

static _Atomic int64_t g_held, g_most; /* what the "driver" has pinned, and its peak */

/* g_held counts a range from its admission to just before its removal: inside the time
 * vramguard counts it, so the cap must hold for it too. */
static void *loader(void *arg) {
    uintptr_t base = 0x100000000ull * (1 + (uintptr_t)arg);
    uint32_t site = here();
    uint64_t held[8] = {0};
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t n = (uint64_t)(1 + i % 3) * MiB;
        if (vg__pinned_admit(n, site, "cuMemHostAlloc")) {
            int64_t now = atomic_fetch_add(&g_held, (int64_t)n) + (int64_t)n;
            for (int64_t m = atomic_load(&g_most);
                 now > m && !atomic_compare_exchange_weak(&g_most, &m, now);)
                ;
            vg__pinned_added((void *)(base + (uintptr_t)(i % 8) * 0x400000), n, site, false,
                             NULL, 1000);
            held[i % 8] = n;
        }
        if (i % 8 == 7 || i == ROUNDS - 1) /* (frees the ranges it holds) */
            for (int k = 0; k < 8; k++) {
                if (!held[k])
                    continue;
                atomic_fetch_sub(&g_held, (int64_t)held[k]);
                CHECK(vg__pinned_remove((void *)(base + (uintptr_t)k * 0x400000), false, NULL));
                held[k] = 0;
            }
    }
    return NULL;
}

VG_TEST(threads_pinning_at_once_never_pass_the_cap) {
    vgt_init("pinned_limit=12M,pinned_warn=0,log=/dev/null");
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, loader, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    vg_host_stats_t s = stats();
    CHECK(atomic_load(&g_most) <= (int64_t)(12 * MiB));
    CHECK(s.allocated_bytes.peak <= (int64_t)(12 * MiB));
    CHECK_EQ(s.allocated_bytes.current, 0);
    CHECK_EQ(s.allocations.current, 0);
    CHECK_EQ(s.num_host_alloc, s.num_host_free);
    CHECK(s.num_ooms > 0); /* (each thread's 8 ranges of 1-3 MiB alone pass 12 MiB) */
    CHECK_EQ(s.num_host_alloc + s.num_ooms, (uint64_t)THREADS * ROUNDS);
}
