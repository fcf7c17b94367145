/* s11_pinned_staging.c — S11: a data loader that pins a staging buffer per batch and
 * frees only half of them.
 *
 * Each of 20 batches is written into a fresh 2 MiB pinned buffer (cuMemHostAlloc) and
 * sent to the device with cuMemcpyHtoDAsync, as a loader with pin_memory does; the loader
 * frees the even batches' buffers once their copy is done, and forgets the odd ones: 10
 * buffers, 20 MiB of page-locked host RAM, stay pinned until the process ends. vramguard
 * run in guard mode reports them as pinned host memory leaked, from the line that pinned
 * them. The other ways to run it:
 *   --steps      the loader marks the end of every second batch (a training step that
 *                takes two) as a step for vramguard (vg_step, when the program runs under
 *                it): the pinned memory of that line grows at every step, and is reported
 *                as growth before the end
 *   --register   the batches are written into ordinary memory (malloc) that the loader
 *                pins with cuMemHostRegister (cudaHostRegister), and unregisters only for
 *                the even ones
 *   --big        one 64 MiB pinned buffer (what --pinned_limit=16M refuses); prints the
 *                result of cuMemHostAlloc
 *   --free-queued  a correct loader that frees each buffer right after queueing its copy,
 *                behind 100 ms of earlier work on the stream: the driver waits for the
 *                copy before freeing (docs/decisions.md G14), which verbose mode notes
 */
#include "common.h"

#define BATCHES 20
#define BATCH_BYTES (2u << 20)

/* A batch's contents: what a loader's workers would have decoded. */
static void fill_batch(float *h, int batch) {
    for (size_t i = 0; i < BATCH_BYTES / sizeof(float); i++)
        h[i] = (float)batch;
}

/* vg_step() when vramguard is loaded (vramguard run), else nothing. */
static void end_of_step(void) {
    int (*step)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "vg_step");
    if (step)
        step();
}

static float *pinned_batch(void) {
    float *h;
    CK(cuMemHostAlloc((void **)&h, BATCH_BYTES, 0)); /* PIN */
    return h;
}

static float *registered_batch(void) {
    float *h = aligned_alloc(4096, BATCH_BYTES);
    if (!h)
        exit(1);
    CK(cuMemHostRegister(h, BATCH_BYTES, 0)); /* REGISTER */
    return h;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    ex_init();
    if (strcmp(how, "--big") == 0) {
        void *h = NULL;
        CUresult r = cuMemHostAlloc(&h, 64u << 20, 0); /* BIG */
        const char *name = "?";
        cuGetErrorName(r, &name);
        printf("s11: cuMemHostAlloc of 64 MiB: %s\n", name);
        if (r == CUDA_SUCCESS)
            CK(cuMemFreeHost(h));
        return 0;
    }
    bool reg = strcmp(how, "--register") == 0, queued = strcmp(how, "--free-queued") == 0;
    CUdeviceptr d;
    CUstream s;
    CK(cuMemAlloc(&d, BATCH_BYTES));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    double sum = 0;
    for (int batch = 0; batch < BATCHES; batch++) {
        float *h = reg ? registered_batch() : pinned_batch();
        fill_batch(h, batch);
        if (queued && batch == 0)
            ex_hold_stream(s, 100); /* earlier work keeps the stream busy */
        CK(cuMemcpyHtoDAsync(d, h, BATCH_BYTES, s));
        if (queued) { /* correct, if slow: the driver waits for the copy */
            CK(cuMemFreeHost(h));
            continue;
        }
        CK(cuStreamSynchronize(s)); /* the batch is on the device */
        sum += h[0];
        if (batch % 2 == 0 && reg) {
            CK(cuMemHostUnregister(h));
            free(h);
        } else if (batch % 2 == 0) {
            CK(cuMemFreeHost(h));
        } /* the bug: an odd batch's buffer is never freed */
        if (batch % 2 == 1 && strcmp(how, "--steps") == 0)
            end_of_step();
    }
    CK(cuStreamSynchronize(s));
    CK(cuMemFree(d));
    CK(cuStreamDestroy(s));
    printf("s11: %d batches staged (checksum %.0f)\n", BATCHES, sum);
    return 0;
}
