/* multistream.c — reserved memory when several streams allocate and free, for `vramguard
 * run --verbose` (whose exit line gives the peaks) or any allocator under test.
 *
 * Eight buffers of 1-16 MiB (a seeded generator) are replaced in turn, 600 times; each new
 * buffer gets a kernel on its stream, and every fourth step the host synchronises the
 * context. PATTERN says which streams allocate and free:
 *   single  everything on one stream
 *   own     three streams take turns; each buffer is freed on the stream it was made on
 *   next    one stream allocates, a buffer is freed on the next of three streams
 *           (cuMemFreeAsync on a copy stream: a cross-stream free)
 *   random  allocation and free each on one of three streams, drawn at random
 *
 * usage: multistream [single|own|next|random] [STEPS]   (default: random, 600) */
#include "../examples/common.h"

int main(int argc, char **argv) {
    const char *pattern = argc > 1 ? argv[1] : "random";
    long steps = argc > 2 ? atol(argv[2]) : 600;
    int p = strcmp(pattern, "single") == 0 ? 0 : strcmp(pattern, "own") == 0 ? 1
          : strcmp(pattern, "next") == 0 ? 2 : strcmp(pattern, "random") == 0 ? 3 : -1;
    if (p < 0 || steps < 1) {
        fprintf(stderr, "usage: multistream [single|own|next|random] [STEPS]\n");
        return 2;
    }
    ex_t e = ex_init();
    CUstream s[3];
    for (int i = 0; i < 3; i++)
        CK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    CUdeviceptr live[8] = {0};
    int made_on[8] = {0};
    unsigned seed = 1;
    for (long i = 0; i < steps; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = (size_t)((seed >> 8) % 16 + 1) << 20;
        int k = (int)(i % 8);
        if (live[k]) {
            int fs = p <= 1 ? made_on[k] : p == 2 ? (made_on[k] + 1) % 3 : (int)((seed >> 4) % 3);
            CK(cuMemFreeAsync(live[k], s[fs]));
        }
        int as = p == 0 ? 0 : p == 1 ? (int)(i % 3) : p == 2 ? 0 : (int)((seed >> 12) % 3);
        CK(cuMemAllocAsync(&live[k], n, s[as]));
        made_on[k] = as;
        CK(ex_fill(&e, live[k], 1.0f, 1024, s[as]));
        if (i % 4 == 3)
            CK(cuCtxSynchronize());
    }
    for (int k = 0; k < 8; k++)
        CK(cuMemFreeAsync(live[k], s[made_on[k]]));
    CK(cuCtxSynchronize());
    printf("multistream %s: %ld steps done\n", pattern, steps);
    return 0;
}
