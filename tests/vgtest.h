/* vgtest.h — helpers for tests that run vramguard's core on vgsim.
 *
 * Tests link the core's objects and talk to vgsim through the driver layer (vg__cu*), so
 * they can also build streams, gates and kernels around the allocator.
 */
#ifndef VG_TESTS_VGTEST_H
#define VG_TESTS_VGTEST_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/heap.h"
#include "driver/driver.h"
#include "harness.h"
#include "vramguard.h"

/* Built with AddressSanitizer or ThreadSanitizer: long random runs do a third of their
 * steps there (every check still runs; the sanitizers look for errors, not volume), so
 * that the whole suite stays within CI's time. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VGT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VGT_SANITIZED 1
#endif
#endif
#ifndef VGT_SANITIZED
#define VGT_SANITIZED 0
#endif
#define VGT_STEPS(n) (VGT_SANITIZED ? (n) / 3 : (n))

#ifndef VG_TEST_VGSIM_LIB
#error "VG_TEST_VGSIM_LIB must name vgsim's libcuda.so.1"
#endif

/* Initialise vramguard on vgsim with extra options ("" for none) and make device 0's
 * primary context current. VGT_DRIVER=libcuda.so.1 runs the same case on a real GPU
 * (docs/gpu-validation.md); CTest never sets it. */
static inline void vgt_init(const char *extra) {
    char opts[2048];
    const char *drv = getenv("VGT_DRIVER");
    snprintf(opts, sizeof opts, "driver=%s%s%s", drv && *drv ? drv : VG_TEST_VGSIM_LIB,
             extra && *extra ? "," : "", extra ? extra : "");
    vg_status_t st = vg_init(opts);
    CHECK_MSG(st == VG_OK, "vg_init(%s): %s", opts, vg_last_error());
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(vg__cuDeviceGet(&dev, 0));
    CHECK_CU(vg__cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(vg__cuCtxSetCurrent(ctx));
}

#define CHECK_VG(call)                                                                      \
    do {                                                                                    \
        vg_status_t vgt_st = (call);                                                        \
        CHECK_MSG(vgt_st == VG_OK, "%s: %s (%s)", #call, vg_strerror(vgt_st), vg_last_error()); \
    } while (0)

#define CHECK_VALID() CHECK_VG(vg_validate())

static inline vg_stats_t vgt_stats(void) {
    vg_stats_t s = {.size = sizeof s};
    CHECK_VG(vg_get_stats(-1, &s));
    return s;
}

/* One token of a generation loop whose caches grow by concatenation: each of `layers`
 * layers gets new K and V caches of `bytes` (k[i], v[i]), the old ones freed after, as
 * torch.cat does; then a temporary of `tmp` bytes (0: none) made and freed. */
static inline void vgt_grow_caches(void **k, void **v, int layers, uint64_t bytes,
                                   uint64_t tmp, CUstream s) {
    for (int i = 0; i < layers; i++) {
        void *nk, *nv, *t;
        CHECK_VG(vg_malloc(&nk, bytes, s));
        CHECK_VG(vg_malloc(&nv, bytes, s));
        if (k[i])
            CHECK_VG(vg_free(k[i], s));
        if (v[i])
            CHECK_VG(vg_free(v[i], s));
        k[i] = nk, v[i] = nv;
        if (tmp) {
            CHECK_VG(vg_malloc(&t, tmp, s));
            CHECK_VG(vg_free(t, s));
        }
    }
}

/* A gate: a host function that holds its stream until the test opens it. */
typedef struct vgt_gate {
    pthread_mutex_t m;
    pthread_cond_t c;
    int open;
} vgt_gate_t;

static void vgt_gate_fn(void *arg) {
    vgt_gate_t *g = arg;
    pthread_mutex_lock(&g->m);
    while (!g->open)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

static inline void vgt_gate_close(vgt_gate_t *g, CUstream s) {
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->c, NULL);
    g->open = 0;
    CHECK_CU(vg__cuLaunchHostFunc(s, vgt_gate_fn, g));
}

static inline void vgt_gate_open(vgt_gate_t *g) {
    pthread_mutex_lock(&g->m);
    g->open = 1;
    pthread_cond_broadcast(&g->c);
    pthread_mutex_unlock(&g->m);
}

/* Fail the test (exit status 3, naming `what`) if it still runs `seconds` from now: for a
 * call that must not hang. vgt_deadline(0, NULL) lifts it. */
static const char *vgt_deadline_what __attribute__((unused));
static inline void vgt_deadline_hit(int sig) {
    (void)sig;
    const char *parts[] = {"FAIL: ", vgt_deadline_what, " did not return in time\n"};
    for (int i = 0; i < 3; i++) {
        ssize_t w = write(2, parts[i], strlen(parts[i]));
        (void)w;
    }
    _exit(3);
}
static inline void vgt_deadline(unsigned seconds, const char *what) {
    vgt_deadline_what = what;
    signal(SIGALRM, vgt_deadline_hit);
    alarm(seconds);
}

static inline CUstream vgt_stream(void) {
    CUstream s;
    CHECK_CU(vg__cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

/* Let the allocator know stream `s`, as its first allocation on it would, without
 * allocating. A heap that has seen one stream only merges every free neighbour (heap.c);
 * tests of how several streams share memory show each stream to it first, as a program
 * that uses them from the start would. */
static inline void vgt_stream_seen(CUstream s) {
    vg_heap_t *h;
    CHECK_MSG(vg__heap_current(&h) == VG_OK, "no heap: %s", vg_last_error());
    pthread_mutex_lock(&h->lock);
    vg_stream_t *st = vg__heap_stream(h, s);
    pthread_mutex_unlock(&h->lock);
    CHECK(st != NULL);
}

#endif /* VG_TESTS_VGTEST_H */
