/* test_torch_random.c — correct PyTorch-style programs drawn from seeds, through the C
 * entry points as PyTorch's pluggable allocator calls them (dlopen + dlsym), on vgsim:
 * every read must find what the last write wrote, and guard mode must report nothing.
 *
 * PyTorch's rules, which the programs follow: a tensor is allocated on the current stream
 * and freed on that same stream when the host drops it, whatever its kernels still do
 * there (stream-ordered reuse); another stream that uses it first waits for the stream
 * that wrote it last (wait_stream), and before the free either the tensor is recorded on
 * that stream (record_stream: the allocator then waits for it) or the allocation's
 * stream waits for it. Streams lag behind the host (host functions that sleep), so that
 * a reuse these rules do not allow shows as a wrong value. empty_cache and
 * synchronisations come at random too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "common.h" /* the examples' kernels (ex_fill), host versions on vgsim */

enum { NSTREAMS = 4, MAXLIVE = 32 };

typedef struct tensor {
    void *p;
    size_t n;           /* floats */
    int alloc;          /* the stream it was allocated on (and is freed on) */
    int owner;          /* the stream of its last write */
    float value;        /* what that write wrote */
    bool unwaited[NSTREAMS]; /* used there, neither recorded nor waited for since */
} tensor_t;

static struct {
    void *(*alloc)(size_t, int, void *);
    void (*free)(void *, size_t, int, void *);
    void (*record)(void *, void *);
    void (*empty_cache)(void);
    uint64_t (*errors)(void);
} T;

static ex_t ex;
static CUstream S[NSTREAMS];
static CUevent E[NSTREAMS];
static unsigned long long rng;
static int wrong;

static unsigned rnd(unsigned n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng >> 33) % n;
}

static void CUDA_CB lag(void *arg) {
    struct timespec ts = {0, (long)(uintptr_t)arg * 100000L}; /* 0-1.5 ms */
    nanosleep(&ts, NULL);
}

static void open_like_pytorch(const char *mode) {
    static char o[4200];
    snprintf(o, sizeof o, "driver=%s,mode=%s,leaks=off", VG_TEST_VGSIM_LIB, mode);
    setenv("VRAMGUARD_OPTIONS", o, 1);
    void *lib = dlopen(VG_TEST_LIB, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(lib != NULL, "dlopen: %s", dlerror());
    T.alloc = (void *(*)(size_t, int, void *))dlsym(lib, "vg_torch_alloc");
    T.free = (void (*)(void *, size_t, int, void *))dlsym(lib, "vg_torch_free");
    T.record = (void (*)(void *, void *))dlsym(lib, "vg_torch_record_stream");
    T.empty_cache = (void (*)(void))dlsym(lib, "vg_torch_empty_cache");
    T.errors = (uint64_t(*)(void))dlsym(lib, "vg_error_count");
    void (*init)(int) = (void (*)(int))dlsym(lib, "vg_torch_init");
    CHECK(T.alloc && T.free && T.record && T.empty_cache && T.errors && init);
    init(1);
    ex = ex_init();
    S[0] = NULL; /* PyTorch's default stream: the legacy one */
    for (int i = 1; i < NSTREAMS; i++)
        CHECK_CU(cuStreamCreate(&S[i], CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < NSTREAMS; i++)
        CHECK_CU(cuEventCreate(&E[i], CU_EVENT_DISABLE_TIMING));
}

/* Stream t waits for stream s's work so far (torch: t.wait_stream(s)). */
static void wait_stream(int t, int s) {
    if (t == s)
        return;
    CHECK_CU(cuEventRecord(E[s], S[s]));
    CHECK_CU(cuStreamWaitEvent(S[t], E[s], 0));
}

static void write(tensor_t *x, int s, float v) {
    if (rnd(3) == 0)
        CHECK_CU(cuLaunchHostFunc(S[s], lag, (void *)(uintptr_t)rnd(16)));
    CHECK_CU(ex_fill(&ex, (CUdeviceptr)(uintptr_t)x->p, v, x->n, S[s]));
    x->owner = s;
    x->value = v;
}

static void read_back(tensor_t *x) {
    CHECK_CU(cuStreamSynchronize(S[x->owner])); /* torch: .item(), .cpu() */
    size_t at[3] = {0, x->n / 2, x->n - 1};
    for (int i = 0; i < 3; i++) {
        float f;
        CHECK_CU(cuMemcpyDtoH(&f, (CUdeviceptr)(uintptr_t)x->p + at[i] * sizeof f, sizeof f));
        if (f != x->value && wrong++ < 5)
            fprintf(stderr, "wrong: float %zu of a %zu-float tensor reads %g, its last write "
                            "wrote %g\n", at[i], x->n, f, x->value);
    }
}

/* del x: the allocation's stream first waits for the uses nothing ordered yet. */
static void drop(tensor_t *x) {
    for (int t = 0; t < NSTREAMS; t++)
        if (x->unwaited[t])
            wait_stream(x->alloc, t);
    T.free(x->p, x->n * sizeof(float), 0, S[x->alloc]);
}

static void program(unsigned long long seed, long steps) {
    rng = seed;
    tensor_t live[MAXLIVE];
    int nlive = 0;
    float next = 1.0f;
    for (long step = 0; step < steps; step++) {
        unsigned op = rnd(100);
        if (nlive == 0 || (op < 30 && nlive < MAXLIVE)) { /* a new tensor */
            tensor_t *x = &live[nlive++];
            memset(x, 0, sizeof *x);
            x->n = 64 + rnd(4) * 1024 + rnd(1024) * (rnd(8) == 0 ? 256 : 1);
            x->alloc = (int)rnd(NSTREAMS);
            x->p = T.alloc(x->n * sizeof(float), 0, S[x->alloc]);
            CHECK(x->p != NULL);
            write(x, x->alloc, next++);
        } else if (op < 45) { /* written again where it was last written */
            tensor_t *x = &live[rnd((unsigned)nlive)];
            write(x, x->owner, next++);
        } else if (op < 62) { /* used on another stream: with torch.cuda.stream(t) */
            tensor_t *x = &live[rnd((unsigned)nlive)];
            int t = (int)rnd(NSTREAMS);
            wait_stream(t, x->owner);
            write(x, t, next++);
            if (t != x->alloc) {
                if (rnd(2)) /* x.record_stream(t) */
                    T.record(x->p, S[t]);
                else
                    x->unwaited[t] = true;
            }
        } else if (op < 68) { /* back on its own stream */
            tensor_t *x = &live[rnd((unsigned)nlive)];
            wait_stream(x->alloc, x->owner);
            x->unwaited[x->owner] = false;
            write(x, x->alloc, next++);
        } else if (op < 76) {
            read_back(&live[rnd((unsigned)nlive)]);
        } else if (op < 98) {
            int k = (int)rnd((unsigned)nlive);
            drop(&live[k]);
            live[k] = live[--nlive];
        } else if (op < 99) {
            T.empty_cache();
        } else {
            CHECK_CU(cuCtxSynchronize());
        }
    }
    for (int k = 0; k < nlive; k++) {
        read_back(&live[k]);
        drop(&live[k]);
    }
    CHECK_CU(cuCtxSynchronize());
}

static void programs(const char *mode, int seeds, long steps) {
    open_like_pytorch(mode);
    for (int seed = 1; seed <= seeds; seed++)
        program((unsigned long long)seed, steps);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(T.errors(), 0);
}

VG_TEST(random_pytorch_programs_read_what_they_wrote_in_fast_mode) {
    programs("fast", 6, 2000);
}

VG_TEST(random_pytorch_programs_get_no_report_in_guard_mode) {
    programs("guard", 4, 2000);
}
