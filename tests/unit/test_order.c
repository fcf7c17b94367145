/* test_order.c — guard mode's check of stream-ordered frees (docs/decisions.md G7).
 *
 * A free on stream S of memory a kernel on stream T was given is reported unless
 * something orders S's later work after that kernel. The interposer tells vramguard of
 * the program's event records, waits, queries and synchronisations; these cases call the
 * same entry points (order.h) beside the real vgsim operations, with free_order=on
 * because no interposer is loaded.
 */
#include <string.h>

#include "vgtest.h"
#include "alloc/heap.h"   /* vg__capture_began */
#include "diag/order.h"
#include "diag/report.h" /* vg__report_count_kind */

static uint64_t unordered(void) { return vg__report_count_kind(VG_REPORT_UNORDERED_FREE); }

static __attribute__((noinline)) void *buf(CUstream s) {
    void *p;
    CHECK_VG(vg_malloc(&p, 4096, s));
    return p;
}

/* A kernel on s given p (what the interposer notes at cuLaunchKernel). */
static __attribute__((noinline)) void use(const char *name, void *p, CUstream s) {
    const void *ptrs[] = {p};
    vg_kernel_launched_args(name, s, ptrs, 1);
}

static CUstream stream(unsigned flags) {
    CUstream s;
    CHECK_CU(vg__cuStreamCreate(&s, flags));
    return s;
}

static CUevent event(void) {
    CUevent e;
    CHECK_CU(vg__cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    return e;
}

/* cuEventRecord and cuStreamWaitEvent as the interposer forwards them. */
static void record(CUevent e, CUstream s) {
    CHECK_CU(vg__cuEventRecord(e, s));
    vg__order_event_record(e, s);
}

static void wait_on(CUstream s, CUevent e) {
    CHECK_CU(vg__cuStreamWaitEvent(s, e, 0));
    vg__order_stream_wait(s, e);
}

static void init(void) { vgt_init("mode=guard,free_order=on,leaks=off"); }

/* One step of a training loop with the bug (not inlined: the same sites every step,
 * however the compiler unrolls the loop). */
static __attribute__((noinline)) void racy_step(CUstream main_s, CUstream side) {
    void *x = buf(main_s);
    use("k_side", x, side);
    CHECK_VG(vg_free(x, main_s));
}

VG_TEST(a_free_racing_another_streams_kernel_is_reported_once_per_site) {
    init();
    CUstream main_s = vgt_stream(), side = vgt_stream();
    volatile int steps = 3; /* (a loop the compiler cannot unroll into three call sites) */
    for (int i = 0; i < steps; i++) /* a training loop: one report, not one per step */
        racy_step(main_s, side);
    CHECK(unordered() == 1);
    char *json = vg_errors_json();
    CHECK(json && strstr(json, "\"kind\":\"unordered_free\""));
    CHECK(strstr(json, "\"kernel\":{") && strstr(json, "\"name\":\"k_side\""));
    free(json);
    CHECK_VG(vg_free(buf(main_s), main_s)); /* no other stream used it */
    CHECK(unordered() == 1);
    CHECK_VALID();
}

VG_TEST(an_event_recorded_after_the_kernel_orders_the_free) {
    init();
    CUstream main_s = vgt_stream(), side = vgt_stream();
    CUevent e = event();
    void *x = buf(main_s);
    use("k_side", x, side);
    record(e, side);
    wait_on(main_s, e);
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 0);
}

VG_TEST(an_event_recorded_before_the_kernel_does_not) {
    init();
    CUstream main_s = vgt_stream(), side = vgt_stream();
    CUevent e = event();
    void *x = buf(main_s);
    record(e, side);
    use("k_side", x, side);
    wait_on(main_s, e);
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 1);
}

VG_TEST(what_the_host_waited_for_orders_the_free) {
    init();
    CUstream main_s = vgt_stream(), side = vgt_stream();
    void *x = buf(main_s), *y = buf(main_s), *z = buf(main_s);
    use("k_side", x, side);
    CHECK_VG(vg_stream_synchronized(side)); /* cuStreamSynchronize, or a query said done */
    CHECK_VG(vg_free(x, main_s));
    CUevent e = event();
    use("k_side", y, side);
    record(e, side);
    CHECK_CU(vg__cuEventSynchronize(e));
    vg__order_event_done(e); /* cuEventSynchronize, or cuEventQuery said done */
    CHECK_VG(vg_free(y, main_s));
    use("k_side", z, side);
    vg__order_all_done(); /* a context synchronisation */
    CHECK_VG(vg_free(z, main_s));
    CHECK(unordered() == 0);
}

VG_TEST(record_stream_orders_the_free) {
    init();
    CUstream main_s = vgt_stream(), side = vgt_stream();
    void *x = buf(main_s);
    use("k_side", x, side);
    CHECK_VG(vg_record_stream(x, side)); /* the allocator then waits for side itself */
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 0);
    CHECK_CU(vg__cuCtxSynchronize());
}

VG_TEST(the_legacy_stream_orders_blocking_streams_only) {
    init();
    CUstream blocking = stream(CU_STREAM_DEFAULT), nonblocking = vgt_stream();
    void *x = buf(NULL), *y = buf(NULL);
    use("k_blocking", x, blocking);
    CHECK_VG(vg_free(x, NULL)); /* the legacy stream waits for blocking streams */
    CHECK(unordered() == 0);
    use("k_nonblocking", y, nonblocking);
    CHECK_VG(vg_free(y, NULL));
    CHECK(unordered() == 1);
}

VG_TEST(two_blocking_streams_are_ordered_through_the_legacy_stream) {
    init();
    CUstream b1 = stream(CU_STREAM_DEFAULT), b2 = stream(CU_STREAM_DEFAULT);
    void *x = buf(b2), *y = buf(b2);
    use("k_b1", x, b1);
    CHECK_VG(vg_free(x, b2)); /* nothing ran on the legacy stream in between */
    CHECK(unordered() == 1);
    use("k_b1_again", y, b1);
    vg_kernel_launched("k_legacy", NULL); /* waits for b1; b2's later work waits for it */
    CHECK_VG(vg_free(y, b2));
    CHECK(unordered() == 1);
    void *z = buf(b2); /* the same through an event recorded on the legacy stream */
    use("k_b1_third", z, b1);
    record(event(), NULL);
    CHECK_VG(vg_free(z, b2));
    CHECK(unordered() == 1);
}

VG_TEST(waiting_for_the_legacy_stream_orders_blocking_streams_only) {
    init(); /* (a synchronous cuMemcpyDtoH, or cuStreamSynchronize(0)) */
    CUstream b1 = stream(CU_STREAM_DEFAULT), b2 = stream(CU_STREAM_DEFAULT);
    CUstream nb = vgt_stream();
    void *x = buf(b2), *y = buf(b2);
    use("k_blocking", x, b1);
    use("k_nonblocking", y, nb);
    vg__order_stream_done(NULL); /* the legacy stream was never used before */
    CHECK_VG(vg_free(x, b2));
    CHECK(unordered() == 0);
    CHECK_VG(vg_free(y, b2));
    CHECK(unordered() == 1);
}

VG_TEST(event_order_is_transitive) {
    init();
    CUstream a = vgt_stream(), b = vgt_stream(), main_s = vgt_stream();
    CUevent e1 = event(), e2 = event();
    void *x = buf(main_s);
    use("k_a", x, a);
    record(e1, a);
    wait_on(b, e1);
    record(e2, b);
    wait_on(main_s, e2); /* main waits for b, which waited for a */
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 0);
}

VG_TEST(an_event_vramguard_never_saw_recorded_orders_everything) {
    init(); /* (fewer reports rather than a false one) */
    CUstream main_s = vgt_stream(), side = vgt_stream();
    CUevent e = event();
    void *x = buf(main_s);
    use("k_side", x, side);
    CHECK_CU(vg__cuEventRecord(e, side)); /* not told */
    wait_on(main_s, e);
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 0);
}

VG_TEST(a_kernel_launched_before_the_allocation_is_not_its_user) {
    vgt_init("mode=guard,free_order=on,leaks=off,quarantine=0");
    CUstream main_s = vgt_stream(), side = vgt_stream();
    void *old = buf(main_s);
    CHECK_VG(vg_free(old, main_s));
    use("k_stale", old, side); /* a stale pointer, before the next allocation there */
    void *x = buf(main_s);
    CHECK_MSG(x == old, "the case needs the same address again (%p, %p)", x, old);
    use("k_main", x, main_s); /* (launches after the allocation: the record is searched) */
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 0);
}

VG_TEST(kernels_captured_into_a_graph_are_not_judged) {
    init();
    CUstream main_s = vgt_stream(), side = vgt_stream();
    void *x = buf(main_s);
    vg__capture_began(); /* (the interposer's cuStreamBeginCapture hook) */
    CHECK_CU(vg__cuStreamBeginCapture(side, CU_STREAM_CAPTURE_MODE_RELAXED));
    use("k_captured", x, side); /* runs when the graph is launched, not now */
    CUgraph g;
    CHECK_CU(vg__cuStreamEndCapture(side, &g));
    vg__capture_ended();
    CHECK_CU(vg__cuGraphDestroy(g));
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 0);
}

VG_TEST(off_by_option) {
    vgt_init("mode=guard,free_order=off,leaks=off");
    CUstream main_s = vgt_stream(), side = vgt_stream();
    void *x = buf(main_s);
    use("k_side", x, side);
    CHECK_VG(vg_free(x, main_s));
    CHECK(unordered() == 0);
}

/* Threads allocating, launching, recording and waiting at once: no false report (each
 * frees on the stream it used), and TSan sees the order module's locking. */
typedef struct {
    CUcontext ctx;
    CUstream own, other;
    CUevent e;
} worker_t;

static void *worker(void *arg) {
    worker_t *w = arg;
    CHECK_CU(vg__cuCtxSetCurrent(w->ctx));
    for (int i = 0; i < 200; i++) {
        void *x = buf(w->own);
        use("k_own", x, w->own);
        record(w->e, w->own);
        wait_on(w->other, w->e);
        CHECK_VG(vg_free(x, w->own));
    }
    return NULL;
}

VG_TEST(threads_at_once) {
    init();
    CUcontext ctx;
    CHECK_CU(vg__cuCtxGetCurrent(&ctx));
    enum { N = 4 };
    worker_t w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        w[i] = (worker_t){.ctx = ctx, .own = vgt_stream(), .other = vgt_stream(), .e = event()};
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&t[i], NULL, worker, &w[i]) == 0);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    CHECK(unordered() == 0);
    CHECK_CU(vg__cuCtxSynchronize());
    CHECK_VALID();
}

VG_TEST(guard_order_counts_direct_waits_on_events_recorded_since_only) {
    /* vg__order_waited_after: guard mode's strict question (G3). */
    init();
    CUstream a = stream(CU_STREAM_NON_BLOCKING), b = stream(CU_STREAM_NON_BLOCKING),
             c = stream(CU_STREAM_NON_BLOCKING), d = stream(CU_STREAM_NON_BLOCKING);
    CUevent e0 = event(), e1 = event(), e2 = event(), unseen = event();
    record(e0, a);
    uint64_t moment = vg__order_tick();
    wait_on(b, e0);
    CHECK(!vg__order_waited_after(b, a, moment)); /* recorded before the moment */
    record(e1, a);
    wait_on(c, e1);
    CHECK(vg__order_waited_after(c, a, moment)); /* recorded since, waited for */
    CHECK(!vg__order_waited_after(c, a, vg__order_tick()));
    CHECK(!vg__order_waited_after(b, a, moment));
    record(e2, c);
    wait_on(b, e2); /* b after c after a: a chain, not counted */
    CHECK(!vg__order_waited_after(b, a, moment));
    CHECK(vg__order_waited_after(b, c, moment));
    CHECK(!vg__order_waited_after(a, a, 0));
    CHECK(!vg__order_waited_after(CU_STREAM_PER_THREAD, a, 0));
    CHECK_CU(vg__cuEventRecord(unseen, a)); /* a record vramguard was not told of */
    wait_on(d, unseen);
    CHECK(!vg__order_waited_after(d, a, 0));
    CHECK_CU(vg__cuCtxSynchronize());
    vg__order_all_done(); /* the host's knowledge does not count either */
    CHECK(!vg__order_waited_after(d, a, 0));
}
