/* memcheck_user.c — kernels that read and write where they should not, and the same
 * kernels used right (tests/cli memcheck_*; docs/memcheck.md). A plain driver-API program
 * with real kernels (examples/kernels.cu, whose host twins tell vgsim of each access),
 * correct on a GPU but for the planted bug.
 *
 * usage: memcheck_user CASE. The bugs, each a kernel's access that no API call shows:
 *   read_past     ex_sum reads floats 995 to 1004 of a 1000-float (4000-byte) buffer:
 *                 the first bad read is 0 bytes past its end
 *   read_far      ex_sum reads one float 1 MiB past the end of a 4000-byte buffer (a
 *                 bad index), in segment memory no allocation holds
 *   read_before   ex_sum_range reads from 4 bytes before the start of a buffer
 *   write_far     ex_scatter writes one float at index 70000 of a 1000-float buffer
 *   read_freed    ex_sum reads a buffer freed (cuMemFreeAsync) just before on its stream
 *   write_freed   ex_fill writes a buffer freed (cuMemFree) just before
 *   write_freed_many  the same over 1M floats: far more bad accesses than the log holds
 *   async_past    ex_sum reads past a cuMemAllocAsync buffer, on its stream
 *   pool_past     ex_sum reads past a buffer of a memory pool (cuMemAllocFromPoolAsync)
 *   library_past  ex_sum loaded as a library (cuLibraryLoadData, as the CUDA runtime loads
 *                 PyTorch's kernels) reads past a buffer
 *   graph_past    ex_sum, captured into a CUDA graph launched three times, reads past a
 *                 buffer (each launch of the graph is checked)
 *   graph_pool_past  the same with the buffer allocated during the capture, as PyTorch's
 *                 torch.cuda.graph allocates (vramguard's graph pool)
 *   graph_pool_released  once a graph and its pool are gone, ex_sum reads a buffer its
 *                 capture allocated and freed (the pool's memory is the program's again)
 *   graph_output_past  once a graph and its pool are gone, ex_sum reads past the buffer
 *                 the graph made and the program kept (where the capture's first, larger
 *                 buffer lay)
 *   other_stream  a buffer freed on stream A is read by a kernel on stream B, queued after
 *                 an event recorded on A (the free is ordered, the read is not allowed)
 *   uninit_read   ex_sum reads a buffer only half of which a kernel, a memset and a copy
 *                 wrote (with initcheck=1: the read of the other half)
 *   torch_past    ex_sum reads past a buffer allocated as PyTorch allocates under vramguard
 *                 (vg_torch_alloc on a stream; cuMemAllocAsync where vramguard is absent)
 *   tma_unwritten a kernel stores 16 rows of a 32-row buffer through a tensor map (the
 *                 tensor memory accelerator, as cuBLAS on Hopper); ex_sum reads row 16
 *                 (with initcheck=1: a read of bytes never written, 4096 bytes in)
 * and the correct ones (no report, the same sums with and without vramguard):
 *   clean         begin/end pairs (end one past the last float), odd sizes (1, 3, 4001,
 *                 65537 bytes) written up to their last byte, every float of buffers read,
 *                 memory freed and reused, async allocations on two streams, and a buffer
 *                 freed by PyTorch's calls while a kernel on another stream still reads it,
 *                 with that stream recorded first (record_stream: the read is allowed),
 *                 and a graph whose capture allocates a buffer, frees it and allocates a
 *                 smaller one in its place, as torch.cuda.graph does: each replay writes
 *                 the first buffer whole, where the second one's redzone now lies
 *   tma_written   buffers written whole through tensor maps, one built for each and one
 *                 moved to another buffer (cuTensorMapReplaceAddress), arguments packed in
 *                 an `extra` buffer, a store captured into a CUDA graph; then read by
 *                 ex_sum (no report with initcheck=1: the bulk copies' bytes count as written)
 * The tma_ cases need compute capability 9.0 (vgsim has it); below, they say "skipped".
 * Exit status 0, or 1 if a correct case read a wrong value.
 */
#include "common.h"
#include "tma.h"

#include <math.h>
#include <stddef.h>

static ex_t g_ex;

static float device_float(CUdeviceptr p) {
    float v;
    CK(cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

/* A buffer of n floats, each v, ready (the fill completed). */
static CUdeviceptr floats(size_t n, float v) {
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n * sizeof(float)));
    CK(ex_fill(&g_ex, p, v, n, NULL));
    CK(cuCtxSynchronize());
    return p;
}

/* PyTorch's calls into vramguard (src/pytorch/entry.c), when vramguard is loaded. */
typedef void *(*torch_alloc_fn)(size_t, int, void *);
typedef void (*torch_free_fn)(void *, size_t, int, void *);
typedef void (*torch_record_fn)(void *, void *);

static CUdeviceptr torch_alloc(size_t n, CUstream s) {
    torch_alloc_fn f = (torch_alloc_fn)dlsym(RTLD_DEFAULT, "vg_torch_alloc");
    CUdeviceptr p;
    if (f && (p = (CUdeviceptr)(uintptr_t)f(n, 0, s)))
        return p;
    CK(cuMemAllocAsync(&p, n, s));
    return p;
}

static void torch_free(CUdeviceptr p, size_t n, CUstream s) {
    torch_free_fn f = (torch_free_fn)dlsym(RTLD_DEFAULT, "vg_torch_free");
    if (f)
        f((void *)(uintptr_t)p, n, 0, s);
    else
        CK(cuMemFreeAsync(p, s));
}

/* record_stream: false where vramguard is absent (the caller then waits for s instead). */
static bool torch_record_stream(CUdeviceptr p, CUstream s) {
    torch_record_fn f = (torch_record_fn)dlsym(RTLD_DEFAULT, "vg_torch_record_stream");
    if (f)
        f((void *)(uintptr_t)p, s);
    return f != NULL;
}

/* PyTorch's graph pool calls (torch.cuda.graph), when vramguard is loaded; false if not. */
typedef int (*pool_fn)(int, unsigned long long);
typedef int (*pool_begin_fn)(int, unsigned long long, void *, void *);

static bool graph_pool(const char *what, unsigned long long id) {
    if (strcmp(what, "begin") == 0) {
        pool_begin_fn f = (pool_begin_fn)dlsym(RTLD_DEFAULT, "vg_graph_pool_begin");
        return f && f(0, id, NULL, NULL) == 0;
    }
    char name[64];
    snprintf(name, sizeof name, "vg_graph_pool_%s", what);
    pool_fn f = (pool_fn)dlsym(RTLD_DEFAULT, name);
    return f && f(0, id) == 0;
}

/* n floats for a capture on s: from the graph pool in the capture where vramguard keeps
 * one (`pooled`), else allocated before it (the caller's order makes that so). */
static CUdeviceptr capture_floats(size_t n, CUstream s, bool pooled) {
    CUdeviceptr p;
    if (pooled)
        return torch_alloc(n * sizeof(float), s);
    CK(cuMemAlloc(&p, n * sizeof(float)));
    return p;
}

/* Capture on s what `body` queues, launch the graph three times, wait. (Three calls on one
 * line: three launch sites that read the same, as a loop the compiler unrolls makes; the
 * planted cases' one report must count the bad accesses of all three.) */
static void graph_three_times(CUstream s, void (*body)(CUstream, void *), void *arg) {
    CUgraph g;
    CUgraphExec exec;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    body(s, arg);
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&exec, g, 0));
    CK(cuGraphLaunch(exec, s)); CK(cuGraphLaunch(exec, s)); CK(cuGraphLaunch(exec, s));
    CK(cuStreamSynchronize(s));
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(g));
}

typedef struct {
    bool pooled;
    CUdeviceptr a, b, sums;
} pool_step_t;

/* ex_sum reads 4 floats past a 1000-float buffer (allocated in the capture if pooled). */
static void past_body(CUstream s, void *arg) {
    pool_step_t *t = arg;
    if (t->pooled)
        t->a = capture_floats(1000, s, true);
    CK(ex_fill(&g_ex, t->a, 1.0f, 1000, s));
    CK(ex_sum(&g_ex, t->a, 996, 8, t->sums, s)); /* the bug */
}

/* As torch.cuda.graph: a buffer allocated, used and freed in the capture, and a smaller
 * one allocated in its place (the pool's memory), so each replay's fill writes the first
 * buffer whole, over the second one's redzone. */
static void pool_reuse_body(CUstream s, void *arg) {
    pool_step_t *t = arg;
    if (t->pooled)
        t->a = capture_floats(2000, s, true);
    CK(ex_fill(&g_ex, t->a, 1.0f, 2000, s));
    CK(ex_sum(&g_ex, t->a, 0, 2000, t->sums, s));
    if (t->pooled) {
        torch_free(t->a, 2000 * sizeof(float), s);
        t->b = capture_floats(500, s, true);
    }
    CK(ex_fill(&g_ex, t->b, 2.0f, 500, s));
    CK(ex_sum(&g_ex, t->b, 0, 500, t->sums + sizeof(float), s));
}

/* The graph of the clean case's pool_reuse_body, launched three times, destroyed, its pool
 * ended and released; the program keeps the second buffer. Nothing without vramguard (no
 * pool, and so no buffer made in a capture). */
static pool_step_t released_pool(CUstream s) {
    pool_step_t g = {.pooled = graph_pool("begin", 11)};
    if (!g.pooled)
        return g;
    CK(cuMemAlloc(&g.sums, 2 * sizeof(float)));
    graph_three_times(s, pool_reuse_body, &g);
    graph_pool("end", 11);
    graph_pool("release", 11);
    CK(cuMemFree(g.sums));
    return g;
}

static int planted(const char *c, CUdeviceptr out) {
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (strcmp(c, "read_past") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        CK(ex_sum(&g_ex, p, 995, 10, out, NULL)); /* the bug */
    } else if (strcmp(c, "read_far") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        CK(ex_sum(&g_ex, p, 1000 + (1 << 18), 1, out, NULL)); /* the bug: 1 MiB past */
    } else if (strcmp(c, "read_before") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        CK(ex_sum_range(&g_ex, p - 4, p + 4000, out, NULL)); /* the bug */
    } else if (strcmp(c, "write_far") == 0) {
        CUdeviceptr p = floats(1000, 1.0f), idx;
        long long i = 70000; /* the bug: an index past the end */
        CK(cuMemAlloc(&idx, sizeof i));
        CK(cuMemcpyHtoD(idx, &i, sizeof i));
        void *params[] = {&p, &idx, &(unsigned){1}, &(float){2.0f}};
        CK(cuLaunchKernel(g_ex.scatter, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    } else if (strcmp(c, "read_freed") == 0) {
        CUdeviceptr p;
        CK(cuMemAllocAsync(&p, 4000, s));
        CK(ex_fill(&g_ex, p, 1.0f, 1000, s));
        CK(cuMemFreeAsync(p, s));
        CK(ex_sum(&g_ex, p, 0, 10, out, s)); /* the bug */
        CK(cuStreamSynchronize(s));
    } else if (strcmp(c, "write_freed") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        CK(cuMemFree(p));
        CK(ex_fill(&g_ex, p, 2.0f, 10, NULL)); /* the bug */
    } else if (strcmp(c, "write_freed_many") == 0) {
        CUdeviceptr p = floats(1 << 20, 1.0f);
        CK(cuMemFree(p));
        CK(ex_fill(&g_ex, p, 2.0f, 1 << 20, NULL)); /* the bug */
    } else if (strcmp(c, "async_past") == 0) {
        CUdeviceptr p;
        CK(cuMemAllocAsync(&p, 4000, s));
        CK(ex_fill(&g_ex, p, 1.0f, 1000, s));
        CK(ex_sum(&g_ex, p, 990, 20, out, s)); /* the bug */
        CK(cuStreamSynchronize(s));
    } else if (strcmp(c, "pool_past") == 0) {
        CUmemoryPool pool;
        CUmemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = 0;
        CK(cuMemPoolCreate(&pool, &props));
        CUdeviceptr p;
        CK(cuMemAllocFromPoolAsync(&p, 4000, pool, s));
        CK(ex_fill(&g_ex, p, 1.0f, 1000, s));
        CK(ex_sum(&g_ex, p, 999, 2, out, s)); /* the bug */
        CK(cuStreamSynchronize(s));
    } else if (strcmp(c, "library_past") == 0) {
        CUfunction sum = ex_library_kernel("ex_sum");
        CUdeviceptr p = floats(1000, 1.0f);
        unsigned long long first = 1000, n = 1;
        void *params[] = {&p, &first, &n, &out}; /* the bug: one float past */
        CK(cuLaunchKernel(sum, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    } else if (strcmp(c, "uninit_read") == 0) {
        CUdeviceptr p;
        float h[100] = {0};
        CK(cuMemAlloc(&p, 4000));
        CK(ex_fill(&g_ex, p, 1.0f, 300, NULL));          /* floats 0-299 by a kernel, */
        CK(cuMemsetD32(p + 1200, 0, 100));               /* 300-399 by a memset, */
        CK(cuMemcpyHtoD(p + 1600, h, sizeof h));         /* 400-499 by a copy */
        CK(ex_sum(&g_ex, p, 0, 500, out, NULL));          /* fine */
        CK(ex_sum(&g_ex, p, 500, 500, out, NULL));        /* the bug: never written */
    } else if (strcmp(c, "torch_past") == 0) {
        CUdeviceptr p = torch_alloc(4000, s);
        CK(ex_fill(&g_ex, p, 1.0f, 1000, s));
        CK(ex_sum(&g_ex, p, 996, 8, out, s)); /* the bug */
        torch_free(p, 4000, s);
        CK(cuStreamSynchronize(s));
    } else if (strcmp(c, "graph_past") == 0) { /* (a buffer allocated before the capture) */
        pool_step_t t = {.pooled = false, .a = floats(1000, 1.0f), .sums = out};
        graph_three_times(s, past_body, &t);
    } else if (strcmp(c, "graph_pool_past") == 0) {
        pool_step_t t = {.pooled = graph_pool("begin", 5), .sums = out};
        if (!t.pooled)
            t.a = capture_floats(1000, s, false);
        graph_three_times(s, past_body, &t);
        if (t.pooled) {
            torch_free(t.a, 1000 * sizeof(float), s);
            graph_pool("end", 5);
            graph_pool("release", 5);
        }
    } else if (strcmp(c, "graph_pool_released") == 0) {
        pool_step_t g = released_pool(s);
        if (g.pooled)
            CK(ex_sum(&g_ex, g.a, 1500, 10, out, s)); /* the bug: the capture freed g.a */
        CK(cuStreamSynchronize(s));
    } else if (strcmp(c, "graph_output_past") == 0) {
        pool_step_t g = released_pool(s);
        if (g.pooled)
            CK(ex_sum(&g_ex, g.b, 496, 8, out, s)); /* the bug: g.b holds 500 floats */
        CK(cuStreamSynchronize(s));
    } else if (strcmp(c, "other_stream") == 0) {
        CUstream b;
        CUevent e;
        CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
        CUdeviceptr p;
        CK(cuMemAllocAsync(&p, 4000, s));
        CK(ex_fill(&g_ex, p, 1.0f, 1000, s));
        CK(cuMemFreeAsync(p, s));
        CK(cuEventRecord(e, s));
        CK(cuStreamWaitEvent(b, e, 0));
        CK(ex_sum(&g_ex, p, 0, 1000, out, b)); /* the bug: after the free, on stream b */
        CK(cuStreamSynchronize(b));
    } else if (strcmp(c, "tma_unwritten") == 0) {
        CUfunction tma = ex_tma_kernel();
        if (!tma) {
            printf("%s: skipped (no tensor memory accelerator below compute capability 9.0)\n", c);
            return 0;
        }
        CUdeviceptr p;
        CK(cuMemAlloc(&p, 32 * 64 * sizeof(float))); /* 32 rows of 64 floats */
        CUtensorMap map = ex_tma_map(p, 64, 16, 64 * sizeof(float)); /* its first 16 rows */
        CK(ex_tma_store(tma, &map, 64, 16, 1.0f, NULL));
        CK(ex_sum(&g_ex, p, 0, 16 * 64, out, NULL));  /* fine */
        CK(ex_sum(&g_ex, p, 16 * 64, 8, out, NULL));  /* the bug: row 16, never written */
    } else {
        return -1;
    }
    CK(cuCtxSynchronize());
    printf("%s: launched\n", c);
    return 0;
}

static int wrong;

static void expect(const char *what, double got, double want) {
    if (fabs(got - want) > 1e-3 * fabs(want) + 1e-6) {
        printf("%s: %g, expected %g\n", what, got, want);
        wrong++;
    }
}

static void clean(CUdeviceptr out) {
    /* begin/end pairs: end is one past the last float, never read */
    CUdeviceptr a = floats(1000, 1.0f), b = floats(1024, 2.0f);
    CK(ex_sum_range(&g_ex, a, a + 4000, out, NULL));
    expect("begin/end of 1000 floats", device_float(out), 1000);
    CK(ex_sum_range(&g_ex, b, b + 4096, out, NULL));
    expect("begin/end of 1024 floats", device_float(out), 2048);
    CK(ex_sum(&g_ex, a, 0, 1000, out, NULL));
    expect("every float", device_float(out), 1000);
    /* odd sizes, written up to their last byte and read back */
    const size_t sizes[] = {1, 3, 4001, 65537};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CUdeviceptr p;
        CK(cuMemAlloc(&p, sizes[i]));
        CK(ex_fill_bytes(&g_ex, p, 7, sizes[i], NULL));
        unsigned char last = 0;
        CK(cuMemcpyDtoH(&last, p + sizes[i] - 1, 1));
        expect("the last byte", last, 7);
        CK(cuMemFree(p));
    }
    /* freed and reused: the new allocation's bytes are its own */
    CK(cuMemFree(a));
    CUdeviceptr c = floats(1000, 3.0f);
    CK(ex_sum(&g_ex, c, 0, 1000, out, NULL));
    expect("a reused buffer", device_float(out), 3000);
    /* async allocations on two streams, freed in stream order */
    CUstream s[2];
    for (int k = 0; k < 2; k++)
        CK(cuStreamCreate(&s[k], CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 20; i++) {
        CUstream t = s[i % 2];
        CUdeviceptr p;
        size_t n = 100 + 37 * (size_t)i;
        CK(cuMemAllocAsync(&p, n * sizeof(float), t));
        CK(ex_fill(&g_ex, p, 1.0f, n, t));
        CK(ex_sum_range(&g_ex, p, p + n * sizeof(float), out, t));
        CK(cuMemFreeAsync(p, t));
        CK(cuStreamSynchronize(t));
        expect("an async buffer", device_float(out), (double)n);
    }
    /* PyTorch's record_stream: freed on s[0] while s[1] still reads it, rightly */
    CUdeviceptr t = torch_alloc(4000, s[0]);
    CK(ex_fill(&g_ex, t, 1.0f, 1000, s[0]));
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e, s[0]));
    CK(cuStreamWaitEvent(s[1], e, 0));
    ex_hold_stream(s[1], 100); /* (the read comes well after the free) */
    CK(ex_sum(&g_ex, t, 0, 1000, out, s[1]));
    if (!torch_record_stream(t, s[1]))
        CK(cuStreamSynchronize(s[1])); /* (no caching allocator to keep it: wait) */
    torch_free(t, 4000, s[0]);
    CK(cuStreamSynchronize(s[1]));
    expect("a buffer read after its free, its stream recorded", device_float(out), 1000);
    /* a graph whose capture frees a buffer and allocates a smaller one in its place */
    pool_step_t g = {.pooled = graph_pool("begin", 9)};
    CK(cuMemAlloc(&g.sums, 2 * sizeof(float)));
    if (!g.pooled)
        g.a = capture_floats(2000, s[0], false), g.b = capture_floats(500, s[0], false);
    graph_three_times(s[0], pool_reuse_body, &g);
    float sums[2];
    CK(cuMemcpyDtoH(sums, g.sums, sizeof sums));
    expect("a graph's first sum", sums[0], 2000);
    expect("a graph's second sum", sums[1], 1000);
    if (g.pooled) { /* (the graph's memory is the pool's until the pool is released) */
        torch_free(g.b, 500 * sizeof(float), s[0]);
        if (!graph_pool("end", 9) || !graph_pool("release", 9))
            expect("the graph pool's end and release", 0, 1);
    } else {
        CK(cuMemFree(g.a));
        CK(cuMemFree(g.b));
    }
    CK(cuMemFree(g.sums));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    CK(cuCtxSynchronize());
    printf("clean: %s\n", wrong ? "WRONG VALUES" : "all sums right");
}

/* Buffers written whole by bulk tensor copies, then read: every float as stored. */
static void tma_written(CUdeviceptr out) {
    CUfunction tma = ex_tma_kernel();
    if (!tma) {
        printf("tma_written: skipped (no tensor memory accelerator below compute capability "
               "9.0)\n");
        return;
    }
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 16 * 64 * sizeof(float)));  /* 16 rows of 64 floats, */
    CK(cuMemAlloc(&b, 40 * 112 * sizeof(float))); /* 40 rows of 100 floats, 112 apart */
    CUtensorMap map = ex_tma_map(a, 64, 16, 64 * sizeof(float));
    CK(ex_tma_store(tma, &map, 64, 16, 1.0f, NULL));
    CK(ex_sum(&g_ex, a, 0, 16 * 64, out, NULL));
    expect("a tensor stored whole", device_float(out), 16 * 64);
    /* (through cuGetProcAddress, as cuBLAS and cuDNN reach the tensor map calls) */
    CUresult (*replace)(CUtensorMap *, void *) = NULL;
    CK(cuGetProcAddress("cuTensorMapReplaceAddress", (void **)&replace, 13000, 0, NULL));
    CK(replace(&map, (void *)(uintptr_t)(b + 112 * sizeof(float))));
    CK(ex_tma_store(tma, &map, 64, 16, 2.0f, NULL)); /* (from float 112: the map's rows) */
    CK(ex_sum(&g_ex, b, 112, 64, out, NULL));
    expect("a moved map's first row", device_float(out), 128);
    CUtensorMap wide = ex_tma_map(b, 100, 40, 112 * sizeof(float)); /* (boxes clipped) */
    CK(ex_tma_store(tma, &wide, 100, 40, 3.0f, NULL));
    CK(ex_sum_range(&g_ex, b + 39 * 112 * sizeof(float), b + (39 * 112 + 100) * sizeof(float),
                    out, NULL));
    expect("the last row of a strided tensor", device_float(out), 300);
    /* the arguments packed in an `extra` buffer (the map at byte 0, the float at 128) */
    CUdeviceptr c;
    CK(cuMemAlloc(&c, 16 * 64 * sizeof(float)));
    struct { CUtensorMap map; float v; } packed = {ex_tma_map(c, 64, 16, 64 * sizeof(float)), 4.0f};
    size_t size = offsetof(__typeof__(packed), v) + sizeof packed.v; /* (132: the kernel's) */
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &size, CU_LAUNCH_PARAM_END};
    CK(cuLaunchKernel(tma, 2, 2, 1, 128, 1, 1, 0, NULL, NULL, extra));
    CK(ex_sum(&g_ex, c, 0, 16 * 64, out, NULL));
    expect("a tensor stored through packed arguments", device_float(out), 4 * 16 * 64);
    /* a store captured into a CUDA graph, launched twice (its region marked at the capture) */
    CUstream s;
    CUgraph g;
    CUgraphExec tma_exec;
    CUdeviceptr d;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&d, 16 * 64 * sizeof(float)));
    CUtensorMap dmap = ex_tma_map(d, 64, 16, 64 * sizeof(float));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(ex_tma_store(tma, &dmap, 64, 16, 5.0f, s));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&tma_exec, g, 0));
    CK(cuGraphLaunch(tma_exec, s));
    CK(cuGraphLaunch(tma_exec, s));
    CK(ex_sum(&g_ex, d, 0, 16 * 64, out, s));
    CK(cuStreamSynchronize(s));
    expect("a tensor stored by a graph", device_float(out), 5 * 16 * 64);
    CK(cuGraphExecDestroy(tma_exec));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy(s));
    CK(cuMemFree(d));
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    printf("tma_written: %s\n", wrong ? "WRONG VALUES" : "all sums right");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: memcheck_user CASE (see the source)\n");
        return 2;
    }
    g_ex = ex_init();
    CUdeviceptr out;
    CK(cuMemAlloc(&out, sizeof(float)));
    if (strcmp(argv[1], "clean") == 0) {
        clean(out);
        CK(cuMemFree(out));
        return wrong ? 1 : 0;
    }
    if (strcmp(argv[1], "tma_written") == 0) {
        tma_written(out);
        CK(cuMemFree(out));
        return wrong ? 1 : 0;
    }
    if (planted(argv[1], out) < 0) {
        fprintf(stderr, "memcheck_user: unknown case '%s'\n", argv[1]);
        return 2;
    }
    return 0;
}
