/* test_nvtx.c — vramguard tells an NVTX tool (compute-sanitizer) where its allocations are
 * (src/check/nvtx.c, docs/decisions.md G12), checked with a tool of the tests' own
 * (inject.c, loaded through NVTX_INJECTION64_PATH as compute-sanitizer's is).
 *
 * After every step of random workloads (fast and guard mode, virtual-memory and cuMemAlloc
 * segments, several streams, small, large and empty requests, record_stream, cache
 * trims) the regions the tool holds are exactly the live allocations, each inside a
 * registered heap and named; a CUDA graph pool's memory stays covered until its release;
 * nothing is left once everything is freed and the heap released. And vramguard goes on,
 * untouched, without a tool, with a path that names none, and with a tool that refuses.
 *
 * Needs the CUDA toolkit's nvtx3 headers to build the tool: every case is skipped without.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "check/guard_impl.h"
#include "check/nvtx.h"
#include "diag/report.h" /* vg__primary_resetting */
#include "nvtx/vgnvtx.h"
#include "vgtest.h"

#ifdef VG_TEST_HAVE_NVTX3 /* the program's own NVTX, beside vramguard's (one case) */
#define NVTX_AS_SYSTEM_HEADER
#include <nvtx3/nvToolsExtMem.h>
#endif

#define MIB (1ull << 20)
#define MAX_LIVE 256

#ifndef VG_TEST_NVTX_LIB
#define VG_TEST_NVTX_LIB ""
#endif

/* ---------------------------------------------------------------------------------------
 * The tool's view
 * ------------------------------------------------------------------------------------- */

static struct {
    vgnvtx_regions_fn regions;
    vgnvtx_heaps_fn heaps;
    vgnvtx_counts_fn counts;
    vgnvtx_errors_fn errors;
} T;

static void use_tool(const char *fail) {
    if (!*VG_TEST_NVTX_LIB)
        vgt_skip("the CUDA toolkit's nvtx3 headers were not found: no test NVTX tool");
    setenv("NVTX_INJECTION64_PATH", VG_TEST_NVTX_LIB, 1);
    if (fail)
        setenv("VGNVTX_FAIL", fail, 1);
    else
        unsetenv("VGNVTX_FAIL");
}

/* The tool as the process loaded it (at vramguard's first segment): its query functions. */
static void find_tool(void) {
    void *lib = dlopen(VG_TEST_NVTX_LIB, RTLD_LAZY | RTLD_NOLOAD);
    CHECK_MSG(lib, "the NVTX tool was not loaded");
    T.regions = (vgnvtx_regions_fn)dlsym(lib, "vgnvtx_regions");
    T.heaps = (vgnvtx_heaps_fn)dlsym(lib, "vgnvtx_heaps");
    T.counts = (vgnvtx_counts_fn)dlsym(lib, "vgnvtx_counts");
    T.errors = (vgnvtx_errors_fn)dlsym(lib, "vgnvtx_errors");
    CHECK(T.regions && T.heaps && T.counts && T.errors);
    dlclose(lib);
}

static vgnvtx_counts_t counts(void) {
    vgnvtx_counts_t c;
    T.counts(&c);
    if (c.errors) {
        char text[4096];
        T.errors(text, sizeof text);
        vgt_fail(__FILE__, __LINE__, "the NVTX tool saw %llu protocol errors:\n%s",
                 (unsigned long long)c.errors, text);
    }
    return c;
}

/* ---------------------------------------------------------------------------------------
 * What the program holds, and the check after every step
 * ------------------------------------------------------------------------------------- */

typedef struct live {
    void *p;
    uint64_t size;
} live_t;

static int live_cmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const live_t *)a)->p, y = (uintptr_t)((const live_t *)b)->p;
    return x < y ? -1 : x > y;
}

static vgnvtx_region_t g_regions[4 * MAX_LIVE];
static vgnvtx_heap_t g_heaps[256];

static bool in_a_heap(const vgnvtx_region_t *r, size_t nheaps) {
    for (size_t k = 0; k < nheaps; k++)
        if (r->heap_lo == g_heaps[k].lo && r->heap_size == g_heaps[k].size)
            return r->lo >= g_heaps[k].lo && r->lo + r->size <= g_heaps[k].lo + g_heaps[k].size;
    return false;
}

/* The tool's regions are exactly the live allocations (empty ones have none), each inside
 * a live heap and named. */
static void check_exact(const live_t *live, size_t n, const char *when) {
    counts();
    live_t sorted[MAX_LIVE];
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (live[i].size)
            sorted[m++] = live[i];
    qsort(sorted, m, sizeof *sorted, live_cmp);
    size_t nr = T.regions(g_regions, VG_ARRAY_LEN(g_regions));
    size_t nh = T.heaps(g_heaps, VG_ARRAY_LEN(g_heaps));
    CHECK_MSG(nr == m, "%s: the tool holds %zu regions, the program %zu allocations", when, nr,
              m);
    for (size_t i = 0; i < m; i++) {
        const vgnvtx_region_t *r = &g_regions[i];
        CHECK_MSG(r->lo == (uintptr_t)sorted[i].p && r->size == sorted[i].size,
                  "%s: region %zu is [%#llx, +%llu), the allocation [%p, +%llu)", when, i,
                  (unsigned long long)r->lo, (unsigned long long)r->size, sorted[i].p,
                  (unsigned long long)sorted[i].size);
        CHECK_MSG(in_a_heap(r, nh), "%s: region %#llx lies in no live heap", when,
                  (unsigned long long)r->lo);
        CHECK_MSG(strncmp(r->name, "vramguard #", 11) == 0,
                  "%s: region %#llx is named \"%s\"", when, (unsigned long long)r->lo, r->name);
    }
}

/* Every live allocation lies inside one region (a graph pool's may be merged). */
static void check_covered(const live_t *live, size_t n) {
    counts();
    size_t nr = T.regions(g_regions, VG_ARRAY_LEN(g_regions));
    for (size_t i = 0; i < n; i++) {
        uintptr_t lo = (uintptr_t)live[i].p, hi = lo + live[i].size;
        bool in = false;
        for (size_t k = 0; k < nr && !in; k++)
            in = lo >= g_regions[k].lo && hi <= g_regions[k].lo + g_regions[k].size;
        CHECK_MSG(in || live[i].size == 0, "allocation [%p, +%llu) is in no region",
                  live[i].p, (unsigned long long)live[i].size);
    }
}

/* ---------------------------------------------------------------------------------------
 * A random workload
 * ------------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static uint64_t random_size(void) {
    uint64_t r = rnd() % 100;
    if (r < 2)
        return 0;
    if (r < 80)
        return 1 + rnd() % 100000;
    if (r < 97)
        return MIB + rnd() % (8 * MIB);
    return 16 * MIB + rnd() % (48 * MIB);
}

/* steps operations on 3 streams and the legacy stream; check_each: the exact check after
 * every one (else only at the end). Frees everything before it returns. */
static void workload(int steps, bool check_each) {
    CUstream s[4] = {NULL, vgt_stream(), vgt_stream(), vgt_stream()};
    live_t live[MAX_LIVE];
    size_t n = 0;
    for (int i = 0; i < steps; i++) {
        uint64_t op = rnd() % 100;
        CUstream st = s[rnd() % 4];
        if (n < MAX_LIVE && (op < 55 || n == 0)) {
            uint64_t size = random_size();
            void *p = NULL;
            CHECK_VG(vg_malloc(&p, size, st));
            live[n++] = (live_t){p, size};
        } else if (op < 95) {
            size_t k = rnd() % n;
            if (rnd() % 8 == 0 && live[k].size)
                CHECK_VG(vg_record_stream(live[k].p, s[1 + rnd() % 3]));
            CHECK_VG(vg_free(live[k].p, st));
            live[k] = live[--n];
        } else if (op < 98) {
            CHECK_CU(vg__cuCtxSynchronize());
            CHECK_VG(vg_stream_synchronized(NULL));
        } else {
            CHECK_VG(vg_empty_cache());
        }
        if (check_each)
            check_exact(live, n, "after a step");
    }
    while (n > 0) {
        CHECK_VG(vg_free(live[n - 1].p, s[rnd() % 4]));
        n--;
    }
    if (T.counts) /* (the tool is loaded) */
        check_exact(live, 0, "with everything freed");
    CHECK_VALID();
}

/* Release device 0's heap as a cudaDeviceReset does: its segments (and heaps) go. */
static void release_heap(void) {
    CUdevice dev;
    CHECK_CU(vg__cuDeviceGet(&dev, 0));
    vg__primary_resetting(dev);
}

/* ---------------------------------------------------------------------------------------
 * The regions follow the allocations
 * ------------------------------------------------------------------------------------- */

VG_TEST(regions_follow_a_random_workload) {
    use_tool(NULL);
    vgt_init("");
    void *first;
    CHECK_VG(vg_malloc(&first, 4000, NULL)); /* (the tool is loaded with the first heap) */
    find_tool();
    CHECK(vg__nvtx_attached());
    check_exact(&(live_t){first, 4000}, 1, "after the first allocation");
    CHECK_VG(vg_free(first, NULL));
    workload(VGT_STEPS(3000), true);
    release_heap();
    CHECK_EQ(T.regions(g_regions, 0), 0);
    CHECK_EQ(T.heaps(g_heaps, 0), 0);
    vgnvtx_counts_t c = counts();
    CHECK_EQ(c.core_clients, 1);
    CHECK_EQ(c.ext_clients, 1);
}

VG_TEST(regions_follow_a_random_workload_in_guard_mode) {
    use_tool(NULL);
    vgt_init("mode=guard");
    void *first;
    CHECK_VG(vg_malloc(&first, 4000, NULL));
    find_tool();
    CHECK_VG(vg_free(first, NULL)); /* (quarantined: freed memory has no region) */
    check_exact(NULL, 0, "after a free into the quarantine");
    workload(VGT_STEPS(3000), true);
    CHECK_VG(vg_check());
    vg_heap_t *h;
    CHECK_VG(vg__heap_for_device(0, &h));
    CHECK_EQ(((vg_guard_t *)h->guard)->launches, 0); /* (memcheck checks the accesses: G12) */
    CHECK_EQ(vg_error_count(), 0);
    release_heap();
    CHECK_EQ(T.heaps(g_heaps, 0), 0);
}

VG_TEST(regions_follow_a_random_workload_in_cumemalloc_segments) {
    use_tool(NULL);
    vgt_init("vmm=off");
    void *first;
    CHECK_VG(vg_malloc(&first, 4000, NULL));
    find_tool();
    CHECK_VG(vg_free(first, NULL));
    workload(VGT_STEPS(3000), true);
    CHECK_VG(vg_empty_cache()); /* every segment is free: freed, and its heap with it */
    CHECK_EQ(T.heaps(g_heaps, 0), 0);
    vgnvtx_counts_t c = counts();
    CHECK(c.heaps_registered > 1);
}

static int nvtx_log_lines(const char *extra);

/* compute-sanitizer takes no pool in virtual memory (G12): under a tool, vmm=auto means
 * cuMemAlloc segments, and vmm=on keeps its segments whole to the tool (said once). */
VG_TEST(under_a_tool_segments_are_cumemalloc_chunks) {
    use_tool(NULL);
    vgt_init("");
    vg_heap_t *h;
    CHECK_VG(vg__heap_for_device(0, &h));
    CHECK(!h->vmm);
    find_tool();
    CHECK_EQ(T.heaps(g_heaps, VG_ARRAY_LEN(g_heaps)), 0); /* (none until the first request) */
    void *p;
    CHECK_VG(vg_malloc(&p, 4000, NULL));
    CHECK_EQ(T.heaps(g_heaps, VG_ARRAY_LEN(g_heaps)), 1);
    CHECK_CONTAINS(g_heaps[0].name, "vramguard cuMemAlloc segment on device 0, 2.00 MiB");
    CHECK_VG(vg_free(p, NULL));
}

VG_TEST(vmm_on_under_a_tool_keeps_its_segments_whole) {
    use_tool(NULL);
    CHECK_EQ(nvtx_log_lines("vmm=on,mode=guard"), 1);
    find_tool();
    CHECK_EQ(T.heaps(g_heaps, 0), 0);
    CHECK_EQ(counts().regions_registered, 0);
    CHECK(!vg__nvtx_attached());
    vg_heap_t *h;
    CHECK_VG(vg__heap_for_device(0, &h));
    CHECK(h->vmm);
    CHECK(((vg_guard_t *)h->guard)->launches > 0); /* (guard mode keeps its own checks) */
}

static CUcontext g_ctx;

static void *thread_work(void *arg) {
    uint64_t seed = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    CHECK_CU(vg__cuCtxSetCurrent(g_ctx));
    CUstream s = vgt_stream();
    void *mine[16] = {0};
    for (int i = 0; i < VGT_STEPS(1500); i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        int k = (int)(seed % 16);
        if (mine[k]) {
            CHECK_VG(vg_free(mine[k], s));
            mine[k] = NULL;
        } else {
            CHECK_VG(vg_malloc(&mine[k], 1 + seed % 300000, s));
        }
    }
    for (int k = 0; k < 16; k++)
        if (mine[k])
            CHECK_VG(vg_free(mine[k], s));
    return NULL;
}

VG_TEST(regions_follow_allocations_from_many_threads) {
    use_tool(NULL);
    vgt_init("");
    void *first;
    CHECK_VG(vg_malloc(&first, 4000, NULL));
    find_tool();
    CHECK_VG(vg_free(first, NULL));
    CHECK_CU(vg__cuCtxGetCurrent(&g_ctx));
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, thread_work, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    check_exact(NULL, 0, "once every thread freed its allocations");
    CHECK(counts().regions_registered >= (uint64_t)THREADS * VGT_STEPS(1500) / 4);
}

/* ---------------------------------------------------------------------------------------
 * CUDA graph pools: a replay may touch what a capture freed, until the pool is released
 * ------------------------------------------------------------------------------------- */

static CUstream g_capturing;
static int capturing_only(void *stream, void *arg) {
    (void)arg;
    return stream == (void *)g_capturing;
}

VG_TEST(a_graph_pools_memory_stays_covered_until_its_release) {
    use_tool(NULL);
    vgt_init("");
    g_capturing = vgt_stream();
    CHECK_VG(vg_graph_pool_begin(0, 7, capturing_only, NULL));
    void *a, *b, *c, *d;
    CHECK_VG(vg_malloc(&a, MIB, g_capturing)); /* from general memory: the pool's now */
    find_tool();
    CHECK_VG(vg_malloc(&c, 3 * MIB, g_capturing));
    check_exact((live_t[]){{a, MIB}, {c, 3 * MIB}}, 2, "two allocations of a capture");
    CHECK_VG(vg_free(a, g_capturing)); /* a replay still writes a: its region stays */
    check_covered(&(live_t){a, MIB}, 1);
    CHECK_VG(vg_malloc(&b, MIB / 2 + 4096, g_capturing)); /* a's bytes again, likely */
    CHECK_VG(vg_malloc(&d, 100, NULL)); /* not the capture's: a region of its own */
    check_covered((live_t[]){{a, MIB}, {b, MIB / 2 + 4096}, {c, 3 * MIB}, {d, 100}}, 4);
    CHECK_VG(vg_free(b, g_capturing));
    CHECK_VG(vg_graph_pool_end(0, 7));
    check_covered((live_t[]){{a, MIB}, {b, MIB / 2 + 4096}, {c, 3 * MIB}}, 3);
    CHECK_VG(vg_graph_pool_release(0, 7)); /* c is live: its own region again */
    check_exact((live_t[]){{c, 3 * MIB}, {d, 100}}, 2, "after the pool's release");
    CHECK_VG(vg_free(c, g_capturing));
    CHECK_VG(vg_free(d, NULL));
    check_exact(NULL, 0, "with everything freed");
    workload(VGT_STEPS(500), true); /* (the pool's memory is general memory again) */
}

/* ---------------------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------------------- */

__attribute__((noinline)) static void *allocate_a_tensor(uint64_t size) {
    void *p = NULL;
    CHECK_VG(vg_malloc(&p, size, NULL));
    __asm__ volatile("" ::: "memory"); /* (a frame of its own: not a tail call) */
    return p;
}

/* (Called through a pointer: one copy of the function, one frame address for its sites.) */
static void *(*volatile allocate)(uint64_t) = allocate_a_tensor;

static const char *name_of(void *p) {
    size_t n = T.regions(g_regions, VG_ARRAY_LEN(g_regions));
    for (size_t i = 0; i < n; i++)
        if (g_regions[i].lo == (uintptr_t)p)
            return g_regions[i].name;
    return NULL;
}

VG_TEST(a_region_is_named_by_number_size_and_site) {
    use_tool(NULL);
    vgt_init("");
    void *p = allocate(4000);
    find_tool();
    void *q = allocate(12345);
    CHECK_CONTAINS(name_of(q), "vramguard #2, 12345 bytes, ");
    CHECK_CONTAINS(name_of(q), "+0x"); /* (no symbolizer on the allocation path) */
    CHECK(strlen(name_of(q)) <= 49);   /* (compute-sanitizer takes no longer name) */
    CHECK_CONTAINS(name_of(p), "vramguard #1, 4000 bytes, ");
    /* A site a report already symbolized (here: an out-of-memory explanation, which names
     * the top holders' lines) is named with its file and line at once. (Live regions are
     * not renamed at exit: the tool's own exit handlers may have run by then, G12.) */
    void *big;
    CHECK(vg_malloc(&big, 1ull << 50, NULL) == VG_ERR_OUT_OF_MEMORY);
    void *r = allocate(77);
    CHECK_CONTAINS(name_of(r), "vramguard #3, 77 bytes, test_nvtx.c:");
    CHECK_VG(vg_free(p, NULL));
    CHECK_VG(vg_free(q, NULL));
    CHECK_VG(vg_free(r, NULL));
    check_exact(NULL, 0, "with everything freed");
}

/* In fast mode under a tool, allocations are padded as in guard mode: an access past one
 * lands in no region, not in the next tensor's (G12; a read past a PyTorch tensor went
 * unreported on the H200 until then: its neighbour's region held the bytes). */
VG_TEST(under_a_tool_allocations_are_padded_apart) {
    use_tool(NULL);
    vgt_init("redzone=256");
    void *p = allocate(4000), *q = allocate(4000);
    find_tool();
    size_t n = T.regions(g_regions, VG_ARRAY_LEN(g_regions));
    const vgnvtx_region_t *rp = NULL, *rq = NULL;
    for (size_t i = 0; i < n; i++) {
        if (g_regions[i].lo == (uintptr_t)p)
            rp = &g_regions[i];
        if (g_regions[i].lo == (uintptr_t)q)
            rq = &g_regions[i];
    }
    CHECK(rp && rq);
    CHECK_EQ(rp->size, 4000);
    uint64_t gap = rq->lo > rp->lo ? rq->lo - (rp->lo + rp->size) : rp->lo - (rq->lo + rq->size);
    CHECK(gap >= 256);
    CHECK_VG(vg_free(p, NULL));
    CHECK_VG(vg_free(q, NULL));
    check_exact(NULL, 0, "with everything freed");
}

/* ---------------------------------------------------------------------------------------
 * Without a tool, vramguard is untouched
 * ------------------------------------------------------------------------------------- */

/* Run a short workload with a log file; return how many of its lines mention NVTX. */
static int nvtx_log_lines(const char *extra) {
    char path[128], opts[256];
    snprintf(path, sizeof path, "/tmp/vg_nvtx_log_%d.txt", (int)getpid());
    snprintf(opts, sizeof opts, "log=%s%s%s", path, *extra ? "," : "", extra);
    vgt_init(opts);
    void *p;
    CHECK_VG(vg_malloc(&p, 4000, NULL));
    CHECK_VG(vg_free(p, NULL));
    workload(VGT_STEPS(300), false);
    FILE *f = fopen(path, "r");
    CHECK(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, "NVTX") != NULL;
    fclose(f);
    unlink(path);
    return n;
}

VG_TEST(no_tool_named_loads_nothing) {
    if (!*VG_TEST_NVTX_LIB)
        vgt_skip("no test NVTX tool (no nvtx3 headers)");
    unsetenv("NVTX_INJECTION64_PATH");
    CHECK_EQ(nvtx_log_lines("verbose=1"), 0);
    CHECK(!atomic_load(&vg__alloc_tool));
    CHECK(!vg__nvtx_attached());
    CHECK_MSG(!dlopen(VG_TEST_NVTX_LIB, RTLD_LAZY | RTLD_NOLOAD), "a tool was loaded");
}

VG_TEST(a_path_that_names_nothing_costs_one_verbose_line) {
    setenv("NVTX_INJECTION64_PATH", "/nonexistent/libnvtx-tool.so", 1);
    CHECK_EQ(nvtx_log_lines("verbose=1"), 1);
    CHECK(!vg__nvtx_attached());
    CHECK(!atomic_load(&vg__alloc_tool));
}

VG_TEST(a_path_that_names_nothing_is_silent_without_verbose) {
    setenv("NVTX_INJECTION64_PATH", "/nonexistent/libnvtx-tool.so", 1);
    CHECK_EQ(nvtx_log_lines(""), 0);
}

VG_TEST(a_library_that_is_no_tool_is_left_alone) {
    setenv("NVTX_INJECTION64_PATH", "libm.so.6", 1);
    CHECK_EQ(nvtx_log_lines("verbose=1"), 1);
    CHECK(!vg__nvtx_attached());
}

/* lines: what verbose=1 says of it (a tool that takes the Memory API and then no heap
 * has already had vramguard choose cuMemAlloc segments for it: said too). */
static void refused(const char *how, int lines) {
    use_tool(how);
    CHECK_EQ(nvtx_log_lines("verbose=1,mode=guard"), lines); /* (guard keeps its checks) */
    find_tool();
    CHECK_EQ(T.regions(g_regions, 0), 0);
    CHECK_EQ(T.heaps(g_heaps, 0), 0);
    CHECK_EQ(counts().regions_registered, 0);
    CHECK(!vg__nvtx_attached());
    CHECK(!atomic_load(&vg__alloc_tool));
    vg_heap_t *h;
    CHECK_VG(vg__heap_for_device(0, &h));
    CHECK(((vg_guard_t *)h->guard)->launches > 0);
}

VG_TEST(a_tool_that_refuses_the_client_is_left_alone) { refused("core", 1); }

VG_TEST(a_tool_without_the_memory_api_is_left_alone) { refused("ext", 1); }

VG_TEST(a_tool_that_registers_no_heap_is_left_alone) { refused("noheap", 2); }

/* ---------------------------------------------------------------------------------------
 * Beside the program's own NVTX
 * ------------------------------------------------------------------------------------- */

VG_TEST(coexists_with_the_programs_own_nvtx) {
#ifndef VG_TEST_HAVE_NVTX3
    vgt_skip("no nvtx3 headers");
#else
    use_tool(NULL);
    vgt_init("");
    /* The program registers a pool of its own (here: plain driver memory) first. */
    CUdeviceptr mine;
    CHECK_CU(vg__cuMemAlloc(&mine, 4 * MIB));
    nvtxDomainHandle_t dom = nvtxDomainCreateA("the program");
    nvtxMemVirtualRangeDesc_t range = {4 * MIB, (void *)(uintptr_t)mine};
    nvtxMemHeapDesc_t hd = {.extCompatID = NVTX_EXT_COMPATID_MEM,
                            .structSize = sizeof hd,
                            .usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR,
                            .type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
                            .typeSpecificDescSize = sizeof range,
                            .typeSpecificDesc = &range};
    nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(dom, &hd);
    CHECK(heap != NULL);
    nvtxMemVirtualRangeDesc_t piece = {1000, (void *)(uintptr_t)(mine + 4096)};
    nvtxMemRegionsRegisterBatch_t rb = {.extCompatID = NVTX_EXT_COMPATID_MEM,
                                        .structSize = sizeof rb,
                                        .regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
                                        .heap = heap,
                                        .regionCount = 1,
                                        .regionDescElementSize = sizeof piece,
                                        .regionDescElements = &piece};
    nvtxMemRegionsRegister(dom, &rb);
    /* vramguard's client attaches to the same copy of the tool, with tables of its own. */
    void *p;
    CHECK_VG(vg_malloc(&p, 4000, NULL));
    find_tool();
    vgnvtx_counts_t c = counts();
    CHECK_EQ(c.core_clients, 2);
    CHECK_EQ(c.ext_clients, 2);
    CHECK_EQ(T.regions(g_regions, VG_ARRAY_LEN(g_regions)), 2);
    CHECK(name_of(p) && strncmp(name_of(p), "vramguard #1, 4000 bytes", 24) == 0);
    CHECK_VG(vg_free(p, NULL));
    CHECK_EQ(T.regions(g_regions, VG_ARRAY_LEN(g_regions)), 1); /* the program's stays */
    CHECK_EQ(g_regions[0].lo, mine + 4096);
    nvtxMemHeapUnregister(dom, heap);
    CHECK_EQ(T.regions(g_regions, 0), 0);
    CHECK_CU(vg__cuMemFree(mine));
    counts();
#endif
}
