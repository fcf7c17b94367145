/* random_clean.c — a correct multi-stream program drawn at random (tests/cli
 * interposer_random_clean): under vramguard it must compute exactly what it computes
 * without it, and guard mode must report nothing.
 *
 * Buffers are allocated with cuMemAlloc, cuMemAllocManaged, cuMemAllocPitch,
 * cuMemAllocAsync or cuMemAllocFromPoolAsync (from a pool the thread made, or its
 * device's default pool, which the thread names: cuMemAllocAsync is then counted in its
 * figures), filled,
 * refilled, handed from stream to stream through events or flags in device memory
 * (cuStreamWriteValue32 and cuStreamWaitValue32), read back, and freed with
 * cuMemFree (any of them) or cuMemFreeAsync (the stream-ordered ones), on legacy,
 * blocking and non-blocking streams, each step drawn from a seed. Host functions that
 * sleep make streams lag behind the host, so that a reuse the program's ordering does not
 * allow shows as a wrong value.
 *
 * Fills are kernels (cuLaunchKernel, cuLaunchKernelEx or cuLaunchCooperativeKernel, the
 * pointer an argument or inside one), memsets (8, 16 or 32 bits, 1D or 2D),
 * device-to-device copies (plain, peer, 2D or 3D) from another buffer, copies
 * from pinned or pageable host memory the host wrote, or a kernel or memset captured in a
 * graph (every capture mode) and launched. Reads wait for the stream or for an event
 * (each waited for, or polled), or copy the whole buffer into pinned or pageable host
 * memory; each checks the buffer's first, middle and last float against what its last
 * fill wrote. The pinned memory comes from cuMemAllocHost or cuMemHostRegister. Streams
 * are destroyed and created again (a new stream may get a destroyed one's handle), their
 * buffers handed to another first.
 *
 * With THREADS > 1, each thread runs such a program of its own (its own streams, the
 * first of them the per-thread default stream, and buffers; seed SEED*100+thread), so
 * that one thread's synchronisations and frees happen while the others allocate, free
 * and launch. Thread i uses device i % (the number of devices)'s primary context.
 *
 * Built with CUDA_API_PER_THREAD_DEFAULT_STREAM (random_clean_ptds, as nvcc
 * --default-stream per-thread builds), cuda.h maps every stream-taking call to its _ptsz
 * twin and every synchronous copy and memset to its _ptds twin: the NULL stream is each
 * thread's own default stream, and every thread makes synchronous copies there.
 *
 * With PLANT, thread 0 plants one bug halfway (or soon after, once a buffer suits it),
 * for guard mode to find among all this: "overrun" or "underrun" (a kernel fills 1-16
 * floats past a buffer's end, or before its start), "copy_overrun" (a synchronous copy
 * — cuMemcpyDtoD, cuMemcpy, cuMemcpyPeer, cuMemcpy3D or a batch — fills a buffer just
 * allocated and 1-16 floats past it: vramguard refuses it at the call, as the driver
 * refuses one past a cuMemAlloc block), "freed" (a kernel writes 1-16
 * floats at the start of a buffer just freed, in order after the free, every stream idle
 * before it), "double_free" (cuMemFree twice), "unordered" (cuMemFreeAsync on one stream
 * while a kernel on another may still write the buffer; if the write lands after the
 * free's poison, it is reported too, as DESIGN.md's S2 asks) or "host_race" (the host
 * writes pinned memory an async copy is reading). It prints "planted:", the plant, and
 * the report guard mode must give as arguments of tests/cli/check_report.py, separated
 * by tabs.
 *
 * usage: random_clean SEED [STEPS] [THREADS] [PLANT]. Prints a checksum of what each
 * thread read; exit status 1 if a value was wrong (with no bug planted).
 */
#include "common.h"

#include <sched.h>

enum { NSTREAMS = 4, MAXLIVE = 24 };
#define MAXFLOATS (64 + 3 * 1024 + 1023 * 256) /* the largest buffer drawn */

typedef struct buf {
    CUdeviceptr p;
    size_t n;    /* floats */
    size_t bytes; /* allocated: n floats, or a row's pitch */
    int owner;   /* index into streams: where its last fill ran */
    float value; /* what that fill wrote */
    bool sync;   /* from cuMemAlloc (freed with cuMemFree), else cuMemAllocAsync */
} buf_t;

typedef struct worker {
    unsigned long long rng;
    long steps;
    CUstream streams[NSTREAMS]; /* [0]: the legacy stream, or the per-thread one */
    CUevent events[NSTREAMS];
    CUdeviceptr flags;          /* a word per stream: the last flag it wrote */
    unsigned flag_seq[NSTREAMS];
    bool blocking[NSTREAMS];    /* created CU_STREAM_DEFAULT (may not be captured) */
    float *pinned, *pageable;   /* MAXFLOATS each */
    bool registered;            /* pinned by cuMemHostRegister, not cuMemAllocHost */
    int pinned_stream;          /* the stream of an async copy of pinned not waited for, or -1 */
    bool alone;                 /* the only thread: a GLOBAL capture cannot fail another's call */
    const char *plant;          /* the bug to plant halfway, or NULL */
    const ex_t *ex;             /* its device's context and kernels */
    CUmemoryPool pool, default_pool; /* a pool of its own, and its device's default one */
    int wrong;
    double checksum;
} worker_t;

enum { MAXDEVICES = 8 };
static ex_t g_ex[MAXDEVICES]; /* each device's primary context and kernels */

static unsigned rnd(worker_t *w, unsigned n) {
    w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(w->rng >> 33) % n;
}

static void CUDA_CB lag(void *arg) {
    struct timespec ts = {0, (long)(uintptr_t)arg * 100000L}; /* 0-1.5 ms */
    nanosleep(&ts, NULL);
}

/* The host_race plant and hold(): the host sets `written` after its write; hold() sets
 * `let_go` as it returns, after which the copy behind it may run. */
typedef struct held {
    _Atomic int written, let_go;
} held_t;

/* Hold a stream until the host has written, or for 1 s: the host_race plant's write
 * then lands while the copy behind it waits, however slowly the host runs (a 1.5 ms lag
 * was too short under ASan on a loaded host; with 200 ms, two runs of the seventh session
 * on the 2-core machine, four threads, reported no race, which 80 runs since, loaded or
 * not, did not repeat). (Under vramguard the write itself waits for the copy, so the
 * flag comes after it: the bound ends the wait.) */
static void CUDA_CB hold(void *arg) {
    held_t *h = arg;
    for (int i = 0; i < 1000 && !atomic_load(&h->written); i++) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    atomic_store(&h->let_go, 1);
}

/* A float whose bytes are all c, or whose two halves are both h: what a byte or 16-bit
 * memset writes (c and h drawn so that the float is finite, and no byte is one of the
 * guard pattern's). */
static float repeated(unsigned bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Fill b on stream s with v: a kernel (cuLaunchKernel, cuLaunchKernelEx, the pointer in a
 * struct, a cooperative launch) or a memset (32-bit, or 2D in two rows). Unless `exact`,
 * some fills write another value instead: a byte or 16-bit memset (1D or 2D) of a
 * repeated pattern. b->value says what was written. */
static void fill_as(worker_t *w, buf_t *b, int s, float v, bool exact) {
    CUstream st = w->streams[s];
    if (rnd(w, 3) == 0)
        CK(cuLaunchHostFunc(st, lag, (void *)(uintptr_t)rnd(w, 16)));
    unsigned how = rnd(w, exact ? 10 : 13), bits;
    size_t rows = b->n % 2 == 0 ? 2 : 1, row = b->n / rows; /* (floats) */
    memcpy(&bits, &v, sizeof bits);
    if (how < 2) { /* a memset instead of a kernel */
        CK(cuMemsetD32Async(b->p, bits, b->n, st));
    } else if (how == 2) { /* cuLaunchKernelEx */
        CK(ex_fill_ex(w->ex, b->p, v, b->n, st));
    } else if (how == 3) { /* the pointer inside a struct argument */
        CK(ex_fill_span(w->ex, b->p, v, b->n, st));
    } else if (how == 4) {
        CK(ex_fill_coop(w->ex, b->p, v, b->n, st));
    } else if (how == 5) { /* rows back to back */
        CK(cuMemsetD2D32Async(b->p, row * sizeof(float), bits, row, rows, st));
    } else if (how < 10) {
        CK(ex_fill(w->ex, b->p, v, b->n, st));
    } else if (how == 10) {
        unsigned c = 0x41 + rnd(w, 6);
        v = repeated(c * 0x01010101u);
        CK(rnd(w, 2) ? cuMemsetD8Async(b->p, (unsigned char)c, b->n * 4, st)
                     : cuMemsetD2D8Async(b->p, row * 4, (unsigned char)c, row * 4, rows, st));
    } else {
        unsigned h = 0x4140 + rnd(w, 64);
        v = repeated(h * 0x10001u);
        CK(rnd(w, 2) ? cuMemsetD16Async(b->p, (unsigned short)h, b->n * 2, st)
                     : cuMemsetD2D16Async(b->p, row * 4, (unsigned short)h, row * 2, rows, st));
    }
    b->owner = s;
    b->value = v;
}

static void fill(worker_t *w, buf_t *b, int s, float v) { fill_as(w, b, s, v, false); }

static void expect(worker_t *w, const buf_t *b, size_t i, float x) {
    w->checksum += x;
    if (x != b->value && w->wrong++ < 5)
        printf("wrong: float %zu of a %zu-float buffer reads %g, its last fill wrote %g\n", i,
               b->n, x, b->value);
}

/* Stream t comes after b's last fill: through an event, or a flag in device memory that
 * b's stream writes and t waits for (cuStreamWriteValue32, cuStreamWaitValue32). */
static void order_after(worker_t *w, const buf_t *b, int t) {
    int s = b->owner;
    if (t == s)
        return;
    if (rnd(w, 6) == 0) {
        CUdeviceptr flag = w->flags + (CUdeviceptr)s * 4;
        unsigned k = ++w->flag_seq[s];
        CK(cuStreamWriteValue32(w->streams[s], flag, k, 0));
        CK(cuStreamWaitValue32(w->streams[t], flag, k, CU_STREAM_WAIT_VALUE_GEQ));
        return;
    }
    CK(cuEventRecord(w->events[s], w->streams[s]));
    CK(cuStreamWaitEvent(w->streams[t], w->events[s], 0));
}

/* Wait for stream s: for the stream (waited for or polled), or for an event recorded now
 * (waited for or polled). */
static void wait_for(worker_t *w, int s) {
    unsigned how = rnd(w, 6);
    if (how == 0) {
        while (cuStreamQuery(w->streams[s]) == CUDA_ERROR_NOT_READY)
            sched_yield();
    } else if (how < 3) {
        CK(cuEventRecord(w->events[s], w->streams[s]));
        if (rnd(w, 2))
            CK(cuEventSynchronize(w->events[s]));
        else
            while (cuEventQuery(w->events[s]) == CUDA_ERROR_NOT_READY)
                sched_yield();
    } else {
        CK(cuStreamSynchronize(w->streams[s]));
    }
}

static void check(worker_t *w, const buf_t *b) {
    wait_for(w, b->owner);
    size_t at[3] = {0, b->n / 2, b->n - 1};
    for (int i = 0; i < 3; i++) {
        float x;
        CK(cuMemcpyDtoH(&x, b->p + at[i] * sizeof(float), sizeof x));
        expect(w, b, at[i], x);
    }
}

/* The host may touch the pinned buffer: no async copy of it is still running. */
static void pinned_idle(worker_t *w) {
    if (w->pinned_stream >= 0)
        CK(cuStreamSynchronize(w->streams[w->pinned_stream]));
    w->pinned_stream = -1;
}

/* The whole buffer into pinned memory (waited for before the host reads it) or into
 * pageable memory (the call returns when the copy is done). */
static void download(worker_t *w, const buf_t *b) {
    float *h = w->pageable;
    if (rnd(w, 2)) {
        pinned_idle(w);
        h = w->pinned;
        CK(cuMemcpyDtoHAsync(h, b->p, b->n * sizeof(float), w->streams[b->owner]));
        wait_for(w, b->owner);
    } else {
        CK(cuMemcpyDtoHAsync(h, b->p, b->n * sizeof(float), w->streams[b->owner]));
    }
    expect(w, b, 0, h[0]);
    expect(w, b, b->n / 2, h[b->n / 2]);
    expect(w, b, b->n - 1, h[b->n - 1]);
}

/* Fill b from host memory the host wrote: pinned memory is not touched again until the
 * copy is waited for; pageable memory is staged, so the host overwrites it at once. */
static void upload(worker_t *w, buf_t *b, float v) {
    bool pinned = rnd(w, 2);
    float *h = pinned ? w->pinned : w->pageable;
    if (pinned)
        pinned_idle(w);
    for (size_t i = 0; i < b->n; i++)
        h[i] = v;
    CK(cuMemcpyHtoDAsync(b->p, h, b->n * sizeof(float), w->streams[b->owner]));
    if (pinned)
        w->pinned_stream = b->owner;
    else
        h[0] = h[b->n / 2] = h[b->n - 1] = -v;
    b->value = v;
}

/* A copy of `rows` rows of `width` bytes lying back to back from src to dst: a 2D copy,
 * or (`three_d`) a 3D one of a row per slice; synchronous, or on stream s. */
static CUresult copy_rows(CUdeviceptr dst, CUdeviceptr src, size_t width, size_t rows,
                          bool three_d, bool sync, CUstream s) {
    if (three_d) {
        CUDA_MEMCPY3D c;
        memset(&c, 0, sizeof c);
        c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = src;
        c.dstDevice = dst;
        c.srcPitch = c.dstPitch = c.WidthInBytes = width;
        c.srcHeight = c.dstHeight = c.Height = 1;
        c.Depth = rows;
        return sync ? cuMemcpy3D(&c) : cuMemcpy3DAsync(&c, s);
    }
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstDevice = dst;
    c.srcPitch = c.dstPitch = c.WidthInBytes = width;
    c.Height = rows;
    return sync ? cuMemcpy2D(&c) : cuMemcpy2DAsync(&c, s);
}

/* Fill b with a copy of a, on a stream that comes after both their last fills: a plain
 * device-to-device copy, a peer copy, a 2D one of two rows, a 3D one of two slices, or a
 * batch of one, asynchronous or synchronous (on the stream the NULL stream names: the
 * legacy stream, thread 0's stream 0; built for the per-thread default stream, each
 * thread's stream 0; a batch, which may not use the legacy stream, uses the thread's
 * default stream instead, which waits for it and which it waits for), the rest of a
 * longer b set by a memset. */
static void copy_from(worker_t *w, buf_t *a, buf_t *b) {
    bool sync = w->streams[0] == NULL && rnd(w, 3) == 0;
    int t = sync ? 0 : (int)rnd(w, NSTREAMS);
    CUstream s = w->streams[t];
    order_after(w, a, t);
    order_after(w, b, t);
    size_t m = a->n < b->n ? a->n : b->n;
    unsigned kind = rnd(w, 6);
    CUcontext ctx = w->ex->ctx;
    if (kind == 0) {
        CK(sync ? cuMemcpyDtoD(b->p, a->p, m * sizeof(float))
                : cuMemcpyDtoDAsync(b->p, a->p, m * sizeof(float), s));
    } else if (kind == 1) {
        CK(sync ? cuMemcpy(b->p, a->p, m * sizeof(float))
                : cuMemcpyAsync(b->p, a->p, m * sizeof(float), s));
    } else if (kind == 2) { /* (within the context: a peer copy all the same) */
        CK(sync ? cuMemcpyPeer(b->p, ctx, a->p, ctx, m * sizeof(float))
                : cuMemcpyPeerAsync(b->p, ctx, a->p, ctx, m * sizeof(float), s));
    } else if (kind == 5) {
        CK(ex_batch_copy(b->p, a->p, m * sizeof(float), CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
                          s ? s : CU_STREAM_PER_THREAD));
    } else { /* two rows, or two slices of a row */
        m -= m % 2;
        CK(copy_rows(b->p, a->p, m / 2 * sizeof(float), 2, kind == 3, sync, s));
    }
    if (b->n > m) {
        unsigned bits;
        memcpy(&bits, &a->value, sizeof bits);
        CK(sync ? cuMemsetD32(b->p + m * sizeof(float), bits, b->n - m)
                : cuMemsetD32Async(b->p + m * sizeof(float), bits, b->n - m, s));
    }
    a->owner = b->owner = t; /* a's next fill comes after this read of it */
    b->value = a->value;
}

/* Fill b by a graph: a kernel or a memset captured on a non-blocking stream (in any
 * capture mode), launched once or twice. One thread only: another thread's cuMemFree or
 * context synchronisation during a capture is invalid in CUDA. */
static void graph_fill(worker_t *w, buf_t *b, float v) {
    static const CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                CU_STREAM_CAPTURE_MODE_RELAXED};
    int t = 2 + (int)rnd(w, 2);
    CUstream s = w->streams[t];
    order_after(w, b, t);
    CK(cuStreamBeginCapture(s, modes[rnd(w, 3)]));
    if (rnd(w, 3) == 0) {
        unsigned bits;
        memcpy(&bits, &v, sizeof bits);
        CK(cuMemsetD32Async(b->p, bits, b->n, s));
    } else if (rnd(w, 2)) {
        CK(ex_fill(w->ex, b->p, v, b->n, s));
    } else {
        CK(ex_fill_span(w->ex, b->p, v, b->n, s));
    }
    CUgraph g;
    CUgraphExec e;
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&e, g, 0));
    for (unsigned i = 0, n = 1 + rnd(w, 2); i < n; i++)
        CK(cuGraphLaunch(e, s));
    CK(cuGraphExecDestroy(e));
    CK(cuGraphDestroy(g));
    b->owner = t;
    b->value = v;
}

/* Destroy a stream, its work still queued, and create it again (the new one may get its
 * handle): its buffers and the pinned buffer's copy go to stream 0, which waits for it. */
static void recycle(worker_t *w, buf_t *live, int nlive) {
    int s = 1 + (int)rnd(w, NSTREAMS - 1);
    CK(cuEventRecord(w->events[s], w->streams[s]));
    CK(cuStreamWaitEvent(w->streams[0], w->events[s], 0));
    for (int k = 0; k < nlive; k++)
        if (live[k].owner == s)
            live[k].owner = 0;
    if (w->pinned_stream == s)
        w->pinned_stream = 0;
    CK(cuStreamDestroy(w->streams[s]));
    CK(cuStreamCreate(&w->streams[s], w->blocking[s] ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
}

/* What plant() did. */
enum { NOT_YET, PLANTED, PLANTED_FREED };

/* The report guard mode must give, as check_report.py's arguments: tab-separated. */
#define EXPECT(name, kind, fmt, ...) printf("planted:\t" name "\t" kind "\t" fmt "\n", __VA_ARGS__)

/* Plant w->plant on a live buffer (see the top of the file), or NOT_YET if none suits. */
static int plant(worker_t *w, buf_t *live, int *nlive) {
    int k = (int)rnd(w, (unsigned)*nlive);
    buf_t *b = &live[k];
    unsigned extra = 1 + rnd(w, 16), n = b->bytes / sizeof(float);
    const char *what = w->plant;
    /* The bugs write 3, 5 or 7.0f: no byte of theirs is one of the guard pattern's, whose
     * bytes a write of it would leave unchanged, and unreported (kernels/guard_abi.h). */
    if (strcmp(what, "overrun") == 0) {
        CK(ex_fill(w->ex, b->p, 3.0f, n + extra, w->streams[b->owner]));
        b->value = 3.0f;
        EXPECT("overrun", "out_of_bounds_after",
               "allocation.size=%zu\tdamage.first_offset=%zu\tdamage.bytes=%u", b->bytes,
               b->bytes, extra * 4);
        return PLANTED;
    }
    if (strcmp(what, "underrun") == 0) {
        CK(ex_fill(w->ex, b->p - extra * 4, 5.0f, extra, w->streams[b->owner]));
        EXPECT("underrun", "out_of_bounds_before",
               "allocation.size=%zu\tdamage.first_offset=-%u\tdamage.bytes=%u", b->bytes,
               extra * 4, extra * 4);
        return PLANTED;
    }
    if (strcmp(what, "copy_overrun") == 0) { /* a new buffer, half of b, copied too long */
        if (*nlive == MAXLIVE)
            return NOT_YET;
        buf_t *c = &live[(*nlive)++];
        *c = (buf_t){.n = b->n / 2, .bytes = b->n / 2 * sizeof(float), .owner = 0,
                     .value = b->value, .sync = false};
        fill_as(w, b, b->owner, 3.0f, true);
        c->value = 3.0f;
        order_after(w, b, 0); /* (the legacy stream: thread 0's stream 0) */
        CK(cuMemAllocAsync(&c->p, c->bytes, NULL));
        size_t n_copy = c->bytes + extra * 4;
        unsigned how = rnd(w, 5);
        /* (The driver may refuse it, as vramguard does: CUDA_ERROR_INVALID_VALUE, nothing
         * copied; or make it, into the memory after the buffer. Either way the buffer's
         * contents are the bug's: not checked.) */
        CUresult r;
        if (how == 0) {
            r = cuMemcpyDtoD(c->p, b->p, n_copy);
        } else if (how == 1) {
            r = cuMemcpy(c->p, b->p, n_copy);
        } else if (how == 2) {
            r = cuMemcpyPeer(c->p, w->ex->ctx, b->p, w->ex->ctx, n_copy);
        } else if (how == 3) { /* a 3D copy of one slice of one row */
            r = copy_rows(c->p, b->p, n_copy, 1, true, true, NULL);
        } else { /* a batch of one, on the thread's default stream (not the legacy one) */
            r = ex_batch_copy(c->p, b->p, n_copy, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
                              CU_STREAM_PER_THREAD);
        }
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE)
            CK(r);
        c->value = r == CUDA_SUCCESS ? 3.0f : -1.0f; /* (-1: not known) */
        b->owner = 0; /* (its next fill or free comes after this read of it) */
        EXPECT("copy_overrun", "out_of_bounds_copy",
               "allocation.size=%zu\taccess.operation=write\taccess.range=destination"
               "\taccess.past_end=%u\taccess.refused=True",
               c->bytes, extra * 4);
        return PLANTED;
    }
    if (strcmp(what, "host_race") == 0) { /* the host writes a source page in flight */
        if (n < 2048) /* (a page the copy covers whole: bytes 4096-8191) */
            return NOT_YET;
        pinned_idle(w);
        for (size_t i = 0; i < b->n; i++)
            w->pinned[i] = b->value;
        static held_t held; /* (thread 0 alone plants) */
        atomic_store(&held.written, 0);
        atomic_store(&held.let_go, 0);
        CK(cuLaunchHostFunc(w->streams[b->owner], hold, &held));
        CK(cuMemcpyHtoDAsync(b->p, w->pinned, b->n * sizeof(float), w->streams[b->owner]));
        w->pinned_stream = b->owner;
        /* Another thread's cuMemFree or synchronisation waits for this stream too, and
         * under vramguard it holds the heap lock while it waits (docs/decisions.md A9),
         * so the copy call may return only once hold() has given up: the copy may then
         * be done, and the write would race nothing. Plant again at the next step. */
        if (atomic_load(&held.let_go)) {
            fprintf(stderr, "random_clean: host_race: the copy was let go before the host "
                            "could write: planting it again\n");
            return NOT_YET;
        }
        ((volatile float *)w->pinned)[1024] = b->value;
        atomic_store(&held.written, 1);
        EXPECT("host_race", "host_race",
               "detail~byte 4096 of the source of cuMemcpyHtoDAsync (%zu bytes",
               b->n * sizeof(float));
        return PLANTED;
    }
    if (strcmp(what, "unordered") == 0) { /* freed on stream 3 while stream 2 writes it */
        if (b->sync)
            return NOT_YET;
        order_after(w, b, 2);
        CK(ex_fill(w->ex, b->p, b->value, b->n, w->streams[2]));
        CK(cuMemFreeAsync(b->p, w->streams[3]));
        EXPECT("unordered", "unordered_free",
               "allocation.size=%zu\tkernel.name=ex_fill\tkernel.argument=0\tkernel.offset=0",
               b->bytes);
        live[k] = live[--*nlive];
        return PLANTED_FREED;
    }
    /* freed, double_free. (With every stream idle: a free on another stream than the
     * allocation's while that one is busy, handed over through a third stream, poisons
     * the block unordered with the freeing stream's next work, which may then write
     * first, unseen; docs/decisions.md G3.) */
    CK(cuCtxSynchronize());
    int s = b->owner;
    if (b->sync)
        CK(cuMemFree(b->p)); /* (any stream's work comes after it) */
    else
        CK(cuMemFreeAsync(b->p, w->streams[s]));
    if (strcmp(what, "double_free") == 0) {
        if (cuMemFree(b->p) == CUDA_SUCCESS)
            printf("the second cuMemFree succeeded\n");
        EXPECT("double_free", "double_free", "allocation.size=%zu", b->bytes);
    } else {
        CK(ex_fill(w->ex, b->p, 7.0f, extra, w->streams[s]));
        EXPECT("freed", "use_after_free",
               "allocation.size=%zu\tdamage.first_offset=0\tdamage.bytes=%u", b->bytes,
               extra * 4);
    }
    live[k] = live[--*nlive];
    return PLANTED_FREED;
}

static void *run(void *arg) {
    worker_t *w = arg;
    CK(cuCtxSetCurrent(w->ex->ctx));
    w->blocking[1] = true;
    for (int i = 1; i < NSTREAMS; i++)
        CK(cuStreamCreate(&w->streams[i], w->blocking[i] ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < NSTREAMS; i++)
        CK(cuEventCreate(&w->events[i], CU_EVENT_DISABLE_TIMING));
    CK(cuMemAlloc(&w->flags, NSTREAMS * 4));
    CK(cuMemsetD32(w->flags, 0, NSTREAMS));
    CK(cuCtxSynchronize()); /* (before any stream, blocking or not, writes a flag) */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CK(cuCtxGetDevice(&props.location.id));
    CK(cuMemPoolCreate(&w->pool, &props));
    CK(cuDeviceGetDefaultMemPool(&w->default_pool, props.location.id));
    w->registered = rnd(w, 2);
    if (w->registered) { /* (page-aligned memory the program pins itself) */
        if (posix_memalign((void **)&w->pinned, 4096, MAXFLOATS * sizeof(float)) != 0)
            exit(1);
        CK(cuMemHostRegister(w->pinned, MAXFLOATS * sizeof(float), 0));
    } else {
        CK(cuMemAllocHost((void **)&w->pinned, MAXFLOATS * sizeof(float)));
    }
    w->pageable = malloc(MAXFLOATS * sizeof(float));
    w->pinned_stream = -1;
    buf_t live[MAXLIVE];
    int nlive = 0;
    float next_value = 1.0f;
    for (long step = 0; step < w->steps; step++) {
        if (w->plant && step >= w->steps / 2 && nlive > 0) {
            int done = plant(w, live, &nlive);
            if (done != NOT_YET)
                w->plant = NULL;
            if (done == PLANTED_FREED)
                continue;
        }
        unsigned op = rnd(w, 100);
        if (nlive == 0 || (op < 28 && nlive < MAXLIVE)) { /* allocate and fill */
            buf_t *b = &live[nlive++];
            b->n = 64 + rnd(w, 4) * 1024 + rnd(w, 1024) * (rnd(w, 8) == 0 ? 256 : 1);
            int s = (int)rnd(w, NSTREAMS);
            b->sync = rnd(w, 2);
            b->bytes = b->n * sizeof(float);
            if (b->sync && rnd(w, 4) == 0) /* one row */
                CK(cuMemAllocPitch(&b->p, &b->bytes, b->n * sizeof(float), 1, sizeof(float)));
            else if (b->sync && b->n % 4 == 3) /* (managed memory: as cuMemAlloc's here) */
                CK(cuMemAllocManaged(&b->p, b->n * sizeof(float), CU_MEM_ATTACH_GLOBAL));
            else if (b->sync)
                CK(cuMemAlloc(&b->p, b->n * sizeof(float))); /* any stream may use it */
            else if (b->n % 3 == 1) /* (drawn from n: the seeds' draws stay the same) */
                CK(cuMemAllocFromPoolAsync(&b->p, b->n * sizeof(float),
                                           b->n % 2 ? w->pool : w->default_pool, w->streams[s]));
            else
                CK(cuMemAllocAsync(&b->p, b->n * sizeof(float), w->streams[s]));
            fill(w, b, s, next_value++);
        } else if (op < 38) { /* refill on its stream */
            buf_t *b = &live[rnd(w, nlive)];
            fill(w, b, b->owner, next_value++);
        } else if (op < 48) { /* hand it to another stream through an event */
            buf_t *b = &live[rnd(w, nlive)];
            int t = (int)rnd(w, NSTREAMS);
            order_after(w, b, t);
            fill(w, b, t, next_value++);
        } else if (op < 54 && nlive > 1) {
            int i = (int)rnd(w, nlive), j = (int)rnd(w, nlive - 1);
            copy_from(w, &live[i], &live[j < i ? j : j + 1]);
        } else if (op < 58) {
            upload(w, &live[rnd(w, nlive)], next_value++);
        } else if (op < 62) {
            check(w, &live[rnd(w, nlive)]);
        } else if (op < 66) {
            download(w, &live[rnd(w, nlive)]);
        } else if (op < 68 && w->alone) {
            graph_fill(w, &live[rnd(w, nlive)], next_value++);
        } else if (op < 69) {
            recycle(w, live, nlive);
        } else if (op < 97) { /* free: cuMemFree waits for the device, FreeAsync is ordered */
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
    CK(cuMemPoolDestroy(w->pool));
    CK(cuMemFree(w->flags));
    for (int i = 1; i < NSTREAMS; i++)
        CK(cuStreamDestroy(w->streams[i]));
    if (w->registered) {
        CK(cuMemHostUnregister(w->pinned));
        free(w->pinned);
    } else {
        CK(cuMemFreeHost(w->pinned));
    }
    free(w->pageable);
    return NULL;
}

int main(int argc, char **argv) {
    unsigned long long seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    long steps = argc > 2 ? atol(argv[2]) : 3000;
    int nthreads = argc > 3 ? atoi(argv[3]) : 1;
    const char *planted = argc > 4 ? argv[4] : NULL;
    if (nthreads < 1 || nthreads > 16) {
        fprintf(stderr, "random_clean: THREADS is 1 to 16\n");
        return 2;
    }
    static const char *const plants[] = {"overrun", "underrun", "copy_overrun", "freed",
                                         "double_free", "unordered", "host_race"};
    bool known = !planted;
    for (size_t i = 0; i < sizeof plants / sizeof plants[0] && !known; i++)
        known = strcmp(planted, plants[i]) == 0;
    if (!known) {
        fprintf(stderr, "random_clean: PLANT is overrun, underrun, copy_overrun, freed, "
                        "double_free, unordered or host_race\n");
        return 2;
    }
    int ndevices;
    CK(cuInit(0));
    CK(cuDeviceGetCount(&ndevices));
    if (ndevices > MAXDEVICES)
        ndevices = MAXDEVICES;
    for (int d = ndevices - 1; d >= 0; d--) /* (device 0's context current at the end) */
        g_ex[d] = ex_init_device(d);
    worker_t w[16];
    pthread_t t[16];
    for (int i = 0; i < nthreads; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].rng = nthreads == 1 ? seed : seed * 100 + (unsigned long long)i;
        w[i].steps = steps;
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
        w[i].streams[0] = NULL; /* (every call's NULL stream is the thread's own) */
#else
        w[i].streams[0] = i == 0 ? NULL : CU_STREAM_PER_THREAD;
#endif
        w[i].alone = nthreads == 1;
        w[i].plant = i == 0 ? planted : NULL;
        w[i].ex = &g_ex[i % ndevices];
    }
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, run, &w[i]);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    int wrong = 0;
    printf("%d thread(s) on %d device(s)\n", nthreads, ndevices < nthreads ? ndevices : nthreads);
    for (int i = 0; i < nthreads; i++) {
        printf("%ld steps: checksum %.1f, %d wrong values\n", steps, w[i].checksum, w[i].wrong);
        wrong += w[i].wrong;
    }
    return wrong != 0 && !planted;
}
