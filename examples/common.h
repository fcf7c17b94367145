/* common.h — what every example program shares: a context, the kernels, a gate.
 *
 * The examples are plain CUDA driver-API programs. They know nothing of vramguard: run
 * them as `vramguard run --sim -- ./s1_overrun` (vgsim) or `vramguard run -- ./s1_overrun`
 * (a GPU). On vgsim a "kernel" is a host function registered under the kernel's name, so
 * this file also holds host versions of kernels.cu, registered when vgsim is the driver.
 */
#ifndef VG_EXAMPLES_COMMON_H
#define VG_EXAMPLES_COMMON_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef VG_HAVE_CUDA_H
#include <cuda.h>
#else
#include "vgsim_cuda.h"
#endif

#ifndef CUDA_CB
#define CUDA_CB
#endif

#include "kernels_ptx.h" /* generated from kernels.ptx: ex_kernels_ptx[] */

#define CK(call)                                                                            \
    do {                                                                                    \
        CUresult r_ = (call);                                                               \
        if (r_ != CUDA_SUCCESS) {                                                           \
            const char *n_ = "?";                                                           \
            cuGetErrorName(r_, &n_);                                                        \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, n_);      \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* --- host versions of kernels.cu, for vgsim ------------------------------------------ */

typedef struct ex_launch {
    unsigned int grid[3], block[3], shared_mem;
    int nparams;
    void *params[32];
} ex_launch_t;

/* The twins tell vgsim of each global-memory access before they make it (vgsim.h's
 * vgsim_access), as a GPU's patched kernel calls the Compute Sanitizer callback, so that
 * vramguard's memcheck mode checks them. Element i is thread i of the launch's grid. */
static void (*ex_vgsim_access)(const volatile void *p, unsigned size, unsigned flags);
static void (*ex_vgsim_thread)(unsigned block, unsigned thread);

static inline void ex_access(const ex_launch_t *l, unsigned long long i, const volatile void *p,
                             unsigned size, unsigned flags) {
    if (!ex_vgsim_access)
        return;
    unsigned long long threads = (unsigned long long)l->grid[0] * l->block[0];
    unsigned long long t = threads ? i % threads : 0;
    ex_vgsim_thread((unsigned)(t / l->block[0]), (unsigned)(t % l->block[0]));
    ex_vgsim_access(p, size, flags);
}
#define EX_LOAD(l, i, p) (ex_access((l), (i), (p), sizeof *(p), 1), *(p))
#define EX_STORE(l, i, p, v) (ex_access((l), (i), (p), sizeof *(p), 2), *(p) = (v))

/* x[i] = v for i < n, thread i of launch l storing x[i] (the fill kernels' body). */
static void ex_fill_floats(const ex_launch_t *l, float *x, float v, unsigned long long n) {
    for (unsigned long long i = 0; i < n; i++)
        EX_STORE(l, i, &x[i], v);
}

static void ex_fill_host(const ex_launch_t *l) {
    ex_fill_floats(l, *(float **)l->params[0], *(float *)l->params[1],
                   *(unsigned long long *)l->params[2]);
}

static void ex_scatter_host(const ex_launch_t *l) {
    float *x = *(float **)l->params[0];
    const long long *idx = *(const long long **)l->params[1];
    unsigned n = *(unsigned *)l->params[2];
    float v = *(float *)l->params[3];
    for (unsigned i = 0; i < n; i++)
        EX_STORE(l, i, &x[EX_LOAD(l, i, &idx[i])], v);
}

typedef struct ex_span { /* kernels.cu's */
    unsigned long long n;
    float *x;
} ex_span_t;

static void ex_fill_span_host(const ex_launch_t *l) {
    ex_span_t s = *(ex_span_t *)l->params[1];
    ex_fill_floats(l, s.x, *(float *)l->params[0], s.n);
}

typedef struct ex_typed { /* kernels.cu's */
    int dtype, elem_size;
    unsigned long long n;
    float *x;
} ex_typed_t;

static void ex_fill_typed_host(const ex_launch_t *l) {
    ex_typed_t s = *(ex_typed_t *)l->params[1];
    if (s.dtype == 6 && s.elem_size == (int)sizeof(float))
        ex_fill_floats(l, s.x, *(float *)l->params[0], s.n);
}

static void ex_sum_host(const ex_launch_t *l) {
    const float *x = *(const float **)l->params[0];
    unsigned long long first = *(unsigned long long *)l->params[1];
    unsigned long long n = *(unsigned long long *)l->params[2];
    float *out = *(float **)l->params[3], s = 0.0f;
    for (unsigned long long i = first; i < first + n; i++)
        s += EX_LOAD(l, 0, &x[i]);
    EX_STORE(l, 0, out, s);
}

static void ex_sum_range_host(const ex_launch_t *l) {
    const float *begin = *(const float **)l->params[0], *end = *(const float **)l->params[1];
    float *out = *(float **)l->params[2], s = 0.0f;
    for (const float *p = begin; p < end; p++)
        s += EX_LOAD(l, 0, p);
    EX_STORE(l, 0, out, s);
}

static void ex_fill_bytes_host(const ex_launch_t *l) {
    unsigned char *p = *(unsigned char **)l->params[0];
    unsigned char v = *(unsigned char *)l->params[1];
    unsigned long long n = *(unsigned long long *)l->params[2];
    for (unsigned long long i = 0; i < n; i++)
        EX_STORE(l, i, &p[i], v);
}

typedef struct ex {
    CUcontext ctx;
    CUfunction fill, scatter, fill_span, sum, sum_range, fill_bytes, fill_typed;
} ex_t;

/* Device `ordinal`'s primary context, made current, with the kernels loaded in it. */
static inline ex_t ex_init_device(int ordinal) {
    ex_t e;
    CUdevice dev;
    CUmodule mod;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, ordinal));
    CK(cuDevicePrimaryCtxRetain(&e.ctx, dev));
    CK(cuCtxSetCurrent(e.ctx));
    int (*reg)(const char *, void (*)(const ex_launch_t *)) =
        (int (*)(const char *, void (*)(const ex_launch_t *)))dlsym(RTLD_DEFAULT,
                                                                   "vgsim_register_kernel");
    if (reg) { /* vgsim: the kernels run on the host */
        *(void **)&ex_vgsim_access = dlsym(RTLD_DEFAULT, "vgsim_access");
        *(void **)&ex_vgsim_thread = dlsym(RTLD_DEFAULT, "vgsim_thread");
        if (!ex_vgsim_thread)
            ex_vgsim_access = NULL;
        reg("ex_fill", ex_fill_host);
        reg("ex_scatter", ex_scatter_host);
        reg("ex_fill_span", ex_fill_span_host);
        reg("ex_sum", ex_sum_host);
        reg("ex_sum_range", ex_sum_range_host);
        reg("ex_fill_bytes", ex_fill_bytes_host);
        reg("ex_fill_typed", ex_fill_typed_host);
    }
    CK(cuModuleLoadData(&mod, ex_kernels_ptx));
    CK(cuModuleGetFunction(&e.fill, mod, "ex_fill"));
    CK(cuModuleGetFunction(&e.scatter, mod, "ex_scatter"));
    CK(cuModuleGetFunction(&e.fill_span, mod, "ex_fill_span"));
    CK(cuModuleGetFunction(&e.sum, mod, "ex_sum"));
    CK(cuModuleGetFunction(&e.sum_range, mod, "ex_sum_range"));
    CK(cuModuleGetFunction(&e.fill_bytes, mod, "ex_fill_bytes"));
    CK(cuModuleGetFunction(&e.fill_typed, mod, "ex_fill_typed"));
    return e;
}

static inline ex_t ex_init(void) { return ex_init_device(0); }

/* Kernel `name` of the same PTX loaded as a library (cuLibraryLoadData, CUDA 12.0), its
 * CUkernel cast to CUfunction: what the CUDA runtime (12+) gives cuLaunchKernel for a
 * cudaLaunchKernel or a <<<...>>> launch, PyTorch's kernels included. */
static inline CUfunction ex_library_kernel(const char *name) {
    CUlibrary lib;
    CUkernel k;
    CK(cuLibraryLoadData(&lib, ex_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, name));
    return (CUfunction)(void *)k; /* (the library stays loaded until the process ends) */
}

/* The same as ex_fill, the pointer inside a struct argument (as in PyTorch's kernels). */
static inline CUresult ex_fill_span(const ex_t *e, CUdeviceptr x, float v, unsigned long long n,
                                    CUstream s) {
    ex_span_t span = {n, (float *)(uintptr_t)x};
    void *params[] = {&v, &span};
    return cuLaunchKernel(e->fill_span, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s,
                          params, NULL);
}

/* The same again, the struct beginning with PyTorch's data type and element size of a
 * float: (6, 4), two small integers in the struct's first 8 bytes. */
static inline CUresult ex_fill_typed(const ex_t *e, CUdeviceptr x, float v, unsigned long long n,
                                     CUstream s) {
    ex_typed_t typed = {6, (int)sizeof(float), n, (float *)(uintptr_t)x};
    void *params[] = {&v, &typed};
    return cuLaunchKernel(e->fill_typed, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s,
                          params, NULL);
}

/* fill n floats at x with v, on stream s */
static inline CUresult ex_fill(const ex_t *e, CUdeviceptr x, float v, unsigned long long n,
                               CUstream s) {
    void *params[] = {&x, &v, &n};
    return cuLaunchKernel(e->fill, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s, params,
                          NULL);
}

/* *out = the sum of x[first], ..., x[first + n - 1] (a kernel that only reads x), on
 * stream s */
static inline CUresult ex_sum(const ex_t *e, CUdeviceptr x, unsigned long long first,
                              unsigned long long n, CUdeviceptr out, CUstream s) {
    void *params[] = {&x, &first, &n, &out};
    return cuLaunchKernel(e->sum, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

/* *out = the sum of the floats in [begin, end) */
static inline CUresult ex_sum_range(const ex_t *e, CUdeviceptr begin, CUdeviceptr end,
                                    CUdeviceptr out, CUstream s) {
    void *params[] = {&begin, &end, &out};
    return cuLaunchKernel(e->sum_range, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

/* n bytes at p set to v */
static inline CUresult ex_fill_bytes(const ex_t *e, CUdeviceptr p, unsigned char v,
                                     unsigned long long n, CUstream s) {
    void *params[] = {&p, &v, &n};
    return cuLaunchKernel(e->fill_bytes, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s,
                          params, NULL);
}

/* The same kernel by a cooperative launch (cudaLaunchCooperativeKernel), with at most 16
 * blocks (all must be resident at once; the kernel loops over the rest). */
static inline CUresult ex_fill_coop(const ex_t *e, CUdeviceptr x, float v, unsigned long long n,
                                    CUstream s) {
    void *params[] = {&x, &v, &n};
    unsigned blocks = (unsigned)((n + 255) / 256);
    return cuLaunchCooperativeKernel(e->fill, blocks < 16 ? blocks : 16, 1, 1, 256, 1, 1, 0, s,
                                     params);
}

/* The same launch through cuLaunchKernelEx, as cudaLaunchKernelEx and Hopper's cluster
 * launches make it (here with one attribute, a priority of 0). */
static inline CUresult ex_fill_ex(const ex_t *e, CUdeviceptr x, float v, unsigned long long n,
                                  CUstream s) {
    void *params[] = {&x, &v, &n};
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 0;
    CUlaunchConfig cfg = {.gridDimX = (unsigned)((n + 255) / 256), .gridDimY = 1, .gridDimZ = 1,
                          .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1, .hStream = s,
                          .attrs = &attr, .numAttrs = 1};
    return cuLaunchKernelEx(&cfg, e->fill, params, NULL);
}

/* --- a gate: a host function that holds a stream until another thread opens it -------- */

static atomic_int ex_gate_open;

static void CUDA_CB ex_gate_wait(void *arg) {
    (void)arg;
    struct timespec ts = {0, 1000000};
    while (!atomic_load(&ex_gate_open))
        nanosleep(&ts, NULL);
}

static void *ex_gate_opener(void *arg) {
    long ms = (long)(intptr_t)arg;
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) /* (interrupted: the rest of it) */
        ;
    atomic_store(&ex_gate_open, 1);
    return NULL;
}

/* Hold stream s (what a long-running kernel does) until `ms` milliseconds from now, or
 * until ex_release_stream(). */
static inline void ex_hold_stream(CUstream s, int ms) {
    pthread_t t;
    atomic_store(&ex_gate_open, 0);
    CK(cuLaunchHostFunc(s, ex_gate_wait, NULL));
    pthread_create(&t, NULL, ex_gate_opener, (void *)(intptr_t)ms);
    pthread_detach(t);
}

static inline void ex_release_stream(void) { atomic_store(&ex_gate_open, 1); }

/* One copy made as a batch of one (cuMemcpyBatchAsync; cudaMemcpyBatchAsync, CUDA 12.8+),
 * its source read as `order` says. s may not be the legacy stream. */
static inline CUresult ex_batch_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                     CUmemcpySrcAccessOrder order, CUstream s) {
    CUmemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = order;
    size_t first = 0;
    return cuMemcpyBatchAsync(&dst, &src, &bytes, 1, &a, &first, 1, s);
}

#endif /* VG_EXAMPLES_COMMON_H */
