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
 * With THREADS > 1, each thread runs such a program of its own (its own streams, the
 * first of them the per-thread default stream, and buffers; seed SEED*100+thread) in the
 * one context, so that one thread's synchronisations and frees happen while the others
 * allocate, free and launch.
 *
 * usage: random_clean SEED [STEPS] [THREADS]. Prints a checksum of what each thread read;
 * exit status 1 if a value was wrong.
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

typedef struct worker {
    unsigned long long rng;
    long steps;
    CUstream streams[NSTREAMS]; /* [0]: the legacy stream, or the per-thread one */
    CUevent events[NSTREAMS];
    int wrong;
    double checksum;
} worker_t;

static ex_t ex;

static unsigned rnd(worker_t *w, unsigned n) {
    w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(w->rng >> 33) % n;
}

static void CUDA_CB lag(void *arg) {
    struct timespec ts = {0, (long)(uintptr_t)arg * 100000L}; /* 0-1.5 ms */
    nanosleep(&ts, NULL);
}

static void fill(worker_t *w, buf_t *b, int s, float v) {
    if (rnd(w, 3) == 0)
        CK(cuLaunchHostFunc(w->streams[s], lag, (void *)(uintptr_t)rnd(w, 16)));
    if (rnd(w, 4) == 0) { /* a memset instead of a kernel */
        unsigned bits;
        memcpy(&bits, &v, sizeof bits);
        CK(cuMemsetD32Async(b->p, bits, b->n, w->streams[s]));
    } else {
        CK(ex_fill(&ex, b->p, v, b->n, w->streams[s]));
    }
    b->owner = s;
    b->value = v;
}

static void check(worker_t *w, const buf_t *b) {
    CUstream s = w->streams[b->owner];
    if (rnd(w, 3) == 0) { /* an event, waited for or polled, instead of the stream */
        CK(cuEventRecord(w->events[b->owner], s));
        if (rnd(w, 2))
            CK(cuEventSynchronize(w->events[b->owner]));
        else
            while (cuEventQuery(w->events[b->owner]) == CUDA_ERROR_NOT_READY)
                sched_yield();
    } else {
        CK(cuStreamSynchronize(s));
    }
    size_t at[3] = {0, b->n / 2, b->n - 1};
    for (int i = 0; i < 3; i++) {
        float x;
        CK(cuMemcpyDtoH(&x, b->p + at[i] * sizeof(float), sizeof x));
        w->checksum += x;
        if (x != b->value && w->wrong++ < 5)
            printf("wrong: float %zu of a %zu-float buffer reads %g, its last fill wrote %g\n",
                   at[i], b->n, x, b->value);
    }
}

static void *run(void *arg) {
    worker_t *w = arg;
    CK(cuCtxSetCurrent(ex.ctx));
    CK(cuStreamCreate(&w->streams[1], CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&w->streams[2], CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&w->streams[3], CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < NSTREAMS; i++)
        CK(cuEventCreate(&w->events[i], CU_EVENT_DISABLE_TIMING));
    buf_t live[MAXLIVE];
    int nlive = 0;
    float next_value = 1.0f;
    for (long step = 0; step < w->steps; step++) {
        unsigned op = rnd(w, 100);
        if (nlive == 0 || (op < 30 && nlive < MAXLIVE)) { /* allocate and fill */
            buf_t *b = &live[nlive++];
            b->n = 64 + rnd(w, 4) * 1024 + rnd(w, 1024) * (rnd(w, 8) == 0 ? 256 : 1);
            int s = (int)rnd(w, NSTREAMS);
            b->sync = rnd(w, 2);
            if (b->sync)
                CK(cuMemAlloc(&b->p, b->n * sizeof(float))); /* any stream may use it */
            else
                CK(cuMemAllocAsync(&b->p, b->n * sizeof(float), w->streams[s]));
            fill(w, b, s, next_value++);
        } else if (op < 45) { /* refill on its stream */
            buf_t *b = &live[rnd(w, nlive)];
            fill(w, b, b->owner, next_value++);
        } else if (op < 60) { /* hand it to another stream through an event */
            buf_t *b = &live[rnd(w, nlive)];
            int t = (int)rnd(w, NSTREAMS);
            CK(cuEventRecord(w->events[b->owner], w->streams[b->owner]));
            CK(cuStreamWaitEvent(w->streams[t], w->events[b->owner], 0));
            fill(w, b, t, next_value++);
        } else if (op < 72) {
            check(w, &live[rnd(w, nlive)]);
        } else if (op < 98) { /* free: cuMemFree waits for the device, FreeAsync is ordered */
            int k = (int)rnd(w, nlive);
            buf_t *b = &live[k];
            if (rnd(w, 4) == 0)
                check(w, b);
            if (b->sync || rnd(w, 2))
                CK(cuMemFree(b->p));
            else
                CK(cuMemFreeAsync(b->p, w->streams[b->owner]));
            live[k] = live[--nlive];
        } else {
            CK(cuCtxSynchronize());
        }
    }
    for (int k = 0; k < nlive; k++) {
        check(w, &live[k]);
        CK(cuMemFree(live[k].p));
    }
    CK(cuCtxSynchronize());
    for (int i = 1; i < NSTREAMS; i++)
        CK(cuStreamDestroy(w->streams[i]));
    return NULL;
}

int main(int argc, char **argv) {
    unsigned long long seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    long steps = argc > 2 ? atol(argv[2]) : 3000;
    int nthreads = argc > 3 ? atoi(argv[3]) : 1;
    if (nthreads < 1 || nthreads > 16) {
        fprintf(stderr, "random_clean: THREADS is 1 to 16\n");
        return 2;
    }
    ex = ex_init();
    worker_t w[16];
    pthread_t t[16];
    for (int i = 0; i < nthreads; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].rng = nthreads == 1 ? seed : seed * 100 + (unsigned long long)i;
        w[i].steps = steps;
        w[i].streams[0] = i == 0 ? NULL : CU_STREAM_PER_THREAD;
    }
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, run, &w[i]);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    int wrong = 0;
    for (int i = 0; i < nthreads; i++) {
        printf("%ld steps: checksum %.1f, %d wrong values\n", steps, w[i].checksum, w[i].wrong);
        wrong += w[i].wrong;
    }
    return wrong != 0;
}
