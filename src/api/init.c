/* init.c — process-wide initialisation and shutdown.
 *
 * Initialisation happens once: explicitly through vg_init(), or implicitly on the first
 * call of any other function (options from VRAMGUARD_OPTIONS only). It reads the
 * options, opens the output sinks, loads the driver and registers the exit handler.
 * After it, vg__ready is true and the fast paths only test that flag.
 */
#define _GNU_SOURCE
#include "init.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc/heap.h"
#include "alloc/hooks.h"
#include "base/common.h"
#include "base/options.h"
#include "check/guard.h"
#include "check/memcheck.h"
#include "check/nvtx.h"
#include "diag/leaks.h"
#include "diag/pinned.h"
#include "diag/oom.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "diag/snapshot.h"
#include "diag/suppress.h"
#include "diag/trace.h"
#include "driver/driver.h"

_Atomic bool vg__ready;
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_tried;
static vg_status_t g_init_status;
static char g_init_error[1024];
static char g_init_options[8192];
static bool g_have_init_options;

/* The options and where each came from, one log line each (verbose=1). */
static void options_print(void) {
    vg_buf_t b = {0};
    vg__options_describe(&b);
    for (char *line = b.data, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = '\0';
        vg__log("%s", line);
    }
    vg__buf_free(&b);
}

static pid_t g_init_pid; /* the process that initialised vramguard */

/* A child made with fork() shares the parent's state but owns none of it: its CUDA
 * context is the parent's (unusable after fork), and a lock held by another thread at the
 * fork stays held forever in the child. So a forked child that exits does nothing here:
 * no final check, no leak report, no summary — those are the parent's. */
static void at_exit(void) {
    if (getpid() == g_init_pid)
        vg__shutdown();
}

static vg_status_t init_locked(const char *options, vg_opt_source_t src) {
    vg_status_t st = vg__options_load_env();
    if (st == VG_OK && options)
        st = vg__options_apply(options, src);
    if (st != VG_OK)
        return st;
    vg__output_open();
    if (vg__opt.verbose)
        options_print();
    st = vg__driver_load(NULL);
    if (st != VG_OK)
        return st;
    if (vg__opt.verbose)
        vg__log("driver: %s (CUDA %d.%d)%s", vg__drv.path, vg__drv.version / 1000,
                vg__drv.version % 1000 / 10, vg__drv.is_vgsim ? ", vgsim: the CPU simulation" : "");
    st = vg__modules_init();
    if (st != VG_OK)
        return st;
    g_init_pid = getpid();
    atexit(at_exit);
    return VG_OK;
}

/* *attempted (if not NULL): set when this call was the one that tried. */
static vg_status_t init_once(const char *options, vg_opt_source_t src, bool *attempted) {
    pthread_mutex_lock(&g_init_lock);
    if (!g_tried) {
        g_tried = true;
        if (attempted)
            *attempted = true;
        if (options) {
            g_have_init_options = true;
            strncpy(g_init_options, options, sizeof g_init_options - 1);
        }
        g_init_status = init_locked(options, src);
        if (g_init_status == VG_OK)
            atomic_store(&vg__ready, true);
        else
            strncpy(g_init_error, vg_last_error(), sizeof g_init_error - 1);
        pthread_mutex_unlock(&g_init_lock);
        return g_init_status;
    }
    vg_status_t st = g_init_status;
    bool same = !options || (g_have_init_options && strcmp(options, g_init_options) == 0);
    pthread_mutex_unlock(&g_init_lock);
    if (st != VG_OK)
        return vg__error(st, "%s", g_init_error);
    if (!same)
        return vg__error(VG_ERR_INVALID_ARGUMENT,
                         "vramguard is already initialised with other options; vg_init() must "
                         "come before any other vramguard call");
    return VG_OK;
}

vg_status_t vg__init_slow(void) { return init_once(NULL, VG_SRC_ENV, NULL); }

VG_API vg_status_t vg_init(const char *options) {
    bool first = false;
    vg_status_t st = init_once(options, VG_SRC_INIT, &first);
    /* A program that asked for vramguard and cannot have it is told why once, in the log,
     * beside the status it gets: a C program may not print vg_last_error(). */
    if (st != VG_OK && first)
        vg__log("vg_init failed, vramguard is not active: %s", vg_last_error());
    return st;
}

vg_status_t vg__init_from_cli(const char *options) { return init_once(options, VG_SRC_CLI, NULL); }

VG_API void vg_print_options(void) {
    if (vg__ensure_init() == VG_OK || g_tried)
        options_print();
}

static _Atomic int g_shutdown;     /* 0: not yet, 1: running, 2: done */
static _Atomic int g_fatal_signal; /* a signal the process is to die of, once reported */

void vg__shutdown(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_shutdown, &expected, 1)) {
        /* Another thread is at it (a signal's watcher, while the program exits): the
         * process must not end before the reports are out, nor end other than by that
         * signal. */
        struct timespec ts = {0, 1000000};
        while (atomic_load(&g_shutdown) == 1 || atomic_load(&g_fatal_signal))
            nanosleep(&ts, NULL);
        return;
    }
    if (atomic_load(&vg__ready))
        vg__modules_shutdown();
    vg__output_close();
    atomic_store(&g_shutdown, 2);
    int sig = atomic_load(&g_fatal_signal);
    if (sig) { /* the process dies of it, as it would have without vramguard */
        signal(sig, SIG_DFL);
        kill(getpid(), sig);
    }
}

void vg__note_fatal_signal(int sig) { atomic_store(&g_fatal_signal, sig); }

vg_status_t vg__options_validate(const char *str) {
    vg_options_t tmp;
    vg_status_t st = vg__options_check(str, &tmp);
    if (st == VG_OK) /* (a program is not started with a file that would stop vramguard) */
        st = vg__suppressions_check(tmp.suppressions);
    return st;
}

VG_API vg_status_t vg_options_check(const char *options) {
    return options ? vg__options_validate(options) : VG_OK;
}

/* ---------------------------------------------------------------------------------------
 * The allocator's doors (alloc/hooks.h): guard mode, the memory tool and the
 * explanations, filled before any heap exists.
 * ------------------------------------------------------------------------------------- */

static bool account_gone(vg_block_t *b, void *arg) {
    (void)arg;
    if (b->state == VG_BLOCK_ALLOCATED) /* (reported as leaks) */
        vg__site_account(b->site, -(int64_t)b->requested, -1);
    return true;
}

static void heap_gone(vg_heap_t *h) {
    vg__heap_each_block(h, account_gone, NULL);
    vg__guard_heap_release(h);
}

/* Segments, for the tools that keep a view of them: compute-sanitizer's (NVTX) and
 * memcheck mode's shadow. */
static void tool_segment_added(vg_heap_t *h, vg_segment_t *seg) {
    vg__nvtx_segment_added_slow(h, seg);
    vg__memcheck_segment_added(h, seg);
}
static void tool_segment_removed(vg_heap_t *h, vg_segment_t *seg) {
    vg__nvtx_segment_removed_slow(h, seg);
    vg__memcheck_segment_removed(h, seg);
}
/* memcheck's shadow is kept per cuMemAlloc segment (docs/decisions.md G13), and
 * compute-sanitizer takes no pool in virtual memory (G12). */
static bool tool_plain_segments(void) {
    return (vg__memcheck_on() && vg__opt.vmm == VG_VMM_AUTO) || vg__nvtx_plain_segments();
}

static void open_doors(void) {
    vg__alloc_hooks = (vg_alloc_hooks_t){
        .heap_created = vg__guard_heap_init,
        .heap_retiring = heap_gone,
        .before_free = vg__guard_before_free,
        .quarantine = vg__guard_quarantine,
        .shrink_quarantine = vg__guard_shrink_quarantine,
        .flush_quarantine = vg__guard_flush_quarantine,
        .flush = vg__guard_flush,
        .poll = vg__guard_poll,
        .graph_fill = vg__guard_graph_fill,
        .unpooled = vg__memcheck_unpooled,
        .segment_added = tool_segment_added,
        .segment_removed = tool_segment_removed,
        .region_added = vg__nvtx_region_added_slow,
        .region_named = vg__nvtx_region_named_slow,
        .region_removed = vg__nvtx_region_removed_slow,
        .pool_adopted = vg__nvtx_pool_adopted_slow,
        .pool_released = vg__nvtx_pool_released_slow,
        .plain_segments = tool_plain_segments,
        .explain_oom = vg__oom_explain,
    };
}

vg_status_t vg__modules_init(void) {
    open_doors();
    vg__sites_init();
    vg__nvtx_init();
    vg_status_t st = vg__memcheck_init();
    if (st != VG_OK)
        return st;
    st = vg__suppressions_load(vg__opt.suppressions, vg__opt.default_suppressions);
    return st != VG_OK ? st : vg__trace_open();
}

void vg__modules_shutdown(void) {
    for (int i = 0; i < vg__heap_count(); i++) { /* the final check */
        vg_heap_t *h = vg__heap_at(i);
        if (vg__heap_retired(h)) /* (its context was destroyed) */
            continue;
        pthread_mutex_lock(&h->lock);
        vg__guard_heap_shutdown(h);
        pthread_mutex_unlock(&h->lock);
    }
    if (vg__leaks_wanted()) {
        vg__leak_report(NULL, "at exit");
        vg__pinned_leak_report();
    }
    vg__snapshot_at_exit();
    vg__trace_close();
    vg__memcheck_exit_summary();
    if (vg__opt.verbose) {
        vg__heaps_describe_exit();
        vg__pinned_describe_exit();
    }
    vg__report_finish();
}
