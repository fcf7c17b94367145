/* access_user.c — the accesses the API shows, planted wrong and made right (tests/cli
 * access_*; docs/decisions.md G11). A plain driver-API program with real kernels
 * (examples/kernels.cu), correct on a GPU but for the planted bug.
 *
 * usage: access_user CASE. The bugs (each prints the planted call's CUresult, which
 * vramguard makes CUDA_ERROR_INVALID_VALUE for a copy or memset, as the driver does for
 * its own allocations):
 *   copy_read_past        cuMemcpyDtoD reads 4096 bytes from a 4000-byte source
 *   memset_past           cuMemsetD32 sets 1001 words of a 4000-byte buffer
 *   copy2d_past           cuMemcpy2D's 16th row of 256 bytes ends 96 bytes past a 4000-byte
 *                         destination
 *   copy_far              cuMemcpyDtoHAsync from 1 MiB past the end of a 4000-byte buffer
 *                         (a bad offset), into memory no allocation holds
 *   copy_freed            cuMemcpyDtoH from a buffer freed just before
 *   freed_arg             ex_sum is given a buffer freed just before; it only reads it
 *   redzone_arg_overrun   ex_sum is given a pointer 16 bytes before a buffer (with a first
 *                         index that keeps its reads inside), then ex_fill writes 4 bytes
 *                         past its end: the overrun's report names both kernels
 * and the correct ones (the same output with and without vramguard, no report):
 *   redzone_arg           ex_sum given that pointer before a buffer, reading inside it,
 *                         and one 64 bytes past its end, reading nothing
 *   begin_end             ex_sum_range with begin/end pairs, end one past the last float,
 *                         of buffers of 4000 and 4096 bytes, beside freed neighbours
 *   last_byte             odd sizes (1, 3, 4001, 65537 bytes): a kernel writes up to the
 *                         last byte; a memset and a copy of exactly the size
 *   pitched_2d            cuMemAllocPitch, 2D copies and a 2D memset up to its last row
 *   threads               8 threads, each with its own stream, allocating, filling,
 *                         copying, summing and freeing
 *   small_ints_arg        ex_fill_typed, whose struct argument begins with two small
 *                         integers (6, 4: 0x400000006 read as one word), launched after
 *                         freeing a buffer that held that address where device memory
 *                         lies near 16 GiB (vgsim: VGSIM_ARENA_AT=0x380000000); prints
 *                         "a freed buffer held 0x400000006" when one did
 * Exit status 0, or 1 if a correct case read a wrong value.
 */
#include "common.h"

#include <math.h>

static ex_t g_ex;

static const char *result(CUresult r) {
    const char *n = "?";
    cuGetErrorName(r, &n);
    return n;
}

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

static int planted(const char *c) {
    static const char *const bugs[] = {"copy_read_past", "memset_past", "copy2d_past", "copy_far",
                                       "copy_freed", "freed_arg", "redzone_arg_overrun"};
    bool known = false;
    for (size_t i = 0; i < sizeof bugs / sizeof bugs[0]; i++)
        known |= strcmp(c, bugs[i]) == 0;
    if (!known)
        return -1;
    CUdeviceptr out;
    CK(cuMemAlloc(&out, sizeof(float)));
    if (strcmp(c, "copy_read_past") == 0) {
        CUdeviceptr src = floats(1000, 1.0f), dst;
        CK(cuMemAlloc(&dst, 8192));
        printf("copy_read_past: %s\n", result(cuMemcpyDtoD(dst, src, 4096))); /* the bug */
    } else if (strcmp(c, "memset_past") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        printf("memset_past: %s\n", result(cuMemsetD32(p, 0, 1001))); /* the bug */
    } else if (strcmp(c, "copy2d_past") == 0) {
        CUdeviceptr src, dst;
        CK(cuMemAlloc(&src, 4096));
        CK(cuMemsetD8(src, 3, 4096));
        CK(cuMemAlloc(&dst, 4000));
        CUDA_MEMCPY2D m;
        memset(&m, 0, sizeof m);
        m.srcMemoryType = m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        m.srcDevice = src;
        m.dstDevice = dst;
        m.srcPitch = m.dstPitch = m.WidthInBytes = 256;
        m.Height = 16; /* the bug: 4096 bytes into 4000 */
        printf("copy2d_past: %s\n", result(cuMemcpy2D(&m)));
    } else if (strcmp(c, "copy_far") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        float *h;
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAllocHost((void **)&h, 4096));
        CUresult r = cuMemcpyDtoHAsync(h, p + 4000 + (1 << 20), 256, s); /* the bug */
        CK(cuStreamSynchronize(s));
        printf("copy_far: %s\n", result(r));
    } else if (strcmp(c, "copy_freed") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        float h[1000];
        CK(cuMemFree(p));
        printf("copy_freed: %s\n", result(cuMemcpyDtoH(h, p, sizeof h))); /* the bug */
    } else if (strcmp(c, "freed_arg") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        CK(cuMemFree(p));
        CK(ex_sum(&g_ex, p, 0, 1000, out, NULL)); /* the bug: it reads freed memory */
        CK(cuCtxSynchronize());
        printf("freed_arg: launched\n");
    } else if (strcmp(c, "redzone_arg_overrun") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        /* Given 4 floats before the buffer, the kernel reads from element 4 on (fine) */
        CK(ex_sum(&g_ex, p - 16, 4, 1000, out, NULL));
        CK(ex_fill(&g_ex, p, 2.0f, 1001, NULL)); /* the bug: 4 bytes past the end */
        CK(cuCtxSynchronize());
        printf("redzone_arg_overrun: launched\n");
    } else {
        return -1;
    }
    return 0;
}

static int wrong;

static void expect(const char *what, double got, double want) {
    if (fabs(got - want) > 1e-3 * fabs(want) + 1e-6) {
        printf("%s: %g, expected %g\n", what, got, want);
        wrong++;
    }
}

static void *thread_main(void *arg) {
    long id = (long)(intptr_t)arg;
    CK(cuCtxSetCurrent(g_ex.ctx));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    double total = 0;
    for (int i = 0; i < 50; i++) {
        size_t n = 1 + (size_t)((id * 7919 + i * 104729) % 5000);
        CUdeviceptr a, b, out;
        CK(cuMemAllocAsync(&a, n * sizeof(float), s));
        CK(cuMemAllocAsync(&b, n * sizeof(float), s));
        CK(cuMemAllocAsync(&out, sizeof(float), s));
        CK(ex_fill(&g_ex, a, (float)(id + 1), n, s));
        CK(cuMemcpyDtoDAsync(b, a, n * sizeof(float), s));
        CK(ex_sum(&g_ex, b, 0, n, out, s));
        float v;
        CK(cuMemcpyDtoHAsync(&v, out, sizeof v, s));
        CK(cuStreamSynchronize(s));
        total += v;
        CK(cuMemFreeAsync(a, s));
        CK(cuMemFreeAsync(b, s));
        CK(cuMemFreeAsync(out, s));
    }
    CK(cuStreamSynchronize(s));
    CK(cuStreamDestroy(s));
    return (void *)(intptr_t)(long)total;
}

static int correct(const char *c) {
    CUdeviceptr out;
    CK(cuMemAlloc(&out, sizeof(float)));
    if (strcmp(c, "redzone_arg") == 0) {
        CUdeviceptr p = floats(1000, 1.0f);
        /* Given 4 floats before the buffer, the kernel reads from element 4 on; then given a
         * pointer past the end and nothing to read. */
        CK(ex_sum(&g_ex, p - 16, 4, 1000, out, NULL));
        expect("redzone_arg", device_float(out), 1000);
        CK(ex_sum(&g_ex, p + 4000 + 64, 0, 0, out, NULL));
        expect("redzone_arg (nothing read)", device_float(out), 0);
        CK(cuMemFree(p));
    } else if (strcmp(c, "begin_end") == 0) {
        size_t sizes[] = {1000, 1024}; /* 4000 and 4096 bytes */
        for (int k = 0; k < 2; k++) {
            CUdeviceptr p = floats(sizes[k], 1.0f), next = floats(sizes[k], 2.0f);
            CK(cuMemFree(next)); /* (its start may be p's end) */
            CK(ex_sum_range(&g_ex, p, p + sizes[k] * sizeof(float), out, NULL));
            expect("begin_end", device_float(out), (double)sizes[k]);
            CK(ex_sum_range(&g_ex, p + sizes[k] * sizeof(float), p + sizes[k] * sizeof(float),
                            out, NULL)); /* an empty range at the end */
            expect("begin_end (empty)", device_float(out), 0);
            CK(cuMemFree(p));
        }
    } else if (strcmp(c, "last_byte") == 0) {
        size_t sizes[] = {1, 3, 4001, 65537};
        for (int k = 0; k < 4; k++) {
            size_t n = sizes[k];
            CUdeviceptr p;
            unsigned char *h = malloc(n);
            CK(cuMemAlloc(&p, n));
            CK(cuMemsetD8(p, 1, n));
            CK(ex_fill_bytes(&g_ex, p + n / 2, 9, n - n / 2, NULL)); /* up to the last byte */
            CK(cuMemcpyDtoH(h, p, n));
            expect("last_byte (first)", h[0], n == 1 ? 9 : 1);
            expect("last_byte (last)", h[n - 1], 9);
            free(h);
            CK(cuMemFree(p));
        }
    } else if (strcmp(c, "pitched_2d") == 0) {
        CUdeviceptr p;
        size_t pitch, width = 300, rows = 17;
        CK(cuMemAllocPitch(&p, &pitch, width, rows, 4));
        CK(cuMemsetD2D8(p, pitch, 5, width, rows)); /* every row, the last one too */
        unsigned char *h = calloc(rows, width);
        CUDA_MEMCPY2D m;
        memset(&m, 0, sizeof m);
        m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        m.srcDevice = p;
        m.srcPitch = pitch;
        m.dstMemoryType = CU_MEMORYTYPE_HOST;
        m.dstHost = h;
        m.dstPitch = m.WidthInBytes = width;
        m.Height = rows;
        CK(cuMemcpy2D(&m));
        expect("pitched_2d (last byte)", h[rows * width - 1], 5);
        CUdeviceptr q;
        CK(cuMemAlloc(&q, rows * width)); /* packed: its last row ends at its end */
        m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        m.dstDevice = q;
        m.dstHost = NULL;
        CK(cuMemcpy2D(&m));
        CK(cuMemcpyDtoH(h, q, rows * width));
        expect("pitched_2d (copied)", h[rows * width - 1], 5);
        free(h);
        CK(cuMemFree(q));
        CK(cuMemFree(p));
    } else if (strcmp(c, "threads") == 0) {
        pthread_t t[8];
        for (long i = 0; i < 8; i++)
            pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)i);
        long total = 0;
        for (int i = 0; i < 8; i++) {
            void *v;
            pthread_join(t[i], &v);
            total += (long)(intptr_t)v;
        }
        printf("threads: %ld\n", total);
    } else if (strcmp(c, "small_ints_arg") == 0) {
        /* 256 MiB buffers from the bottom of device memory up to 0x400000006 (none where
         * memory lies higher), all freed; then a kernel given (6, 4) in one word */
        const CUdeviceptr target = 0x400000006ull;
        CUdeviceptr bufs[80];
        int n = 0;
        bool held = false;
        while (n < 80) {
            CK(cuMemAlloc(&bufs[n], 256u << 20));
            held |= bufs[n] <= target && target < bufs[n] + (256u << 20);
            if (bufs[n++] > target || held)
                break;
        }
        while (n > 0)
            CK(cuMemFree(bufs[--n]));
        if (held)
            printf("small_ints_arg: a freed buffer held 0x400000006\n");
        CUdeviceptr p = floats(1000, 0.0f);
        CK(ex_fill_typed(&g_ex, p, 2.0f, 1000, NULL));
        CK(ex_sum(&g_ex, p, 0, 1000, out, NULL));
        expect("small_ints_arg", device_float(out), 2000);
        CK(cuMemFree(p));
    } else {
        return -1;
    }
    CK(cuMemFree(out));
    printf("%s: done\n", c);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: access_user CASE (see the top of access_user.c)\n");
        return 2;
    }
    g_ex = ex_init();
    int r = planted(argv[1]);
    if (r < 0)
        r = correct(argv[1]);
    if (r < 0) {
        fprintf(stderr, "access_user: unknown case '%s'\n", argv[1]);
        return 2;
    }
    return wrong ? 1 : 0;
}
