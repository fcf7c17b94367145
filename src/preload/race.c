/* race.c — the host/async-copy race guard (S3, S4; DESIGN.md D7).
 *
 * While an asynchronous copy from pinned host memory to the device is in flight, the host
 * must not write its source; while one from the device into pinned host memory is, the
 * host must not touch its destination. So for the duration of the copy the pages the
 * buffer covers entirely are protected — read-only for a source, no access for a
 * destination — and a host function enqueued right after the copy, on the same stream,
 * lifts the protection when the copy has completed. (The copy engine is not affected: a
 * GPU's DMA ignores the CPU's page tables, and vgsim copies through its own view.)
 *
 *   - Pages shared with other data (the buffer's partial first and last pages) are left
 *     alone: no false report, at the price of not seeing a race on those bytes.
 *   - Pageable memory is never protected: CUDA makes those copies synchronous.
 *   - Overlapping copies: each page gets the strictest protection of the copies that
 *     cover it, recomputed whenever one completes.
 *   - A program that synchronises before touching the buffer (stream, event recorded
 *     after the copy, context) never faults: our host function precedes anything the
 *     program enqueues after the copy.
 *
 * A fault on a protected page is a race. The SIGSEGV handler records it (no allocation,
 * no locks: only preallocated records and atomics), then with host_race_action=wait
 * (default) waits for the copy to complete and returns, so the access is retried and the
 * program goes on as if it had synchronised; with abort it aborts. Faults that are not
 * ours go to the handler that was installed before (vgsim's, the program's, or the
 * default action). The report is written outside the handler, at the next CUDA call or
 * at exit.
 *
 * A buffer freed or unregistered while a copy is still queued on it (the driver waits for
 * the copy: docs/decisions.md G14) stops being guarded at once: the driver may hand its
 * address out again before the copy's host function runs. Without the guard (fast mode),
 * verbose mode follows the copies all the same, protecting nothing, so that such a free
 * is noted (vgp_race_unpinned).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/common.h"
#include "alloc/heap.h"
#include "base/options.h"
#include "diag/pinned.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "preload.h"
#include "vramguard.h"

#define RECS 256
#define FRAMES 16

/* FREE -> (claimed: DONE) -> ACTIVE (protected) -> LIFTING (its protection being
 * removed) -> DONE (kept until its fault is reported) -> FREE */
enum { R_FREE = 0, R_ACTIVE = 1, R_DONE = 2, R_LIFTING = 3 };

typedef struct rec {
    _Atomic int state;
    uintptr_t lo, hi;          /* the protected pages */
    const void *host;          /* the copy: host side, bytes, direction, stream, where */
    size_t bytes;
    bool to_device;
    const char *api;           /* the copy's function, for the report */
    CUstream stream;
    uint32_t enqueue_site;
    _Atomic uint64_t fault;    /* gen << 2 | F_*: the copy's generation (bumped each time
                                  the record is taken for a copy), and whether a fault was
                                  claimed for it (by the signal handler, once) */
    _Atomic bool gone;         /* the buffer is being freed: its pages are no longer guarded */
    uintptr_t fault_addr;
    bool fault_write, waited_out;
    int nframes;
    uintptr_t frames[FRAMES];
    pid_t tid;
} rec_t;

enum { F_NONE = 0, F_FAULTED = 1, F_REPORTED = 2 };
static inline int fault_of(rec_t *r) { return (int)(atomic_load(&r->fault) & 3); }

static rec_t g_recs[RECS];
static _Atomic uint64_t g_lifts; /* protections lifted so far (on_segv) */
static _Atomic int g_pending_reports;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* protections */

static struct sigaction g_old_segv;
static bool g_handler_installed;
static _Atomic long g_page; /* (learnt by the first copy; read in the signal handler) */

static uintptr_t page_size(void) {
    long p = atomic_load_explicit(&g_page, memory_order_relaxed);
    if (!p) {
        p = sysconf(_SC_PAGESIZE);
        atomic_store_explicit(&g_page, p, memory_order_relaxed);
    }
    return (uintptr_t)p;
}

bool vgp_race_enabled(void) {
    return vg__opt.host_race == VG_RACE_ON ||
           (vg__opt.host_race == VG_RACE_AUTO && vg__opt.mode >= VG_MODE_GUARD);
}

/* ---------------------------------------------------------------------------------------
 * Pinned ranges (diag/pinned.h keeps them)
 * ------------------------------------------------------------------------------------- */

static void reprotect(uintptr_t lo, uintptr_t hi);

bool vgp_race_unpinned(const void *p, size_t n, vgp_copy_t *copy) {
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    bool found = false;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < RECS; i++) {
        rec_t *r = &g_recs[i];
        uintptr_t h = (uintptr_t)r->host;
        if (atomic_load(&r->state) != R_ACTIVE || atomic_load(&r->gone) || h + r->bytes <= lo ||
            h >= hi)
            continue;
        if (!found)
            *copy = (vgp_copy_t){r->api, r->bytes, r->stream, r->enqueue_site};
        found = true;
        /* The driver may hand the address out again before the copy's host function runs:
         * its pages must not stay protected for a copy of a buffer that is gone. */
        atomic_store(&r->gone, true);
        if (r->lo < r->hi)
            reprotect(r->lo, r->hi);
        atomic_fetch_add(&g_lifts, 1);
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* ---------------------------------------------------------------------------------------
 * Protections: each page gets the strictest of the active copies covering it
 * ------------------------------------------------------------------------------------- */

static int cmp_uptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Re-apply the protection of [lo, hi) from the active records (g_lock held). */
static void reprotect(uintptr_t lo, uintptr_t hi) {
    uintptr_t cuts[2 * RECS + 2];
    int n = 0;
    cuts[n++] = lo;
    cuts[n++] = hi;
    for (int i = 0; i < RECS; i++) {
        rec_t *r = &g_recs[i];
        if (atomic_load(&r->state) != R_ACTIVE || atomic_load(&r->gone) || r->hi <= lo ||
            r->lo >= hi)
            continue;
        if (r->lo > lo)
            cuts[n++] = r->lo;
        if (r->hi < hi)
            cuts[n++] = r->hi;
    }
    qsort(cuts, (size_t)n, sizeof cuts[0], cmp_uptr);
    for (int k = 0; k + 1 < n; k++) {
        uintptr_t a = cuts[k], b = cuts[k + 1];
        if (a >= b)
            continue;
        int prot = PROT_READ | PROT_WRITE;
        for (int i = 0; i < RECS; i++) {
            rec_t *r = &g_recs[i];
            if (atomic_load(&r->state) != R_ACTIVE || atomic_load(&r->gone) || r->hi <= a ||
                r->lo >= b)
                continue;
            prot &= r->to_device ? PROT_READ : PROT_NONE;
        }
        mprotect((void *)a, b - a, prot);
    }
}

/* ---------------------------------------------------------------------------------------
 * The signal handler
 * ------------------------------------------------------------------------------------- */

static void chain(int sig, siginfo_t *si, void *uc) {
    if (g_old_segv.sa_flags & SA_SIGINFO) {
        if (g_old_segv.sa_sigaction) {
            g_old_segv.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (g_old_segv.sa_handler == SIG_IGN) {
        return;
    } else if (g_old_segv.sa_handler != SIG_DFL) {
        g_old_segv.sa_handler(sig);
        return;
    }
    /* The default action: restore it and return; the access faults again and kills the
     * process as it would have without vramguard. */
    signal(sig, SIG_DFL);
}

static void say(const char *s) {
    ssize_t w = write(2, s, strlen(s));
    (void)w;
}

/* The record of an active (or lifting) copy whose protected pages hold a, with the
 * generation it was read at; NULL if none. */
static rec_t *rec_holding(uintptr_t a, uint64_t *gen) {
    for (int i = 0; i < RECS; i++) {
        rec_t *r = &g_recs[i];
        uint64_t g = atomic_load(&r->fault) >> 2; /* (first: the fields below are its copy's) */
        int st = atomic_load(&r->state);
        /* (LIFTING: the copy completed and the page is about to become accessible) */
        if ((st == R_ACTIVE || st == R_LIFTING) && !atomic_load(&r->gone) && a >= r->lo &&
            a < r->hi) {
            *gen = g;
            return r;
        }
    }
    return NULL;
}

/* Claim r's fault for the copy of generation gen, in one step with the generation:
 * between finding r and claiming it, the copy may complete and another thread's copy take
 * the record (the fault would be blamed on the wrong copy): then the caller looks again. */
static bool claim(rec_t *r, uint64_t gen, bool *retry) {
    uint64_t want = gen << 2 | F_NONE;
    *retry = false;
    if (atomic_load(&r->state) == R_ACTIVE &&
        atomic_compare_exchange_strong(&r->fault, &want, gen << 2 | F_FAULTED))
        return true;
    *retry = (atomic_load(&r->fault) >> 2) != gen;
    return false;
}

/* on_segv: the last fault retried as lifted, and g_lifts then */
static VG_TLS_FAST uintptr_t t_lifted_at;
static VG_TLS_FAST uint64_t t_lifted_lifts;

static void on_segv(int sig, siginfo_t *si, void *ucv) {
    uintptr_t a = (uintptr_t)si->si_addr;
    uint64_t gen = 0;
    bool retry = false, claimed = false;
    rec_t *r;
    do {
        r = rec_holding(a, &gen);
        claimed = r && claim(r, gen, &retry);
    } while (r && retry);
    if (!r) {
        /* A copy's page that faulted while protected, whose copy completed before this
         * handler looked: its protection is lifted, so the access, retried, goes through.
         * The same address faulting again with no protection lifted since is not that (a
         * buffer freed, then touched): it goes on, as anything else that is not ours. */
        uint64_t lifts = atomic_load(&g_lifts);
        bool lifted = false;
        for (int i = 0; i < RECS && !lifted && (a != t_lifted_at || lifts != t_lifted_lifts);
             i++)
            lifted = a >= g_recs[i].lo && a < g_recs[i].hi;
        t_lifted_at = lifted ? a : 0;
        t_lifted_lifts = lifts;
        if (!lifted)
            chain(sig, si, ucv);
        return;
    }
    int saved_errno = errno;
    if (claimed) {
        ucontext_t *uc = ucv;
        r->fault_addr = a;
#if defined(__x86_64__)
        r->fault_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
        bool in = vg__in_signal_handler;
        vg__in_signal_handler = true;
        r->nframes = vg__unwind_from((uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                                     (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], r->frames, FRAMES);
        vg__in_signal_handler = in;
#else
        (void)uc;
        r->fault_write = !r->to_device; /* unknown: a destination denies both */
        r->nframes = 0;
#endif
        r->tid = (pid_t)syscall(SYS_gettid);
        atomic_store(&g_pending_reports, 1);
    }
    if (vg__opt.host_race_action == VG_RACE_ABORT) {
        say("==vramguard== ERROR: the host touched a buffer while an asynchronous copy was "
            "using it (host_race_action=abort)\n");
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    /* Wait for the copy's host function to lift the protection, then retry the access. */
    struct timespec ts = {0, 100000}, t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&r->state) == R_ACTIVE || atomic_load(&r->state) == R_LIFTING) {
        nanosleep(&ts, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t1.tv_nsec -
                (uint64_t)t0.tv_nsec > (uint64_t)vg__opt.host_race_wait_ms * 1000000ull) {
            /* The copy does not complete (a stream waiting on this very thread?): stop
             * guarding this page rather than hang the program. */
            uintptr_t size = (uintptr_t)atomic_load_explicit(&g_page, memory_order_relaxed);
            mprotect((void *)(a & ~(size - 1)), size, PROT_READ | PROT_WRITE);
            r->waited_out = true;
            break;
        }
    }
    errno = saved_errno;
}

static void install_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &g_old_segv) == 0)
        g_handler_installed = true;
}

/* ---------------------------------------------------------------------------------------
 * Around a copy
 * ------------------------------------------------------------------------------------- */

uintptr_t vgp_race_before(const void *h, size_t n, bool to_device, CUstream stream,
                          const char *api) {
    /* Without the race guard, verbose mode still follows the copy, unprotected, for the
     * note of a free that waits for it (vgp_race_unpinned). */
    bool guard = vgp_race_enabled();
    if ((!guard && !vg__opt.verbose) || !h || n == 0)
        return 0;
    uintptr_t page = page_size();
    uintptr_t lo = ((uintptr_t)h + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)h + n) & ~(page - 1);
    if (lo >= hi && guard)
        return 0; /* no page belongs to the buffer alone */
    if (!guard)
        lo = hi = 0; /* (nothing to protect) */
    if (!vg__pinned_contains((uintptr_t)h, (uintptr_t)h + n))
        return 0; /* (device memory, as cuMemcpyAsync's often is, stops here) */
    if (vg__stream_capturing(stream))
        return 0; /* captured into a graph: the copy runs at each replay, not now (A7) */
    if (guard)
        vg__stack_bounds_prepare(); /* so the handler can unwind this thread */
    uint32_t site = vg__opt.stack_depth ? vg__site_here(2) : 0;
    pthread_mutex_lock(&g_lock);
    if (!vg__pinned_contains((uintptr_t)h, (uintptr_t)h + n)) {
        pthread_mutex_unlock(&g_lock);
        return 0; /* pageable: CUDA copies it synchronously */
    }
    if (!g_handler_installed && guard)
        install_handler();
    rec_t *r = NULL;
    for (int i = 0; i < RECS && !r; i++) {
        int expect = R_FREE;
        if (atomic_compare_exchange_strong(&g_recs[i].state, &expect, R_DONE))
            r = &g_recs[i];
    }
    if (!r) { /* too many copies in flight: this one goes unguarded */
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    r->lo = lo;
    r->hi = hi;
    r->host = h;
    r->bytes = n;
    r->to_device = to_device;
    r->api = api;
    r->stream = stream;
    r->enqueue_site = site;
    r->waited_out = false;
    atomic_store(&r->gone, false);
    /* (a new generation: a fault on the copy before is not this one's) */
    atomic_store(&r->fault, ((atomic_load(&r->fault) >> 2) + 1) << 2 | F_NONE);
    atomic_store(&r->state, R_ACTIVE);
    if (guard)
        reprotect(lo, hi);
    pthread_mutex_unlock(&g_lock);
    return (uintptr_t)(r - g_recs) + 1;
}

/* The copy completed (or was never enqueued): lift its protection. */
static void complete(rec_t *r) {
    pthread_mutex_lock(&g_lock);
    atomic_store(&r->state, R_LIFTING); /* a fault now waits, instead of looking foreign */
    if (r->lo < r->hi) /* (an unguarded copy protected nothing) */
        reprotect(r->lo, r->hi);
    atomic_store(&r->state, R_DONE);
    atomic_fetch_add(&g_lifts, 1);
    if (fault_of(r) != F_FAULTED)
        atomic_store(&r->state, R_FREE); /* (a fault not yet reported: freed once it is) */
    pthread_mutex_unlock(&g_lock);
}

static void copy_done(void *arg) { complete(arg); }

void vgp_race_after(uintptr_t token, CUresult r, CUstream stream) {
    if (!token)
        return;
    rec_t *rec = &g_recs[token - 1];
    if (r != CUDA_SUCCESS) {
        complete(rec);
        return;
    }
    if (vg__cuLaunchHostFunc(stream, copy_done, rec) != CUDA_SUCCESS) {
        vg__cuStreamSynchronize(stream); /* cannot follow it: wait for it now */
        complete(rec);
    }
}

/* ---------------------------------------------------------------------------------------
 * Reports (outside the handler)
 * ------------------------------------------------------------------------------------- */

static void report_race(rec_t *r) {
    vg_report_t rep = {.kind = VG_REPORT_HOST_RACE, .stream = r->stream, .clean_seq = UINT64_MAX};
    rep.call_site = r->nframes ? vg__site_intern(r->frames, r->nframes) : 0;
    intptr_t off = (intptr_t)(r->fault_addr - (uintptr_t)r->host);
    char sz[32];
    vg_buf_t d = {0};
    vg__buf_printf(&d, "the host %s 0x%llx, byte %lld of the %s of %s (%zu bytes, %s) "
                       "on stream 0x%llx, before the copy had completed\n",
                   r->fault_write ? "wrote to" : "read", (unsigned long long)r->fault_addr,
                   (long long)off, r->to_device ? "source" : "destination", r->api, r->bytes,
                   vg__fmt_bytes(sz, r->bytes), (unsigned long long)(uintptr_t)r->stream);
    vg__buf_printf(&d, "%s\n", r->to_device
                                   ? "the copy may send the new bytes, the old ones, or a mix"
                                   : "the host may see the old bytes, the new ones, or a mix");
    vg_site_t *s = vg__site(r->enqueue_site);
    if (s && s->nframes) {
        uint32_t shown = vg__site_symbolize(s);
        vg__buf_printf(&d, "the copy was enqueued at:\n");
        for (uint32_t i = 0; i < shown && i < 8; i++)
            vg__buf_printf(&d, "  #%u %s\n", i, vg__symbolize(s->frames[i]));
    }
    int64_t ms = vg__opt.host_race_wait_ms;
    if (r->waited_out && ms % 1000 == 0)
        vg__buf_printf(&d, "vramguard waited %lld s for the copy", (long long)(ms / 1000));
    else if (r->waited_out)
        vg__buf_printf(&d, "vramguard waited %lld ms for the copy", (long long)ms);
    vg__buf_printf(&d, "%s", r->waited_out
                                 ? " (host_race_wait_ms), then stopped guarding the page; "
                                   "synchronise the stream before touching the buffer"
                                 : "vramguard made the access wait for the copy to complete; "
                                   "synchronise the stream (or an event recorded after the "
                                   "copy) before touching the buffer");
    snprintf(rep.detail, sizeof rep.detail, "%s", d.data ? d.data : "");
    vg__buf_free(&d);
    rep.found = "by the page protection of a buffer with an asynchronous copy in flight";
    vg__report(&rep);
}

void vgp_flush_deferred(void) {
    if (!atomic_load_explicit(&g_pending_reports, memory_order_relaxed))
        return;
    atomic_store(&g_pending_reports, 0);
    for (int i = 0; i < RECS; i++) {
        rec_t *r = &g_recs[i];
        uint64_t f = atomic_load(&r->fault);
        if ((f & 3) != F_FAULTED)
            continue;
        atomic_store(&r->fault, (f & ~3ull) | F_REPORTED);
        report_race(r);
        pthread_mutex_lock(&g_lock);
        int done = R_DONE;
        atomic_compare_exchange_strong(&r->state, &done, R_FREE);
        pthread_mutex_unlock(&g_lock);
    }
}

/* At exit: lift every protection still in place and give SIGSEGV back to the handler
 * that was there before vramguard's (exit handlers of the program may touch the buffers). */
void vgp_race_release(void) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < RECS; i++) {
        rec_t *r = &g_recs[i];
        if (atomic_load(&r->state) == R_ACTIVE) {
            atomic_store(&r->state, R_LIFTING);
            if (r->lo < r->hi)
                mprotect((void *)r->lo, r->hi - r->lo, PROT_READ | PROT_WRITE);
            atomic_store(&r->state, R_DONE);
        }
    }
    if (g_handler_installed) {
        sigaction(SIGSEGV, &g_old_segv, NULL);
        g_handler_installed = false;
    }
    pthread_mutex_unlock(&g_lock);
}
