/* core.c — vgsim: initialisation, devices, contexts, errors, entry points, fault guard.
 *
 * cuInit reads the settings (VGSIM_MEMORY, VGSIM_DEVICES, VGSIM_VMM, VGSIM_LOG, ...), sets up
 * one arena per device and installs the SIGSEGV/SIGBUS handler that turns a kernel's
 * stray access into a sticky CUDA_ERROR_ILLEGAL_ADDRESS. The handler only acts for a
 * stream worker that is inside a guarded operation; every other fault goes to the
 * handler that was installed before it (or the default action), so vgsim never hides a
 * host program's own crash.
 */
#include "internal.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/util/parse_size.h"

sim_state_t g_sim = {.lock = PTHREAD_MUTEX_INITIALIZER, .procmem_fd = -1};

/* ---------------------------------------------------------------------------------------
 * Logging (VGSIM_LOG=1)
 * ------------------------------------------------------------------------------------- */

void sim_logf(const char *fmt, ...) {
    if (!g_sim.log)
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "vgsim: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}

/* ---------------------------------------------------------------------------------------
 * The fault guard
 * ------------------------------------------------------------------------------------- */

static struct sigaction g_old_segv, g_old_bus;
static __thread sigjmp_buf *t_jmp;
static __thread void *t_fault_addr;
static __thread bool t_worker;

bool sim_on_worker(void) { return t_worker; }

static void chain(int sig, siginfo_t *si, void *uc) {
    struct sigaction *old = sig == SIGBUS ? &g_old_bus : &g_old_segv;
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, uc);
        return;
    }
    if (old->sa_handler == SIG_IGN)
        return;
    if (old->sa_handler != SIG_DFL && old->sa_handler) {
        old->sa_handler(sig);
        return;
    }
    /* Default action: restore it; returning re-executes the access, which kills the
     * process with the right signal and a core dump. */
    signal(sig, SIG_DFL);
}

static void fault_handler(int sig, siginfo_t *si, void *uc) {
    if (t_jmp) {
        t_fault_addr = si->si_addr;
        siglongjmp(*t_jmp, 1);
    }
    chain(sig, si, uc);
}

void sim_install_fault_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
}

CUresult sim_run_guarded(void (*fn)(void *), void *arg, void **fault_addr) {
    sigjmp_buf jb;
    t_worker = true;
    /* No signal mask to save: the handler runs with SA_NODEFER, so leaving it by
     * siglongjmp leaves the mask as it was (and saving it costs a system call). */
    if (sigsetjmp(jb, 0) == 0) {
        t_jmp = &jb;
        fn(arg);
        t_jmp = NULL;
        return CUDA_SUCCESS;
    }
    t_jmp = NULL;
    if (fault_addr)
        *fault_addr = t_fault_addr;
    return CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* ---------------------------------------------------------------------------------------
 * Initialisation and devices
 * ------------------------------------------------------------------------------------- */

static uint64_t env_size(const char *name, uint64_t def) {
    const char *v = getenv(name);
    uint64_t out;
    if (!v || !*v)
        return def;
    if (vg_util_parse_size(v, &out) != 0 || out == 0) {
        fprintf(stderr, "vgsim: ignoring %s=%s (expected a size such as 16G)\n", name, v);
        return def;
    }
    return out;
}

CUresult sim_check_init(void) {
    return g_sim.initialised ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

VGSIM_API CUresult cuInit(unsigned int flags) {
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    if (g_sim.initialised) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_SUCCESS;
    }
    uint64_t mem = env_size("VGSIM_MEMORY", 80ull << 30);
    uint64_t ndev = env_size("VGSIM_DEVICES", 1);
    const char *vmm = getenv("VGSIM_VMM");
    const char *log = getenv("VGSIM_LOG");
    g_sim.vmm = !(vmm && strcmp(vmm, "0") == 0);
    g_sim.log = log && strcmp(log, "1") == 0;
    const char *skip = getenv("VGSIM_SKIP_GUARD_KERNELS");
    g_sim.skip_guard = skip && strcmp(skip, "1") == 0;
    const char *p2p = getenv("VGSIM_P2P");
    g_sim.p2p = !(p2p && strcmp(p2p, "0") == 0);
    const char *cma = getenv("VGSIM_CONCURRENT_MANAGED");
    g_sim.concurrent_managed = !(cma && strcmp(cma, "0") == 0);
    g_sim.ndevices = (int)(ndev > VGSIM_MAX_DEVICES ? VGSIM_MAX_DEVICES : ndev);
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < g_sim.ndevices && r == CUDA_SUCCESS; i++) {
        sim_device_t *d = &g_sim.devices[i];
        d->ordinal = i;
        d->total = (mem + VGSIM_PAGE - 1) & ~(VGSIM_PAGE - 1);
        r = sim_memory_init_device(d);
    }
    if (r == CUDA_SUCCESS) {
        sim_install_fault_handler();
        sim_register_builtin_kernels();
        g_sim.initialised = true;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return r;
}

VGSIM_API CUresult cuDriverGetVersion(int *version) {
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

VGSIM_API const char *vgsim_version(void) { return VGSIM_VERSION; }

static CUresult check_device(CUdevice dev) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < g_sim.ndevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

VGSIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= g_sim.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuDeviceGetCount(int *count) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = g_sim.ndevices;
    return CUDA_SUCCESS;
}

/* Whether dev can map peer's memory: every pair of devices, unless VGSIM_P2P=0 (GPUs on
 * PCIe switches without peer-to-peer support). */
VGSIM_API CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
    CUresult r = check_device(dev);
    if (r == CUDA_SUCCESS)
        r = check_device(peer);
    if (r != CUDA_SUCCESS)
        return r;
    if (!can)
        return CUDA_ERROR_INVALID_VALUE;
    *can = dev != peer && g_sim.p2p;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "vgsim virtual GPU %d (CPU simulation)", dev);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = g_sim.devices[dev].total;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev) {
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value || (int)attrib <= 0 || (int)attrib > 200)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 48 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1000000; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 2; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = dev; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 4 << 20; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *value = g_sim.concurrent_managed; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = g_sim.vmm; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: *value = 1; break;
    default: *value = 0; break; /* not modelled: reported as absent */
    }
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------
 * Contexts. Each thread has a small stack of current contexts.
 * ------------------------------------------------------------------------------------- */

#define CTX_STACK 16
static __thread sim_ctx_t *t_ctx[CTX_STACK];
static __thread int t_nctx;

sim_ctx_t *sim_current_ctx(void) { return t_nctx > 0 ? t_ctx[t_nctx - 1] : NULL; }

CUresult sim_ctx_check(sim_ctx_t **out) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_on_worker())
        return CUDA_ERROR_NOT_PERMITTED; /* driver calls from host functions */
    sim_ctx_t *c = sim_current_ctx();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    int sticky = atomic_load(&c->sticky);
    if (sticky)
        return (CUresult)sticky;
    *out = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_new(sim_device_t *dev, bool primary, sim_ctx_t **out) {
    sim_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->dev = dev;
    c->primary = primary;
    pthread_mutex_init(&c->lock, NULL);
    CUresult r = sim_stream_create(c, CU_STREAM_DEFAULT | SIM_STREAM_LEGACY, 0, &c->legacy);
    if (r != CUDA_SUCCESS) {
        free(c);
        return r;
    }
    *out = c;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    sim_device_t *d = &g_sim.devices[dev];
    pthread_mutex_lock(&g_sim.lock);
    if (!d->primary)
        r = ctx_new(d, true, &d->primary);
    if (r == CUDA_SUCCESS) {
        d->primary_refs++;
        *pctx = (CUcontext)d->primary;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return r;
}

VGSIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    sim_device_t *d = &g_sim.devices[dev];
    pthread_mutex_lock(&g_sim.lock);
    if (d->primary_refs == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else
        d->primary_refs--; /* the context itself stays: its memory outlives the count */
    pthread_mutex_unlock(&g_sim.lock);
    return r;
}

VGSIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    sim_device_t *d = &g_sim.devices[dev];
    pthread_mutex_lock(&g_sim.lock);
    *flags = 0;
    *active = d->primary && d->primary_refs > 0;
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

/* The primary context's work is waited for, its cuMemAlloc memory freed and its sticky
 * error cleared; the handle stays the same (its streams are kept, as with cuCtxDestroy). */
VGSIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    sim_device_t *d = &g_sim.devices[dev];
    pthread_mutex_lock(&g_sim.lock);
    sim_ctx_t *c = d->primary;
    pthread_mutex_unlock(&g_sim.lock);
    if (!c)
        return CUDA_SUCCESS;
    sim_ctx_synchronize(c);
    sim_free_ctx_memory(c);
    atomic_store(&c->sticky, 0);
    return CUDA_SUCCESS;
}

/* cuCtxCreate with CUDA 12's signature (cuCtxCreate_v2) and CUDA 13's (cuCtxCreate_v4). */
VGSIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    (void)flags;
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ctx_t *c;
    r = ctx_new(&g_sim.devices[dev], false, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (t_nctx < CTX_STACK)
        t_ctx[t_nctx++] = c;
    else
        t_ctx[CTX_STACK - 1] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags,
                                  CUdevice dev) {
    (void)params;
    return cuCtxCreate_v2(pctx, flags, dev);
}

VGSIM_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_ctx_t *c = (sim_ctx_t *)ctx;
    if (!c || c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_ctx_synchronize(c);
    sim_free_ctx_memory(c); /* its cuMemAlloc memory, not the VMM calls' or the pool's */
    /* Pop it from this thread's stack wherever it is. Its streams stay allocated (other
     * threads may still name them); its work has finished. */
    for (int i = 0; i < t_nctx; i++) {
        if (t_ctx[i] == c) {
            memmove(&t_ctx[i], &t_ctx[i + 1], (size_t)(t_nctx - i - 1) * sizeof t_ctx[0]);
            t_nctx--;
            i--;
        }
    }
    atomic_store(&c->sticky, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)sim_current_ctx();
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxSetCurrent(CUcontext ctx) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx) {
        if (t_nctx > 0)
            t_nctx--;
        return CUDA_SUCCESS;
    }
    if (t_nctx == 0)
        t_ctx[t_nctx++] = (sim_ctx_t *)ctx;
    else
        t_ctx[t_nctx - 1] = (sim_ctx_t *)ctx;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (t_nctx >= CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t_ctx[t_nctx++] = (sim_ctx_t *)ctx;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (t_nctx == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_ctx_t *c = t_ctx[--t_nctx];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxGetDevice(CUdevice *device) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_ctx_t *c = sim_current_ctx();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev->ordinal;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxSynchronize(void) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_sync_check(c, NULL)) != CUDA_SUCCESS)
        return r;
    return sim_ctx_synchronize(c);
}

/* CUDA 13's explicit-context versions. cuda.h keeps cuCtxGetDevice and cuCtxSynchronize
 * on the versions above, but cuGetProcAddress at 13000 answers with these, as the real
 * driver does: a caller that trusts the name gets the wrong signature on both. */
VGSIM_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_ctx_t *c = ctx ? (sim_ctx_t *)ctx : sim_current_ctx();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev->ordinal;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    if (!ctx)
        return cuCtxSynchronize();
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_sync_check((sim_ctx_t *)ctx, NULL)) != CUDA_SUCCESS)
        return r;
    return sim_ctx_synchronize((sim_ctx_t *)ctx);
}

/* ---------------------------------------------------------------------------------------
 * Errors and entry points
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuGetErrorName(CUresult error, const char **str) {
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)error) {
#define VG_X(name, value, text)                                                             \
    case value: *str = #name; return CUDA_SUCCESS;
        VG_CU_ERRORS(VG_X)
#undef VG_X
    default: *str = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}

VGSIM_API CUresult cuGetErrorString(CUresult error, const char **str) {
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)error) {
#define VG_X(name, value, text)                                                             \
    case value: *str = text; return CUDA_SUCCESS;
        VG_CU_ERRORS(VG_X)
#undef VG_X
    default: *str = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The CUDA runtime (libcudart, linked statically by default or shared) reaches the
 * driver's private interfaces through cuGetExportTable at its first call. Their contents
 * are undocumented, so vgsim cannot provide them, and a runtime refused them reports
 * "API call is not supported in the installed CUDA driver" from every call while the
 * program goes on as if it had run. Better to stop at once and say why: with a message
 * and exit status 125 (as `git bisect run` means "cannot be tested here"), the program's
 * own output so far flushed, and no exit handlers (nothing ran worth summarising). */
#define VGSIM_EXIT_UNSUPPORTED 125

VGSIM_API CUresult cuGetExportTable(const void **table, const void *id /* a CUuuid */) {
    (void)table;
    (void)id;
    fflush(NULL);
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    const char *base = strrchr(exe, '/');
    dprintf(2, "vgsim: %s uses the CUDA runtime (cudaMalloc, <<<...>>>: libcudart), which vgsim "
               "cannot run: vgsim implements the CUDA driver API (cuMemAlloc, cuLaunchKernel) "
               "only. Run it on a machine with an NVIDIA GPU, without --sim; examples/ shows "
               "driver-API programs that run on both (exit status %d)\n",
            base ? base + 1 : (n > 0 ? exe : "this program"), VGSIM_EXIT_UNSUPPORTED);
    _exit(VGSIM_EXIT_UNSUPPORTED);
}

typedef struct proc_entry {
    const char *api;
    void *fn;
} proc_entry_t;

static const proc_entry_t g_procs[] = {
#define VG_X(api, sym, need, params, args) {#api, (void *)sym},
    VG_DRIVER_FUNCS(VG_X)
#undef VG_X
};

/* The earlier ABI versions (VG_DRIVER_OLDER): what cuGetProcAddress gives a caller
 * asking for a cudaVersion before 13000, where a function had another signature. */
static const struct {
    const char *api, *sym;
    void *fn;
} g_older[] = {
#define VG_X(api, sym, params, args) {#api, #sym, (void *)sym},
    VG_DRIVER_OLDER(VG_X)
#undef VG_X
};

static void *older_proc(const char *api, bool ptsz) {
    for (size_t i = 0; i < sizeof g_older / sizeof g_older[0]; i++)
        if (strcmp(g_older[i].api, api) == 0 && (strstr(g_older[i].sym, "_ptsz") != NULL) == ptsz)
            return g_older[i].fn;
    return NULL;
}

VGSIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    bool per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    void *older = cudaVersion < 13000 ? older_proc(symbol, per_thread) : NULL;
    void *twin = per_thread ? sim_twin_proc(symbol) /* (NULL: the function has no twin) */
                            : NULL;
    *pfn = NULL;
    if (older) {
        *pfn = older;
    } else if (twin) {
        *pfn = twin;
    } else if (strcmp(symbol, "cuCtxCreate") == 0) {
        *pfn = cudaVersion >= 13000 ? (void *)cuCtxCreate_v4 : (void *)cuCtxCreate_v2;
    } else if (cudaVersion >= 13000 && strcmp(symbol, "cuCtxGetDevice") == 0) {
        *pfn = (void *)cuCtxGetDevice_v2;
    } else if (cudaVersion >= 13000 && strcmp(symbol, "cuCtxSynchronize") == 0) {
        *pfn = (void *)cuCtxSynchronize_v2;
    } else if (strcmp(symbol, "cuGetExportTable") == 0) {
        *pfn = (void *)cuGetExportTable;
    } else {
        for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
            if (strcmp(g_procs[i].api, symbol) == 0) {
                *pfn = g_procs[i].fn;
                break;
            }
        }
    }
    if (status)
        *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    /* An unknown name is not an error for driver 580 (H100, docs/gpu-validation.md): it
     * returns CUDA_SUCCESS with *pfn NULL, and the status says why. */
    return CUDA_SUCCESS;
}
