/* random_clean.c — a correct multi-stream program drawn at random (tests/cli
 * interposer_random_clean): under vramguard it must compute exactly what it computes
 * without it, and guard mode must report nothing.
 *
 * Buffers are allocated with cuMemAlloc or cuMemAllocAsync, filled by a kernel, refilled,
 * handed from stream to stream through events, read back, and freed with cuMemFree (any
 * of them) or cuMemFreeAsync (those from cuMemAllocAsync), on legacy, blocking and
 * non-blocking streams, each step drawn from a seed. Host functions that sleep make streams lag behind the host, so that a reuse the
 * program's ordering does not allow shows as a wrong value. Fills are kernels or memsets;
 * reads wait for the stream or for an event (waited for, or polled). Every read checks the
 * buffer's first, middle and last float against what its last fill wrote.
 *
 * usage: random_clean SEED [STEPS]. Prints a checksum of what it read; exit status 1 if
 * a value was wrong.
 */
#include "common.h"

#include <sched.h>

enum { NSTREAMS = 4, MAXLIVE = 24 };

typedef struct buf {
    CUdeviceptr p;
    size_t n;    /* floats */
    int owner;   /* index into streams: where its last fill ran */
    float value; /* what that fill wrote */
    bool sync;   /* from cuMemAlloc (freed with cuMemFree), else cuMemAllocAsync */
} buf_t;

static unsigned long long rng_state;
static unsigned rnd(unsigned n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng_state >> 33) % n;
}

static void CUDA_CB lag(void *arg) {
    struct timespec ts = {0, (long)(uintptr_t)arg * 100000L}; /* 0-1.5 ms */
    nanosleep(&ts, NULL);
}

static CUstream streams[NSTREAMS]; /* [0] is the legacy stream */
static CUevent events[NSTREAMS];
static ex_t ex;
static int wrong;
static double checksum;

static void fill(buf_t *b, int s, float v) {
    if (rnd(3) == 0)
        CK(cuLaunchHostFunc(streams[s], lag, (void *)(uintptr_t)rnd(16)));
    if (rnd(4) == 0) { /* a memset instead of a kernel */
        unsigned bits;
        memcpy(&bits, &v, sizeof bits);
        CK(cuMemsetD32Async(b->p, bits, b->n, streams[s]));
    } else {
        CK(ex_fill(&ex, b->p, v, b->n, streams[s]));
    }
    b->owner = s;
    b->value = v;
}

static void check(const buf_t *b) {
    if (rnd(3) == 0) { /* an event, waited for or polled, instead of the stream */
        CK(cuEventRecord(events[b->owner], streams[b->owner]));
        if (rnd(2))
            CK(cuEventSynchronize(events[b->owner]));
        else
            while (cuEventQuery(events[b->owner]) == CUDA_ERROR_NOT_READY)
                sched_yield();
    } else {
        CK(cuStreamSynchronize(streams[b->owner]));
    }
    size_t at[3] = {0, b->n / 2, b->n - 1};
    for (int i = 0; i < 3; i++) {
        float x;
        CK(cuMemcpyDtoH(&x, b->p + at[i] * sizeof(float), sizeof x));
        checksum += x;
        if (x != b->value && wrong++ < 5)
            printf("wrong: float %zu of a %zu-float buffer reads %g, its last fill wrote %g\n",
                   at[i], b->n, x, b->value);
    }
}

int main(int argc, char **argv) {
    rng_state = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    long steps = argc > 2 ? atol(argv[2]) : 3000;
    ex = ex_init();
    streams[0] = NULL;
    CK(cuStreamCreate(&streams[1], CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&streams[2], CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&streams[3], CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < NSTREAMS; i++)
        CK(cuEventCreate(&events[i], CU_EVENT_DISABLE_TIMING));
    buf_t live[MAXLIVE];
    int nlive = 0;
    float next_value = 1.0f;
    for (long step = 0; step < steps; step++) {
        unsigned op = rnd(100);
        if (nlive == 0 || (op < 30 && nlive < MAXLIVE)) { /* allocate and fill */
            buf_t *b = &live[nlive++];
            b->n = 64 + rnd(4) * 1024 + rnd(1024) * (rnd(8) == 0 ? 256 : 1);
            int s = (int)rnd(NSTREAMS);
            b->sync = rnd(2);
            if (b->sync)
                CK(cuMemAlloc(&b->p, b->n * sizeof(float))); /* any stream may use it */
            else
                CK(cuMemAllocAsync(&b->p, b->n * sizeof(float), streams[s]));
            fill(b, s, next_value++);
        } else if (op < 45) { /* refill on its stream */
            buf_t *b = &live[rnd(nlive)];
            fill(b, b->owner, next_value++);
        } else if (op < 60) { /* hand it to another stream through an event */
            buf_t *b = &live[rnd(nlive)];
            int t = (int)rnd(NSTREAMS);
            CK(cuEventRecord(events[b->owner], streams[b->owner]));
            CK(cuStreamWaitEvent(streams[t], events[b->owner], 0));
            fill(b, t, next_value++);
        } else if (op < 72) {
            check(&live[rnd(nlive)]);
        } else if (op < 98) { /* free: cuMemFree waits for the device, FreeAsync is ordered */
            int k = (int)rnd(nlive);
            buf_t *b = &live[k];
            if (rnd(4) == 0)
                check(b);
            if (b->sync || rnd(2))
                CK(cuMemFree(b->p));
            else
                CK(cuMemFreeAsync(b->p, streams[b->owner]));
            live[k] = live[--nlive];
        } else {
            CK(cuCtxSynchronize());
        }
    }
    for (int k = 0; k < nlive; k++) {
        check(&live[k]);
        CK(cuMemFree(live[k].p));
    }
    CK(cuCtxSynchronize());
    printf("%ld steps: checksum %.1f, %d wrong values\n", steps, checksum, wrong);
    return wrong != 0;
}
