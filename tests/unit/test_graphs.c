/* test_graphs.c — CUDA graph captures under vramguard (docs/decisions.md A7), on vgsim,
 * which captures work and replays it as a GPU does, and fails what CUDA forbids during a
 * capture (vgsim/graph.c).
 *
 * The bug these guard against: a graph replays its kernels on the addresses they had when
 * it was captured, so memory the capture allocated and freed must not go to another
 * tensor while the graph lives, or every replay overwrites that tensor.
 */
#include <string.h>

#include "vgtest.h"
#include "diag/report.h" /* vg__report_count_kind */

#define MIB (1u << 20)

static CUdeviceptr dp(void *p) { return (CUdeviceptr)(uintptr_t)p; }

static void fill(void *p, unsigned v, CUstream s) {
    CHECK_CU(vg__cuMemsetD32Async(dp(p), v, MIB / 4, s));
}

static void expect_filled(void *p, unsigned v) {
    unsigned h[3];
    CHECK_CU(vg__cuMemcpyDtoH(&h[0], dp(p), 4));
    CHECK_CU(vg__cuMemcpyDtoH(&h[1], dp(p) + MIB / 2, 4));
    CHECK_CU(vg__cuMemcpyDtoH(&h[2], dp(p) + MIB - 4, 4));
    for (int i = 0; i < 3; i++)
        CHECK_MSG(h[i] == v, "word %d of %p is %#x, expected %#x", i, p, h[i], v);
}

/* Capture, on s, one temporary of 1 MiB that the graph fills and frees (as a training
 * step's activations are), into pool `pool`. */
static CUgraphExec capture_temporary(CUstream s, uint64_t pool, void **tmp, unsigned v) {
    CHECK_VG(vg_graph_pool_begin(-1, pool, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_malloc(tmp, MIB, s));
    fill(*tmp, v, s);
    CHECK_VG(vg_free(*tmp, s));
    CUgraph g = NULL;
    CHECK_CU(vg__cuStreamEndCapture(s, &g)); /* (fails if vramguard broke the capture) */
    CHECK_VG(vg_graph_pool_end(-1, pool));
    CUgraphExec x;
    CHECK_CU(vg__cuGraphInstantiate(&x, g, 0));
    CHECK_CU(vg__cuGraphDestroy(g));
    return x;
}

VG_TEST(a_graphs_memory_is_not_given_to_other_tensors) {
    vgt_init("");
    CUstream s = vgt_stream();
    void *tmp, *x;
    CUgraphExec graph = capture_temporary(s, 7, &tmp, 0xAAAAAAAAu);
    CHECK_VALID();
    CHECK_VG(vg_malloc(&x, MIB, s)); /* without the pool: tmp's block, freed on s */
    CHECK(x != tmp);
    fill(x, 0x11111111u, s);
    CHECK_CU(vg__cuGraphLaunch(graph, s));
    CHECK_CU(vg__cuStreamSynchronize(s));
    expect_filled(x, 0x11111111u); /* the replay wrote the graph's memory only */
    expect_filled(tmp, 0xAAAAAAAAu);
    CHECK_VG(vg_free(x, s));
    /* The graph is destroyed: its memory serves everyone again. */
    CHECK_CU(vg__cuGraphExecDestroy(graph));
    vg_stats_t before = vgt_stats();
    CHECK_VG(vg_graph_pool_release(-1, 7));
    CHECK_VALID();
    void *a, *b;
    CHECK_VG(vg_malloc(&a, MIB, s));
    CHECK_VG(vg_malloc(&b, MIB, s));
    CHECK(a == tmp || b == tmp);
    vg_stats_t after = vgt_stats();
    CHECK_EQ(after.reserved_bytes[VG_POOL_ALL].current, before.reserved_bytes[VG_POOL_ALL].current);
    CHECK_VG(vg_free(a, s));
    CHECK_VG(vg_free(b, s));
    CHECK_VALID();
}

VG_TEST(captures_sharing_a_pool_reuse_its_memory) {
    vgt_init("");
    CUstream s = vgt_stream();
    void *t1, *t2;
    CUgraphExec g1 = capture_temporary(s, 3, &t1, 1);
    uint64_t reserved = (uint64_t)vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    CUgraphExec g2 = capture_temporary(s, 3, &t2, 2);
    CHECK(t2 == t1); /* graph_pool_handle's use: graphs replayed in order share memory */
    CHECK_EQ((uint64_t)vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    CHECK_VALID();
    CHECK_CU(vg__cuGraphLaunch(g1, s));
    CHECK_CU(vg__cuGraphLaunch(g2, s));
    CHECK_CU(vg__cuStreamSynchronize(s));
    expect_filled(t1, 2);
    CHECK_CU(vg__cuGraphExecDestroy(g1));
    CHECK_CU(vg__cuGraphExecDestroy(g2));
    CHECK_VG(vg_graph_pool_release(-1, 3));
    void *x;
    CHECK_VG(vg_malloc(&x, MIB, s)); /* one graph still uses the pool: kept */
    CHECK(x != t1);
    CHECK_VG(vg_graph_pool_release(-1, 3));
    CHECK_VG(vg_free(x, s));
    CHECK_VALID();
}

/* What is not captured stays general memory: a request on another stream while the
 * capture runs, and a tensor the graph's output still holds after release. */
VG_TEST(only_the_captures_requests_go_to_its_pool) {
    vgt_init("");
    CUstream s = vgt_stream(), t = vgt_stream();
    void *in_graph, *outside, *again;
    CHECK_VG(vg_graph_pool_begin(-1, 9, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_malloc(&in_graph, MIB, s));
    CHECK_VG(vg_malloc(&outside, MIB, t));
    fill(in_graph, 5, s);
    CUgraph g = NULL;
    CHECK_CU(vg__cuStreamEndCapture(s, &g));
    CHECK_VG(vg_graph_pool_end(-1, 9));
    CHECK_VG(vg_free(outside, t));
    CHECK_VG(vg_malloc(&again, MIB, t));
    CHECK(again == outside); /* general memory, reused at once on its stream */
    CHECK_VG(vg_free(again, t));
    CHECK_CU(vg__cuGraphDestroy(g));
    CHECK_VG(vg_graph_pool_release(-1, 9)); /* in_graph is still live (the graph's output) */
    CHECK_VALID();
    CHECK_VG(vg_free(in_graph, s)); /* ... and returns to general memory when freed */
    CHECK_VG(vg_malloc(&again, MIB, s));
    CHECK(again == in_graph);
    CHECK_VG(vg_free(again, s));
    CHECK_VALID();
}

/* Guard mode launches checks on the program's streams and waits for them: never on a
 * stream being captured, where a launch would become part of the graph and a wait breaks
 * the capture. A check during the capture (a synchronisation elsewhere, vg_check) skips
 * the captured stream; the capture's own allocations are not checked, and exit says so. */
VG_TEST(guard_mode_leaves_captures_intact) {
    vgt_init("mode=guard");
    CUstream s = vgt_stream();
    void *before, *tmp;
    CHECK_VG(vg_malloc(&before, MIB, s));
    fill(before, 3, s);
    CHECK_VG(vg_free(before, s)); /* quarantined: its checks wait on s */
    CHECK_VG(vg_graph_pool_begin(-1, 4, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_malloc(&tmp, MIB, s));
    fill(tmp, 4, s);
    CHECK_VG(vg_check());
    CHECK_VG(vg_free(tmp, s));
    CUgraph g = NULL;
    CHECK_CU(vg__cuStreamEndCapture(s, &g));
    CHECK_VG(vg_graph_pool_end(-1, 4));
    CUgraphExec x;
    CHECK_CU(vg__cuGraphInstantiate(&x, g, 0));
    CHECK_CU(vg__cuGraphLaunch(x, s));
    CHECK_CU(vg__cuStreamSynchronize(s));
    expect_filled(tmp, 4);
    CHECK_VG(vg_check()); /* the checks that waited on s run now: nothing to report */
    CHECK_CU(vg__cuGraphExecDestroy(x));
    CHECK_CU(vg__cuGraphDestroy(g));
    CHECK_VG(vg_graph_pool_release(-1, 4));
    CHECK_VALID();
}

/* A capture in global mode allocates through vramguard as through PyTorch's allocator:
 * vramguard's driver calls (new pages) run in relaxed mode, or the capture would be
 * invalidated (conformance cumemalloc_during_a_global_capture_needs_relaxed_mode). The
 * thread's own mode is left as it was. */
VG_TEST(a_capture_may_grow_the_heap_and_keeps_its_mode) {
    vgt_init("");
    CUstream s = vgt_stream();
    void *big;
    CHECK_VG(vg_graph_pool_begin(-1, 11, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_malloc(&big, 64 * MIB, s)); /* maps new pages */
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_GLOBAL;
    CHECK_CU(vg__cuThreadExchangeStreamCaptureMode(&m));
    CHECK_EQ(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUgraph g = NULL;
    CHECK_CU(vg__cuStreamEndCapture(s, &g));
    CHECK_VG(vg_graph_pool_end(-1, 11));
    CHECK_CU(vg__cuGraphDestroy(g));
    CHECK_VG(vg_free(big, s));
    CHECK_VG(vg_graph_pool_release(-1, 11));
    CHECK_VG(vg_empty_cache());
    CHECK_VALID();
    CHECK_VG(vg_graph_pool_begin(-1, 0, NULL, NULL) == VG_ERR_INVALID_ARGUMENT ? VG_OK
                                                                             : VG_ERR_INTERNAL);
}

/* Memory kept for graphs is not free for others: an out-of-memory explanation says how
 * much the graphs keep and what to do. */
VG_TEST(an_out_of_memory_explanation_counts_the_graphs_memory) {
    vgt_init("limit=8M");
    CUstream s = vgt_stream();
    void *tmp, *x = NULL;
    CHECK_VG(vg_graph_pool_begin(-1, 21, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_malloc(&tmp, 6 * MIB, s));
    CHECK_VG(vg_free(tmp, s));
    CUgraph g = NULL;
    CHECK_CU(vg__cuStreamEndCapture(s, &g));
    CHECK_VG(vg_graph_pool_end(-1, 21));
    CHECK_EQ(vg_malloc(&x, 4 * MIB, s), VG_ERR_OUT_OF_MEMORY);
    const char *why = vg_last_error();
    CHECK_MSG(strstr(why, "CUDA graphs keep 6.00 MiB") &&
                  strstr(why, "of it is kept for CUDA graphs, which may replay into it"),
              "explanation: %s", why);
    CHECK_CU(vg__cuGraphDestroy(g));
    CHECK_VG(vg_graph_pool_release(-1, 21));
    CHECK_VG(vg_malloc(&x, 4 * MIB, s)); /* released: the memory serves the request */
    CHECK_VG(vg_free(x, s));
    CHECK_VALID();
}

/* A release while another capture runs waits for that capture to end (waiting for the
 * context then would break it); at most VG_GPOOL_ROUTES captures route at once. */
VG_TEST(a_release_during_another_capture_waits_for_it) {
    vgt_init("");
    CUstream s = vgt_stream(), t = vgt_stream();
    void *tmp, *x;
    CUgraphExec done = capture_temporary(s, 31, &tmp, 9);
    CHECK_CU(vg__cuGraphExecDestroy(done));
    CHECK_VG(vg_graph_pool_begin(-1, 32, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(t, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_graph_pool_release(-1, 31)); /* pending: t is being captured */
    CHECK_VG(vg_malloc(&x, MIB, s));
    CHECK(x != tmp);
    CHECK_VG(vg_free(x, s));
    CUgraph g = NULL;
    CHECK_CU(vg__cuStreamEndCapture(t, &g)); /* (no synchronisation broke it) */
    CHECK_VG(vg_graph_pool_end(-1, 32)); /* ... and now pool 31 is released */
    CHECK_VALID();
    void *a, *b;
    CHECK_VG(vg_malloc(&a, MIB, s));
    CHECK_VG(vg_malloc(&b, MIB, s));
    CHECK(a == tmp || b == tmp);
    CHECK_VG(vg_free(a, s));
    CHECK_VG(vg_free(b, s));
    CHECK_CU(vg__cuGraphDestroy(g));
    CHECK_VG(vg_graph_pool_release(-1, 32));
    for (uint64_t i = 1; i <= 8; i++)
        CHECK_VG(vg_graph_pool_begin(-1, 100 + i, NULL, NULL));
    CHECK_EQ(vg_graph_pool_begin(-1, 200, NULL, NULL), VG_ERR_NOT_SUPPORTED);
    CHECK(strstr(vg_last_error(), "more than 8 CUDA graph captures at once"));
    for (uint64_t i = 1; i <= 8; i++) {
        CHECK_VG(vg_graph_pool_end(-1, 100 + i));
        CHECK_VG(vg_graph_pool_release(-1, 100 + i));
    }
    CHECK_VALID();
}

/* A global-mode capture forbids unsafe calls in every thread whose mode is global: another
 * thread's request that maps pages must not break it (PyTorch's other threads allocate
 * while a graph is captured: autograd's workers, data loaders pinning nothing). */
typedef struct grow_arg {
    CUstream stream;
    vg_status_t st;
    void *p;
} grow_arg_t;

static void *grow_elsewhere(void *arg) {
    grow_arg_t *g = arg;
    CUcontext ctx;
    CUdevice dev;
    if (vg__cuDeviceGet(&dev, 0) || vg__cuDevicePrimaryCtxRetain(&ctx, dev) ||
        vg__cuCtxSetCurrent(ctx)) {
        g->st = VG_ERR_INTERNAL;
        return NULL;
    }
    g->st = vg_malloc(&g->p, 96 * MIB, g->stream); /* new pages, on a stream not captured */
    return NULL;
}

VG_TEST(another_threads_growth_leaves_a_global_capture_intact) {
    vgt_init("");
    CUstream s = vgt_stream();
    grow_arg_t g = {.stream = vgt_stream()};
    void *tmp;
    CHECK_VG(vg_graph_pool_begin(-1, 41, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_malloc(&tmp, MIB, s));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, grow_elsewhere, &g) == 0);
    pthread_join(t, NULL);
    CHECK_VG(g.st);
    fill(tmp, 6, s);
    CUgraph graph = NULL;
    CHECK_CU(vg__cuStreamEndCapture(s, &graph));
    CHECK_VG(vg_graph_pool_end(-1, 41));
    CHECK_VG(vg_free(g.p, g.stream));
    CHECK_CU(vg__cuGraphDestroy(graph));
    CHECK_VG(vg_free(tmp, s));
    CHECK_VG(vg_graph_pool_release(-1, 41));
    CHECK_VALID();
}

/* Guard mode sees a captured kernel write past the end of a tensor the capture allocated
 * (and freed: in the graph it is live at every replay), once the graph replays; a graph
 * whose kernels stay in bounds gives no report, although its capture reused memory at
 * other offsets and a second capture shares the pool. */
static CUgraphExec capture_writes(CUstream s, uint64_t pool, size_t n, size_t written,
                                  void **keep) {
    void *a, *b, *c;
    CHECK_VG(vg_graph_pool_begin(-1, pool, NULL, NULL));
    CHECK_CU(vg__cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_VG(vg_malloc(&c, n, s));
    CHECK_VG(vg_malloc(&a, 3 * MIB, s)); /* a temporary, freed: b reuses its memory at */
    CHECK_CU(vg__cuMemsetD32Async(dp(a), 1, 3 * MIB / 4, s)); /* other offsets, so a's */
    CHECK_VG(vg_free(a, s));             /* and b's redzones are never checked */
    CHECK_VG(vg_malloc(&b, MIB + 4096, s));
    CHECK_CU(vg__cuMemsetD32Async(dp(b), 2, (MIB + 4096) / 4, s));
    CHECK_CU(vg__cuMemsetD32Async(dp(c), 3, written / 4, s)); /* the kernel under test */
    CHECK_VG(vg_free(b, s));
    CHECK_VG(vg_free(c, s));
    CUgraph g = NULL;
    CHECK_CU(vg__cuStreamEndCapture(s, &g));
    CHECK_VG(vg_graph_pool_end(-1, pool));
    CUgraphExec x;
    CHECK_CU(vg__cuGraphInstantiate(&x, g, 0));
    CHECK_CU(vg__cuGraphDestroy(g));
    *keep = c;
    return x;
}

VG_TEST(guard_mode_checks_what_a_graph_writes) {
    vgt_init("mode=guard,report_json=/dev/null");
    CUstream s = vgt_stream();
    void *ok1, *ok2, *bad;
    CUgraphExec g1 = capture_writes(s, 51, 4000, 4000, &ok1);
    CUgraphExec g2 = capture_writes(s, 51, 8192, 8192, &ok2); /* shares pool 51 */
    for (int i = 0; i < 3; i++) {
        CHECK_CU(vg__cuGraphLaunch(g1, s));
        CHECK_CU(vg__cuGraphLaunch(g2, s));
    }
    CHECK_CU(vg__cuStreamSynchronize(s));
    CHECK_VG(vg_check()); /* in bounds: nothing to report */
    CUgraphExec g3 = capture_writes(s, 52, 4000, 4016, &bad); /* 16 bytes too many */
    CHECK_VG(vg_check()); /* captured, not run yet: nothing to report */
    CHECK_CU(vg__cuGraphLaunch(g3, s));
    CHECK_CU(vg__cuStreamSynchronize(s));
    CHECK_EQ(vg_check(), VG_ERR_MEMORY_ERRORS);
    CHECK_EQ(vg__report_count_kind(VG_REPORT_OOB_AFTER), 1);
    CHECK_CU(vg__cuGraphLaunch(g3, s)); /* reported once */
    CHECK_CU(vg__cuStreamSynchronize(s));
    CHECK_VG(vg_check());
    for (CUgraphExec *x = (CUgraphExec[]){g1, g2, g3}, *e = x + 3; x < e; x++)
        CHECK_CU(vg__cuGraphExecDestroy(*x));
    CHECK_VG(vg_graph_pool_release(-1, 51));
    CHECK_VG(vg_graph_pool_release(-1, 51));
    CHECK_VG(vg_graph_pool_release(-1, 52));
    CHECK_VALID();
}
