/* cmd_replay.c — `vramguard replay TRACE.csv`: replay an allocation trace through the
 * allocator on vgsim and report its time per operation and its memory.
 *
 * Timing: each repeat runs every event of the trace through vg_malloc/vg_free and is
 * timed as a whole (clock_gettime around the loop); after it, the allocations the trace
 * leaves live are freed, untimed, so every repeat starts from the same state. The first
 * repeat meets a cold cache (pages are mapped in vgsim, which costs system calls); later
 * repeats run warm, as a training loop does after its first step. ns_per_op is the median
 * over repeats of (loop time / events); the first repeat is reported apart. The simulated
 * device only does work when the allocator maps or unmaps pages, so on warm repeats the
 * time measured is the allocator's own. An extra, untimed-overall repeat reads the cycle
 * counter around every operation for the latency percentiles.
 *
 * Memory: peaks are vramguard's own statistics (allocated_bytes, requested_bytes,
 * reserved_bytes), and reserved_over_allocated is peak reserved / peak allocated — the
 * figure the traces' .json files give for PyTorch. When TRACE.json lies beside TRACE.csv
 * (bench/traces, `python -m vramguard convert`), its pytorch_peak_reserved and
 * pytorch_peak_allocated are printed beside vramguard's figures.
 *
 * Perturbed order (--perturb=SEED): in a real program the same loop's frees do not always
 * arrive in the same order — PyTorch's backward pass frees from its own thread, and the
 * last frees of a step can come just after the next allocations. With a seed, each free is
 * delayed by 1 to 8 events with probability 1/50 (xorshift64*, the same for one seed), so
 * the figures show how sensitive the allocator's fragmentation is to such noise.
 * bench/pytorch_alloc_model.py perturbs a trace the same way.
 *
 * Device lag (--lag=N): a real GPU runs behind the host, so a block freed on a stream is
 * still in use for a while after vg_free returns, and an event the allocator records
 * completes later. With --lag=N the simulated device reaches the end of event i only once
 * the host has issued event i + N (a host function on the event's stream holds the queue
 * until then), or once the host sleeps with nothing issued for half a millisecond (it
 * waits for the device: an allocator's synchronisation, or the simulated device's full
 * command queue, 1024 operations per stream, as a GPU's is bounded). Each repeat ends
 * with the device catching up, as a loop's synchronisation does. Memory figures then show
 * what the allocator does on a busy GPU; time figures include the host functions' cost.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "base/common.h"
#include "api/init.h"
#include "base/options.h"
#include "../driver/driver.h"
#include "cli.h"
#include "json.h"
#include "readfile.h"
#include "trace_csv.h"

static uint64_t clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
/* CPU time of this thread: the host's own work, without the simulated device's (which
 * runs on vgsim's stream threads, as a GPU runs beside the host). */
static uint64_t cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

/* plan=on: the requests the plans placed (and the last one's tensors, if one is followed),
 * and how often a plan was taken up again. */
static void print_placed(const vg_stats_t *s) {
    printf("  placed by plan:   %llu requests, %llu missed (their place taken)",
           (unsigned long long)s->plan_placed, (unsigned long long)s->plan_missed);
    if (s->plan_tensors)
        printf("; the last plan puts %llu of its %llu tensors on the pages of those live "
               "across steps", (unsigned long long)s->plan_beside_long_lived,
               (unsigned long long)s->plan_tensors);
    printf("\n");
    if (s->plan_resumed)
        printf("  plan resumed:     %llu time%s, when the step came back after an interruption\n",
               (unsigned long long)s->plan_resumed, s->plan_resumed == 1 ? "" : "s");
}

/* plan=learn: the step found, and what a plan placing two steps would reserve. */
static void print_step(const vg_stats_t *s, uint64_t peak_alloc) {
    char b1[32], b2[32], b3[32], b4[32];
    printf("  training step:    %llu requests, found at allocation %llu",
           (unsigned long long)s->step_requests, (unsigned long long)s->step_found_at);
    if (s->steps_found > 1)
        printf(" (after %llu period%s that stopped repeating)",
               (unsigned long long)(s->steps_found - 1), s->steps_found == 2 ? "" : "s");
    if (s->step_since)
        printf("; %.1f%% of the %llu allocations since had the size one step earlier",
               100.0 * (double)s->step_repeated / (double)s->step_since,
               (unsigned long long)s->step_since);
    uint64_t with = s->plan_bytes + s->long_lived_bytes;
    bool on = strcmp(vg_option("plan"), "on") == 0;
    printf("\n  a plan of two:    %s for their tensors (peak live %s), beside %s live across "
           "steps: %s, %.4f of peak allocated (pages not counted%s)\n",
           vg__fmt_bytes(b1, s->plan_bytes), vg__fmt_bytes(b2, s->plan_peak_bytes),
           vg__fmt_bytes(b3, s->long_lived_bytes), vg__fmt_bytes(b4, with),
           peak_alloc ? (double)with / (double)peak_alloc : 0.0,
           on ? "" : "; placement unchanged");
    if (on)
        print_placed(s);
}

/* Steps were found, and none is followed at the end: each stopped repeating (a pattern
 * inside a step longer than the longest looked for, such as a micro-batch of gradient
 * accumulation, found again after each optimizer step). */
static void print_steps_dropped(const vg_stats_t *s) {
    printf("  training step:    none at the end; %llu found, each dropped when the program "
           "stopped repeating it\n", (unsigned long long)s->steps_found);
    if (strcmp(vg_option("plan"), "on") == 0)
        print_placed(s);
}

/* plan=on: the pages moved (idle ones, unmapped to be mapped where needed), and of them
 * those in the last quarter of the trace (UINT64_MAX: not known, --threads=log). */
static void print_moves(const vg_stats_t *s, uint64_t moved_late) {
    printf("  pages moved:      %llu", (unsigned long long)s->pages_moved);
    if (moved_late != UINT64_MAX)
        printf(", %llu of them in the last quarter of the last run",
               (unsigned long long)moved_late);
    printf("; waited for the streams %llu time%s\n", (unsigned long long)s->page_move_waits,
           s->page_move_waits == 1 ? "" : "s");
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct replay {
    const vg_trace_t *t;
    void **ptrs;
    CUstream *streams;
    uint64_t ooms;
    char first_oom[4096];
    bool validate;
    char validate_error[1024];
    bool plan;              /* plan=on */
    uint64_t moved_at_3q;   /* pages moved before the last quarter of the latest run */
    uint64_t lag;      /* --lag: events the device runs behind the host (0: none) */
    uint64_t *gates;   /* per event: the host position its gate waits for */
    bool threaded;     /* --threads=log: each log thread's events on a thread of its own */
    pthread_mutex_t turn_lock;
    pthread_cond_t turn_cond;
    size_t turn;       /* (threaded) the event whose turn it is */
    _Atomic uint64_t op_ticks; /* (threaded) cycles spent in the operations, last run */
} replay_t;

/* Flag --name as a whole number in [lo, hi] (left as it is when absent); false, with a
 * message saying what was expected, when it is malformed or out of range. */
static bool number_flag(const cli_args_t *a, const char *name, unsigned long long lo,
                        unsigned long long hi, const char *expected, unsigned long long *out) {
    const char *v = cli_flag(a, name, NULL);
    if (!v)
        return true;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*v || *end || v[0] == '-' || errno || n < lo || n > hi) {
        cli_error("bad value '%s' for --%s (expected %s)", v, name, expected);
        return false;
    }
    *out = n;
    return true;
}

/* The host's position (events issued, over all repeats), read by the device's gates, and
 * the position at which a gate last found the host waiting for the device: the gates
 * queued behind it then open at once while the host stays there. */
static _Atomic uint64_t g_host_pos, g_stalled_at = UINT64_MAX, g_stalls;
static pid_t g_host_tid;

/* Is the host thread asleep (waiting for the device, since the replay sleeps nowhere
 * else)? A host that is busy in one long operation (mapping pages) is not. */
static bool host_asleep(void) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)g_host_tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return !p || (p[1] == ' ' && p[2] == 'S');
}

/* A gate on a stream: hold the device until the host reaches *arg, or waits for it. */
static void gate(void *arg) {
    uint64_t target = *(const uint64_t *)arg;
    uint64_t seen = atomic_load_explicit(&g_host_pos, memory_order_acquire), idle = 0;
    struct timespec nap = {0, 20 * 1000};
    while (seen < target && seen != atomic_load(&g_stalled_at)) {
        if (idle >= 25 && idle % 25 == 0 && host_asleep()) {
            atomic_store(&g_stalled_at, seen);
            atomic_fetch_add(&g_stalls, 1);
            return;
        }
        nanosleep(&nap, NULL);
        uint64_t now = atomic_load_explicit(&g_host_pos, memory_order_acquire);
        idle = now == seen ? idle + 1 : 0;
        seen = now;
    }
}

/* The trace with a seeded share of its frees delayed by a few events (see above). Each op
 * keeps its slot (one per allocation), so a later free stays after its allocation. */
static uint64_t xorshift(uint64_t *x) {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1Dull;
}

static bool perturb(vg_trace_t *t, uint64_t seed) {
    vg_trace_op_t *out = malloc((t->nops ? t->nops : 1) * sizeof *out);
    struct { size_t at; vg_trace_op_t op; } held[64]; /* in the order they were held */
    size_t n = 0, nheld = 0;
    if (!out)
        return false;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull | 1;
    for (size_t i = 0; i < t->nops; i++) {
        size_t kept = 0; /* release the delayed frees now due, keep the rest in order */
        for (size_t k = 0; k < nheld; k++) {
            if (held[k].at <= i)
                out[n++] = held[k].op;
            else
                held[kept++] = held[k];
        }
        nheld = kept;
        const vg_trace_op_t *op = &t->ops[i];
        if (!op->alloc && nheld < 64 && xorshift(&x) % 50 == 0) {
            held[nheld].at = i + 1 + xorshift(&x) % 8;
            held[nheld++].op = *op;
        } else {
            out[n++] = *op;
        }
    }
    for (size_t k = 0; k < nheld; k++)
        out[n++] = held[k].op;
    memcpy(t->ops, out, n * sizeof *out);
    free(out);
    return true;
}

/* Run event i of the trace. */
static inline __attribute__((always_inline)) void run_op(replay_t *r, size_t i,
                                                        uint64_t *ticks) {
    const vg_trace_op_t *op = &r->t->ops[i];
    CUstream s = r->streams[op->stream];
    uint64_t c0 = ticks ? __rdtsc() : 0;
    if (op->alloc) {
        if (vg_malloc(&r->ptrs[op->slot], op->size, s) != VG_OK) {
            if (r->ooms++ == 0)
                snprintf(r->first_oom, sizeof r->first_oom, "%s", vg_last_error());
            r->ptrs[op->slot] = NULL;
        }
    } else if (r->ptrs[op->slot]) {
        vg_free(r->ptrs[op->slot], s);
        r->ptrs[op->slot] = NULL;
    }
    if (ticks)
        ticks[i] = __rdtsc() - c0;
}

/* --threads=log: one worker per thread of the log runs that thread's events, each when
 * its turn comes (the log's order, as RMM's replay benchmark keeps it). */
typedef struct worker {
    replay_t *r;
    uint32_t first, last; /* the log threads whose events it runs: [first, last) */
    uint64_t *ticks;
} worker_t;

static void *worker_main(void *arg) {
    worker_t *w = arg;
    replay_t *r = w->r;
    uint64_t spent = 0;
    for (size_t i = 0; i < r->t->nops; i++) {
        if (r->t->ops[i].thread < w->first || r->t->ops[i].thread >= w->last)
            continue;
        pthread_mutex_lock(&r->turn_lock);
        while (r->turn != i)
            pthread_cond_wait(&r->turn_cond, &r->turn_lock);
        pthread_mutex_unlock(&r->turn_lock);
        uint64_t c0 = __rdtsc();
        run_op(r, i, w->ticks);
        spent += __rdtsc() - c0;
        pthread_mutex_lock(&r->turn_lock);
        r->turn = i + 1;
        pthread_cond_broadcast(&r->turn_cond);
        pthread_mutex_unlock(&r->turn_lock);
    }
    atomic_fetch_add(&r->op_ticks, spent);
    return NULL;
}

static bool run_threaded(replay_t *r, uint64_t *ticks) {
    uint32_t n = r->t->nthreads;
    pthread_t tid[VG_TRACE_THREADS];
    worker_t w[VG_TRACE_THREADS];
    r->turn = 0;
    atomic_store(&r->op_ticks, 0);
    uint32_t started = 0;
    for (; started < n; started++) {
        w[started] = (worker_t){r, started, started + 1, ticks};
        if (pthread_create(&tid[started], NULL, worker_main, &w[started]) != 0)
            break;
    }
    if (started < n) { /* (threads that could not start: their events run here, in turn) */
        worker_t rest = {r, started, n, ticks};
        worker_main(&rest);
    }
    for (uint32_t k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    return true;
}

/* Run every event once; returns false if validation failed. */
static bool run_once(replay_t *r, uint64_t *ticks) {
    const vg_trace_t *t = r->t;
    if (r->threaded)
        return run_threaded(r, ticks);
    for (size_t i = 0; i < t->nops; i++) {
        CUstream s = r->streams[t->ops[i].stream];
        if (r->plan && !ticks && i == t->nops * 3 / 4) { /* (the pages moved after it: a plan's
                                                  steady state should move none) */
            vg_stats_t st = {.size = sizeof st};
            vg_get_stats(-1, &st);
            r->moved_at_3q = st.pages_moved;
        }
        run_op(r, i, ticks);
        if (r->lag) {
            uint64_t pos = atomic_fetch_add_explicit(&g_host_pos, 1, memory_order_release) + 1;
            r->gates[i] = pos + r->lag;
            vg__cuLaunchHostFunc(s, gate, &r->gates[i]);
        }
        if (r->validate && vg_validate() != VG_OK) {
            snprintf(r->validate_error, sizeof r->validate_error, "after event %zu: %s", i + 1,
                     vg_last_error());
            return false;
        }
    }
    return true;
}

static void free_live(replay_t *r) {
    if (r->lag) { /* the device catches up (the loop synchronises) */
        atomic_fetch_add_explicit(&g_host_pos, r->lag, memory_order_release);
        for (uint32_t i = 0; i < r->t->nstreams; i++)
            vg__cuStreamSynchronize(r->streams[i]);
    }
    for (size_t i = 0; i < r->t->nslots; i++) {
        if (r->ptrs[i]) {
            vg_free(r->ptrs[i], NULL);
            r->ptrs[i] = NULL;
        }
    }
}

static double ns_per_tick(void) {
    uint64_t t0 = now_ns(), c0 = __rdtsc();
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    uint64_t t1 = now_ns(), c1 = __rdtsc();
    return (double)(t1 - t0) / (double)(c1 - c0);
}

/* PyTorch's figures on the same events, from the .json beside the trace (bench/traces/
 * README.md), if there is one that has them: 0 where it has not. A sidecar that cannot be
 * read is only mentioned; the replay goes on. */
typedef struct pytorch_figures {
    uint64_t peak_allocated, peak_reserved;
    char path[PATH_MAX];
} pytorch_figures_t;

static void read_pytorch_figures(const char *trace, pytorch_figures_t *pf) {
    memset(pf, 0, sizeof *pf);
    size_t n = strlen(trace);
    if (n > 3 && strcasecmp(trace + n - 3, ".gz") == 0) /* NAME.csv.gz: NAME.json */
        n -= 3;
    if (n < 4 || strncasecmp(trace + n - 4, ".csv", 4) != 0 || n >= sizeof pf->path)
        return;
    snprintf(pf->path, sizeof pf->path, "%.*s.json", (int)(n - 4), trace);
    if (access(pf->path, F_OK) != 0)
        return;
    size_t len;
    char err[600];
    char *text = cli_read_file(pf->path, &len, err, sizeof err);
    json_doc_t *doc = text ? json_parse(text, len, err, sizeof err) : NULL;
    if (!doc) {
        cli_error("ignoring %s (PyTorch's figures): %s", pf->path, err);
    } else {
        int64_t res = json_int(json_root(doc), "pytorch_peak_reserved", 0);
        int64_t all = json_int(json_root(doc), "pytorch_peak_allocated", 0);
        pf->peak_reserved = res > 0 ? (uint64_t)res : 0;
        pf->peak_allocated = all > 0 ? (uint64_t)all : 0;
        json_free(doc);
    }
    free(text);
}

int cmd_replay(int argc, char **argv) {
    cli_args_t a;
    int exit_code;
    if (!cli_parse(argc, argv, cli_verb("replay"), &a, &exit_code))
        return exit_code;
    const char *path = cli_positional(&a, 0);
    if (!path) {
        cli_error("usage: vramguard replay TRACE.csv [--device-memory=80G] [--repeat=5] "
                  "[--lag=N] [--perturb=SEED] [--mode=fast|guard] [--json]");
        return CLI_USAGE;
    }
    bool json = false, validate = false;
    cli_flag(&a, "json", &json);
    cli_flag(&a, "validate", &validate);
    const char *mem = cli_flag(&a, "device-memory", NULL);
    uint64_t device_memory = 80ull << 30;
    if (mem && !vg__parse_size(mem, &device_memory)) {
        cli_error("bad value '%s' for --device-memory (expected a size such as 80G)", mem);
        return CLI_USAGE;
    }
    unsigned long long reps = 5, lag_events = 0, seed = 0;
    if (!number_flag(&a, "repeat", 1, 1000, "1 to 1000", &reps) ||
        !number_flag(&a, "lag", 0, 1000000, "0 to 1000000 events", &lag_events) ||
        !number_flag(&a, "perturb", 0, ULLONG_MAX,
                     "a seed: 0 for the trace's own order, or a positive number", &seed))
        return CLI_USAGE;
    long repeats = (long)reps;
    const char *threads = cli_flag(&a, "threads", NULL);
    if (threads && strcmp(threads, "one") != 0 && strcmp(threads, "log") != 0) {
        cli_error("bad value '%s' for --threads (expected one or log)", threads);
        return CLI_USAGE;
    }
    bool threaded = threads && strcmp(threads, "log") == 0;
    if (threaded && (lag_events || validate)) {
        cli_error("--threads=log replays without --lag and --validate (they follow one host "
                  "thread)");
        return CLI_USAGE;
    }
    pytorch_figures_t pf;
    read_pytorch_figures(path, &pf);
    vg_trace_t t;
    char err[1024];
    if (vg_trace_load(path, &t, err, sizeof err) != 0) {
        cli_error("%s", err);
        return CLI_USAGE;
    }
    if (seed && !perturb(&t, seed)) {
        cli_error("out of memory");
        vg_trace_free(&t);
        return CLI_FAILED;
    }
    char dir[PATH_MAX], opts[PATH_MAX + sizeof a.options + 64], memtext[32];
    if (!cli_find_vgsim_dir(dir, sizeof dir)) {
        cli_error("cannot find vgsim (libcuda.so.1) next to the vramguard executable");
        vg_trace_free(&t);
        return CLI_USAGE;
    }
    snprintf(memtext, sizeof memtext, "%llu", (unsigned long long)device_memory);
    setenv("VGSIM_MEMORY", memtext, 1);
    /* The replay is the only thing that runs on the device, so guard work may wait for
     * the next operation as it does under vramguard run (G3); --guard_defer=off undoes it. */
    snprintf(opts, sizeof opts, "driver=%s/libcuda.so.1,guard_defer=on%s%s", dir,
             a.options[0] ? "," : "", a.options);
    if (vg__init_from_cli(opts) != VG_OK) {
        cli_error("%s", vg_last_error());
        vg_trace_free(&t);
        return CLI_USAGE;
    }
    replay_t r = {.t = &t, .validate = validate, .lag = lag_events,
                  .threaded = threaded && t.nthreads > 1,
                  .plan = strcmp(vg_option("plan"), "on") == 0};
    pthread_mutex_init(&r.turn_lock, NULL);
    pthread_cond_init(&r.turn_cond, NULL);
    r.ptrs = calloc(t.nslots ? t.nslots : 1, sizeof *r.ptrs);
    r.gates = calloc(t.nops ? t.nops : 1, sizeof *r.gates);
    r.streams = calloc(t.nstreams, sizeof *r.streams);
    uint64_t *times = calloc((size_t)repeats, sizeof *times);
    uint64_t *cpus = calloc((size_t)repeats, sizeof *cpus);
    uint64_t *ticks = calloc(t.nops ? t.nops : 1, sizeof *ticks);
    if (!r.ptrs || !r.gates || !r.streams || !times || !cpus || !ticks) {
        cli_error("out of memory");
        return CLI_FAILED;
    }
    /* The trace's streams become real (simulated) streams; stream 0 is the default. */
    CUdevice dev;
    CUcontext ctx;
    if (vg__cuDeviceGet(&dev, 0) || vg__cuDevicePrimaryCtxRetain(&ctx, dev) ||
        vg__cuCtxSetCurrent(ctx)) {
        cli_error("the simulated device did not start");
        return CLI_FAILED;
    }
    for (uint32_t i = 1; i < t.nstreams; i++) {
        if (vg__cuStreamCreate(&r.streams[i], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
            cli_error("cannot create stream %u of the trace", i);
            return CLI_FAILED;
        }
    }
    g_host_tid = (pid_t)syscall(SYS_gettid);
    int rc = CLI_OK;
    /* (--threads=log: the host time is the operations' own, by the cycle counter: a
     * thread's CPU time would count the hand-overs between threads) */
    double tick_ns = ns_per_tick();
    vg_stats_t s = {.size = sizeof s};
    for (long k = 0; k < repeats; k++) {
        uint64_t t0 = now_ns(), c0 = cpu_ns();
        bool ok = run_once(&r, NULL);
        times[k] = now_ns() - t0;
        cpus[k] = r.threaded ? (uint64_t)((double)atomic_load(&r.op_ticks) * tick_ns)
                             : cpu_ns() - c0;
        if (!ok) {
            cli_error("the allocator's invariants broke %s", r.validate_error);
            return CLI_FAILED;
        }
        if (k == repeats - 1) /* (the plan as the trace left it, before its tensors go) */
            vg_get_stats(0, &s);
        free_live(&r);
    }
    uint64_t ooms_timed = r.ooms;
    /* One more repeat with a cycle-counter reading around every operation. */
    run_once(&r, ticks);
    free_live(&r);
    /* The last quarter's median first: the steady state of a training loop, once a plan
     * (plan=on) has taken over. */
    size_t q4 = t.nops - t.nops * 3 / 4;
    qsort(ticks + t.nops * 3 / 4, q4, sizeof *ticks, cmp_u64);
    double p50_q4 = q4 ? (double)ticks[t.nops * 3 / 4 + q4 / 2] * tick_ns : 0;
    /* Its middle half's mean: on a machine whose cycle counter moves in steps (10 ns on
     * some virtual machines), a median moves only by whole steps; this shows less. */
    double iqm_q4 = 0;
    if (q4 >= 4) {
        uint64_t sum = 0;
        for (size_t k = q4 / 4; k < q4 - q4 / 4; k++)
            sum += ticks[t.nops * 3 / 4 + k];
        iqm_q4 = (double)sum / (double)(q4 - 2 * (q4 / 4)) * tick_ns;
    }
    qsort(ticks, t.nops, sizeof *ticks, cmp_u64);
    double p50 = t.nops ? (double)ticks[t.nops / 2] * tick_ns : 0;
    double p99 = t.nops ? (double)ticks[(size_t)((double)t.nops * 0.99)] * tick_ns : 0;
    double cold = t.nops ? (double)times[0] / (double)t.nops : 0;
    uint64_t *sorted = malloc((size_t)repeats * sizeof *sorted);
    memcpy(sorted, times, (size_t)repeats * sizeof *sorted);
    qsort(sorted, (size_t)repeats, sizeof *sorted, cmp_u64);
    double nsop = t.nops ? (double)sorted[repeats / 2] / (double)t.nops : 0;
    char each[1024]; /* every repeat's CPU ns per operation, in order (JSON) */
    size_t at = 0;
    for (long k = 0; k < repeats && at + 24 < sizeof each; k++)
        at += (size_t)snprintf(each + at, sizeof each - at, "%s%.1f", k ? "," : "",
                               t.nops ? (double)cpus[k] / (double)t.nops : 0.0);
    each[at] = '\0';
    qsort(cpus, (size_t)repeats, sizeof *cpus, cmp_u64);
    double cpuop = t.nops ? (double)cpus[repeats / 2] / (double)t.nops : 0;
    uint64_t peak_alloc = (uint64_t)s.allocated_bytes[VG_POOL_ALL].peak;
    uint64_t peak_req = (uint64_t)s.requested_bytes[VG_POOL_ALL].peak;
    uint64_t peak_res = (uint64_t)s.reserved_bytes[VG_POOL_ALL].peak;
    double ratio = peak_alloc ? (double)peak_res / (double)peak_alloc : 0;
    const char *mode = vg_option("mode");
    if (json) {
        printf("{\"trace\":\"%s\",\"events\":%zu,\"repeats\":%ld,\"mode\":\"%s\","
               "\"device_memory\":%llu,\"lag\":%llu,\"perturb\":%llu,\"ns_per_op\":%.1f,\"cpu_ns_per_op\":%.1f,"
               "\"ns_per_op_cold\":%.1f,\"cpu_ns_per_op_each\":[%s],"
               "\"p50_ns\":%.1f,\"p99_ns\":%.1f,\"p50_ns_last_quarter\":%.1f,"
               "\"iqm_ns_last_quarter\":%.1f,"
               "\"peak_allocated\":%llu,"
               "\"peak_requested\":%llu,\"peak_reserved\":%llu,"
               "\"reserved_over_allocated\":%.4f,\"ooms\":%llu,\"num_device_alloc\":%llu,"
               "\"num_device_free\":%llu,\"num_alloc_retries\":%llu,\"lag_host_waits\":%llu",
               path, t.nops, repeats, mode, (unsigned long long)device_memory, lag_events, seed, nsop,
               cpuop, cold, each, p50, p99, p50_q4, iqm_q4, (unsigned long long)peak_alloc, (unsigned long long)peak_req,
               (unsigned long long)peak_res, ratio, (unsigned long long)ooms_timed,
               (unsigned long long)s.num_device_alloc, (unsigned long long)s.num_device_free,
               (unsigned long long)s.num_alloc_retries, (unsigned long long)g_stalls);
        printf(",\"threads\":%u,\"replay_threads\":%u,\"log_failures\":%zu", t.nthreads,
               r.threaded ? t.nthreads : 1, t.failures);
        if (pf.peak_reserved)
            printf(",\"pytorch_peak_reserved\":%llu", (unsigned long long)pf.peak_reserved);
        if (pf.peak_allocated)
            printf(",\"pytorch_peak_allocated\":%llu", (unsigned long long)pf.peak_allocated);
        if (s.step_requests)
            printf(",\"step_requests\":%llu,\"step_found_at\":%llu,\"steps_found\":%llu,"
                   "\"long_lived_bytes\":%llu,\"plan_bytes\":%llu,\"plan_peak_bytes\":%llu",
                   (unsigned long long)s.step_requests, (unsigned long long)s.step_found_at,
                   (unsigned long long)s.steps_found,
                   (unsigned long long)s.long_lived_bytes, (unsigned long long)s.plan_bytes,
                   (unsigned long long)s.plan_peak_bytes);
        else if (s.steps_found) /* (none followed at the end: print_steps_dropped) */
            printf(",\"steps_found\":%llu", (unsigned long long)s.steps_found);
        if (s.step_requests || s.plan_placed)
            printf(",\"plan_placed\":%llu,\"plan_missed\":%llu,\"plan_tensors\":%llu,"
                   "\"plan_beside_long_lived\":%llu,\"plan_resumed\":%llu",
                   (unsigned long long)s.plan_placed, (unsigned long long)s.plan_missed,
                   (unsigned long long)s.plan_tensors,
                   (unsigned long long)s.plan_beside_long_lived,
                   (unsigned long long)s.plan_resumed);
        printf(",\"pages_moved\":%llu,\"page_move_waits\":%llu",
               (unsigned long long)s.pages_moved, (unsigned long long)s.page_move_waits);
        if (r.plan && !r.threaded) /* (counted on the replay's one thread only) */
            printf(",\"pages_moved_last_quarter\":%llu",
                   (unsigned long long)(s.pages_moved - r.moved_at_3q));
        printf("}\n");
    } else {
        char b1[32], b2[32], b3[32];
        printf("vramguard replay of %s\n", path);
        printf("  %zu events, %zu allocations, %zu still live at the end of the trace\n", t.nops,
               t.nslots, t.live_at_end);
        if (t.nthreads > 1 || t.failures)
            printf("  %u thread%s in the log (%s)%s", t.nthreads, t.nthreads == 1 ? "" : "s",
                   r.threaded ? "each replayed on a thread of its own, in the log's order"
                              : "replayed in the log's order on one thread; --threads=log: "
                                "each on its own",
                   t.failures ? "; " : "\n");
        if (t.failures)
            printf("%zu allocation failure%s in the log (the program's allocation failed "
                   "there: not replayed)\n",
                   t.failures, t.failures == 1 ? "" : "s");
        printf("  simulated device: %s; mode %s; %ld repeat%s", vg__fmt_bytes(b1, device_memory),
               mode, repeats, repeats == 1 ? "" : "s");
        if (seed)
            printf("; frees delayed as by seed %llu", seed);
        if (lag_events)
            printf("; the device %llu events behind the host (the host waited for it %llu "
                   "times)",
                   lag_events, (unsigned long long)g_stalls);
        printf("\n");
        if (repeats == 1)
            printf("  allocator time:   %.0f ns per operation (one cold run)\n", nsop);
        else
            printf("  allocator time:   %.0f ns per operation (median of %ld repeats; the first, "
                   "cold: %.0f ns)\n",
                   nsop, repeats, cold);
        if (r.threaded)
            printf("  host time:        %.0f ns per operation (the operations alone, by the "
                   "cycle counter; the threads hand over between them)\n",
                   cpuop);
        else
            printf("  host CPU time:    %.0f ns per operation (the allocating thread's own "
                   "work)\n",
                   cpuop);
        printf("  latency:          p50 %.0f ns, p99 %.0f ns per operation (p50 of the last "
               "quarter: %.0f ns)\n", p50, p99, p50_q4);
        printf("  peak allocated:   %s (%llu bytes)\n", vg__fmt_bytes(b1, peak_alloc),
               (unsigned long long)peak_alloc);
        printf("  peak requested:   %s\n", vg__fmt_bytes(b2, peak_req));
        printf("  peak reserved:    %s\n", vg__fmt_bytes(b3, peak_res));
        printf("  reserved/allocated at peak: %.4f\n", ratio);
        if (s.step_requests)
            print_step(&s, peak_alloc);
        else if (s.steps_found) /* (found, and none followed at the end) */
            print_steps_dropped(&s);
        else if (strcmp(vg_option("plan"), "off") != 0)
            printf("  training step:    none found (plan=%s looks for a period of the "
                   "sizes asked for after which live memory comes back)\n",
                   vg_option("plan"));
        if (r.plan)
            print_moves(&s, r.threaded ? UINT64_MAX : s.pages_moved - r.moved_at_3q);
        if (pf.peak_reserved) {
            printf("  PyTorch's allocator: peak reserved %s", vg__fmt_bytes(b3, pf.peak_reserved));
            if (pf.peak_allocated)
                printf(", %.4f of its peak allocated",
                       (double)pf.peak_reserved / (double)pf.peak_allocated);
            printf("\n                       (%s: the same events%s, on the GPU they were "
                   "recorded on)\n",
                   pf.path, seed ? ", in the trace's own order" : "");
            printf("  vramguard / PyTorch peak reserved: %.4f%s\n",
                   (double)peak_res / (double)pf.peak_reserved,
                   ooms_timed ? " (not a comparison: allocations failed here, see below)" : "");
        }
        if (ooms_timed == 0)
            printf("  out-of-memory failures: 0\n");
        else if (ooms_timed % (uint64_t)repeats == 0)
            printf("  out-of-memory failures: %llu of the %zu allocations in each repeat (%llu "
                   "in all): the trace needs more than the simulated %s device, so the peaks "
                   "above are what fitted in it\n",
                   (unsigned long long)(ooms_timed / (uint64_t)repeats), t.nslots,
                   (unsigned long long)ooms_timed, vg__fmt_bytes(b1, device_memory));
        else
            printf("  out-of-memory failures: %llu over %ld repeats of %zu allocations: the "
                   "trace needs more than the simulated %s device, so the peaks above are what "
                   "fitted in it\n",
                   (unsigned long long)ooms_timed, repeats, t.nslots,
                   vg__fmt_bytes(b1, device_memory));
        if (ooms_timed)
            printf("\nthe first failure:\n%s\n", r.first_oom);
    }
    if (ooms_timed)
        rc = CLI_FAILED;
    free(sorted);
    free(times);
    free(cpus);
    free(ticks);
    free(r.ptrs);
    free(r.gates);
    free(r.streams);
    vg_trace_free(&t);
    return rc;
}
