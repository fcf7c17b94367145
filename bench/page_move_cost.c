/* page_move_cost.c — what moving a physical page costs on this driver (issue 37,
 * docs/decisions.md A13: a plan that settles still moves pages while it learns the step
 * and at its handover, thousands on GPT-2; the models count moves, not their cost).
 *
 * With PAGES physical pages of the allocation granularity (2 MiB on the GPUs measured):
 *  1. maps each at an address and opens access to it, page by page: the cost of a page
 *     mapped for the first time (cuMemMap, cuMemSetAccess);
 *  2. moves each to another address (cuMemUnmap, cuMemMap, cuMemSetAccess): the cost of
 *     one move, as A1's pressure path makes it;
 *  3. moves them back, opening access once per run of 64 pages: what batching the
 *     access call saves;
 *  4. holds a stream for HOLD_MS (a host function waiting on a gate) with a memset of
 *     page 0 queued behind it, then unmaps page 1, which nothing uses: if cuMemUnmap waits
 *     for the device, it takes about HOLD_MS, and a move is then a synchronisation.
 * Prints the median and the 90th percentile of each call in microseconds, and (4) in
 * milliseconds.
 *
 * usage: page_move_cost [PAGES] [HOLD_MS]   (default 256 pages, 300 ms) */
#include "../examples/common.h"

#define RUN 64 /* pages per access call in step 3 */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "NAME: median M us, p90 P us (N calls)" of n timings (sorted in place). */
static void report(const char *name, double *t, long n) {
    qsort(t, (size_t)n, sizeof *t, by_value);
    printf("%-36s median %8.1f us, p90 %8.1f us (%ld calls)\n", name, t[n / 2],
           t[(long)((double)n * 0.9)], n);
}

int main(int argc, char **argv) {
    long pages = argc > 1 ? atol(argv[1]) : 256;
    long hold = argc > 2 ? atol(argv[2]) : 300;
    if (pages < RUN || pages % RUN) {
        fprintf(stderr, "page_move_cost: PAGES must be a multiple of %d\n", RUN);
        return 2;
    }
    ex_t e = ex_init();
    (void)e;
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t page = 0;
    CK(cuMemGetAllocationGranularity(&page, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, 2 * (size_t)pages * page, page, 0, 0));
    CUmemGenericAllocationHandle *h = calloc((size_t)pages, sizeof *h);
    double *map = calloc((size_t)pages, sizeof *map), *acc = calloc((size_t)pages, sizeof *acc),
           *unmap = calloc((size_t)pages, sizeof *unmap);
    if (!h || !map || !acc || !unmap)
        return 2;
    for (long i = 0; i < pages; i++)
        CK(cuMemCreate(&h[i], page, &prop, 0));
    printf("page_move_cost: %ld pages of %zu KiB\n", pages, page >> 10);

    for (long i = 0; i < pages; i++) { /* 1. first mappings */
        CUdeviceptr at = va + (CUdeviceptr)i * page;
        double t0 = now_us();
        CK(cuMemMap(at, page, 0, h[i], 0));
        double t1 = now_us();
        CK(cuMemSetAccess(at, page, &access, 1));
        map[i] = t1 - t0;
        acc[i] = now_us() - t1;
    }
    report("1. cuMemMap, a new page", map, pages);
    report("1. cuMemSetAccess, one page", acc, pages);

    double *move = calloc((size_t)pages, sizeof *move);
    for (long i = 0; i < pages; i++) { /* 2. moves, page by page */
        CUdeviceptr from = va + (CUdeviceptr)i * page, to = from + (CUdeviceptr)pages * page;
        double t0 = now_us();
        CK(cuMemUnmap(from, page));
        double t1 = now_us();
        CK(cuMemMap(to, page, 0, h[i], 0));
        double t2 = now_us();
        CK(cuMemSetAccess(to, page, &access, 1));
        double t3 = now_us();
        unmap[i] = t1 - t0;
        map[i] = t2 - t1;
        acc[i] = t3 - t2;
        move[i] = t3 - t0;
    }
    report("2. cuMemUnmap", unmap, pages);
    report("2. cuMemMap, a moved page", map, pages);
    report("2. cuMemSetAccess, one page", acc, pages);
    report("2. one move (the three)", move, pages);

    long runs = pages / RUN;
    double *batch = calloc((size_t)runs, sizeof *batch);
    for (long r = 0; r < runs; r++) { /* 3. moved back, access opened per run */
        double t0 = now_us();
        for (long i = r * RUN; i < (r + 1) * RUN; i++) {
            CUdeviceptr from = va + (CUdeviceptr)(pages + i) * page;
            CK(cuMemUnmap(from, page));
            CK(cuMemMap(va + (CUdeviceptr)i * page, page, 0, h[i], 0));
        }
        CK(cuMemSetAccess(va + (CUdeviceptr)(r * RUN) * page, RUN * page, &access, 1));
        batch[r] = (now_us() - t0) / RUN;
    }
    report("3. one move, access per 64 pages", batch, runs);

    CUstream s; /* 4. does an unmap wait for the device? */
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ex_hold_stream(s, (int)hold);
    CK(cuMemsetD8Async(va, 7, page, s));
    double t0 = now_us();
    CK(cuMemUnmap(va + page, page));
    double t1 = now_us();
    CUresult q = cuStreamQuery(s);
    const char *qn = "?";
    cuGetErrorName(q, &qn);
    printf("4. cuMemUnmap of an idle page, with a memset of another queued behind a %ld ms "
           "hold: %.1f ms (the stream then: %s)\n",
           hold, (t1 - t0) / 1e3, qn);
    CK(cuStreamSynchronize(s));
    CK(cuMemMap(va + page, page, 0, h[1], 0));
    CK(cuMemSetAccess(va + page, page, &access, 1));

    for (long i = 0; i < pages; i++) {
        CK(cuMemUnmap(va + (CUdeviceptr)i * page, page));
        CK(cuMemRelease(h[i]));
    }
    CK(cuMemAddressFree(va, 2 * (size_t)pages * page));
    CK(cuStreamDestroy(s));
    free(h), free(map), free(acc), free(unmap), free(move), free(batch);
    return 0;
}
