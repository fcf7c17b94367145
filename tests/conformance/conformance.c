/* conformance.c — driver-API conformance suite: what vgsim must do the way a GPU does.
 *
 * Written against the CUDA driver API only. The same source builds against the toolkit's
 * <cuda.h> and libcuda stub (then runs on a real GPU, or on vgsim with
 * LD_LIBRARY_PATH=<vgsim dir>), or without the toolkit against vgsim_cuda.h.
 *
 * Ordering is made observable with gates, never sleeps: a host function that blocks its
 * stream until the test opens the gate, so "not yet done" is a certainty, not a race.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "conformance.h"
#include "kernels_ptx.h" /* generated: const char cf_kernels_ptx[] */

/* ---------------------------------------------------------------------------------------
 * Set-up: a context, the kernels, and host twins of the kernels on vgsim
 * ------------------------------------------------------------------------------------- */

typedef struct vgsim_launch {
    unsigned int grid[3], block[3], shared_mem;
    int nparams;
    void *params[32];
} vgsim_launch_t;
typedef int (*register_fn)(const char *, void (*)(const vgsim_launch_t *));

static void host_store_u32(const vgsim_launch_t *l) {
    unsigned *p = *(unsigned **)l->params[0];
    *p = *(unsigned *)l->params[1];
}
static void host_fill_u32(const vgsim_launch_t *l) {
    unsigned *p = *(unsigned **)l->params[0];
    unsigned v = *(unsigned *)l->params[1];
    unsigned long long n = *(unsigned long long *)l->params[2];
    for (unsigned long long i = 0; i < n; i++)
        p[i] = v;
}
static void host_add_u32(const vgsim_launch_t *l) {
    unsigned *p = *(unsigned **)l->params[0];
    unsigned v = *(unsigned *)l->params[1];
    unsigned long long n = *(unsigned long long *)l->params[2];
    for (unsigned long long i = 0; i < n; i++)
        p[i] += v;
}

CUcontext g_ctx;
static CUmodule g_mod;
static CUfunction k_store, k_fill, k_add;
int g_on_vgsim;

void setup(void) {
    register_fn reg = (register_fn)dlsym(RTLD_DEFAULT, "vgsim_register_kernel");
    if (reg) {
        g_on_vgsim = 1;
        reg("cf_store_u32", host_store_u32);
        reg("cf_fill_u32", host_fill_u32);
        reg("cf_add_u32", host_add_u32);
    }
    CHECK_CU(cuInit(0));
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&g_ctx, dev));
    CHECK_CU(cuCtxSetCurrent(g_ctx));
    CHECK_CU(cuModuleLoadData(&g_mod, cf_kernels_ptx));
    CHECK_CU(cuModuleGetFunction(&k_store, g_mod, "cf_store_u32"));
    CHECK_CU(cuModuleGetFunction(&k_fill, g_mod, "cf_fill_u32"));
    CHECK_CU(cuModuleGetFunction(&k_add, g_mod, "cf_add_u32"));
}

CUresult launch_store(CUstream s, CUdeviceptr p, unsigned v) {
    void *args[] = {&p, &v};
    return cuLaunchKernel(k_store, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}
CUresult launch_fill(CUstream s, CUdeviceptr p, unsigned v, unsigned long long n) {
    void *args[] = {&p, &v, &n};
    return cuLaunchKernel(k_fill, 64, 1, 1, 128, 1, 1, 0, s, args, NULL);
}
CUresult launch_add(CUstream s, CUdeviceptr p, unsigned v, unsigned long long n) {
    void *args[] = {&p, &v, &n};
    return cuLaunchKernel(k_add, 64, 1, 1, 128, 1, 1, 0, s, args, NULL);
}

void gate_init(gate_t *g) {
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->c, NULL);
    g->open = g->reached = 0;
}
void CUDA_CB gate_fn(void *arg) {
    gate_t *g = arg;
    pthread_mutex_lock(&g->m);
    g->reached = 1;
    pthread_cond_broadcast(&g->c);
    while (!g->open)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}
void gate_open(gate_t *g) {
    pthread_mutex_lock(&g->m);
    g->open = 1;
    pthread_cond_broadcast(&g->c);
    pthread_mutex_unlock(&g->m);
}
/* Wait until the stream has reached the gate (everything before it is done). */
void gate_wait_reached(gate_t *g) {
    pthread_mutex_lock(&g->m);
    while (!g->reached)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

/* A negative property ("this stream cannot have run yet") holds only if it holds for a
 * while: poll the stream for `ms` milliseconds while its gate is shut and fail the moment
 * it completes. A correct implementation costs the test `ms`; a wrong one is caught as
 * soon as its worker runs, instead of only when the scheduler happens to be slow. */
void expect_blocked(CUstream s, int ms, const char *file, int line) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        CUresult r = cuStreamQuery(s);
        if (r != CUDA_ERROR_NOT_READY)
            vgt_fail(file, line, "the stream completed (%d) while it should be waiting", r);
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* ---------------------------------------------------------------------------------------
 * Devices and contexts
 * ------------------------------------------------------------------------------------- */

VG_TEST(device_queries) {
    setup();
    int n = 0, v = 0;
    CHECK_CU(cuDeviceGetCount(&n));
    CHECK(n >= 1);
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU_EQ(cuDeviceGet(&dev, n), CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cuDeviceGet(&dev, 0));
    char name[128];
    CHECK_CU(cuDeviceGetName(name, sizeof name, dev));
    CHECK(strlen(name) > 0);
    size_t total = 0, free_b = 0, total2 = 0;
    CHECK_CU(cuDeviceTotalMem(&total, dev));
    CHECK(total >= (256u << 20));
    CHECK_CU(cuMemGetInfo(&free_b, &total2));
    CHECK_EQ(total, total2);
    CHECK(free_b <= total);
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
    CHECK_EQ(v, 32);
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(v >= 7);
    int ver = 0;
    CHECK_CU(cuDriverGetVersion(&ver));
    CHECK(ver >= 12000);
}

VG_TEST(context_current_and_device) {
    setup();
    CUcontext cur = NULL;
    CHECK_CU(cuCtxGetCurrent(&cur));
    CHECK(cur == g_ctx);
    CUdevice d = -1;
    CHECK_CU(cuCtxGetDevice(&d));
    CHECK_EQ(d, 0);
    CHECK_CU(cuCtxPushCurrent(g_ctx));
    CUcontext popped = NULL;
    CHECK_CU(cuCtxPopCurrent(&popped));
    CHECK(popped == g_ctx);
    CHECK_CU(cuCtxSynchronize());
}

VG_TEST(error_names) {
    const char *s = NULL;
    CHECK_CU(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    CHECK_STREQ(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_CU(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK_STREQ(s, "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_CU(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strlen(s) > 0);
}

VG_TEST(get_proc_address) {
    setup();
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    CHECK_CU(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CHECK_EQ(q, CU_GET_PROC_ADDRESS_SUCCESS);
    CUdeviceptr p = 0;
    CHECK_CU(((CUresult(*)(CUdeviceptr *, size_t))fn)(&p, 4096));
    CHECK(p != 0);
    CHECK_CU(cuMemFree(p));
    /* An unknown name: CUDA_SUCCESS from driver 580, with no function and the status. */
    fn = (void *)&fn;
    CHECK_CU(cuGetProcAddress("cuNoSuchFunction", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CHECK(fn == NULL);
    CHECK_EQ(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    /* At 13000 the driver gives the newest version of a name, which is not always the one
     * cuda.h maps the name to: cuCtxGetDevice is cuCtxGetDevice_v2(CUdevice *, CUcontext). */
    CHECK_CU(cuGetProcAddress("cuCtxGetDevice", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CHECK(fn != NULL && fn != (void *)&cuCtxGetDevice);
    CHECK_CU(cuGetProcAddress("cuCtxGetDevice", &fn, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CHECK(fn == (void *)&cuCtxGetDevice);
}

/* ---------------------------------------------------------------------------------------
 * Memory, copies, sets
 * ------------------------------------------------------------------------------------- */

VG_TEST(alloc_copy_roundtrip) {
    setup();
    enum { N = 1 << 16 };
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, N * sizeof(unsigned)));
    CHECK_EQ(d % 256, 0);
    unsigned *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    for (unsigned i = 0; i < N; i++)
        h[i] = i * 2654435761u;
    CHECK_CU(cuMemcpyHtoD(d, h, N * sizeof *h));
    CHECK_CU(cuMemcpyDtoH(back, d, N * sizeof *back));
    CHECK(memcmp(h, back, N * sizeof *h) == 0);
    CUdeviceptr base;
    size_t size;
    CHECK_CU(cuMemGetAddressRange(&base, &size, d + 100));
    CHECK(base == d);
    CHECK(size >= N * sizeof(unsigned));
    unsigned type = 0;
    CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    CHECK_EQ(type, CU_MEMORYTYPE_DEVICE);
    CHECK_CU(cuMemFree(d));
    free(h);
    free(back);
}

VG_TEST(memset_and_dtod) {
    setup();
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc(&a, 4096));
    CHECK_CU(cuMemAlloc(&b, 4096));
    CHECK_CU(cuMemsetD8(a, 0x5a, 4096));
    CHECK_CU(cuMemsetD32(a + 1024, 0xdeadbeefu, 16));
    CHECK_CU(cuMemcpyDtoD(b, a, 4096));
    unsigned char h[4096];
    CHECK_CU(cuMemcpyDtoH(h, b, sizeof h));
    CHECK_EQ(h[0], 0x5a);
    CHECK_EQ(h[4095], 0x5a);
    unsigned w;
    memcpy(&w, h + 1024 + 60, 4);
    CHECK_EQ(w, 0xdeadbeefu);
    CHECK_EQ(h[1024 + 64], 0x5a);
    CHECK_CU_EQ(cuMemsetD32(a + 2, 0, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
    CHECK_CU(cuMemFree(a));
    CHECK_CU(cuMemFree(b));
}

VG_TEST(copy_to_freed_memory_is_rejected) {
    setup();
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 1 << 20));
    CHECK_CU(cuMemFree(d));
    char h[64] = {0};
    CHECK_CU_EQ(cuMemcpyHtoD(d, h, sizeof h), CUDA_ERROR_INVALID_VALUE);
    /* An invalid argument is not sticky: the context still works. */
    CUdeviceptr e;
    CHECK_CU(cuMemAlloc(&e, 4096));
    CHECK_CU(cuMemcpyHtoD(e, h, sizeof h));
    CHECK_CU(cuMemFree(e));
}

VG_TEST(oom_at_device_size) {
    setup();
    size_t total;
    CUdevice dev;
    CHECK_CU(cuCtxGetDevice(&dev));
    CHECK_CU(cuDeviceTotalMem(&total, dev));
    CUdeviceptr keep, too_big = 0;
    CHECK_CU(cuMemAlloc(&keep, 1 << 20));
    CHECK_CU(cuMemsetD8(keep, 0x11, 1 << 20));
    CHECK_CU_EQ(cuMemAlloc(&too_big, total + (64u << 20)), CUDA_ERROR_OUT_OF_MEMORY);
    /* Nothing else is disturbed: the context works and the old allocation holds its data. */
    unsigned char h[16];
    CHECK_CU(cuMemcpyDtoH(h, keep + 1000, sizeof h));
    CHECK_EQ(h[0], 0x11);
    CHECK_CU(cuMemFree(keep));
}

VG_TEST(oom_fills_then_recovers) {
    setup();
    size_t free_b, total;
    CHECK_CU(cuMemGetInfo(&free_b, &total));
    if (total > (64ull << 30) && !g_on_vgsim)
        vgt_skip("device too large to fill quickly");
    /* Fill in 1/8ths of the device until it refuses; then free one and retry. */
    size_t chunk = total / 8;
    CUdeviceptr p[16];
    int n = 0;
    CUresult r = CUDA_SUCCESS;
    while (n < 16 && (r = cuMemAlloc(&p[n], chunk)) == CUDA_SUCCESS)
        n++;
    CHECK_CU_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(n >= 6 && n <= 8);
    CHECK_CU(cuMemFree(p[--n]));
    CHECK_CU(cuMemAlloc(&p[n], chunk));
    n++;
    while (n > 0)
        CHECK_CU(cuMemFree(p[--n]));
}

VG_TEST(pinned_host_memory) {
    setup();
    void *h = NULL;
    CHECK_CU(cuMemHostAlloc(&h, 1 << 16, CU_MEMHOSTALLOC_PORTABLE));
    unsigned type = 0;
    CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h));
    CHECK_EQ(type, CU_MEMORYTYPE_HOST);
    CUdeviceptr dp;
    CHECK_CU(cuMemHostGetDevicePointer(&dp, h, 0));
    CHECK(dp != 0);
    CHECK_CU(cuMemFreeHost(h));
    void *h2 = NULL;
    CHECK_CU(cuMemAllocHost(&h2, 4096));
    CHECK_CU(cuMemFreeHost(h2));
    char *reg = aligned_alloc(4096, 1 << 16);
    CHECK_CU(cuMemHostRegister(reg, 1 << 16, 0));
    CHECK_CU_EQ(cuMemHostRegister(reg, 1 << 16, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_CU(cuMemHostUnregister(reg));
    CHECK_CU_EQ(cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(reg);
}

/* ---------------------------------------------------------------------------------------
 * Streams and ordering
 * ------------------------------------------------------------------------------------- */

VG_TEST(fifo_order_10000_ops) {
    setup();
    enum { N = 10000 };
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr cell;
    CHECK_CU(cuMemAlloc(&cell, 4));
    unsigned *out = NULL;
    CHECK_CU(cuMemHostAlloc((void **)&out, N * sizeof *out, 0));
    memset(out, 0xff, N * sizeof *out);
    /* 10,000 (set, copy-out) pairs on one stream: out[i] == i only if each copy runs
     * after its own set and before the next one. */
    for (unsigned i = 0; i < N / 2; i++) {
        CHECK_CU(cuMemsetD32Async(cell, i, 1, s));
        CHECK_CU(cuMemcpyDtoHAsync(out + i, cell, 4, s));
    }
    CHECK_CU(cuStreamSynchronize(s));
    for (unsigned i = 0; i < N / 2; i++)
        CHECK_MSG(out[i] == i, "out[%u] = %u: operations ran out of order", i, out[i]);
    CHECK_CU(cuStreamQuery(s));
    CHECK_CU(cuMemFreeHost(out));
    CHECK_CU(cuMemFree(cell));
    CHECK_CU(cuStreamDestroy(s));
}

static unsigned g_order[64];
static int g_norder;
static void CUDA_CB append_order(void *arg) { g_order[g_norder++] = (unsigned)(uintptr_t)arg; }

VG_TEST(host_function_ordering) {
    setup();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 4 * 1024));
    unsigned *h = NULL;
    CHECK_CU(cuMemHostAlloc((void **)&h, 4 * 1024, 0));
    for (uintptr_t i = 0; i < 32; i++)
        CHECK_CU(cuLaunchHostFunc(s, append_order, (void *)i));
    /* A host function sees the results of the kernels and copies queued before it. */
    CHECK_CU(launch_fill(s, d, 7, 1024));
    CHECK_CU(cuMemcpyDtoHAsync(h, d, 4 * 1024, s));
    CHECK_CU(cuLaunchHostFunc(s, append_order, (void *)(uintptr_t)1000));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_EQ(g_norder, 33);
    for (int i = 0; i < 32; i++)
        CHECK_EQ(g_order[i], i);
    CHECK_EQ(g_order[32], 1000);
    CHECK_EQ(h[1023], 7);
    CHECK_CU(cuMemFreeHost(h));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuStreamDestroy(s));
}

VG_TEST(event_query_before_and_after_completion) {
    setup();
    CUstream s;
    CUevent never, e;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuEventCreate(&never, CU_EVENT_DEFAULT));
    CHECK_CU(cuEventCreate(&e, CU_EVENT_DEFAULT));
    CHECK_CU(cuEventQuery(never)); /* never recorded: complete */
    gate_t g;
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(s, gate_fn, &g));
    CHECK_CU(cuEventRecord(e, s));
    CHECK_CU_EQ(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CHECK_CU_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    gate_open(&g);
    CHECK_CU(cuEventSynchronize(e));
    CHECK_CU(cuEventQuery(e));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuStreamQuery(s));
    CHECK_CU(cuEventDestroy(e));
    CHECK_CU(cuEventDestroy(never));
    CHECK_CU(cuStreamDestroy(s));
}

VG_TEST(event_elapsed_time) {
    setup();
    CUstream s;
    CUevent a, b, untimed;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
    CHECK_CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
    CHECK_CU(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 1 << 20));
    CHECK_CU(cuEventRecord(a, s));
    CHECK_CU(launch_fill(s, d, 1, (1 << 20) / 4));
    CHECK_CU(cuEventRecord(b, s));
    CHECK_CU(cuEventRecord(untimed, s));
    CHECK_CU(cuEventSynchronize(b));
    float ms = -1;
    CHECK_CU(cuEventElapsedTime(&ms, a, b));
    CHECK(ms >= 0.0f);
    CHECK_CU_EQ(cuEventElapsedTime(&ms, a, untimed), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuStreamDestroy(s));
}

VG_TEST(cross_stream_wait_event) {
    setup();
    CUstream a, b;
    CUevent e;
    CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 4096));
    CHECK_CU(cuMemsetD32(d, 0, 1024));
    CHECK_CU(cuCtxSynchronize());
    unsigned *h = NULL;
    CHECK_CU(cuMemHostAlloc((void **)&h, 4096, 0));
    h[0] = 12345;
    gate_t g;
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(a, gate_fn, &g));
    CHECK_CU(launch_fill(a, d, 42, 1024));
    CHECK_CU(cuEventRecord(e, a));
    CHECK_CU(cuStreamWaitEvent(b, e, 0));
    CHECK_CU(cuMemcpyDtoHAsync(h, d, 4096, b));
    /* b cannot run its copy while a is held at the gate. */
    EXPECT_BLOCKED(b);
    CHECK_EQ(h[0], 12345);
    gate_open(&g);
    CHECK_CU(cuStreamSynchronize(b));
    CHECK_EQ(h[0], 42);
    CHECK_EQ(h[1023], 42);
    CHECK_CU(cuMemFreeHost(h));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuStreamDestroy(a));
    CHECK_CU(cuStreamDestroy(b));
}

VG_TEST(async_copy_not_complete_until_synchronized) {
    setup();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 4096));
    CHECK_CU(cuMemsetD8(d, 0x77, 4096));
    CHECK_CU(cuCtxSynchronize());
    unsigned char *pinned = NULL;
    CHECK_CU(cuMemHostAlloc((void **)&pinned, 4096, 0));
    memset(pinned, 0, 4096);
    gate_t g;
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(s, gate_fn, &g));
    CHECK_CU(cuMemcpyDtoHAsync(pinned, d, 4096, s));
    gate_wait_reached(&g);
    /* The stream is held before the copy: its destination is still untouched (S4). */
    CHECK_EQ(pinned[0], 0);
    CHECK_CU_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    gate_open(&g);
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_EQ(pinned[0], 0x77);
    CHECK_EQ(pinned[4095], 0x77);

    /* Pinned source: the copy reads the buffer when the stream reaches it, so a host
     * write before then changes what arrives (the hazard of S3). */
    gate_init(&g);
    memset(pinned, 1, 4096);
    CHECK_CU(cuLaunchHostFunc(s, gate_fn, &g));
    CHECK_CU(cuMemcpyHtoDAsync(d, pinned, 4096, s));
    memset(pinned, 2, 4096);
    gate_open(&g);
    CHECK_CU(cuStreamSynchronize(s));
    unsigned char back[4];
    CHECK_CU(cuMemcpyDtoH(back, d, sizeof back));
    CHECK_EQ(back[0], 2);

    /* Pageable source: staged at the call, so a later host write is safe. */
    unsigned char *pageable = malloc(4096);
    memset(pageable, 3, 4096);
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(s, gate_fn, &g));
    CHECK_CU(cuMemcpyHtoDAsync(d, pageable, 4096, s));
    memset(pageable, 4, 4096);
    gate_open(&g);
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemcpyDtoH(back, d, sizeof back));
    CHECK_EQ(back[0], 3);
    free(pageable);
    CHECK_CU(cuMemFreeHost(pinned));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuStreamDestroy(s));
}

VG_TEST(legacy_default_stream_synchronizes) {
    setup();
    CUstream blocking, nonblocking;
    CHECK_CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CHECK_CU(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 4096));
    CHECK_CU(cuMemsetD32(d, 0, 1024));
    CHECK_CU(cuCtxSynchronize());
    /* Work on the legacy stream waits for earlier work on a blocking stream. */
    gate_t g;
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(blocking, gate_fn, &g));
    CHECK_CU(launch_fill(blocking, d, 9, 1024));
    CHECK_CU(launch_add(NULL, d, 1, 1024)); /* legacy stream */
    EXPECT_BLOCKED(NULL);
    gate_open(&g);
    unsigned h[4];
    CHECK_CU(cuMemcpyDtoH(h, d, sizeof h)); /* synchronous, legacy stream */
    CHECK_EQ(h[0], 10);
    /* ... and later work on a blocking stream waits for the legacy stream. */
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(NULL, gate_fn, &g));
    CHECK_CU(launch_add(blocking, d, 5, 1024));
    EXPECT_BLOCKED(blocking);
    gate_open(&g);
    CHECK_CU(cuStreamSynchronize(blocking));
    CHECK_CU(cuMemcpyDtoH(h, d, sizeof h));
    CHECK_EQ(h[0], 15);
    /* A non-blocking stream does not wait for the legacy stream, nor it for it. */
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(nonblocking, gate_fn, &g));
    CHECK_CU(launch_add(NULL, d, 100, 1024));
    CHECK_CU(cuStreamSynchronize(NULL));
    CHECK_CU_EQ(cuStreamQuery(nonblocking), CUDA_ERROR_NOT_READY);
    gate_open(&g);
    CHECK_CU(cuStreamSynchronize(nonblocking));
    CHECK_CU(cuMemcpyDtoH(h, d, sizeof h));
    CHECK_EQ(h[0], 115);
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuStreamDestroy(blocking));
    CHECK_CU(cuStreamDestroy(nonblocking));
}

VG_TEST(stream_ordered_alloc) {
    setup();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CHECK_CU(cuMemAllocAsync(&d, 1 << 20, s));
    CHECK_CU(launch_fill(s, d, 3, (1 << 20) / 4));
    unsigned h[2];
    CHECK_CU(cuMemcpyDtoHAsync(h, d, sizeof h, s));
    CHECK_CU(cuMemFreeAsync(d, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_EQ(h[0], 3);
    CHECK_CU(cuStreamDestroy(s));
}

/* ---------------------------------------------------------------------------------------
 * Virtual memory management and illegal addresses
 * ------------------------------------------------------------------------------------- */

static void vmm_prop(CUmemAllocationProp *prop) {
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = 0;
}

static size_t vmm_granularity(void) {
    int vmm = 0;
    CHECK_CU(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    if (!vmm)
        vgt_skip("the device has no virtual memory management");
    CUmemAllocationProp prop;
    vmm_prop(&prop);
    size_t gran = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran >= 4096 && (gran & (gran - 1)) == 0);
    return gran;
}

VG_TEST(vmm_reserve_map_unmap) {
    setup();
    size_t gran = vmm_granularity();
    CUmemAllocationProp prop;
    vmm_prop(&prop);
    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
    CHECK_EQ(va % gran, 0);
    CUmemGenericAllocationHandle h1, h2;
    CHECK_CU(cuMemCreate(&h1, gran, &prop, 0));
    CHECK_CU(cuMemCreate(&h2, 2 * gran, &prop, 0));
    CHECK_CU(cuMemMap(va + gran, gran, 0, h1, 0));
    CHECK_CU(cuMemMap(va + 2 * gran, 2 * gran, 0, h2, 0));
    CHECK_CU_EQ(cuMemMap(va + gran, gran, 0, h2, 0), CUDA_ERROR_NOT_SUPPORTED); /* driver 580 */
    CUmemAccessDesc acc;
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK_CU(cuMemSetAccess(va + gran, 3 * gran, &acc, 1));
    /* One contiguous range across two physical allocations. */
    CHECK_CU(launch_fill(NULL, va + gran, 0xabcdu, 3 * gran / 4));
    unsigned h[2];
    CHECK_CU(cuMemcpyDtoH(&h[0], va + gran, 4));
    CHECK_CU(cuMemcpyDtoH(&h[1], va + 4 * gran - 4, 4));
    CHECK_EQ(h[0], 0xabcdu);
    CHECK_EQ(h[1], 0xabcdu);
    /* Data lives in the physical handle: unmap it and map it elsewhere. */
    CHECK_CU(cuMemUnmap(va + gran, gran));
    CHECK_CU(cuMemMap(va, gran, 0, h1, 0));
    CHECK_CU(cuMemSetAccess(va, gran, &acc, 1));
    CHECK_CU(cuMemcpyDtoH(&h[0], va + 8, 4));
    CHECK_EQ(h[0], 0xabcdu);
    /* A copy into the unmapped granule is refused. */
    CHECK_CU_EQ(cuMemcpyHtoD(va + gran, h, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemUnmap(va, gran));
    CHECK_CU(cuMemUnmap(va + 2 * gran, 2 * gran));
    CHECK_CU(cuMemRelease(h1));
    CHECK_CU(cuMemRelease(h2));
    CHECK_CU(cuMemAddressFree(va, 4 * gran));
}

VG_TEST(vmm_physical_memory_counts_against_device) {
    setup();
    size_t gran = vmm_granularity();
    CUmemAllocationProp prop;
    vmm_prop(&prop);
    size_t free0, free1, total;
    CHECK_CU(cuMemGetInfo(&free0, &total));
    CUmemGenericAllocationHandle h;
    CHECK_CU(cuMemCreate(&h, 8 * gran, &prop, 0));
    CHECK_CU(cuMemGetInfo(&free1, &total));
    CHECK(free0 - free1 >= 8 * gran);
    CHECK_CU(cuMemRelease(h));
    CHECK_CU_EQ(cuMemCreate(&h, (total / gran + 1) * gran, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
}

VG_TEST(sticky_illegal_address_on_unmapped_page) {
    setup();
    size_t gran = vmm_granularity();
    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    CUdeviceptr ok;
    CHECK_CU(cuMemAlloc(&ok, 4096));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    /* A kernel that stores into a reserved but unmapped page. The launch itself
     * succeeds; the error surfaces at the next synchronisation and then sticks. */
    CHECK_CU(launch_store(s, va + 64, 1));
    CHECK_CU_EQ(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUdeviceptr again;
    CHECK_CU_EQ(cuMemAlloc(&again, 4096), CUDA_ERROR_ILLEGAL_ADDRESS);
    unsigned h = 0;
    CHECK_CU_EQ(cuMemcpyDtoH(&h, ok, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_CU_EQ(launch_store(s, ok, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
}

VG_TEST(sticky_illegal_address_on_mapped_page_without_access) {
    setup();
    size_t gran = vmm_granularity();
    CUmemAllocationProp prop;
    vmm_prop(&prop);
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CHECK_CU(cuMemAddressReserve(&va, gran, 0, 0, 0));
    CHECK_CU(cuMemCreate(&h, gran, &prop, 0));
    CHECK_CU(cuMemMap(va, gran, 0, h, 0));
    /* Mapped, but cuMemSetAccess was never called: not accessible. */
    CHECK_CU(launch_store(NULL, va, 1));
    CHECK_CU_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}

VG_TEST(kernel_in_bounds_is_fine) {
    setup();
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 4096));
    CHECK_CU(launch_store(NULL, d + 4092, 77));
    CHECK_CU(cuCtxSynchronize());
    unsigned h = 0;
    CHECK_CU(cuMemcpyDtoH(&h, d + 4092, 4));
    CHECK_EQ(h, 77);
    CHECK_CU(cuMemFree(d));
}

/* cuLaunchKernelEx (cudaLaunchKernelEx): the same launch as cuLaunchKernel, its geometry
 * and stream in a struct, attributes beside it; stream order holds across both. */
VG_TEST(launch_kernel_ex_runs_like_launch_kernel) {
    setup();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const unsigned long long n = 64 * 128;
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, n * 4));
    CHECK_CU(launch_fill(s, d, 5, n));
    unsigned v = 2;
    void *args[] = {&d, &v, (void *)&n};
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 0;
    CUlaunchConfig cfg = {.gridDimX = 64, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = &attr,
                          .numAttrs = 1};
    CHECK_CU(cuLaunchKernelEx(&cfg, k_add, args, NULL)); /* after the fill, on s */
    cfg.numAttrs = 0;
    cfg.attrs = NULL;
    CHECK_CU(cuLaunchKernelEx(&cfg, k_add, args, NULL));
    CHECK_CU(cuStreamSynchronize(s));
    unsigned first = 0, last = 0;
    CHECK_CU(cuMemcpyDtoH(&first, d, 4));
    CHECK_CU(cuMemcpyDtoH(&last, d + (n - 1) * 4, 4));
    CHECK_EQ(first, 9);
    CHECK_EQ(last, 9);
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuStreamDestroy(s));
}

/* cuMemcpy2D / cuMemcpy2DAsync: a sub-rectangle into a pitched device buffer and back,
 * rows at their pitches, nothing outside the rectangle touched. */
/* ---------------------------------------------------------------------------------------
 * Stream capture and graphs (what vramguard must not break in a program's captures)
 * ------------------------------------------------------------------------------------- */

void expect_u32(CUdeviceptr d, size_t n, unsigned want, const char *file, int line) {
    unsigned *h = malloc(n * sizeof *h);
    if (!h)
        vgt_fail(file, line, "out of host memory");
    if (cuMemcpyDtoH(h, d, n * sizeof *h) != CUDA_SUCCESS)
        vgt_fail(file, line, "cuMemcpyDtoH failed");
    for (size_t i = 0; i < n; i++)
        if (h[i] != want)
            vgt_fail(file, line, "word %zu is %u, expected %u", i, h[i], want);
    free(h);
}

VG_TEST(captured_work_runs_only_when_the_graph_is_launched) {
    setup();
    const size_t n = 4096;
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, n * 4));
    CHECK_CU(cuMemsetD32(d, 0, n));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK_CU(cuStreamIsCapturing(s, &st));
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_CU_EQ(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    CHECK_CU(launch_add(s, d, 1, n));
    CHECK_CU(launch_add(s, d, 2, n));
    CUgraph g = NULL;
    CHECK_CU(cuStreamEndCapture(s, &g));
    CHECK(g != NULL);
    CHECK_CU(cuStreamIsCapturing(s, &st));
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK_CU(cuCtxSynchronize());
    EXPECT_U32(d, n, 0); /* captured, not run */
    CUgraphExec x;
    CHECK_CU(cuGraphInstantiate(&x, g, 0));
    CHECK_CU(cuGraphLaunch(x, s));
    CHECK_CU(cuGraphLaunch(x, s));
    CHECK_CU(cuStreamSynchronize(s));
    EXPECT_U32(d, n, 6); /* two replays of +1 +2 */
    CHECK_CU(cuGraphExecDestroy(x));
    CHECK_CU(cuGraphDestroy(g));
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
}

VG_TEST(synchronizing_a_capturing_stream_invalidates_the_capture) {
    setup();
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 4096));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(launch_add(s, d, 1, 1024));
    CHECK_CU_EQ(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK_CU(cuStreamIsCapturing(s, &st));
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CUgraph g = (CUgraph)1;
    CHECK_CU_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(g == NULL);
    /* The same for a query of the stream. */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU_EQ(cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
}

VG_TEST(cumemalloc_during_a_global_capture_needs_relaxed_mode) {
    setup();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d = 0;
    CUgraph g = NULL;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU_EQ(cuMemAlloc(&d, 1 << 20), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* What PyTorch's allocator does: the calling thread switches to relaxed mode. */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CHECK_CU(cuMemAlloc(&d, 1 << 20));
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK_EQ(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
    CHECK_CU(launch_fill(s, d, 3, (1 << 20) / 4));
    CHECK_CU(cuStreamEndCapture(s, &g));
    CUgraphExec x;
    CHECK_CU(cuGraphInstantiate(&x, g, 0));
    CHECK_CU(cuGraphLaunch(x, s));
    CHECK_CU(cuStreamSynchronize(s));
    EXPECT_U32(d, (1 << 20) / 4, 3);
    CHECK_CU(cuGraphExecDestroy(x));
    CHECK_CU(cuGraphDestroy(g));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuStreamDestroy(s));
}

/* vramguard's heap maps pages with the VMM calls: whether a global capture forbids them
 * too decides whether it must switch to relaxed mode around them (it does either way). */
VG_TEST(vmm_calls_during_a_global_capture_need_relaxed_mode) {
    setup();
    CUmemAllocationProp prop;
    vmm_prop(&prop);
    size_t gran = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g = NULL;
    CUmemGenericAllocationHandle h = 0;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU_EQ(cuMemCreate(&h, gran, &prop, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK_CU(cuMemCreate(&h, gran, &prop, 0));
    CHECK_CU(cuMemRelease(h));
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK_CU(cuStreamEndCapture(s, &g));
    CHECK_CU(cuGraphDestroy(g));
    CHECK_CU(cuStreamDestroy(s));
}

VG_TEST(events_fork_and_join_captures) {
    setup();
    const size_t n = 1024;
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, n * 4));
    CHECK_CU(cuMemsetD32(d, 0, n));
    CHECK_CU(cuCtxSynchronize()); /* (the streams below do not wait for the legacy one) */
    CUstream s, t;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    CUevent fork, join;
    CHECK_CU(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK_CU(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CUgraph g = NULL;
    /* Forked and never joined: the capture cannot end. */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuEventRecord(fork, s));
    CHECK_CU_EQ(cuEventQuery(fork), CUDA_ERROR_CAPTURED_EVENT);
    CHECK_CU(cuStreamWaitEvent(t, fork, 0));
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK_CU(cuStreamIsCapturing(t, &st));
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_CU(launch_add(t, d, 1, n));
    CHECK_CU_EQ(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    CHECK_CU(cuStreamIsCapturing(t, &st));
    CHECK_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
    /* Forked and joined. */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(launch_add(s, d, 1, n));
    CHECK_CU(cuEventRecord(fork, s));
    CHECK_CU(cuStreamWaitEvent(t, fork, 0));
    CHECK_CU(launch_add(t, d, 10, n));
    CHECK_CU(cuEventRecord(join, t));
    CHECK_CU(cuStreamWaitEvent(s, join, 0));
    CHECK_CU(cuStreamEndCapture(s, &g));
    CUgraphExec x;
    CHECK_CU(cuGraphInstantiate(&x, g, 0));
    CHECK_CU(cuGraphLaunch(x, s));
    CHECK_CU(cuStreamSynchronize(s));
    EXPECT_U32(d, n, 11);
    CHECK_CU(cuGraphExecDestroy(x));
    CHECK_CU(cuGraphDestroy(g));
    CHECK_CU(cuEventDestroy(fork));
    CHECK_CU(cuEventDestroy(join));
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuStreamDestroy(t));
    CHECK_CU(cuMemFree(d));
}

/* A stream that allocated, worked and freed before its capture (as a training loop's
 * stream does before torch.cuda.graph): the capture and its replays are unaffected by
 * what was queued before. Under `vramguard run --mode=guard` the checks of the earlier
 * free must stay out of the graph. */
VG_TEST(a_stream_used_before_its_capture) {
    setup();
    const size_t n = 1 << 16;
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    CHECK_CU(cuMemAllocAsync(&a, n * 4, s));
    CHECK_CU(cuMemAlloc(&b, n * 4));
    CHECK_CU(launch_fill(s, a, 1, n));
    CHECK_CU(launch_fill(s, b, 0, n));
    CHECK_CU(cuMemFreeAsync(a, s));
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(launch_add(s, b, 5, n));
    CUgraph g = NULL;
    CHECK_CU(cuStreamEndCapture(s, &g));
    CUgraphExec x;
    CHECK_CU(cuGraphInstantiate(&x, g, 0));
    for (int i = 0; i < 3; i++)
        CHECK_CU(cuGraphLaunch(x, s));
    CHECK_CU(cuStreamSynchronize(s));
    EXPECT_U32(b, n, 15);
    CHECK_CU(cuGraphExecDestroy(x));
    CHECK_CU(cuGraphDestroy(g));
    CHECK_CU(cuMemFree(b));
    CHECK_CU(cuStreamDestroy(s));
}

/* ---------------------------------------------------------------------------------------
 * 16-bit and 2D memsets, cooperative launches, per-thread-default-stream twins
 * ------------------------------------------------------------------------------------- */

VG_TEST(memsets_of_16_bits_and_2d_memsets_set_exactly_their_bytes) {
    setup();
    enum { N = 4096 };
    unsigned char want[N], got[N];
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, N));
    CHECK_CU(cuMemsetD8(d, 0x5a, N));
    memset(want, 0x5a, N);
    CHECK_CU(cuCtxSynchronize()); /* (s, non-blocking, does not wait for the legacy stream:
                                     the memsets below go to disjoint bytes) */
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuMemsetD16(d + 2, 0xabcd, 5)); /* bytes 2-11 */
    for (int i = 0; i < 5; i++)
        memcpy(want + 2 + 2 * i, &(unsigned short){0xabcd}, 2);
    CHECK_CU(cuMemsetD16Async(d + 20, 0x1234, 3, s)); /* 20-25 */
    for (int i = 0; i < 3; i++)
        memcpy(want + 20 + 2 * i, &(unsigned short){0x1234}, 2);
    /* Three rows of 10 bytes, 64 bytes apart, from byte 100; the bytes between stay. */
    CHECK_CU(cuMemsetD2D8(d + 100, 64, 0x11, 10, 3));
    for (int y = 0; y < 3; y++)
        memset(want + 100 + 64 * y, 0x11, 10);
    CHECK_CU(cuMemsetD2D16Async(d + 400, 128, 0x2233, 7, 4, s));
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 7; x++)
            memcpy(want + 400 + 128 * y + 2 * x, &(unsigned short){0x2233}, 2);
    CHECK_CU(cuMemsetD2D32(d + 1024, 256, 0xdeadbeefu, 9, 5));
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 9; x++)
            memcpy(want + 1024 + 256 * y + 4 * x, &(unsigned){0xdeadbeefu}, 4);
    CHECK_CU(cuMemsetD2D32Async(d + 3072, 512, 0x01020304u, 16, 2, s));
    CHECK_CU(cuMemsetD2D8Async(d + 3200, 512, 0x77, 3, 2, s));
    for (int y = 0; y < 2; y++) {
        for (int x = 0; x < 16; x++)
            memcpy(want + 3072 + 512 * y + 4 * x, &(unsigned){0x01020304u}, 4);
        memset(want + 3200 + 512 * y, 0x77, 3);
    }
    if (g_on_vgsim) { /* rows past the end of the address space: refused, nothing set */
        CHECK_CU_EQ(cuMemsetD2D8(d, SIZE_MAX / 2, 0x66, 4, 3), CUDA_ERROR_INVALID_VALUE);
        CHECK_CU_EQ(cuMemsetD2D32Async(d, 2, 0x66, 1, 2, s), CUDA_ERROR_INVALID_VALUE);
    }
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemcpyDtoH(got, d, N));
    for (int i = 0; i < N; i++)
        if (got[i] != want[i])
            vgt_fail(__FILE__, __LINE__, "byte %d is 0x%02x, expected 0x%02x", i, got[i],
                     want[i]);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
}

VG_TEST(a_cooperative_launch_runs_in_stream_order) {
    setup();
    const unsigned long long n = 1024;
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, n * 4));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(launch_fill(s, d, 5, n));
    unsigned v = 2;
    void *args[] = {&d, &v, (void *)&n};
    CHECK_CU(cuLaunchCooperativeKernel(k_add, 1, 1, 1, 128, 1, 1, 0, s, args));
    CHECK_CU(cuStreamSynchronize(s));
    EXPECT_U32(d, n, 7);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
}

/* What the CUDA runtime does for nvcc --default-stream per-thread: ask cuGetProcAddress
 * for the per-thread twins. The twin of a synchronous memset runs on the calling thread's
 * default stream, which does not wait for a blocking stream's work as the legacy stream
 * does; a twin's NULL stream is that stream too. */
VG_TEST(per_thread_twins_run_on_the_threads_default_stream) {
    setup();
    typedef CUresult (*memset32_fn)(CUdeviceptr, unsigned int, size_t);
    typedef CUresult (*query_fn)(CUstream);
    typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, unsigned, CUstream, void **, void **);
    void *legacy = NULL, *twin = NULL, *q = NULL, *l = NULL;
    CUdriverProcAddressQueryResult r;
    CHECK_CU(cuGetProcAddress("cuMemsetD32", &legacy, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &r));
    CHECK_CU(cuGetProcAddress("cuMemsetD32", &twin, 13000,
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &r));
    CHECK_CU(cuGetProcAddress("cuStreamQuery", &q, 13000,
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &r));
    CHECK_CU(cuGetProcAddress("cuLaunchKernel", &l, 13000,
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &r));
    CHECK(legacy && twin && q && l && legacy != twin);
    const size_t n = 256;
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, n * 4));
    CHECK_CU(cuMemsetD32(d, 0, n));
    CHECK_CU(cuCtxSynchronize());
    CUstream blocking;
    CHECK_CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    gate_t g;
    gate_init(&g);
    CHECK_CU(cuLaunchHostFunc(blocking, gate_fn, &g));
    gate_wait_reached(&g);
    /* The twin's memset and a launch on its NULL stream complete while `blocking` is held. */
    CHECK_CU(((memset32_fn)twin)(d, 40, n));
    unsigned v = 2;
    unsigned long long nn = n;
    void *args[] = {&d, &v, &nn};
    CHECK_CU(((launch_fn)l)(k_add, 64, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CUresult done;
    while ((done = ((query_fn)q)(NULL)) == CUDA_ERROR_NOT_READY)
        sched_yield();
    CHECK_CU(done);
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    /* The legacy stream's memset waits for `blocking`. */
    CHECK_CU(((memset32_fn)legacy)(d, 9, 1));
    EXPECT_BLOCKED(CU_STREAM_LEGACY);
    gate_open(&g);
    CHECK_CU(cuCtxSynchronize());
    unsigned h[2];
    CHECK_CU(cuMemcpyDtoH(h, d, sizeof h));
    CHECK_EQ(h[0], 9u);
    CHECK_EQ(h[1], 42u);
    CHECK_CU(cuStreamDestroy(blocking));
    CHECK_CU(cuMemFree(d));
}
