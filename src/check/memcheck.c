/* memcheck.c — memcheck mode's host side: the Compute Sanitizer API loaded and subscribed
 * to, every module the program loads patched, each launch given its user data, and the
 * shadow of vramguard's segments kept in stream order (memcheck.h, docs/decisions.md G13).
 *
 * Per context: a state in device memory ({table, log}), a log in pinned memory the device
 * writes, a stream of memcheck's own, and the segments of the context's heaps, each with
 * its shadow (one 16-bit word per 512 bytes). When segments come or go, a new table is
 * uploaded and the state pointed at it, on memcheck's stream, waited for: launches from
 * then on use it. Old tables and shadows are kept until the context is idle (a kernel
 * still running may read them), at the latest until the heap retires.
 *
 * Inside the API's callbacks no CUDA call is made: the user data needs none.
 */
#define _GNU_SOURCE
#include "memcheck.h"

#include <dlfcn.h>
#include <fnmatch.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../kernels/memcheck_abi.h"
#include "../../kernels/sanitizer_abi.h"
#include "base/common.h"
#include "base/options.h"
#include "diag/order.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "driver/driver.h"
#include "kernel_names.h"
#include "memcheck_fatbin.h" /* generated from kernels/memcheck.fatbin: vg_memcheck_fatbin[] */

#define LOG_CAPACITY 1024
#define MAX_CONTEXTS 64
#define RETIRED_MAX (64ull << 20) /* bytes of old shadows kept before the context is waited for */

/* ---------------------------------------------------------------------------------------
 * The API
 * ------------------------------------------------------------------------------------- */

static struct {
#define VG_X(name, ret, params) ret(*name) params;
    VG_SANITIZER_FUNCS(VG_X)
#undef VG_X
    vg_san_subscriber_t sub;
    char path[PATH_MAX + 64];
} S;

static bool g_ready;
static VG_TLS_FAST bool t_own_module;
static _Atomic uint64_t g_modules, g_unpatched, g_patch_failures, g_launches_checked,
    g_launches_skipped;

bool vg__memcheck_on(void) { return vg__opt.mode == VG_MODE_MEMCHECK; }

void vg__memcheck_own_module(bool loading) { t_own_module = loading; }

static bool bind(void *lib) {
#define VG_X(name, ret, params)                                                             \
    if (!(S.name = (ret(*) params)vg__dlsym(lib, #name)))                                   \
        return false;
    VG_SANITIZER_FUNCS(VG_X)
#undef VG_X
    return true;
}

static bool try_path(const char *path) {
    if (access(path, R_OK) != 0)
        return false;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        vg__log("memcheck: cannot load %s: %s", path, dlerror());
        return false;
    }
    if (!bind(lib)) {
        vg__log("memcheck: %s lacks the Compute Sanitizer API's functions of CUDA 12.3 and "
                "later (sanitizerSetLaunchCallbackData among them): an older toolkit's?", path);
        return false;
    }
    snprintf(S.path, sizeof S.path, "%.*s", (int)sizeof S.path - 1, path);
    return true;
}

/* compute-sanitizer's folder for a `compute-sanitizer` found on PATH: the toolkit's
 * bin/compute-sanitizer is a launcher beside ../compute-sanitizer/. */
static bool try_from_path(void) {
    const char *p = getenv("PATH");
    char dir[1024], exe[1100], real[PATH_MAX], lib[PATH_MAX + 64];
    while (p && *p) {
        size_t n = strcspn(p, ":");
        snprintf(dir, sizeof dir, "%.*s", (int)(n < sizeof dir ? n : sizeof dir - 1), p);
        p += n + (p[n] == ':');
        snprintf(exe, sizeof exe, "%s/compute-sanitizer", dir);
        if (!*dir || access(exe, X_OK) != 0 || !realpath(exe, real))
            continue;
        char *slash = strrchr(real, '/');
        *slash = '\0';
        snprintf(lib, sizeof lib, "%s/libsanitizer-public.so", real); /* (the tool's own) */
        if (try_path(lib))
            return true;
        snprintf(lib, sizeof lib, "%s/../compute-sanitizer/libsanitizer-public.so", real);
        if (try_path(lib))
            return true;
    }
    return false;
}

static bool find_api(void) {
    if (vg__opt.sanitizer_lib[0])
        return try_path(vg__opt.sanitizer_lib);
    if (bind(vg__drv.handle)) { /* vgsim's stand-in */
        snprintf(S.path, sizeof S.path, "%.512s (vgsim's stand-in)", vg__drv.path);
        return true;
    }
    char lib[1200];
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (size_t i = 0; i < VG_ARRAY_LEN(homes); i++) {
        if (!homes[i] || !*homes[i])
            continue;
        snprintf(lib, sizeof lib, "%.1024s/compute-sanitizer/libsanitizer-public.so", homes[i]);
        if (try_path(lib))
            return true;
    }
    if (try_from_path())
        return true;
    glob_t gl; /* the newest toolkit installed */
    bool found = false;
    if (glob("/usr/local/cuda-*/compute-sanitizer/libsanitizer-public.so", 0, NULL, &gl) == 0) {
        for (size_t i = gl.gl_pathc; i-- > 0 && !found;)
            found = try_path(gl.gl_pathv[i]);
        globfree(&gl);
    }
    return found;
}

static void callback(void *userdata, int domain, uint32_t cbid, const void *data);

/* For measuring the API's own cost (docs/memcheck.md "What it costs"), not for users:
 * VRAMGUARD_MEMCHECK_SPLIT=patch-only patches every module but takes no launch callback
 * (every access calls the device function, which returns at once); =patch-empty the same
 * with a device function that does nothing at all (kernels/memcheck.cu: what the call
 * costs without the callback's spilled registers); =callbacks-only takes the launch
 * callbacks but patches nothing. */
static int g_split; /* 0 both, 1 patch only (3: the empty function), 2 callbacks only */

static bool patches_only(void) { return g_split == 1 || g_split == 3; }

const char *vg__memcheck_callback(void) {
    return g_split == 3 ? VG_MC_CALLBACK_EMPTY
         : vg__opt.initcheck ? VG_MC_CALLBACK : VG_MC_CALLBACK_NOINIT;
}

vg_status_t vg__memcheck_init(void) {
    if (!vg__memcheck_on() || g_ready)
        return VG_OK;
    const char *split = getenv("VRAMGUARD_MEMCHECK_SPLIT");
    g_split = !split ? 0 : strcmp(split, "patch-only") == 0 ? 1
            : strcmp(split, "callbacks-only") == 0 ? 2 : strcmp(split, "patch-empty") == 0 ? 3
            : 0;
    if (g_split)
        vg__log("memcheck: VRAMGUARD_MEMCHECK_SPLIT=%s: nothing is checked (a measurement of "
                "the API's cost)", split);
    if (!find_api())
        return vg__error(VG_ERR_NOT_SUPPORTED,
                         "mode=memcheck needs NVIDIA's Compute Sanitizer API "
                         "(libsanitizer-public.so, in the compute-sanitizer folder of the CUDA "
                         "toolkit): not found under $CUDA_HOME, /usr/local/cuda, "
                         "/usr/local/cuda-*, or beside a compute-sanitizer on PATH; name it "
                         "with sanitizer_lib=PATH");
    vg_san_result_t r = S.sanitizerSubscribe(&S.sub, callback, NULL);
    if (r == VG_SAN_SUCCESS)
        r = S.sanitizerEnableCallback(1, S.sub, VG_SAN_DOMAIN_RESOURCE, VG_SAN_CBID_MODULE_LOADED);
    if (r == VG_SAN_SUCCESS && !patches_only())
        r = S.sanitizerEnableCallback(1, S.sub, VG_SAN_DOMAIN_LAUNCH, VG_SAN_CBID_LAUNCH_BEGIN);
    if (r == VG_SAN_SUCCESS) /* (for the modules' lines: without it, a handle loaded again
                              * replaces them, so it may fail) */
        (void)S.sanitizerEnableCallback(1, S.sub, VG_SAN_DOMAIN_RESOURCE,
                                        VG_SAN_CBID_MODULE_UNLOAD_STARTING);
    if (r == VG_SAN_SUCCESS && !patches_only() &&
        S.sanitizerEnableCallback(1, S.sub, VG_SAN_DOMAIN_GRAPHS,
                                  VG_SAN_CBID_GRAPHS_NODE_LAUNCH_BEGIN) != VG_SAN_SUCCESS)
        vg__log("memcheck: the Compute Sanitizer API (%s) gives no graph node callbacks: "
                "kernels launched from CUDA graphs run unchecked", S.path);
    if (r != VG_SAN_SUCCESS)
        return vg__error(VG_ERR_NOT_SUPPORTED,
                         "mode=memcheck: the Compute Sanitizer API (%s) refused a subscriber "
                         "(error %d): is the program already running under compute-sanitizer?",
                         S.path, r);
    g_ready = true;
    if (vg__opt.verbose)
        vg__log("memcheck: the Compute Sanitizer API from %s patches every module loaded from "
                "now on%s",
                S.path, vg__opt.memcheck_kernels[0] ? " that defines a kernel memcheck_kernels names"
                                                    : "");
    return VG_OK;
}

/* ---------------------------------------------------------------------------------------
 * Contexts: the state, the log, the segments and their shadows
 * ------------------------------------------------------------------------------------- */

typedef struct mc_seg {
    uint64_t base, end;
    CUdeviceptr shadow, init; /* init: initcheck's bitmap, or 0 */
} mc_seg_t;

typedef struct mc_ctx {
    CUcontext ctx;
    CUfunction shadow_fn;
    CUstream stream;
    CUdeviceptr state_raw, state;
    vg_mc_log_t *log;
    pthread_mutex_t lock; /* segs, table, retired */
    mc_seg_t *segs;
    size_t nsegs, cap;
    CUdeviceptr table;
    CUdeviceptr *retired;
    size_t nretired, capretired;
    uint64_t retired_bytes;
    int heaps;
    bool broken; /* a CUDA call failed: shadows are no longer kept (said once) */
} mc_ctx_t;

static mc_ctx_t *g_ctxs[MAX_CONTEXTS];
static pthread_mutex_t g_ctxs_lock = PTHREAD_MUTEX_INITIALIZER;

static mc_ctx_t *ctx_find(CUcontext ctx) {
    for (int i = 0; i < MAX_CONTEXTS; i++) {
        mc_ctx_t *c = __atomic_load_n(&g_ctxs[i], __ATOMIC_ACQUIRE);
        if (c && c->ctx == ctx)
            return c;
    }
    return NULL;
}

static void broken(mc_ctx_t *c, CUresult r, const char *what) {
    if (c->broken)
        return;
    c->broken = true;
    vg__log("memcheck: %s failed (%s): accesses to memory allocated from now on may be "
            "reported wrongly, and are no longer checked",
            what, vg__cu_error_name(r));
    if (c->state)
        vg__cuMemsetD32(c->state, 0, 2); /* (the table: launches check nothing) */
}

static void retire(mc_ctx_t *c, CUdeviceptr p, uint64_t bytes) {
    if (!p)
        return;
    if (c->nretired == c->capretired) {
        size_t cap = c->capretired ? 2 * c->capretired : 16;
        CUdeviceptr *grown = realloc(c->retired, cap * sizeof *grown);
        if (!grown)
            return; /* (kept for good: a few bytes of device memory) */
        c->retired = grown;
        c->capretired = cap;
    }
    c->retired[c->nretired++] = p;
    c->retired_bytes += bytes;
}

static void free_retired(mc_ctx_t *c) {
    for (size_t i = 0; i < c->nretired; i++)
        vg__cuMemFree(c->retired[i]);
    c->nretired = 0;
    c->retired_bytes = 0;
}

/* Upload the table of c's segments and point the state at it (c locked, context
 * current). Launches made after this returns use it. */
static void publish(mc_ctx_t *c) {
    uint64_t lo = c->nsegs ? c->segs[0].base : 0, hi = c->nsegs ? c->segs[c->nsegs - 1].end : 0;
    uint64_t page = 1ull << VG_MC_DIR_SHIFT;
    uint64_t ndir = (hi - lo + page - 1) >> VG_MC_DIR_SHIFT;
    if (ndir > VG_MC_DIR_MAX)
        ndir = 0; /* (segments too far apart: a binary search) */
    size_t bytes = VG_MC_TABLE_BYTES(c->nsegs ? c->nsegs : 1, ndir);
    vg_mc_table_t *t = calloc(1, bytes);
    if (!t)
        return broken(c, CUDA_ERROR_OUT_OF_MEMORY, "building the segment table");
    t->n = c->nsegs;
    for (size_t i = 0; i < c->nsegs; i++)
        t->seg[i] = (vg_mc_seg_t){c->segs[i].base, c->segs[i].end, c->segs[i].shadow,
                                  c->segs[i].init};
    t->lo = lo;
    t->hi = hi;
    t->ndir = ndir;
    uint32_t *dir = (uint32_t *)&t->seg[t->n];
    for (size_t i = 0; i < c->nsegs && ndir; i++) { /* each page: its segment, or "search" */
        for (uint64_t p = (c->segs[i].base - lo) >> VG_MC_DIR_SHIFT;
             p < ndir && lo + (p << VG_MC_DIR_SHIFT) < c->segs[i].end; p++) {
            uint64_t start = lo + (p << VG_MC_DIR_SHIFT);
            bool whole = start >= c->segs[i].base && start + page <= c->segs[i].end;
            dir[p] = whole && dir[p] == 0 ? (uint32_t)(i + 1) : VG_MC_DIR_SEARCH;
        }
    }
    CUdeviceptr dev = 0;
    uint64_t dev_addr = 0;
    CUresult r = vg__cuMemAlloc(&dev, bytes);
    if (r == CUDA_SUCCESS)
        r = vg__cuMemcpyHtoDAsync(dev, t, bytes, c->stream);
    if (r == CUDA_SUCCESS) {
        dev_addr = dev;
        r = vg__cuMemcpyHtoDAsync(c->state + offsetof(vg_mc_state_t, table), &dev_addr,
                                  sizeof dev_addr, c->stream);
    }
    if (r == CUDA_SUCCESS)
        r = vg__cuStreamSynchronize(c->stream);
    if (r != CUDA_SUCCESS) {
        if (dev)
            vg__cuMemFree(dev);
        free(t);
        return broken(c, r, "uploading the segment table");
    }
    free(t); /* (uploaded, waited for) */
    retire(c, c->table, 0);
    c->table = dev;
    if (c->retired_bytes > RETIRED_MAX && vg__cuCtxSynchronize() == CUDA_SUCCESS)
        free_retired(c); /* (nothing can be reading them now) */
}

static size_t seg_index(const mc_ctx_t *c, uint64_t p) { /* the first segment ending after p */
    size_t lo = 0, hi = c->nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->segs[mid].end <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void add_segment(mc_ctx_t *c, const vg_segment_t *seg) {
    if (seg->vmm) { /* (memcheck asks for cuMemAlloc segments: only vmm=on makes these) */
        static atomic_flag said = ATOMIC_FLAG_INIT;
        if (!atomic_flag_test_and_set(&said))
            vg__log("memcheck: vmm=on: accesses to virtual-memory segments are not checked "
                    "(leave vmm=auto: memcheck mode uses cuMemAlloc segments)");
        return;
    }
    size_t words = seg->size >> VG_MC_SHIFT, init_words = seg->size >> 7; /* (128 B a word) */
    CUdeviceptr shadow = 0, init = 0;
    CUresult r = vg__cuMemAlloc(&shadow, words * 2);
    if (r == CUDA_SUCCESS)
        r = vg__cuMemsetD16Async(shadow, VG_MC_NONE, words, c->stream);
    if (r == CUDA_SUCCESS && vg__opt.initcheck)
        r = vg__cuMemAlloc(&init, init_words * 4);
    if (r == CUDA_SUCCESS && init)
        r = vg__cuMemsetD32Async(init, 0, init_words, c->stream);
    if (r == CUDA_SUCCESS)
        r = vg__cuStreamSynchronize(c->stream);
    if (r != CUDA_SUCCESS) {
        if (shadow)
            vg__cuMemFree(shadow);
        if (init)
            vg__cuMemFree(init);
        return broken(c, r, "allocating a segment's shadow");
    }
    if (c->nsegs == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        mc_seg_t *grown = realloc(c->segs, cap * sizeof *grown);
        if (!grown) {
            vg__cuMemFree(shadow);
            if (init)
                vg__cuMemFree(init);
            return broken(c, CUDA_ERROR_OUT_OF_MEMORY, "tracking a segment");
        }
        c->segs = grown;
        c->cap = cap;
    }
    size_t i = seg_index(c, seg->base);
    memmove(&c->segs[i + 1], &c->segs[i], (c->nsegs - i) * sizeof c->segs[0]);
    c->segs[i] = (mc_seg_t){seg->base, seg->base + seg->size, shadow, init};
    c->nsegs++;
    publish(c);
}

static bool add_existing(vg_segment_t *seg, void *arg) {
    add_segment(arg, seg);
    return true;
}

static mc_ctx_t *ctx_create(CUcontext ctx, CUfunction shadow_fn) {
    mc_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->ctx = ctx;
    c->shadow_fn = shadow_fn;
    size_t log_bytes = offsetof(vg_mc_log_t, rec) + LOG_CAPACITY * sizeof(vg_mc_record_t);
    void *log = NULL;
    CUdeviceptr log_dev = 0;
    CUresult r = vg__cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS)
        r = vg__cuMemAlloc(&c->state_raw, 2 * VG_MC_LAUNCH_SPAN);
    if (r == CUDA_SUCCESS)
        r = vg__cuMemHostAlloc(&log, log_bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
        memset(log, 0, log_bytes);
        c->log = log;
        c->log->capacity = LOG_CAPACITY;
        r = vg__cuMemHostGetDevicePointer(&log_dev, log, 0);
    }
    vg_mc_state_t st = {0, log_dev};
    if (r == CUDA_SUCCESS) {
        c->state = (c->state_raw + VG_MC_LAUNCH_SPAN - 1) & ~(CUdeviceptr)(VG_MC_LAUNCH_SPAN - 1);
        r = vg__cuMemcpyHtoDAsync(c->state, &st, sizeof st, c->stream);
    }
    if (r == CUDA_SUCCESS)
        r = vg__cuStreamSynchronize(c->stream);
    if (r != CUDA_SUCCESS) {
        vg__error(vg__cu_status(r), "memcheck: setting up the shadow's state failed: %s",
                  vg__cu_error_name(r));
        if (c->state_raw)
            vg__cuMemFree(c->state_raw);
        if (log)
            vg__cuMemFreeHost(log);
        if (c->stream)
            vg__cuStreamDestroy(c->stream);
        free(c);
        return NULL;
    }
    return c;
}

vg_status_t vg__memcheck_heap_init(vg_heap_t *h, CUfunction shadow_fn) {
    if (!vg__memcheck_on())
        return VG_OK;
    pthread_mutex_lock(&g_ctxs_lock);
    mc_ctx_t *c = ctx_find(h->ctx);
    if (!c) {
        int slot = -1;
        for (int i = 0; i < MAX_CONTEXTS && slot < 0; i++)
            if (!g_ctxs[i])
                slot = i;
        c = slot >= 0 ? ctx_create(h->ctx, shadow_fn) : NULL;
        if (c)
            __atomic_store_n(&g_ctxs[slot], c, __ATOMIC_RELEASE);
    }
    if (c)
        c->heaps++;
    pthread_mutex_unlock(&g_ctxs_lock);
    if (!c)
        return vg__error(VG_ERR_OUT_OF_MEMORY, "memcheck: no state for a context (%d at most)",
                         MAX_CONTEXTS);
    h->memcheck = c;
    pthread_mutex_lock(&c->lock);
    vg__heap_each_segment(h, add_existing, c);
    pthread_mutex_unlock(&c->lock);
    return VG_OK;
}

void vg__memcheck_segment_added(vg_heap_t *h, vg_segment_t *seg) {
    mc_ctx_t *c = h->memcheck;
    if (!c || c->broken)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    pthread_mutex_lock(&c->lock);
    add_segment(c, seg);
    pthread_mutex_unlock(&c->lock);
    vg__heap_ctx_leave(pushed);
}

void vg__memcheck_segment_removed(vg_heap_t *h, vg_segment_t *seg) {
    mc_ctx_t *c = h->memcheck;
    if (!c)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    pthread_mutex_lock(&c->lock);
    size_t i = seg_index(c, seg->base);
    if (i < c->nsegs && c->segs[i].base == seg->base) {
        CUdeviceptr shadow = c->segs[i].shadow, init = c->segs[i].init;
        memmove(&c->segs[i], &c->segs[i + 1], (c->nsegs - i - 1) * sizeof c->segs[0]);
        c->nsegs--;
        if (!c->broken)
            publish(c);
        retire(c, shadow, (seg->size >> VG_MC_SHIFT) * 2);
        retire(c, init, seg->size >> 5);
    }
    pthread_mutex_unlock(&c->lock);
    vg__heap_ctx_leave(pushed);
}

void vg__memcheck_heap_release(vg_heap_t *h) {
    mc_ctx_t *c = h->memcheck;
    if (!c)
        return;
    h->memcheck = NULL;
    pthread_mutex_lock(&g_ctxs_lock);
    bool last = --c->heaps == 0;
    if (last)
        for (int i = 0; i < MAX_CONTEXTS; i++)
            if (g_ctxs[i] == c)
                __atomic_store_n(&g_ctxs[i], NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_ctxs_lock);
    if (!last)
        return;
    bool pushed = vg__heap_ctx_enter(h);
    vg__cuCtxSynchronize(); /* (kernels still running read the tables and shadows) */
    for (size_t i = 0; i < c->nsegs; i++) {
        retire(c, c->segs[i].shadow, 0);
        retire(c, c->segs[i].init, 0);
    }
    retire(c, c->table, 0);
    free_retired(c);
    vg__cuMemFree(c->state_raw);
    vg__cuMemFreeHost(c->log);
    vg__cuStreamDestroy(c->stream);
    vg__heap_ctx_leave(pushed);
    free(c->segs);
    free(c->retired);
    /* (c itself is kept: a launch callback on another thread may still hold it) */
}

struct vg_mc_log *vg__memcheck_log(vg_heap_t *h) {
    mc_ctx_t *c = h->memcheck;
    return c ? c->log : NULL;
}

/* ---------------------------------------------------------------------------------------
 * Allocations and frees: the shadow in stream order
 * ------------------------------------------------------------------------------------- */

/* Launch the shadow kernel for op on `stream` (`own`: on memcheck's stream, waited for),
 * its shadow words and init bitmap words starting at those of address addr, in the
 * segment holding it (segments start on 512-byte granules: so do their arrays' words). */
static void shadow_op(vg_heap_t *h, uint64_t addr, vg_mc_shadow_op_t op, CUstream stream,
                      bool own) {
    mc_ctx_t *c = h->memcheck;
    if (!c || c->broken || !c->shadow_fn)
        return;
    pthread_mutex_lock(&c->lock);
    size_t i = seg_index(c, addr);
    bool found = i < c->nsegs && c->segs[i].base <= addr;
    if (found) {
        uint64_t off = addr - c->segs[i].base;
        op.shadow = op.n ? c->segs[i].shadow + (off >> VG_MC_SHIFT) * 2 : 0;
        op.init = c->segs[i].init && op.init_n ? c->segs[i].init + (off >> 7) * 4 : 0;
        if (!op.init)
            op.init_n = 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (!found || (!op.n && !op.init_n))
        return; /* (a virtual-memory segment: not shadowed) */
    if (vg__stream_capturing(stream))
        own = true; /* (not into the program's graph: A7) */
    CUstream s = own ? c->stream : stream;
    unsigned n = op.n > op.init_n ? op.n : op.init_n;
    unsigned threads = 256, blocks = (n + threads - 1) / threads;
    if (blocks > 1024)
        blocks = 1024;
    void *args[] = {&op};
    bool pushed = vg__heap_ctx_enter(h);
    CUresult r = vg__cuLaunchKernel(c->shadow_fn, blocks ? blocks : 1, 1, 1, threads, 1, 1, 0, s,
                                    args, NULL);
    if (r == CUDA_SUCCESS && own)
        r = vg__cuStreamSynchronize(c->stream);
    vg__heap_ctx_leave(pushed);
    if (r != CUDA_SUCCESS)
        broken(c, r, "writing an allocation's shadow");
}

void vg__memcheck_alloc(vg_heap_t *h, const vg_block_t *b, CUstream stream, bool own) {
    if (!h->memcheck)
        return;
    vg_mc_shadow_op_t op = {0};
    op.n = (uint32_t)(b->size >> VG_MC_SHIFT);
    op.live = (uint32_t)((b->user - b->addr) >> VG_MC_SHIFT);
    op.full = (uint32_t)(b->requested >> VG_MC_SHIFT);
    op.partial = (uint16_t)(b->requested & (VG_MC_GRANULE - 1));
    op.outside = VG_MC_NONE;
    op.init_n = (uint32_t)(b->size >> 7); /* (initcheck: never written) */
    /* A graph pool's block gains its words and narrows none: the graph's kernels write at
     * each replay what every capture's allocation had, also the bytes of one the capture
     * freed that a later allocation's redzone covers now (A7, G13). */
    op.merge = b->gpool != NULL;
    shadow_op(h, b->addr, op, stream, own);
}

void vg__memcheck_unpooled(vg_heap_t *h, vg_block_t *b) {
    if (!h->memcheck)
        return;
    vg_mc_shadow_op_t op = {0};
    op.n = (uint32_t)(b->size >> VG_MC_SHIFT);
    op.live = UINT32_MAX;
    op.outside = VG_MC_FREED;
    if (b->state != VG_BLOCK_POOLED) { /* (a graph's output the program still holds) */
        op.live = (uint32_t)((b->user - b->addr) >> VG_MC_SHIFT);
        op.full = (uint32_t)(b->requested >> VG_MC_SHIFT);
        op.partial = (uint16_t)(b->requested & (VG_MC_GRANULE - 1));
        op.outside = VG_MC_NONE;
    }
    shadow_op(h, b->addr, op, NULL, true);
}

void vg__memcheck_free(vg_heap_t *h, const vg_block_t *b, CUstream stream) {
    if (!h->memcheck || b->nuses) /* (record_stream: the streams recorded may still use it, */
        return;                   /*  rightly; its shadow stays live until it is reused) */
    vg_mc_shadow_op_t op = {0};
    op.n = (uint32_t)(b->size >> VG_MC_SHIFT);
    op.live = UINT32_MAX; /* (no live word) */
    op.outside = VG_MC_FREED;
    shadow_op(h, b->addr, op, stream, false);
}

void vg__memcheck_written(uint64_t addr, uint64_t bytes, CUstream stream) {
    if (!vg__opt.initcheck || !vg__memcheck_on() || bytes == 0)
        return;
    vg_heap_t *h = vg__heap_containing(addr);
    if (!h || !h->memcheck)
        return;
    pthread_mutex_lock(&h->lock);
    /* Only the allocation addr lies in counts as written: a range that runs past it (a
     * tensor map's shape, a copy the driver will refuse) writes nothing of its neighbours'
     * as far as initcheck knows. */
    vg_block_t *b = vg__heap_block_containing(h, addr);
    uint64_t end = b && b->state == VG_BLOCK_ALLOCATED ? b->user + b->requested : 0;
    if (addr >= end) {
        pthread_mutex_unlock(&h->lock);
        return;
    }
    if (bytes > end - addr)
        bytes = end - addr;
    uint64_t w0 = addr >> 2, w1 = (addr + bytes - 1) >> 2; /* (4-byte words: bits; a */
    vg_mc_shadow_op_t op = {0};                           /*  segment's base is 128-aligned) */
    op.init_n = (uint32_t)((w1 >> 5) - (w0 >> 5) + 1);
    op.init_value = UINT32_MAX;
    op.init_lo = (uint16_t)(w0 & 31);
    op.init_hi = (uint16_t)(w1 & 31);
    shadow_op(h, addr & ~(uint64_t)127, op, stream, false); /* (from its bitmap word) */
    pthread_mutex_unlock(&h->lock);
}

/* ---------------------------------------------------------------------------------------
 * The API's callbacks: modules and launches
 * ------------------------------------------------------------------------------------- */

static CUcontext g_patched[MAX_CONTEXTS]; /* contexts given the patches */
static pthread_mutex_t g_patch_lock = PTHREAD_MUTEX_INITIALIZER;

static void patch_failed(const char *what, vg_san_result_t r) {
    if (atomic_fetch_add(&g_patch_failures, 1) == 0)
        vg__log("memcheck: %s failed (Compute Sanitizer error %d): the module's kernels are "
                "not checked",
                what, r);
}

static CUmodule g_own[MAX_CONTEXTS]; /* vramguard's own modules: launched unchecked */

static bool own(CUmodule m) {
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (__atomic_load_n(&g_own[i], __ATOMIC_ACQUIRE) == m && m)
            return true;
    return false;
}

static bool name_wanted(const char *name);
static bool wanted_cb(const char *name, void *arg) { return (void)arg, name_wanted(name); }

static void module_loaded(const vg_san_module_data_t *m) {
    if (g_split == 2)
        return; /* (callbacks only: nothing patched) */
    if (t_own_module) {
        for (int i = 0; i < MAX_CONTEXTS; i++) {
            CUmodule none = NULL;
            if (__atomic_compare_exchange_n(&g_own[i], &none, m->module, false, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
                break;
        }
        return;
    }
    vg__memcheck_lines_loaded(m->module, NULL, 0); /* (a handle loaded again: its old lines go) */
    /* memcheck_kernels: a module that defines none of the kernels it names is left as it
     * is, running at full speed (an image this cannot read is patched). */
    if (vg__opt.memcheck_kernels[0] && m->cubin &&
        vg__kernel_names_each(m->cubin, m->cubin_size, wanted_cb, NULL) == 0) {
        atomic_fetch_add(&g_unpatched, 1);
        return;
    }
    pthread_mutex_lock(&g_patch_lock);
    int i = 0;
    while (i < MAX_CONTEXTS && g_patched[i] && g_patched[i] != m->context)
        i++;
    vg_san_result_t r = VG_SAN_SUCCESS;
    if (i < MAX_CONTEXTS && !g_patched[i]) {
        r = S.sanitizerAddPatches(vg_memcheck_fatbin, m->context);
        if (r == VG_SAN_SUCCESS)
            g_patched[i] = m->context;
    }
    pthread_mutex_unlock(&g_patch_lock);
    if (r != VG_SAN_SUCCESS)
        return patch_failed("loading the device callback (sanitizerAddPatches)", r);
    r = S.sanitizerPatchInstructions(VG_SAN_INSTRUCTION_GLOBAL_MEMORY_ACCESS, m->module,
                                     vg__memcheck_callback());
    if (r == VG_SAN_SUCCESS)
        r = S.sanitizerPatchModule(m->module);
    if (r != VG_SAN_SUCCESS)
        return patch_failed("patching a module", r);
    vg__memcheck_lines_loaded(m->module, m->cubin, m->cubin_size);
    atomic_fetch_add(&g_modules, 1);
}

/* Launches, by number modulo VG_MC_LAUNCH_SPAN (allocated at the first). */
static vg_mc_launch_t *g_ring;
static pthread_mutex_t g_ring_lock = PTHREAD_MUTEX_INITIALIZER;

/* Kernel names, interned (the API's strings live only as long as their module). */
#define NAMES 4096
static struct {
    const char *key; /* the API's pointer, for a quick hit */
    char *copy;
} g_names[NAMES];

static struct {
    const char *key, *copy;
} g_recent[256]; /* the API's name pointers last seen, by pointer (g_ring_lock held) */

static const char *intern_slow(const char *name);

static const char *intern(const char *name) { /* (g_ring_lock held) */
    if (!name)
        return "(unnamed kernel)";
    size_t i = ((uintptr_t)name >> 4) % VG_ARRAY_LEN(g_recent);
    if (g_recent[i].key == name && strcmp(g_recent[i].copy, name) == 0)
        return g_recent[i].copy;
    const char *copy = intern_slow(name);
    g_recent[i].key = name;
    g_recent[i].copy = copy;
    return copy;
}

static const char *intern_slow(const char *name) {
    uint64_t hsh = 1469598103934665603ull;
    for (const char *p = name; *p; p++)
        hsh = (hsh ^ (unsigned char)*p) * 1099511628211ull;
    for (size_t k = 0; k < NAMES; k++) {
        size_t i = (hsh + k) % NAMES;
        if (!g_names[i].copy) {
            g_names[i].key = name;
            g_names[i].copy = strdup(name);
            return g_names[i].copy ? g_names[i].copy : "(a kernel)";
        }
        if (g_names[i].key == name || strcmp(g_names[i].copy, name) == 0)
            return g_names[i].copy;
    }
    return "(a kernel: too many names to keep)";
}

static bool name_wanted(const char *name) {
    const char *pats = vg__opt.memcheck_kernels;
    if (!pats[0])
        return true;
    char one[256];
    while (*pats) {
        size_t n = strcspn(pats, ",");
        snprintf(one, sizeof one, "%.*s", (int)n, pats);
        if (name && fnmatch(one, name, 0) == 0)
            return true;
        pats += n + (pats[n] == ',');
    }
    return false;
}

static VG_TLS_FAST bool t_checked; /* (the launch callback's decision, for the interposer) */

/* Launch `seq` of kernel d, launched at `site`: its user data, checked or not. */
static void launch_checked(const vg_san_launch_data_t *d, uint64_t seq, uint32_t site) {
    mc_ctx_t *c = ctx_find(d->context);
    bool check = c && !c->broken && g_split == 0 && name_wanted(d->function_name) &&
                 (vg__opt.memcheck_every <= 1 || seq % (uint64_t)vg__opt.memcheck_every == 0);
    uint64_t ud = 0;
    if (check) {
        ud = c->state + seq % VG_MC_LAUNCH_SPAN;
        pthread_mutex_lock(&g_ring_lock);
        if (!g_ring)
            g_ring = calloc(VG_MC_LAUNCH_SPAN, sizeof *g_ring);
        if (g_ring) {
            vg_mc_launch_t *l = &g_ring[seq % VG_MC_LAUNCH_SPAN];
            *l = (vg_mc_launch_t){seq, intern(d->function_name), d->function, d->module,
                                  d->stream, site};
            memcpy(l->grid, d->grid, sizeof l->grid);
            memcpy(l->block, d->block, sizeof l->block);
        }
        pthread_mutex_unlock(&g_ring_lock);
        atomic_fetch_add(&g_launches_checked, 1);
        t_checked = true;
    } else {
        atomic_fetch_add(&g_launches_skipped, 1);
    }
    S.sanitizerSetLaunchCallbackData(d->hlaunch, d->function, d->hstream,
                                     (const void *)(uintptr_t)ud);
}

bool vg__memcheck_take_checked(void) {
    bool checked = t_checked;
    t_checked = false;
    return checked;
}

/* A launch the interposer did not note, numbered here (its record taken at once, so that
 * the next callback does not take it for its own). */
static uint64_t note_here(const vg_san_launch_data_t *d, uint32_t site) {
    uint64_t seq = vg__launch_note(d->function_name ? d->function_name : "(a kernel)",
                                   d->stream, site);
    uint32_t noted_site;
    vg__launch_take_noted(&noted_site);
    return seq;
}

static void launch_begin(const vg_san_launch_data_t *d) {
    if (own(d->module)) /* (guard mode's kernels) */
        return;
    uint32_t site = 0;
    uint64_t seq = vg__launch_take_noted(&site);
    if (!seq) /* (launched past the interposer) */
        seq = note_here(d, 0);
    launch_checked(d, seq, site);
}

/* A kernel node of a CUDA graph's launch: a launch of its own, numbered here, on the
 * stream the graph was launched on (apiStream: the legacy stream is NULL), at the graph's
 * launch site. The interposer notes each cuGraphLaunch just before the API's node
 * callbacks on the same thread: the first node takes that record, the others keep its
 * site. A node callback of a graph's upload (cuGraphUpload: nothing runs) is no launch. */
static VG_TLS_FAST uint32_t t_graph_site;

static void graph_node_launch(const vg_san_graph_node_launch_data_t *g) {
    if (g->node_type != VG_SAN_GRAPH_NODE_KERNEL || g->is_graph_upload || !g->launch.hlaunch ||
        own(g->launch.module))
        return;
    uint32_t site = 0;
    if (vg__launch_take_noted(&site)) /* (the cuGraphLaunch's record: its first node) */
        t_graph_site = site;
    vg_san_launch_data_t d = g->launch;
    d.stream = d.api_stream;
    launch_checked(&d, note_here(&d, t_graph_site), t_graph_site);
}

static void callback(void *userdata, int domain, uint32_t cbid, const void *data) {
    (void)userdata;
    if (domain == VG_SAN_DOMAIN_RESOURCE && cbid == VG_SAN_CBID_MODULE_LOADED)
        module_loaded(data);
    else if (domain == VG_SAN_DOMAIN_RESOURCE && cbid == VG_SAN_CBID_MODULE_UNLOAD_STARTING)
        vg__memcheck_lines_unloaded(((const vg_san_module_data_t *)data)->module);
    else if (domain == VG_SAN_DOMAIN_LAUNCH && cbid == VG_SAN_CBID_LAUNCH_BEGIN)
        launch_begin(data);
    else if (domain == VG_SAN_DOMAIN_GRAPHS && cbid == VG_SAN_CBID_GRAPHS_NODE_LAUNCH_BEGIN)
        graph_node_launch(data);
}

bool vg__memcheck_launch(uint32_t lo, vg_mc_launch_t *out) {
    pthread_mutex_lock(&g_ring_lock);
    bool ok = g_ring && g_ring[lo % VG_MC_LAUNCH_SPAN].seq != 0;
    if (ok)
        *out = g_ring[lo % VG_MC_LAUNCH_SPAN];
    pthread_mutex_unlock(&g_ring_lock);
    return ok;
}

/* The function of module m holding pc, among those that have lines (a device function
 * kept out of line, or a kernel other than the one launched): its name (the caller frees
 * it) and pc's offset in it; NULL if none. */
static char *function_at(CUmodule m, uint64_t pc, uint64_t *off) {
    size_t n;
    char **names = vg__memcheck_line_functions(m, &n);
    char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t lo = 0, size = 0;
        if (!found && S.sanitizerGetFunctionPcAndSize(m, names[i], &lo, &size) ==
                          VG_SAN_SUCCESS && pc >= lo && pc - lo < size) {
            found = names[i]; /* (the caller frees it) */
            *off = pc - lo;
        } else {
            free(names[i]);
        }
    }
    free(names);
    return found;
}

void vg__memcheck_pc_text(const vg_mc_launch_t *l, uint64_t pc, char *out, size_t n,
                          char *src, size_t src_n) {
    src[0] = '\0';
    if (vg__drv.is_vgsim) { /* the host twin's line */
        snprintf(out, n, "%s (on vgsim: the host twin at %s)", vg__kernel_name(l->name),
                 vg__symbolize(pc));
        return;
    }
    uint64_t fpc = 0, size = 0, off = 0;
    char *other = NULL; /* (a function of the module other than the kernel launched) */
    const char *fn = l->name; /* (whole: a long mangled name cut short finds no line) */
    if (l->module && S.sanitizerGetFunctionPcAndSize(l->module, l->name, &fpc, &size) ==
                         VG_SAN_SUCCESS && pc >= fpc && pc - fpc < size) {
        off = pc - fpc;
    } else if (!l->module || !(fn = other = function_at(l->module, pc, &off))) {
        snprintf(out, n, "pc 0x%llx", (unsigned long long)pc);
        return;
    }
    if (vg__memcheck_line(l->module, fn, off, src, src_n))
        snprintf(out, n, "%s+0x%llx in %s", vg__kernel_name(fn), (unsigned long long)off, src);
    else
        snprintf(out, n, "%s+0x%llx", vg__kernel_name(fn), (unsigned long long)off);
    free(other);
}

void vg__memcheck_counts(uint64_t *modules, uint64_t *unpatched, uint64_t *checked,
                         uint64_t *skipped) {
    *modules = atomic_load(&g_modules);
    *unpatched = atomic_load(&g_unpatched);
    *checked = atomic_load(&g_launches_checked);
    *skipped = atomic_load(&g_launches_skipped);
}
