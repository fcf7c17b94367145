/* stream.c — vgsim: streams, events, the worker threads, synchronisation.
 *
 * Each stream is a FIFO of operations served by its own worker thread. An operation
 * carries dependencies (stream, seq): the worker waits until each named stream has
 * completed that sequence number before running it. Dependencies express:
 *  - the legacy default stream: an op on it waits for everything already queued on every
 *    blocking stream of the context, and an op on a blocking stream waits for everything
 *    already queued on the legacy stream (non-blocking streams skip both);
 *  - cuStreamWaitEvent: a no-op that waits for the event's recorded (stream, seq).
 * Completion is published by bumping `completed` under the stream's lock and
 * broadcasting `done`; waiting on a stream never holds another stream's lock.
 *
 * After a sticky error the workers still drain their queues, but skip the work, so that
 * synchronisation returns (with the error) instead of hanging.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <stddef.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------------------- */

sim_op_t *sim_op_new(int kind) {
    sim_op_t *op = calloc(1, sizeof *op);
    if (op)
        op->kind = kind;
    return op;
}

/* Ops are recycled: the worker pushes finished ops on its stream's `returned` stack, and
 * a producer thread refills its own cache from that stack when the cache runs dry
 * (allocating one op per operation costs as much as the rest of an enqueue, and more
 * since an op holds 4 KiB of kernel arguments inline). The cache is per thread, so
 * taking an op takes no lock. Every enqueue on a stream takes its op here. */
static __thread sim_op_t *t_ops;
#define SMALL_MEMBER(m) _Static_assert(sizeof(((sim_op_t *)0)->u.m) <= 64, "op member " #m)
SMALL_MEMBER(copy);
SMALL_MEMBER(set);
SMALL_MEMBER(host);
SMALL_MEMBER(record);
SMALL_MEMBER(free);

sim_op_t *sim_op_get(sim_stream_t *s, int kind) {
    if (!t_ops)
        t_ops = atomic_exchange(&s->returned, NULL);
    sim_op_t *op = t_ops;
    if (!op)
        return sim_op_new(kind);
    t_ops = op->next;
    /* The header, and the union's small members (a kernel launch writes its own). */
    memset(op, 0, offsetof(sim_op_t, u) + 64);
    op->kind = kind;
    return op;
}

static void op_release(sim_op_t *op) {
    if (op->kind == OP_COPY)
        free(op->u.copy.staging);
    if (op->kind == OP_KERNEL && op->u.kernel.storage != op->u.kernel.inline_args)
        free(op->u.kernel.storage);
    if (op->deps != op->inline_deps)
        free(op->deps);
    op->deps = NULL;
    op->ndeps = 0;
}

void sim_op_destroy(sim_op_t *op) {
    op_release(op);
    free(op);
}

static bool op_add_dep(sim_op_t *op, sim_stream_t *s, uint64_t seq) {
    if (seq == 0 || atomic_load(&s->completed) >= seq)
        return true; /* already satisfied */
    if (op->ndeps < 2) {
        op->deps = op->inline_deps;
    } else {
        sim_dep_t *d = malloc((op->ndeps + 1) * sizeof *d);
        if (!d)
            return false;
        memcpy(d, op->deps, op->ndeps * sizeof *d);
        if (op->deps != op->inline_deps)
            free(op->deps);
        op->deps = d;
    }
    op->deps[op->ndeps++] = (sim_dep_t){s, seq};
    return true;
}

typedef struct run_arg {
    sim_op_t *op;
    sim_ctx_t *ctx;
} run_arg_t;

static void run_copy(void *arg) {
    sim_op_t *op = ((run_arg_t *)arg)->op;
    sim_host_copy(op->u.copy.dst, op->u.copy.staging ? op->u.copy.staging : op->u.copy.src,
                  op->u.copy.n);
}

static void run_memset(void *arg) {
    sim_op_t *op = ((run_arg_t *)arg)->op;
    if (op->u.set.elem == 1) {
        memset(op->u.set.dst, (int)op->u.set.value, op->u.set.count);
    } else if (op->u.set.elem == 2) {
        uint16_t *p = op->u.set.dst, v = (uint16_t)op->u.set.value;
        for (size_t i = 0; i < op->u.set.count; i++)
            p[i] = v;
    } else {
        uint32_t *p = op->u.set.dst, v = op->u.set.value;
        for (size_t i = 0; i < op->u.set.count; i++)
            p[i] = v;
    }
}

/* Does a wait's condition hold for the word read, cur? (cuStreamWaitValue32's flags) */
static bool wait_holds(unsigned flags, uint64_t cur, uint64_t v, bool wide) {
    switch (flags & 3u) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return wide ? (int64_t)(cur - v) >= 0 : (int32_t)((uint32_t)cur - (uint32_t)v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == v;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & v) != 0;
    default: return (wide ? ~(cur | v) : (uint32_t) ~(cur | v)) != 0; /* NOR */
    }
}

/* The word at addr, read or written as the device's memory system would: atomically, with
 * release and acquire order (the writing stream's earlier work is visible to the stream
 * its write releases), or through the copy engine's path for pinned host memory, which
 * may be protected (sim_host_copy). */
static uint64_t word_load(void *addr, bool wide) {
    uint64_t v = 0;
    if (sim_is_pinned(addr, wide ? 8 : 4))
        sim_host_copy(&v, addr, wide ? 8 : 4);
    else
        v = wide ? __atomic_load_n((uint64_t *)addr, __ATOMIC_ACQUIRE)
                 : __atomic_load_n((uint32_t *)addr, __ATOMIC_ACQUIRE);
    return v;
}

static void word_store(void *addr, uint64_t v, bool wide) {
    if (sim_is_pinned(addr, wide ? 8 : 4))
        sim_host_copy(addr, &v, wide ? 8 : 4); /* (little-endian: the low word) */
    else if (wide)
        __atomic_store_n((uint64_t *)addr, v, __ATOMIC_RELEASE);
    else
        __atomic_store_n((uint32_t *)addr, (uint32_t)v, __ATOMIC_RELEASE);
}

/* A write, or a wait that polls the word until its condition holds (the stream blocks
 * meanwhile, as on a GPU; a dead context ends it). */
static void run_memop(void *arg) {
    sim_op_t *op = ((run_arg_t *)arg)->op;
    bool wide = sim_memop_wide(op->u.memop.type);
    void *addr = (void *)(uintptr_t)op->u.memop.addr;
    if (!sim_memop_is_wait(op->u.memop.type)) {
        word_store(addr, op->u.memop.value, wide);
        return;
    }
    while (!atomic_load(&((run_arg_t *)arg)->ctx->sticky)) {
        if (wait_holds(op->u.memop.flags, word_load(addr, wide), op->u.memop.value, wide))
            return;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static void run_twin(void *arg) {
    sim_op_t *op = ((run_arg_t *)arg)->op;
    op->u.kernel.fn(&op->u.kernel.launch);
}

static void run_kernel(void *arg) { /* (with its Compute Sanitizer patch, if any) */
    sim_sanitizer_run(((run_arg_t *)arg)->op, run_twin, arg);
}

static void execute(sim_stream_t *s, sim_op_t *op) {
    sim_ctx_t *ctx = s->ctx;
    bool dead = atomic_load(&ctx->sticky) != 0;
    run_arg_t arg = {op, ctx};
    void *fault = NULL;
    CUresult r = CUDA_SUCCESS;
    switch (op->kind) {
    case OP_COPY:
        if (!dead)
            r = sim_run_guarded(run_copy, &arg, &fault);
        break;
    case OP_MEMSET:
        if (!dead)
            r = sim_run_guarded(run_memset, &arg, &fault);
        break;
    case OP_KERNEL:
        if (!dead)
            r = sim_run_guarded(run_kernel, &arg, &fault);
        break;
    case OP_HOSTFN:
        if (!dead)
            op->u.host.fn(op->u.host.data);
        break;
    case OP_RECORD: {
        sim_event_t *e = op->u.record.event;
        pthread_mutex_lock(&e->lock);
        if (e->stream == s && e->seq == op->seq) {
            e->time_ns = now_ns();
            e->timed = true;
        }
        pthread_mutex_unlock(&e->lock);
        break;
    }
    case OP_FREE:
        if (!dead)
            sim_free_device_ptr(op->u.free.ptr);
        break;
    case OP_MEMOP:
        if (!dead)
            r = sim_run_guarded(run_memop, &arg, &fault);
        break;
    default: break;
    }
    if (r != CUDA_SUCCESS) {
        int expected = 0;
        atomic_compare_exchange_strong(&ctx->sticky, &expected, (int)r);
        sim_logf("%s%s%s touched %p, which is not mapped device memory: the context now "
                 "fails with CUDA_ERROR_ILLEGAL_ADDRESS",
                 op->kind == OP_KERNEL ? "kernel '"
                 : op->kind == OP_MEMOP ? "a stream memory operation"
                                        : "a copy or memset",
                 op->kind == OP_KERNEL ? op->u.kernel.name : "",
                 op->kind == OP_KERNEL ? "'" : "", fault);
    }
}

/* ---------------------------------------------------------------------------------------
 * Workers
 * ------------------------------------------------------------------------------------- */

/* Wake the worker if it sleeps while work is queued. Producers wake it lazily (see
 * push_op), so anyone about to wait for, or ask about, a stream's work kicks it first. */
void sim_kick(sim_stream_t *s) {
    if (atomic_load(&s->sleeping) && atomic_load(&s->incoming)) {
        pthread_mutex_lock(&s->wake_lock);
        atomic_store(&s->unwoken, 0);
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->wake_lock);
    }
}

/* Wait until the stream has completed op `seq`. A waiter registers what it waits for
 * (wake_at) before re-checking, and the worker broadcasts only when it reaches that: one
 * wake-up per wait, not one per completed op. */
void sim_wait_seq(sim_stream_t *s, uint64_t seq) {
    if (atomic_load(&s->completed) >= seq)
        return;
    sim_kick(s);
    pthread_mutex_lock(&s->wake_lock);
    atomic_fetch_add(&s->waiters, 1);
    while (atomic_load(&s->completed) < seq) {
        uint64_t at = atomic_load(&s->wake_at);
        while (seq < at && !atomic_compare_exchange_weak(&s->wake_at, &at, seq)) {
        }
        if (atomic_load(&s->completed) >= seq)
            break;
        pthread_cond_wait(&s->done, &s->wake_lock);
    }
    atomic_fetch_sub(&s->waiters, 1);
    pthread_mutex_unlock(&s->wake_lock);
}

static void complete(sim_stream_t *s, uint64_t seq) {
    atomic_store(&s->completed, seq);
    /* A waiter sets wake_at before re-checking `completed`; this reads wake_at after
     * setting `completed`: one of the two sees the other. */
    if (atomic_load(&s->waiters) && seq >= atomic_load(&s->wake_at)) {
        pthread_mutex_lock(&s->wake_lock);
        atomic_store(&s->wake_at, UINT64_MAX); /* waiters still waiting register again */
        pthread_cond_broadcast(&s->done);
        pthread_mutex_unlock(&s->wake_lock);
    }
}

/* How a worker sleeps (`sleeping`): not at all, lightly (woken in batches, polling), or
 * deeply (woken by the next op). */
enum { AWAKE = 0, SLEEP_LIGHT = 1, SLEEP_DEEP = 2 };
#define IDLE_POLLS 4  /* 200-microsecond waits before a worker sleeps deeply */
#define SPIN_MIN 50   /* pauses an idle worker spins before it sleeps: at least, */
#define SPIN_MAX 2000 /* and at most */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Take everything queued, oldest first; sleep when there is nothing. An idle worker first
 * spins briefly on a plain read (a steadily fed stream then costs its producer no wake-up
 * system call), but never long, and less each time the spin found nothing: on a small
 * machine a spinning worker takes the CPU from the host and the other streams (18% of
 * the CPU time of two random programs side by side, on two cores, before it adapted). */
static sim_op_t *take_work(sim_stream_t *s) {
    for (;;) {
        int spin = 0;
        while (spin < s->spin && !atomic_load_explicit(&s->incoming, memory_order_relaxed)) {
            cpu_relax();
            spin++;
        }
        sim_op_t *top = atomic_exchange(&s->incoming, NULL);
        if (top && spin > 0 && spin < s->spin) /* the spin paid: spin longer next time */
            s->spin = s->spin * 2 > SPIN_MAX ? SPIN_MAX : s->spin * 2;
        else if (!top && s->spin > SPIN_MIN)
            s->spin /= 2;
        if (top) { /* the stack is newest first: reverse it */
            sim_op_t *fifo = NULL;
            while (top) {
                sim_op_t *next = top->next;
                top->next = fifo;
                fifo = top;
                top = next;
            }
            return fifo;
        }
        /* Sleep. While the stream was busy a moment ago (SLEEP_LIGHT), producers wake the
         * worker only every WAKE_BATCH ops and waiters kick it; a short timed wait picks up
         * work that neither reached. An idle stream (SLEEP_DEEP, after IDLE_POLLS empty
         * waits) is woken by the first op pushed, so idle streams do not poll: with dozens
         * of them a program's polling wake-ups took more system time than its work. */
        pthread_mutex_lock(&s->wake_lock);
        atomic_store(&s->sleeping, SLEEP_LIGHT); /* before re-checking: see push_op */
        for (int polls = 0; !atomic_load(&s->incoming); polls++) {
            if (polls == IDLE_POLLS) { /* then re-check before the long wait */
                atomic_store(&s->sleeping, SLEEP_DEEP);
                continue;
            }
            long wait_ns = polls < IDLE_POLLS ? 200 * 1000L : 50 * 1000 * 1000L;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += wait_ns;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&s->work, &s->wake_lock, &until);
        }
        atomic_store(&s->sleeping, AWAKE);
        atomic_store(&s->unwoken, 0);
        pthread_mutex_unlock(&s->wake_lock);
    }
}

static void *worker_main(void *arg) {
    sim_stream_t *s = arg;
    pthread_setname_np(pthread_self(), s->legacy ? "vgsim-legacy" : "vgsim-stream");
    for (;;) {
        sim_op_t *list = take_work(s);
        while (list) {
            sim_op_t *op = list;
            list = op->next;
            for (size_t i = 0; i < op->ndeps; i++)
                sim_wait_seq(op->deps[i].stream, op->deps[i].seq);
            execute(s, op);
            int kind = op->kind;
            uint64_t seq = op->seq;
            op_release(op);
            if (kind == OP_EXIT) {
                complete(s, seq);
                free(op);
                return NULL; /* the stream struct stays: events and deps may name it */
            }
            sim_op_t *top = atomic_load(&s->returned);
            do
                op->next = top;
            while (!atomic_compare_exchange_weak(&s->returned, &top, op));
            complete(s, seq);
        }
    }
}

CUresult sim_stream_create(sim_ctx_t *ctx, unsigned flags, int priority, sim_stream_t **out) {
    sim_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = SIM_STREAM_MAGIC;
    s->wake_at = UINT64_MAX;
    s->ctx = ctx;
    s->legacy = (flags & SIM_STREAM_LEGACY) != 0; /* before the worker reads it */
    s->flags = flags & ~SIM_STREAM_LEGACY;
    s->spin = SPIN_MAX;
    s->priority = priority;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->wake_lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    pthread_mutex_lock(&ctx->lock);
    if (ctx->nstreams == ctx->capstreams) {
        size_t cap = ctx->capstreams ? ctx->capstreams * 2 : 8;
        sim_stream_t **p = realloc(ctx->streams, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&ctx->lock);
            free(s);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        ctx->streams = p;
        ctx->capstreams = cap;
    }
    /* Worker threads inherit the creator's signal mask, which is what the program expects. */
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        pthread_mutex_unlock(&ctx->lock);
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_detach(s->worker);
    ctx->streams[ctx->nstreams++] = s;
    if (!(flags & CU_STREAM_NON_BLOCKING) && ctx->legacy) /* (the legacy one comes first) */
        atomic_fetch_add(&ctx->nblocking, 1);
    pthread_mutex_unlock(&ctx->lock);
    *out = s;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------
 * Enqueueing
 * ------------------------------------------------------------------------------------- */

static bool is_blocking(sim_stream_t *s) { return !(s->flags & CU_STREAM_NON_BLOCKING); }

/* A GPU's command queue is bounded: a launch blocks while this many ops are in flight on
 * the stream. Without the bound a host that outruns the simulated device would queue
 * without limit. */
#define SIM_QUEUE_DEPTH 1024
#define WAKE_BATCH 32

/* Number the op and push it for the worker; wake the worker if it sleeps. */
static void push_op(sim_stream_t *s, sim_op_t *op) {
    /* `completed` sits on a line the worker writes all the time: look every 64 ops only. */
    uint64_t queued = atomic_load_explicit(&s->enqueued, memory_order_relaxed);
    if ((queued & 63) == 0 && op->kind != OP_EXIT &&
        queued - atomic_load(&s->completed) >= SIM_QUEUE_DEPTH)
        sim_wait_seq(s, queued - SIM_QUEUE_DEPTH / 2); /* drained by half: block rarely */
    pthread_mutex_lock(&s->lock);
    op->seq = atomic_load(&s->enqueued) + 1;
    atomic_store(&s->enqueued, op->seq);
    if (op->kind == OP_RECORD) { /* publish the record's position in order */
        sim_event_t *e = op->u.record.event;
        pthread_mutex_lock(&e->lock);
        e->stream = s;
        e->seq = op->seq;
        e->timed = false;
        e->cap_id = 0; /* (recorded outside any capture) */
        pthread_mutex_unlock(&e->lock);
    }
    sim_op_t *top = atomic_load(&s->incoming);
    do
        op->next = top;
    while (!atomic_compare_exchange_weak(&s->incoming, &top, op));
    pthread_mutex_unlock(&s->lock);
    /* A GPU runs queued work asynchronously: nobody can tell when until they wait or ask,
     * and those kick the worker. So a lightly sleeping worker is woken only every
     * WAKE_BATCH ops (a system call each time would cost more than the operations); one
     * sleeping deeply, by the first. */
    int sleeping = atomic_load(&s->sleeping);
    if (sleeping == SLEEP_DEEP ||
        (sleeping == SLEEP_LIGHT && atomic_fetch_add(&s->unwoken, 1) + 1 >= WAKE_BATCH)) {
        pthread_mutex_lock(&s->wake_lock);
        atomic_store(&s->unwoken, 0);
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->wake_lock);
    }
}

bool sim_op_after(sim_op_t *op, sim_stream_t *s, uint64_t seq) { return op_add_dep(op, s, seq); }

bool sim_op_after_blocking(sim_op_t *op, sim_ctx_t *ctx, const sim_stream_t *except) {
    bool ok = true;
    pthread_mutex_lock(&ctx->lock);
    for (size_t i = 0; i < ctx->nstreams && ok; i++) {
        sim_stream_t *o = ctx->streams[i];
        if (o != except && is_blocking(o))
            ok = op_add_dep(op, o, atomic_load(&o->enqueued));
    }
    pthread_mutex_unlock(&ctx->lock);
    return ok;
}

CUresult sim_enqueue(sim_stream_t *s, sim_op_t *op) {
    sim_ctx_t *ctx = s->ctx;
    bool ok = true;
    CUresult captured;
    if (atomic_load_explicit(&s->capture, memory_order_acquire) && sim_capture_op(s, op, &captured))
        return captured; /* kept for the graph, not run */
    if (s->legacy && atomic_load(&ctx->nblocking) > 0) {
        ok = sim_op_after_blocking(op, ctx, s);
    } else if (is_blocking(s)) {
        ok = op_add_dep(op, ctx->legacy, atomic_load(&ctx->legacy->enqueued));
    }
    if (!ok) {
        sim_op_destroy(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    push_op(s, op);
    return CUDA_SUCCESS;
}

CUresult sim_enqueue_wait(sim_stream_t *s, sim_op_t *op) {
    CUresult r = sim_enqueue(s, op);
    if (r != CUDA_SUCCESS)
        return r;
    sim_wait_seq(s, atomic_load(&s->enqueued));
    int sticky = atomic_load(&s->ctx->sticky);
    return sticky ? (CUresult)sticky : CUDA_SUCCESS;
}

static __thread sim_stream_t *t_ptds;
static __thread sim_ctx_t *t_ptds_ctx;
static _Atomic uint64_t g_stream_gen = 1; /* bumped when a stream is destroyed */
static __thread sim_stream_t *t_valid;
static __thread uint64_t t_valid_gen;

bool sim_valid_stream(sim_ctx_t *ctx, sim_stream_t *s) {
    uint64_t gen = atomic_load(&g_stream_gen);
    if (s == t_valid && gen == t_valid_gen && s->ctx == ctx)
        return true;
    pthread_mutex_lock(&ctx->lock);
    bool ok = false;
    for (size_t i = 0; i < ctx->nstreams && !ok; i++)
        ok = ctx->streams[i] == s;
    pthread_mutex_unlock(&ctx->lock);
    if (ok) {
        t_valid = s;
        t_valid_gen = gen;
    }
    return ok;
}

sim_stream_t *sim_stream_resolve(sim_ctx_t *ctx, CUstream h) {
    if (h == NULL || h == CU_STREAM_LEGACY)
        return ctx->legacy;
    if (h == CU_STREAM_PER_THREAD) {
        if (t_ptds_ctx != ctx || !t_ptds) {
            sim_stream_t *s;
            if (sim_stream_create(ctx, CU_STREAM_DEFAULT, 0, &s) != CUDA_SUCCESS)
                return NULL;
            t_ptds = s;
            t_ptds_ctx = ctx;
        }
        return t_ptds;
    }
    sim_stream_t *s = (sim_stream_t *)h;
    return sim_valid_stream(ctx, s) ? s : NULL;
}

/* ---------------------------------------------------------------------------------------
 * Stream API
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuStreamCreate(CUstream *pstream, unsigned int flags) {
    return cuStreamCreateWithPriority(pstream, flags, 0);
}

VGSIM_API CUresult cuStreamCreateWithPriority(CUstream *pstream, unsigned int flags,
                                              int priority) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pstream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    sim_stream_t *s;
    r = sim_stream_create(c, flags, priority, &s);
    if (r == CUDA_SUCCESS)
        *pstream = (CUstream)s;
    return r;
}

VGSIM_API CUresult cuStreamDestroy_v2(CUstream stream) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_ctx_t *c = sim_current_ctx(); /* destroying works on a dead context too */
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_stream_t *s = (sim_stream_t *)stream;
    if (!s || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD || s->legacy)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&c->lock);
    size_t i = 0;
    while (i < c->nstreams && c->streams[i] != s)
        i++;
    if (i == c->nstreams) {
        pthread_mutex_unlock(&c->lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    memmove(&c->streams[i], &c->streams[i + 1], (c->nstreams - i - 1) * sizeof s);
    c->nstreams--;
    if (!(s->flags & CU_STREAM_NON_BLOCKING))
        atomic_fetch_sub(&c->nblocking, 1);
    atomic_fetch_add(&g_stream_gen, 1);
    pthread_mutex_unlock(&c->lock);
    /* Queued work still runs (as on a GPU); then the worker exits. */
    sim_op_t *op = sim_op_new(OP_EXIT);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    push_op(s, op);
    return CUDA_SUCCESS;
}

CUresult sim_resolve(CUstream h, sim_ctx_t **pc, sim_stream_t **ps) {
    CUresult r = sim_ctx_check(pc);
    if (r != CUDA_SUCCESS)
        return r;
    *ps = sim_stream_resolve(*pc, h);
    return *ps ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The flags the stream was created with; 0 for the legacy and per-thread default streams
 * (both synchronise with blocking streams). */
VGSIM_API CUresult cuStreamGetFlags(CUstream stream, unsigned int *flags) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags & CU_STREAM_NON_BLOCKING;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuStreamQuery(CUstream stream) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (atomic_load(&s->capture))
        return sim_capture_sync_check(c, s);
    if (atomic_load(&s->completed) >= atomic_load(&s->enqueued))
        return CUDA_SUCCESS;
    sim_kick(s);
    return CUDA_ERROR_NOT_READY;
}

VGSIM_API CUresult cuStreamSynchronize(CUstream stream) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (atomic_load(&s->capture))
        return sim_capture_sync_check(c, s);
    if (s->legacy) { /* a marker on the legacy stream also waits for blocking streams */
        sim_op_t *op = sim_op_get(s, OP_NOP);
        if (!op)
            return CUDA_ERROR_OUT_OF_MEMORY;
        return sim_enqueue_wait(s, op);
    }
    sim_wait_seq(s, atomic_load(&s->enqueued));
    int sticky = atomic_load(&c->sticky);
    return sticky ? (CUresult)sticky : CUDA_SUCCESS;
}

CUresult sim_ctx_synchronize(sim_ctx_t *ctx) {
    /* Snapshot (stream, last queued seq) pairs, then wait without holding the lock. */
    pthread_mutex_lock(&ctx->lock);
    size_t n = ctx->nstreams;
    sim_dep_t local[64];
    sim_dep_t *list = n <= 64 ? local : malloc(n * sizeof *list);
    if (!list) {
        pthread_mutex_unlock(&ctx->lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        list[i] = (sim_dep_t){ctx->streams[i], atomic_load(&ctx->streams[i]->enqueued)};
    pthread_mutex_unlock(&ctx->lock);
    for (size_t i = 0; i < n; i++)
        sim_wait_seq(list[i].stream, list[i].seq);
    if (list != local)
        free(list);
    int sticky = atomic_load(&ctx->sticky);
    return sticky ? (CUresult)sticky : CUDA_SUCCESS;
}

VGSIM_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    sim_event_t *e = (sim_event_t *)event;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_wait(s, e, &r))
        return r;
    pthread_mutex_lock(&e->lock);
    sim_stream_t *es = e->stream;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&e->lock);
    if (!es)
        return CUDA_SUCCESS; /* never recorded: nothing to wait for */
    sim_op_t *op = sim_op_get(s, OP_NOP);
    if (!op || !op_add_dep(op, es, seq)) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return sim_enqueue(s, op);
}

VGSIM_API CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    sim_op_t *op = sim_op_get(s, OP_HOSTFN);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host.fn = fn;
    op->u.host.data = data;
    return sim_enqueue(s, op);
}

/* ---------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuEventCreate(CUevent *pevent, unsigned int flags) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pevent || (flags & ~0x7u))
        return CUDA_ERROR_INVALID_VALUE;
    sim_event_t *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->ctx = c;
    e->flags = flags;
    pthread_mutex_init(&e->lock, NULL);
    *pevent = (CUevent)e;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuEventDestroy_v2(CUevent event) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_event_t *e = (sim_event_t *)event;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    /* A pending record still points at the event: wait for it before freeing. */
    pthread_mutex_lock(&e->lock);
    sim_stream_t *s = e->stream;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&e->lock);
    if (s)
        sim_wait_seq(s, seq);
    pthread_mutex_destroy(&e->lock);
    free(e);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuEventRecord(CUevent event, CUstream stream) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    sim_event_t *e = (sim_event_t *)event;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_op_t *op = sim_op_get(s, OP_RECORD);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.record.event = e;
    return sim_enqueue(s, op);
}

/* The runtime's cudaEventRecordWithFlags. CU_EVENT_RECORD_EXTERNAL (1) matters only
 * inside a graph capture: vgsim records the event as usual. */
VGSIM_API CUresult cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned int flags) {
    if (flags & ~1u)
        return CUDA_ERROR_INVALID_VALUE;
    return cuEventRecord(event, stream);
}

VGSIM_API CUresult cuEventQuery(CUevent event) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_event_t *e = (sim_event_t *)event;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((r = sim_capture_event_check(e)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&e->lock);
    sim_stream_t *s = e->stream;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&e->lock);
    if (!s || atomic_load(&s->completed) >= seq)
        return CUDA_SUCCESS;
    sim_kick(s);
    return CUDA_ERROR_NOT_READY;
}

VGSIM_API CUresult cuEventSynchronize(CUevent event) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_event_t *e = (sim_event_t *)event;
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((r = sim_capture_event_check(e)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&e->lock);
    sim_stream_t *s = e->stream;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&e->lock);
    if (s)
        sim_wait_seq(s, seq);
    int sticky = atomic_load(&c->sticky);
    return sticky ? (CUresult)sticky : CUDA_SUCCESS;
}

VGSIM_API CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_event_t *a = (sim_event_t *)start, *b = (sim_event_t *)end;
    if (!ms || !a || !b)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (cuEventQuery(start) != CUDA_SUCCESS || cuEventQuery(end) != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_READY;
    pthread_mutex_lock(&a->lock);
    bool ta = a->timed && a->stream;
    uint64_t t0 = a->time_ns;
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_lock(&b->lock);
    bool tb = b->timed && b->stream;
    uint64_t t1 = b->time_ns;
    pthread_mutex_unlock(&b->lock);
    if (!ta || !tb)
        return CUDA_ERROR_INVALID_HANDLE; /* never recorded */
    *ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
    return CUDA_SUCCESS;
}
