/* conformance.h — what the conformance suite's sources share (conformance.c defines it):
 * the set-up, launches of the suite's kernels, and gates. */
#ifndef VG_CONFORMANCE_H
#define VG_CONFORMANCE_H

#include <pthread.h>
#include <stddef.h>

#ifdef VG_HAVE_CUDA_H
#include <cuda.h>
#else
#include "vgsim_cuda.h"
#endif

#ifndef CUDA_CB
#define CUDA_CB
#endif

#include "../harness.h"

extern CUcontext g_ctx; /* device 0's primary context, current after setup() */
extern int g_on_vgsim;  /* running on vgsim rather than a GPU */

/* cuInit, device 0's primary context, the kernels' module. Each case calls it first. */
void setup(void);

/* The suite's kernels (kernels.cu): *p = v; p[0..n) = v; p[0..n) += v. */
CUresult launch_store(CUstream s, CUdeviceptr p, unsigned v);
CUresult launch_fill(CUstream s, CUdeviceptr p, unsigned v, unsigned long long n);
CUresult launch_add(CUstream s, CUdeviceptr p, unsigned v, unsigned long long n);

/* A gate: a host function (gate_fn, launched with the gate as its data) that holds its
 * stream until the test opens it. */
typedef struct gate {
    pthread_mutex_t m;
    pthread_cond_t c;
    int open, reached;
} gate_t;
void gate_init(gate_t *g);
void CUDA_CB gate_fn(void *arg);
void gate_open(gate_t *g);
/* Wait until the stream has reached the gate (everything before it is done). */
void gate_wait_reached(gate_t *g);

/* A negative property ("this stream cannot have run yet") holds only if it holds for a
 * while: poll the stream for `ms` milliseconds and fail the moment it completes. */
void expect_blocked(CUstream s, int ms, const char *file, int line);
#define EXPECT_BLOCKED(s) expect_blocked((s), 30, __FILE__, __LINE__)

/* Every one of the n words at d equals want (read back with cuMemcpyDtoH). */
void expect_u32(CUdeviceptr d, size_t n, unsigned want, const char *file, int line);
#define EXPECT_U32(d, n, want) expect_u32((d), (n), (want), __FILE__, __LINE__)

#endif /* VG_CONFORMANCE_H */
