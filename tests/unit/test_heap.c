/* test_heap.c — the allocator through its public API, on vgsim. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include <unistd.h>

#include "vgtest.h"
#include "diag/report.h" /* vg__sync_begin/end: what the interposer calls */

VG_TEST(alloc_free_basic) {
    vgt_init("");
    void *p = NULL, *q = NULL;
    CHECK_VG(vg_malloc(&p, 4000, NULL));
    CHECK(p != NULL);
    CHECK_EQ((uintptr_t)p % 512, 0);
    CHECK_VG(vg_malloc(&q, 1, NULL));
    CHECK(q != p);
    CHECK_VALID();
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.allocation[VG_POOL_ALL].current, 2);
    CHECK_EQ(s.allocated_bytes[VG_POOL_ALL].current, 4096 + 512);
    CHECK_EQ(s.requested_bytes[VG_POOL_ALL].current, 4001);
    CHECK_VG(vg_free(p, NULL));
    CHECK_VG(vg_free(q, NULL));
    CHECK_VG(vg_free(NULL, NULL)); /* a no-op, as free(NULL) */
    CHECK_VALID();
    s = vgt_stats();
    CHECK_EQ(s.allocation[VG_POOL_ALL].current, 0);
    CHECK_EQ(s.allocated_bytes[VG_POOL_ALL].freed, 4096 + 512);
}

/* The driver layer calls each function by its exact ABI symbol. cuGetProcAddress at
 * CUDA 13000 answers cuCtxGetDevice and cuCtxSynchronize with their two-argument _v2
 * versions (driver 580 and vgsim alike); calling those with one argument crashed every
 * process on a real GPU before this was checked. */
VG_TEST(driver_functions_have_the_cuda_h_signatures) {
    vgt_init("");
    CHECK((void *)vg__drv.cuCtxGetDevice == dlsym(vg__drv.handle, "cuCtxGetDevice"));
    CHECK((void *)vg__drv.cuCtxSynchronize == dlsym(vg__drv.handle, "cuCtxSynchronize"));
    CHECK((void *)vg__drv.cuMemAlloc == dlsym(vg__drv.handle, "cuMemAlloc_v2"));
    CUdevice dev = -1;
    CHECK_CU(vg__cuCtxGetDevice(&dev));
    CHECK_EQ(dev, 0);
    CHECK_CU(vg__cuCtxSynchronize());
}

VG_TEST(memory_is_usable_by_the_device) {
    vgt_init("");
    void *p;
    CHECK_VG(vg_malloc(&p, 3 << 20, NULL));
    CHECK_CU(vg__cuMemsetD32((CUdeviceptr)(uintptr_t)p, 0x12345678u, (3 << 20) / 4));
    unsigned h[2];
    CHECK_CU(vg__cuMemcpyDtoH(&h[0], (CUdeviceptr)(uintptr_t)p, 4));
    CHECK_CU(vg__cuMemcpyDtoH(&h[1], (CUdeviceptr)(uintptr_t)p + (3 << 20) - 4, 4));
    CHECK_EQ(h[0], 0x12345678u);
    CHECK_EQ(h[1], 0x12345678u);
    CHECK_VG(vg_free(p, NULL));
}

VG_TEST(zero_size_gives_unique_pointers) {
    vgt_init("");
    void *a, *b;
    CHECK_VG(vg_malloc(&a, 0, NULL));
    CHECK_VG(vg_malloc(&b, 0, NULL));
    CHECK(a && b && a != b);
    CHECK_VG(vg_free(a, NULL));
    CHECK_VG(vg_free(b, NULL));
    CHECK_VALID();
}

VG_TEST(same_stream_reuses_at_once) {
    vgt_init("");
    CUstream s = vgt_stream();
    void *p, *q;
    CHECK_VG(vg_malloc(&p, 1 << 20, s));
    CHECK_VG(vg_free(p, s));
    CHECK_VG(vg_malloc(&q, 1 << 20, s));
    CHECK(q == p); /* ordered on the same stream: no wait needed */
    CHECK_VG(vg_free(q, s));
    CHECK_VALID();
}

/* The S2 hazard at the allocator level: a block freed on stream A while A still has
 * queued work on it must not be handed to stream B before that work completes. The
 * proof is the data: A's late write must not land in B's allocation. Once A is complete,
 * B gets the block without new memory, whether vramguard is told (`told`: a
 * synchronisation it sees) or not (a pluggable allocator sees none: before mapping memory
 * for B, the allocator asks A's event). */
static void cross_stream_reuse(bool told) {
    vgt_init("");
    CUstream a = vgt_stream(), b = vgt_stream();
    vgt_stream_seen(a);
    vgt_stream_seen(b);
    const size_t n = 4 << 20; /* (y maps new memory: A's event is recorded then) */
    void *x, *y;
    CHECK_VG(vg_malloc(&x, n, a));
    vgt_gate_t g;
    vgt_gate_close(&g, a);
    CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)x, 0xAA, n, a)); /* queued on A */
    CHECK_VG(vg_free(x, a));                                               /* while queued */
    CHECK_VG(vg_malloc(&y, n, b));
    CHECK_MSG(y != x, "stream B got the block A still writes to");
    CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)y, 0x55, n, b));
    CHECK_CU(vg__cuStreamSynchronize(b));
    vgt_gate_open(&g);
    CHECK_CU(vg__cuStreamSynchronize(a));
    unsigned char h[64];
    CHECK_CU(vg__cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)y, sizeof h));
    for (size_t i = 0; i < sizeof h; i++)
        CHECK_EQ(h[i], 0x55);
    if (told)
        CHECK_VG(vg_stream_synchronized(a));
    int64_t reserved = vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    void *z;
    CHECK_VG(vg_malloc(&z, n, b));
    CHECK_MSG(z == x, "stream B did not get the block A freed and completed (x %p y %p z %p)", x, y, z);
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    CHECK_VG(vg_free(y, b));
    CHECK_VG(vg_free(z, b));
    CHECK_VALID();
}

VG_TEST(cross_stream_reuse_waits_for_the_freeing_stream) { cross_stream_reuse(true); }
VG_TEST(another_streams_completed_frees_serve_before_memory_grows) { cross_stream_reuse(false); }

/* A gate holding a stream until the allocator first waits for an event: the driver's
 * cuEventSynchronize, wrapped, opens it. Until then the stream is busy, whatever the
 * threads' timing. */
static vgt_gate_t g_until_wait;
static CUresult (*g_event_synchronize)(CUevent);
static CUresult open_the_gate_and_wait(CUevent e) {
    vgt_gate_open(&g_until_wait);
    return g_event_synchronize(e);
}

VG_TEST(completion_is_learned_from_events_when_memory_runs_short) {
    /* With a limit that leaves no room to grow, B can only be served by the block A freed:
     * the allocator must record an event on A, wait for it, and reuse the block. (A is
     * still busy when the allocator first queries its event: else that query could find
     * A done, and no wait would be needed.) */
    vgt_init("limit=4M");
    CUstream a = vgt_stream(), b = vgt_stream();
    vgt_stream_seen(a);
    vgt_stream_seen(b);
    void *x, *y;
    CHECK_VG(vg_malloc(&x, 3 << 20, a));
    vgt_gate_close(&g_until_wait, a);
    CHECK_VG(vg_free(x, a));
    g_event_synchronize = vg__drv.cuEventSynchronize;
    vg__drv.cuEventSynchronize = open_the_gate_and_wait;
    vg_status_t st = vg_malloc(&y, 3 << 20, b);
    vg__drv.cuEventSynchronize = g_event_synchronize;
    vgt_gate_open(&g_until_wait); /* (in case it did not wait) */
    CHECK_VG(st);
    CHECK(y == x);
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.num_alloc_retries, 1);
    CHECK(s.num_sync_all_streams >= 1);
    CHECK_VG(vg_free(y, b));
    CHECK_VALID();
}

/* A prefetch loop as PyTorch runs it: a buffer made on a side stream, used on the main
 * stream (record_stream), freed; then the host waits for the device (a loss.item()).
 * Nothing tells vramguard that the streams synchronised, yet reserved memory must stay
 * at a few buffers, not grow by one per iteration: the free records the event that says
 * when the main stream is done with the buffer. (Recorded only by the next allocation
 * that needs memory, and queried at once, that event completes only if vgsim's worker
 * happens to take it within the moment: 56-96 MiB in 15 of 20 runs.) */
VG_TEST(a_record_stream_loop_does_not_grow) {
    vgt_init("");
    CUstream side = vgt_stream(), main_s = vgt_stream();
    const size_t n = 8 << 20;
    for (int i = 0; i < 200; i++) {
        void *x;
        CHECK_VG(vg_malloc(&x, n, side));
        CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)x, (unsigned char)i, n, side));
        CHECK_VG(vg_record_stream(x, main_s));
        CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)x, 1, 4096, main_s));
        CHECK_VG(vg_free(x, side));
        CHECK_VALID();
        CHECK_CU(vg__cuCtxSynchronize()); /* (the driver's) */
    }
    int64_t peak = vgt_stats().reserved_bytes[VG_POOL_ALL].peak;
    CHECK_MSG(peak <= 4 * (int64_t)n, "reserved memory grew to %lld MiB over 200 iterations of "
              "8 MiB", (long long)(peak >> 20));
    CHECK_VALID();
}

/* While one stream is all the heap has seen, a free joins its free neighbours whatever
 * their epochs, as in a single-stream allocator: here the freed block joins the unmapped
 * rest of the range, and the next, larger request starts at its address instead of
 * leaving it as a hole. A second stream arriving while that memory still waits on the
 * first gets the unmapped part of it (no kernel can have touched it), not a new range,
 * and the first stream's memory once its work completes. */
VG_TEST(one_stream_merges_every_free_neighbour_and_a_second_stream_waits) {
    vgt_init("");
    CUstream a = vgt_stream(), b = vgt_stream();
    const size_t n = 4 << 20;
    void *x, *y, *z, *w;
    CHECK_VG(vg_malloc(&x, n, a));
    CHECK_VG(vg_free(x, a));
    CHECK_CU(vg__cuStreamSynchronize(a));
    CHECK_VG(vg_stream_synchronized(a)); /* (x is complete: the next free is a new epoch) */
    CHECK_VG(vg_malloc(&y, n, a));
    CHECK(y == x);
    CHECK_VG(vg_free(y, a)); /* waits on A; joins the complete rest of the range */
    CHECK_VG(vg_malloc(&z, 2 * n, a));
    CHECK_MSG(z == x, "the freed block stayed a hole below the larger request");
    void *t, *u; /* the same in the small requests' range */
    CHECK_VG(vg_malloc(&t, 4096, a));
    vgt_gate_t g;
    vgt_gate_close(&g, a);
    CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)z, 0xAA, 2 * n, a));
    CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)t, 0xAA, 4096, a));
    CHECK_VG(vg_free(z, a)); /* queued work on A still uses them */
    CHECK_VG(vg_free(t, a));
    int64_t ranges = vgt_stats().segment[VG_POOL_ALL].current;
    CHECK_VG(vg_malloc(&w, n, b));
    CHECK_MSG((char *)w + n <= (char *)z || (char *)w >= (char *)z + 2 * n,
              "stream B got memory that A's queued work still uses");
    CHECK_VG(vg_malloc(&u, 4096, b));
    CHECK_MSG(u != t, "stream B got the small block A's queued work still uses");
    CHECK_MSG(vgt_stats().segment[VG_POOL_ALL].current == ranges,
              "stream B reserved a new address range instead of the unmapped rest of A's");
    CHECK_VG(vg_free(u, b));
    CHECK_VALID();
    vgt_gate_open(&g);
    CHECK_CU(vg__cuStreamSynchronize(a));
    CHECK_VG(vg_stream_synchronized(a));
    int64_t reserved = vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    void *v;
    CHECK_VG(vg_malloc(&v, 2 * n, b));
    CHECK_MSG(v == z, "stream B did not get A's completed memory");
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    CHECK_VG(vg_free(v, b));
    CHECK_VG(vg_free(w, b));
    CHECK_VALID();
}

/* Allocated on one stream, freed on another (cuMemFreeAsync on a copy stream, as
 * clean_program does), with no synchronisation vramguard sees. Each free lands beside the
 * last one; merged, the earlier frees waited for the latest one's event too, which was
 * never recorded before the next allocation, so every iteration mapped new memory (20
 * iterations of 1 MiB reserved 22 MiB; 200 of 2 MiB reserved 400). Now memory grows only
 * when the event recorded on the way to growing has not completed when it is first asked
 * (it is asked again at the next slow allocation, and the freeing stream's work is done
 * by then): at worst once per round through what is reserved, about 20 blocks in 200
 * iterations; 4 to 11 on vgsim, the more the slower the build. */
VG_TEST(frees_on_another_stream_are_reused_in_a_loop) {
    vgt_init("");
    CUstream alloc_s = vgt_stream(), free_s = vgt_stream();
    const size_t n = 2 << 20;
    for (int i = 0; i < 200; i++) {
        void *x;
        CHECK_VG(vg_malloc(&x, n, alloc_s));
        CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)x, (unsigned char)i, n, alloc_s));
        CHECK_CU(vg__cuStreamSynchronize(alloc_s)); /* (the driver's: vramguard is not told) */
        CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)x, 0, 4096, free_s));
        CHECK_VG(vg_free(x, free_s));
        CHECK_CU(vg__cuStreamSynchronize(free_s)); /* (the same) */
    }
    int64_t peak = vgt_stats().reserved_bytes[VG_POOL_ALL].peak;
    CHECK_MSG(peak <= 32 * (int64_t)n, "reserved memory grew to %lld MiB over 200 iterations "
              "of 2 MiB", (long long)(peak >> 20));
    CHECK_VALID();
}

/* Two neighbours freed on stream A in different epochs stay apart while they wait (the
 * test above); once A's work is known complete, a request of both their sizes takes them
 * joined instead of mapping new memory. */
VG_TEST(neighbours_freed_in_two_epochs_join_once_complete) {
    vgt_init("");
    CUstream a = vgt_stream(), b = vgt_stream();
    const size_t n = 4 << 20;
    void *x, *y, *z, *w, *big;
    CHECK_VG(vg_malloc(&x, n, a));
    CHECK_VG(vg_malloc(&y, n, a));
    CHECK_VG(vg_malloc(&z, n, a)); /* (stays live: y has no free neighbour above) */
    CHECK((char *)y == (char *)x + n);
    CHECK_VG(vg_free(x, a));
    CHECK_VG(vg_malloc(&w, 3 * n, b)); /* maps memory: records an event on A, a new epoch */
    CHECK_VG(vg_free(y, a));
    CHECK_VALID();
    CHECK_CU(vg__cuStreamSynchronize(a));
    CHECK_VG(vg_stream_synchronized(a));
    int64_t reserved = vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    CHECK_VG(vg_malloc(&big, 2 * n, a));
    CHECK_MSG(big == x, "the two freed neighbours were not joined for a request of both sizes");
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    CHECK_VG(vg_free(big, a));
    CHECK_VG(vg_free(z, a));
    CHECK_VG(vg_free(w, b));
    CHECK_VALID();
}

/* A block another stream used (record_stream) waits for that stream too. It comes back
 * once that stream's work is done, told (`told`) or learnt from its event before memory
 * grows. */
static void record_stream_reuse(bool told) {
    vgt_init("");
    CUstream a = vgt_stream(), b = vgt_stream();
    const size_t n = 2 << 20; /* (y maps new memory: B's event is recorded then) */
    void *x, *y, *z;
    CHECK_VG(vg_malloc(&x, n, a));
    CHECK_VG(vg_record_stream(x, b));
    vgt_gate_t g;
    vgt_gate_close(&g, b);
    CHECK_CU(vg__cuMemsetD8Async((CUdeviceptr)(uintptr_t)x, 0xAA, n, b)); /* B uses x */
    CHECK_VG(vg_free(x, a));
    CHECK_VG(vg_malloc(&y, n, a));
    CHECK_MSG(y != x, "A got a block that B still uses");
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.active_bytes[VG_POOL_ALL].current, 2 * (int64_t)n); /* x waits, y is live */
    CHECK_VALID();
    vgt_gate_open(&g);
    CHECK_CU(vg__cuStreamSynchronize(b));
    if (told)
        CHECK_VG(vg_stream_synchronized(b));
    int64_t reserved = vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    CHECK_VG(vg_malloc(&z, n, a));
    CHECK_MSG(z == x, "the block B's use held was not released once B's work completed");
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    CHECK_VG(vg_free(y, a));
    CHECK_VG(vg_free(z, a));
    CHECK_VALID();
}

VG_TEST(an_oom_beside_free_small_range_memory_says_so) {
    /* Small tensors spread over every page the limit allows, half of them freed: the free
     * memory lies in pages live small tensors share, which a larger request cannot use.
     * The explanation says so, and how to keep one range for every size. */
    vgt_init("limit=8M");
    void *p[70], *q;
    int n = 0;
    while (n < 70 && vg_malloc(&p[n], 100 << 10, NULL) == VG_OK)
        n++;
    CHECK(n >= 60);
    for (int i = 0; i < n; i += 2)
        CHECK_VG(vg_free(p[i], NULL));
    CHECK_EQ(vg_malloc(&q, 2 << 20, NULL), VG_ERR_OUT_OF_MEMORY);
    const char *e = vg_last_error();
    CHECK_CONTAINS(e, "of it lies in the range of small requests (up to 1.00 MiB), in pages "
                      "that live small allocations share");
    CHECK_CONTAINS(e, "small_max=0 keeps one range for every size");
    CHECK_VG(vg_malloc(&q, 512 << 10, NULL)); /* a small request still fits */
    CHECK_VG(vg_free(q, NULL));
    for (int i = 1; i < n; i += 2)
        CHECK_VG(vg_free(p[i], NULL));
    CHECK_VALID();
}

VG_TEST(record_stream_delays_reuse) { record_stream_reuse(true); }
VG_TEST(recorded_uses_that_completed_release_the_block_before_memory_grows) {
    record_stream_reuse(false);
}

VG_TEST(oom_over_limit_is_explained_and_disturbs_nothing) {
    vgt_init("limit=64M");
    void *p[3];
    for (int i = 0; i < 3; i++)
        CHECK_VG(vg_malloc(&p[i], 20 << 20, NULL));
    CHECK_CU(vg__cuMemsetD8((CUdeviceptr)(uintptr_t)p[0], 7, 20 << 20));
    void *q = (void *)1;
    CHECK_EQ(vg_malloc(&q, 20 << 20, NULL), VG_ERR_OUT_OF_MEMORY);
    CHECK(q == NULL);
    const char *e = vg_last_error();
    CHECK_CONTAINS(e, "out of memory: cannot allocate 20.00 MiB (20971520 bytes) on device 0");
    CHECK_CONTAINS(e, "vramguard's limit on this device: 64.00 MiB");
    CHECK_CONTAINS(e, "60.00 MiB allocated in 3 blocks");
    CHECK_CONTAINS(e, "the largest block that could be served now:");
    CHECK_CONTAINS(e, "why: serving it would take vramguard over its limit");
    CHECK_CONTAINS(e, "top holders by allocation site:");
    CHECK_CONTAINS(e, "60.00 MiB in 3 allocations from");
    CHECK_CONTAINS(e, "test_heap.c"); /* the site is symbolized to this file */
    CHECK_VALID();
    unsigned char h[4];
    CHECK_CU(vg__cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)p[0] + 100, 4));
    CHECK_EQ(h[0], 7);
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.num_ooms, 1);
    CHECK_VG(vg_free(p[2], NULL));
    CHECK_VG(vg_malloc(&q, 20 << 20, NULL)); /* room again */
    CHECK_VG(vg_free(q, NULL));
    CHECK_VG(vg_free(p[0], NULL));
    CHECK_VG(vg_free(p[1], NULL));
    CHECK_VALID();
}

VG_TEST(oom_larger_than_device) {
    vgt_init(""); /* VGSIM_MEMORY=16G in the test environment */
    void *keep, *q;
    CHECK_VG(vg_malloc(&keep, 4096, NULL));
    CHECK_EQ(vg_malloc(&q, 17ull << 30, NULL), VG_ERR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vg_last_error(), "the request is larger than the whole device (16.00 GiB)");
    CHECK_EQ(vg_malloc(&q, SIZE_MAX, NULL), VG_ERR_OUT_OF_MEMORY); /* absurd: no overflow */
    CHECK_CONTAINS(vg_last_error(), "larger than the whole device");
    CHECK_VALID();
    CHECK_VG(vg_free(keep, NULL));
}

VG_TEST(fraction_limit) {
    vgt_init("limit=0.25");
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.limit, 4ull << 30);
    void *p;
    CHECK_EQ(vg_malloc(&p, (4ull << 30) + (2 << 20), NULL), VG_ERR_OUT_OF_MEMORY);
    CHECK_CONTAINS(vg_last_error(), "larger than the limit");
    CHECK_VG(vg_set_memory_limit(0, 0));
    CHECK_VG(vg_malloc(&p, (4ull << 30) + (2 << 20), NULL));
    CHECK_VG(vg_free(p, NULL));
}

VG_TEST(empty_cache_returns_memory) {
    vgt_init("");
    size_t free0, free1, total;
    CHECK_CU(vg__cuMemGetInfo(&free0, &total));
    void *p[8];
    for (int i = 0; i < 8; i++)
        CHECK_VG(vg_malloc(&p[i], 100 << 20, NULL));
    for (int i = 0; i < 8; i++)
        CHECK_VG(vg_free(p[i], NULL));
    vg_stats_t s = vgt_stats();
    CHECK(s.reserved_bytes[VG_POOL_ALL].current >= 800 << 20);
    CHECK_VG(vg_empty_cache());
    s = vgt_stats();
    CHECK_EQ(s.reserved_bytes[VG_POOL_ALL].current, 0);
    CHECK(s.num_device_free > 0);
    CHECK_CU(vg__cuMemGetInfo(&free1, &total));
    CHECK_EQ(free1, free0); /* every byte went back to the driver */
    CHECK_VALID();
}

/* A5: a large request that grew the heap, of a size freed before (a tensor that comes
 * back every step), keeps its range. Freed, it does not merge with its neighbours, so a
 * larger request cannot swallow it and the next one of its size finds it whole, with no
 * new memory. */
VG_TEST(a_large_allocation_that_grew_the_heap_keeps_its_range) {
    vgt_init("slot_min=8M");
    void *l, *s, *big, *again, *first, *other;
    CHECK_VG(vg_malloc(&first, 16 << 20, NULL)); /* 16 MiB once, freed: a size that comes back */
    CHECK_VG(vg_free(first, NULL));
    CHECK_VG(vg_malloc(&other, 20 << 20, NULL)); /* (over its range: no slot, no 20 MiB freed) */
    CHECK_VG(vg_malloc(&l, 16 << 20, NULL)); /* new memory, a size freed before: a slot */
    CHECK_VG(vg_malloc(&s, 2 << 20, NULL));  /* right after it */
    CHECK_EQ((uintptr_t)s, (uintptr_t)l + (16 << 20));
    CHECK_VG(vg_free(l, NULL));
    CHECK_VG(vg_free(s, NULL));
    CHECK_VALID();                             /* (the two free blocks stay apart) */
    CHECK_VG(vg_malloc(&big, 18 << 20, NULL)); /* would fit l and s merged */
    CHECK_MSG(big != l, "a larger request took the slot and its neighbour together");
    int64_t reserved = vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    CHECK_VG(vg_malloc(&again, 16 << 20, NULL));
    CHECK_MSG(again == l, "the next 16 MiB request did not get the slot back");
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    CHECK_VG(vg_free(big, NULL));
    CHECK_VG(vg_free(again, NULL));
    CHECK_VG(vg_free(other, NULL));
    CHECK_VALID();
}

/* A5's slots are for sizes that come back. A cache grown by concatenation (each new copy
 * a little larger, the old one freed after) has none: were each copy a slot, no later copy
 * would fit a freed one and every copy would map new memory (4 layers of K and V growing
 * 64 KiB a token from 32 MiB, past slot_min at token 1,061 of 1,200: reserved grew to the
 * 16 GiB device, 15.3 times the peak allocated; 1.10 now). */
VG_TEST(a_cache_grown_by_concatenation_makes_no_slots) {
    vgt_init("slot_min=8M");
    void *k[2] = {0}, *v[2] = {0};
    for (int t = 0; t < 120; t++)
        vgt_grow_caches(k, v, 2, (8ull << 20) + (uint64_t)t * (256 << 10), 0, NULL);
    CHECK_VALID();
    vg_stats_t st = vgt_stats();
    uint64_t live = (uint64_t)st.allocated_bytes[VG_POOL_ALL].peak;
    uint64_t reserved = (uint64_t)st.reserved_bytes[VG_POOL_ALL].peak;
    CHECK_MSG(reserved <= live + live / 4, "reserved %llu MiB for %llu MiB allocated",
              (unsigned long long)(reserved >> 20), (unsigned long long)(live >> 20));
}

/* Without slots the same requests merge and the range is gone: the behaviour is the
 * option's, not an accident of placement. */
VG_TEST(slot_min_0_merges_as_before) {
    vgt_init("slot_min=0");
    void *l, *s, *big;
    CHECK_VG(vg_malloc(&l, 16 << 20, NULL));
    CHECK_VG(vg_malloc(&s, 2 << 20, NULL));
    CHECK_VG(vg_free(l, NULL));
    CHECK_VG(vg_free(s, NULL));
    CHECK_VG(vg_malloc(&big, 18 << 20, NULL));
    CHECK(big == l);
    CHECK_VG(vg_free(big, NULL));
    CHECK_VALID();
}

/* Smaller requests use a free slot's memory when nothing else mapped fits, rather than
 * mapping more: a slot is a preference, not a reservation. */
VG_TEST(a_free_slot_serves_smaller_requests_before_memory_grows) {
    vgt_init("slot_min=8M");
    void *l, *a, *b;
    CHECK_VG(vg_malloc(&l, 16 << 20, NULL));
    CHECK_VG(vg_free(l, NULL));
    int64_t reserved = vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    CHECK_VG(vg_malloc(&a, 2 << 20, NULL));
    CHECK_VG(vg_malloc(&b, 6 << 20, NULL));
    CHECK((uintptr_t)a >= (uintptr_t)l && (uintptr_t)a < (uintptr_t)l + (16 << 20));
    CHECK((uintptr_t)b >= (uintptr_t)l && (uintptr_t)b < (uintptr_t)l + (16 << 20));
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    CHECK_VALID();
    CHECK_VG(vg_free(a, NULL));
    CHECK_VG(vg_free(b, NULL));
    CHECK_VALID();
}

/* A small request (up to small_max) lands in its own address range, as in PyTorch's small
 * pool: a long-lived small tensor allocated while a large hole is free must not pin the
 * hole, or the next large tensor of the same size needs new memory (docs/decisions.md A6). */
static void small_request_in_a_large_hole(const char *opts, bool separate) {
    vgt_init(opts);
    void *a, *keep, *small, *b;
    CHECK_VG(vg_malloc(&a, 64 << 20, NULL));
    CHECK_VG(vg_malloc(&keep, 64 << 20, NULL)); /* bounds a's hole */
    CHECK_VG(vg_free(a, NULL));                  /* a hole of exactly 64 MiB */
    CHECK_VG(vg_malloc(&small, 4096, NULL));     /* optimizer state, a norm's weight ... */
    int64_t reserved = vgt_stats().reserved_bytes[VG_POOL_ALL].current;
    CHECK_VG(vg_malloc(&b, 64 << 20, NULL));
    if (separate) {
        CHECK((uintptr_t)small < (uintptr_t)a || (uintptr_t)small >= (uintptr_t)keep + (64 << 20));
        CHECK_MSG(b == a, "the 64 MiB hole did not serve the next 64 MiB tensor");
        CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, reserved);
    } else { /* one range for all: the small block sits in the hole, b needs more memory */
        CHECK(small == a);
        CHECK(vgt_stats().reserved_bytes[VG_POOL_ALL].current > reserved);
    }
    CHECK_VALID();
    CHECK_VG(vg_free(small, NULL));
    CHECK_VG(vg_free(b, NULL));
    CHECK_VG(vg_free(keep, NULL));
    CHECK_VALID();
}

VG_TEST(small_requests_do_not_pin_the_holes_of_large_ones) {
    small_request_in_a_large_hole("", true);
}

VG_TEST(small_max_0_puts_small_requests_in_the_holes) {
    small_request_in_a_large_hole("small_max=0", false);
}

/* When the small range cannot have a page (the limit is reached and no whole page is
 * idle), a small request takes a hole in mapped general memory rather than failing. */
VG_TEST(a_small_request_takes_general_memory_when_its_range_has_no_page) {
    vgt_init("limit=4M");
    void *big, *small;
    CHECK_VG(vg_malloc(&big, (4 << 20) - (256 << 10), NULL)); /* two pages, 256 KiB left */
    CHECK_VG(vg_malloc(&small, 64 << 10, NULL));
    CHECK_EQ((uintptr_t)small, (uintptr_t)big + (4 << 20) - (256 << 10));
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, 4 << 20);
    CHECK_EQ(vgt_stats().num_ooms, 0);
    CHECK_VG(vg_free(small, NULL));
    CHECK_VG(vg_free(big, NULL));
    CHECK_VALID();
}

VG_TEST(idle_pages_move_instead_of_failing) {
    /* Free memory must never be stranded by fragmentation (S6): under a limit that leaves
     * no room for new pages, the pages of a freed block that no longer fits are unmapped
     * and mapped where the new request fits. */
    vgt_init("limit=110M");
    void *a, *b, *c;
    CHECK_VG(vg_malloc(&a, 64 << 20, NULL));
    CHECK_VG(vg_malloc(&b, 2 << 20, NULL));
    CHECK_VG(vg_free(a, NULL));
    CHECK_VG(vg_stream_synchronized(NULL)); /* a's free is complete: its pages are idle */
    CHECK_VG(vg_malloc(&c, 100 << 20, NULL)); /* does not fit in a's 64 MiB hole */
    vg_stats_t s = vgt_stats();
    CHECK(s.reserved_bytes[VG_POOL_ALL].current <= 110 << 20);
    CHECK(s.num_device_free >= 20); /* pages were unmapped from the hole */
    CHECK_EQ(s.num_ooms, 0);
    CHECK_VALID();
    CHECK_VG(vg_free(b, NULL));
    CHECK_VG(vg_free(c, NULL));
    CHECK_VALID();
}

VG_TEST(fragmented_cuMemAlloc_segments_are_released_and_retried) {
    /* Without VMM, free memory split across segments is returned to the driver so that
     * one segment large enough can be made (PyTorch's retry). */
    vgt_init("vmm=off,limit=64M");
    void *p[3], *big;
    for (int i = 0; i < 3; i++)
        CHECK_VG(vg_malloc(&p[i], 20 << 20, NULL));
    for (int i = 0; i < 3; i++)
        CHECK_VG(vg_free(p[i], NULL));
    CHECK_VG(vg_malloc(&big, 50 << 20, NULL));
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.num_alloc_retries, 1);
    CHECK_EQ(s.segment[VG_POOL_ALL].current, 1);
    CHECK_VG(vg_free(big, NULL));
    CHECK_VALID();
}

VG_TEST(vmm_off_uses_cumemalloc_segments) {
    vgt_init("vmm=off");
    void *s1, *l1;
    CHECK_VG(vg_malloc(&s1, 4096, NULL));
    CHECK_VG(vg_malloc(&l1, 30 << 20, NULL));
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.segment[VG_POOL_ALL].current, 2);
    CHECK_EQ(s.reserved_bytes[VG_POOL_SMALL].current, 2 << 20);
    CHECK_EQ(s.reserved_bytes[VG_POOL_LARGE].current, 30 << 20);
    CHECK_VALID();
    CHECK_VG(vg_free(s1, NULL));
    CHECK_VG(vg_free(l1, NULL));
    CHECK_VG(vg_empty_cache());
    s = vgt_stats();
    CHECK_EQ(s.segment[VG_POOL_ALL].current, 0);
    CHECK_EQ(s.reserved_bytes[VG_POOL_ALL].current, 0);
    CHECK_VALID();
}

VG_TEST(vmm_on_without_driver_support_is_a_clear_error) {
    setenv("VGSIM_VMM", "0", 1);
    vgt_init("vmm=on");
    void *p;
    CHECK_EQ(vg_malloc(&p, 4096, NULL), VG_ERR_NOT_SUPPORTED);
    CHECK_CONTAINS(vg_last_error(), "vmm=on, but device 0 or its driver has no virtual memory");
}

VG_TEST(vmm_auto_falls_back_without_driver_support) {
    setenv("VGSIM_VMM", "0", 1);
    vgt_init("");
    void *p;
    CHECK_VG(vg_malloc(&p, 4096, NULL));
    CHECK_EQ(vgt_stats().reserved_bytes[VG_POOL_ALL].current, 2 << 20); /* a cuMemAlloc segment */
    CHECK_VG(vg_free(p, NULL));
    CHECK_VALID();
}

VG_TEST(stats_pools_and_peaks) {
    vgt_init("");
    void *small, *large;
    CHECK_VG(vg_malloc(&small, 1000, NULL));      /* 1024 B block, small pool */
    CHECK_VG(vg_malloc(&large, 3 << 20, NULL));   /* large pool */
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.allocated_bytes[VG_POOL_SMALL].current, 1024);
    CHECK_EQ(s.allocated_bytes[VG_POOL_LARGE].current, 3 << 20);
    CHECK_EQ(s.allocation[VG_POOL_SMALL].current, 1);
    CHECK_EQ(s.requested_bytes[VG_POOL_SMALL].current, 1000);
    CHECK_VG(vg_free(large, NULL));
    s = vgt_stats();
    CHECK_EQ(s.allocated_bytes[VG_POOL_ALL].peak, 1024 + (3 << 20));
    CHECK_EQ(s.allocated_bytes[VG_POOL_ALL].current, 1024);
    CHECK_VG(vg_reset_peak_stats(-1));
    s = vgt_stats();
    CHECK_EQ(s.allocated_bytes[VG_POOL_ALL].peak, 1024);
    CHECK_VG(vg_reset_accumulated_stats(-1));
    s = vgt_stats();
    CHECK_EQ(s.allocated_bytes[VG_POOL_ALL].allocated, 0);
    CHECK_EQ(s.num_device_alloc, 0);
    CHECK_VG(vg_free(small, NULL));
    char *j = vg_memory_stats_json(-1);
    CHECK(j != NULL);
    CHECK_CONTAINS(j, "\"allocated_bytes.all.current\":0");
    CHECK_CONTAINS(j, "\"reserved_bytes.large_pool.peak\":");
    CHECK_CONTAINS(j, "\"num_alloc_retries\":0");
    CHECK_CONTAINS(j, "\"oversize_allocations.current\":0");
    vg_free_string(j);
}

/* Reserved memory counts in the pool of the range its pages are mapped into: a small
 * request's page in the small pool (all reserved memory read "large pool" before, beside
 * a small pool with a segment and blocks), and a page moved between the ranges moves. */
VG_TEST(reserved_memory_counts_in_the_pool_its_pages_serve) {
    vgt_init("limit=6M");
    void *small, *large;
    CHECK_VG(vg_malloc(&small, 4000, NULL));
    CHECK_VG(vg_malloc(&large, 3 << 20, NULL));
    vg_stats_t s = vgt_stats();
    CHECK_EQ(s.reserved_bytes[VG_POOL_SMALL].current, 2 << 20);
    CHECK_EQ(s.reserved_bytes[VG_POOL_LARGE].current, 4 << 20);
    CHECK_EQ(s.reserved_bytes[VG_POOL_LARGE].freed, 0);
    char *sum = vg_memory_summary(-1);
    CHECK(sum != NULL);
    CHECK_CONTAINS(sum, "|       from small pool |   2048 KiB |   2048 KiB |   2048 KiB |      0 B   |");
    vg_free_string(sum);
    /* Under the limit, the small page's memory goes to a large request once it is idle. */
    CHECK_VG(vg_free(small, NULL));
    CHECK_VG(vg_free(large, NULL));
    CHECK_CU(vg__cuCtxSynchronize());
    CHECK_VG(vg_malloc(&large, 5 << 20, NULL));
    s = vgt_stats();
    CHECK_EQ(s.reserved_bytes[VG_POOL_ALL].current, 6 << 20);
    CHECK_EQ(s.reserved_bytes[VG_POOL_SMALL].current, 0);
    CHECK_EQ(s.reserved_bytes[VG_POOL_LARGE].current, 6 << 20);
    CHECK_VALID();
    CHECK_VG(vg_free(large, NULL));
}

VG_TEST(summary_has_pytorch_layout) {
    vgt_init("");
    void *p;
    CHECK_VG(vg_malloc(&p, 1 << 20, NULL));
    char *sum = vg_memory_summary(-1);
    CHECK(sum != NULL);
    /* 47 lines of 77 characters, as torch.cuda.memory_summary() prints. */
    int lines = 0;
    for (char *l = sum, *nl; (nl = strchr(l, '\n')); l = nl + 1, lines++)
        CHECK_MSG(nl - l == 77, "line %d is %d characters: '%.*s'", lines + 1, (int)(nl - l),
                  (int)(nl - l), l);
    CHECK_EQ(lines, 47);
    CHECK_CONTAINS(sum, "|                vramguard CUDA memory summary, device ID 0                 |\n");
    CHECK_CONTAINS(sum, "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n");
    CHECK_CONTAINS(sum, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");
    CHECK_CONTAINS(sum, "| Allocated memory      |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |\n");
    CHECK_CONTAINS(sum, "|       from small pool |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |\n");
    CHECK_CONTAINS(sum, "| Allocations           |       1    |       1    |       1    |       0    |\n");
    CHECK_CONTAINS(sum, "| Oversize GPU segments |       0    |       0    |       0    |       0    |\n");
    CHECK_CONTAINS(sum, "| Non-releasable memory |");
    CHECK_CONTAINS(sum, "| GPU reserved memory   |   2048 KiB |");
    vg_free_string(sum);
    CHECK_VG(vg_free(p, NULL));
}

/* ---------------------------------------------------------------------------------------
 * Bad frees: reported, never corrupting (S8)
 * ------------------------------------------------------------------------------------- */

VG_TEST(double_free_is_reported_with_sites) {
    vgt_init("");
    void *p, *q;
    CHECK_VG(vg_malloc(&p, 4000, NULL));
    CHECK_VG(vg_free(p, NULL));
    CHECK_EQ(vg_free(p, NULL), VG_ERR_DOUBLE_FREE);
    CHECK_CONTAINS(vg_last_error(), "double free of");
    CHECK_CONTAINS(vg_last_error(), "a 4000-byte allocation (#1)");
    CHECK_CONTAINS(vg_last_error(), "the allocation was made at:");
    CHECK_CONTAINS(vg_last_error(), "test_heap.c");
    CHECK_VALID();
    CHECK_VG(vg_malloc(&q, 4000, NULL)); /* the allocator still works, and reuses it */
    CHECK(q == p);
    CHECK_VG(vg_free(q, NULL));
    CHECK_VALID();
}

VG_TEST(invalid_and_interior_frees) {
    vgt_init("");
    void *p;
    CHECK_VG(vg_malloc(&p, 8192, NULL));
    CHECK_EQ(vg_free((char *)p + 100, NULL), VG_ERR_INTERIOR_FREE);
    CHECK_CONTAINS(vg_last_error(), "it points 100 bytes into a 8192-byte allocation");
    int local;
    CHECK_EQ(vg_free(&local, NULL), VG_ERR_INVALID_FREE);
    CHECK_CONTAINS(vg_last_error(), "vramguard never allocated this pointer");
    CHECK_VALID();
    CHECK_EQ(vgt_stats().allocation[VG_POOL_ALL].current, 1);
    CHECK_VG(vg_free(p, NULL));
    CHECK_VALID();
}

VG_TEST(free_on_the_wrong_device) {
    setenv("VGSIM_DEVICES", "2", 1);
    vgt_init("");
    void *p;
    CHECK_VG(vg_malloc_device(&p, 4096, 1, NULL));
    CHECK_EQ(vg_free_device(p, 0, NULL), VG_ERR_WRONG_DEVICE);
    CHECK_CONTAINS(vg_last_error(), "on device 0, but it is a 4096-byte allocation of device 1");
    CHECK_VALID();
    CHECK_VG(vg_free_device(p, 1, NULL));
    CHECK_VALID();
}

/* vgsim's record of the devices granted access to the page at p (a case that asks is
 * skipped on a real driver, which keeps no such record). */
static unsigned access_devices(const void *p) {
    unsigned (*f)(unsigned long long) =
        (unsigned (*)(unsigned long long))dlsym(vg__drv.handle, "vgsim_access_devices");
    if (!f)
        vgt_skip("vgsim only: the driver does not say which devices a mapping names");
    return f((unsigned long long)(uintptr_t)p);
}

/* docs/decisions.md A11: a peer device's kernels may read what the program allocates once
 * it enables peer access, as they may read cuMemAlloc memory; pages mapped through the
 * VMM calls need an access entry for that device, so every device that can reach the
 * memory gets one, small and large allocations alike. */
VG_TEST(peer_devices_can_reach_the_pages) {
    setenv("VGSIM_DEVICES", "3", 1);
    vgt_init("vmm=on");
    void *small, *large;
    CHECK_VG(vg_malloc_device(&small, 4096, 1, NULL));
    CHECK_VG(vg_malloc_device(&large, 64 << 20, 1, NULL));
    CHECK_EQ(access_devices(small), 7u);
    CHECK_EQ(access_devices(large), 7u);
    CHECK_EQ(access_devices((char *)large + (63 << 20)), 7u);
    CHECK_VG(vg_free_device(small, 1, NULL));
    CHECK_VG(vg_free_device(large, 1, NULL));
    CHECK_VALID();
}

/* Without peer-to-peer support (VGSIM_P2P=0: cuDeviceCanAccessPeer says no), only the
 * device itself; and if the driver refuses a peer's entry anyway, the pages are mapped
 * for the device alone from then on, and the allocation succeeds. */
static CUresult (*g_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult refuse_peers(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t count) {
    return count > 1 ? CUDA_ERROR_INVALID_DEVICE : g_set_access(p, n, d, count);
}

VG_TEST(without_peer_to_peer_only_the_device_reaches_the_pages) {
    setenv("VGSIM_DEVICES", "2", 1);
    setenv("VGSIM_P2P", "0", 1);
    vgt_init("vmm=on");
    void *p;
    CHECK_VG(vg_malloc_device(&p, 64 << 20, 1, NULL));
    CHECK_EQ(access_devices(p), 2u);
    CHECK_VG(vg_free_device(p, 1, NULL));
}

VG_TEST(a_driver_refusing_the_peers_leaves_the_device_its_pages) {
    setenv("VGSIM_DEVICES", "2", 1);
    vgt_init("vmm=on");
    g_set_access = vg__drv.cuMemSetAccess;
    vg__drv.cuMemSetAccess = refuse_peers;
    void *p, *q;
    CHECK_VG(vg_malloc_device(&p, 64 << 20, 0, NULL));
    CHECK_EQ(access_devices(p), 1u);
    CHECK_VG(vg_malloc_device(&q, 64 << 20, 0, NULL)); /* (asks for the device alone now) */
    CHECK_EQ(access_devices(q), 1u);
    vg__drv.cuMemSetAccess = g_set_access;
    CHECK_VG(vg_free_device(p, 0, NULL));
    CHECK_VG(vg_free_device(q, 0, NULL));
    CHECK_VALID();
}

VG_TEST(a_context_synchronisation_completes_only_that_context) {
    /* cudaDeviceSynchronize on device 0 says nothing about device 1's streams: memory
     * freed on a busy stream of device 1 must not go to another stream of device 1. */
    setenv("VGSIM_DEVICES", "2", 1);
    vgt_init("");
    CUdevice d0, d1;
    CUcontext c0, c1;
    CHECK_CU(vg__cuDeviceGet(&d0, 0));
    CHECK_CU(vg__cuDeviceGet(&d1, 1));
    CHECK_CU(vg__cuDevicePrimaryCtxRetain(&c0, d0));
    CHECK_CU(vg__cuDevicePrimaryCtxRetain(&c1, d1));
    CHECK_CU(vg__cuCtxPushCurrent(c1));
    CUstream a, b;
    CHECK_CU(vg__cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK_CU(vg__cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    vgt_gate_t busy;
    vgt_gate_close(&busy, a); /* (a stays busy until the test opens it) */
    void *p, *q;
    CHECK_VG(vg_malloc_device(&p, 1 << 20, 1, a));
    CHECK_VG(vg_free_device(p, 1, a)); /* stream a may still use it */
    vg_sync_t t;
    vg__sync_begin(&t, true, c0, NULL);
    vg__sync_end(&t, true);
    CHECK_VG(vg_malloc_device(&q, 1 << 20, 1, b));
    CHECK(q != p);
    CHECK_VG(vg_free_device(q, 1, b));
    vgt_gate_open(&busy);
    vg__sync_begin(&t, true, c1, NULL);
    CHECK_CU(vg__cuCtxSynchronize()); /* c1 is current */
    vg__sync_end(&t, true);
    CHECK_VG(vg_forget_stream(a));
    CHECK_VG(vg_forget_stream(b));
    CHECK_CU(vg__cuStreamDestroy(a));
    CHECK_CU(vg__cuStreamDestroy(b));
    CUcontext popped;
    CHECK_CU(vg__cuCtxPopCurrent(&popped));
    CHECK_VALID();
}

static void *handle_from_another_thread(void *arg) {
    return (void *)vg__stream_handle_here((const vg_stream_t *)arg);
}

VG_TEST(guard_work_for_another_threads_per_thread_stream_goes_on_the_legacy_stream) {
    /* Only its thread can name a per-thread default stream: work another thread queues
     * after it (guard mode's poison, a quarantine exit) goes on the legacy stream, which
     * every per-thread stream synchronises with. Before, it went on the calling thread's
     * own per-thread stream, unordered, and a kernel still writing the freed block
     * overwrote the poison: a false "write to freed memory" (random_clean with threads). */
    vgt_init("");
    vg_heap_t *h;
    CHECK_VG(vg__heap_current(&h));
    pthread_mutex_lock(&h->lock);
    vg_stream_t *pt = vg__heap_stream(h, CU_STREAM_PER_THREAD);
    vg_stream_t *legacy = vg__heap_stream(h, NULL);
    pthread_mutex_unlock(&h->lock);
    CHECK(pt != NULL && legacy != NULL);
    CHECK(vg__stream_handle_here(pt) == CU_STREAM_PER_THREAD); /* its own thread */
    CHECK(vg__stream_handle_here(legacy) == NULL);
    pthread_t t;
    void *there = (void *)1;
    CHECK(pthread_create(&t, NULL, handle_from_another_thread, pt) == 0);
    CHECK(pthread_join(t, &there) == 0);
    CHECK(there == NULL);
}

VG_TEST(a_synchronisation_completes_what_was_freed_before_it_began_only) {
    /* The interposer marks a program's synchronisation when it begins: a free another
     * thread makes while it waits (its kernel queued after the wait began) stays waiting
     * on its stream; what was freed before is any stream's once the wait returns. */
    vgt_init("");
    CUstream a = vgt_stream(), b = vgt_stream();
    vgt_stream_seen(a);
    vgt_stream_seen(b);
    void *before, *during, *q;
    CHECK_VG(vg_malloc(&before, 1 << 20, a));
    CHECK_VG(vg_malloc(&during, 4 << 20, a));
    CHECK_VG(vg_free(before, a));
    vg_sync_t t;
    vg__sync_begin(&t, false, NULL, a);
    vgt_gate_t gate;
    vgt_gate_close(&gate, a); /* work queued after the wait began */
    CHECK_VG(vg_free(during, a));
    vg__sync_end(&t, true);
    CHECK_VG(vg_malloc(&q, 4 << 20, b));
    CHECK(q != during); /* stream a may still use it */
    CHECK_VG(vg_free(q, b));
    CHECK_VG(vg_malloc(&q, 1 << 20, b));
    CHECK(q == before);
    CHECK_VG(vg_free(q, b));
    /* A synchronisation that failed completes nothing. */
    void *r;
    CHECK_VG(vg_malloc(&r, 2 << 20, a));
    CHECK_VG(vg_free(r, a));
    vg__sync_begin(&t, true, NULL, NULL);
    vg__sync_end(&t, false);
    CHECK_VG(vg_malloc(&q, 2 << 20, b));
    CHECK(q != r);
    CHECK_VG(vg_free(q, b));
    vgt_gate_open(&gate);
    CHECK_CU(vg__cuCtxSynchronize());
    CHECK_VG(vg_forget_stream(a));
    CHECK_VG(vg_forget_stream(b));
    CHECK_CU(vg__cuStreamDestroy(a));
    CHECK_CU(vg__cuStreamDestroy(b));
    CHECK_VALID();
}

VG_TEST(unknown_device_is_an_error) {
    vgt_init("");
    void *p;
    CHECK_EQ(vg_malloc_device(&p, 4096, 5, NULL), VG_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(vg_last_error(), "device 5 does not exist (1 device)");
}

VG_TEST(record_stream_of_unknown_pointer) {
    vgt_init("");
    int x;
    CHECK_EQ(vg_record_stream(&x, NULL), VG_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(vg_last_error(), "is not a live vramguard allocation");
}

VG_TEST(second_init_with_other_options_is_refused) {
    vgt_init("");
    CHECK_EQ(vg_init("mode=guard"), VG_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(vg_last_error(), "already initialised with other options");
}
