/* sanitizer.c — vgsim: a stand-in for the part of NVIDIA's Compute Sanitizer API that
 * vramguard's memcheck mode uses (kernels/sanitizer_abi.h), so that its host side —
 * patching at module load, user data at launch, the shadow, the log, the reports — runs
 * in CI without a GPU.
 *
 * One subscriber. Its module-loaded callback runs at the end of cuModuleLoadData and
 * cuLibraryLoadData, its launch-begin and launch-end callbacks around the enqueueing of a
 * kernel (not one captured into a graph: that is no launch), and its graph node callback
 * for each kernel node of each cuGraphLaunch, whose launch handle takes that node's user
 * data. "Patches" are the host twins of known device callbacks: sanitizerAddPatches
 * accepts any image for a context, and sanitizerPatchInstructions finds the twin of the
 * named callback among vgsim's built-ins (vramguard's vg_memcheck_access and
 * vg_memcheck_access_noinit, and the empty vg_memcheck_nothing it measures the API's cost
 * with). A kernel of a patched module runs with the twin and the launch's user data in
 * effect: its host twin
 * reports each access with vgsim_access() (vgsim.h), which calls the twin as the GPU
 * calls the callback before the access. Kernels that do not report accesses are simply
 * not checked, as a GPU's would be if nothing were patched.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "../kernels/memcheck_abi.h"
#include "../kernels/sanitizer_abi.h"

enum { ERR_INVALID_PARAMETER = 1, ERR_NOT_SUPPORTED = 14, ERR_MAX_LIMIT = 10 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    vg_san_callback_t fn;
    void *ud;
    bool module_loaded, module_unload, launch_begin, launch_end, graph_node;
} g_sub;

/* Patched modules and their twin (a list: vgsim keeps every module for good anyway). */
typedef struct patched {
    CUmodule module;
    sim_patch_fn fn, pending; /* pending: chosen by sanitizerPatchInstructions */
} patched_t;
static patched_t *g_patched;
static size_t g_npatched, g_cappatched;
static CUcontext g_patch_ctx[64];

static __thread const void *t_launch_ud; /* sanitizerSetCallbackData, in a callback */
static __thread sim_patch_fn t_patch;     /* the kernel running on this thread */
static __thread void *t_patch_ud;
static __thread unsigned t_block, t_thread;

/* ---------------------------------------------------------------------------------------
 * The twin of vramguard's device callback (kernels/memcheck.cu)
 * ------------------------------------------------------------------------------------- */

static void or_bit(uint32_t *p, uint32_t bit) { __atomic_fetch_or(p, bit, __ATOMIC_RELAXED); }

static int memcheck_twin(void *userdata, uint64_t pc, void *ptr, uint32_t size, uint32_t flags,
                         const void *new_value) {
    (void)new_value;
    uint64_t ud = (uint64_t)(uintptr_t)userdata;
    if (ud == 0 || (flags & VG_MC_PREFETCH))
        return 0;
    const vg_mc_state_t *st = (const vg_mc_state_t *)(uintptr_t)(ud & ~(uint64_t)(VG_MC_LAUNCH_SPAN - 1));
    const vg_mc_table_t *t = (const vg_mc_table_t *)(uintptr_t)__atomic_load_n(&st->table, __ATOMIC_ACQUIRE);
    if (!t)
        return 0;
    uint32_t w;
    VG_MC_CHECK(t, (uint64_t)(uintptr_t)ptr, size, flags, or_bit, w);
    if (w == 0)
        return 0;
    vg_mc_log_t *log = (vg_mc_log_t *)(uintptr_t)st->log;
    if (__atomic_load_n(&log->count, __ATOMIC_RELAXED) - __atomic_load_n(&log->read, __ATOMIC_ACQUIRE) >=
        log->capacity) {
        __atomic_fetch_add(&log->dropped, 1, __ATOMIC_RELAXED);
        return 0;
    }
    uint32_t k = __atomic_fetch_add(&log->count, 1, __ATOMIC_RELAXED);
    if (k - __atomic_load_n(&log->read, __ATOMIC_ACQUIRE) >= log->capacity) {
        __atomic_fetch_add(&log->dropped, 1, __ATOMIC_RELAXED); /* (never overwrite) */
        return 0;
    }
    vg_mc_record_t *r = &log->rec[k % log->capacity];
    r->addr = (uint64_t)(uintptr_t)ptr;
    r->pc = pc;
    r->launch = (uint32_t)(ud & (VG_MC_LAUNCH_SPAN - 1));
    r->size = size;
    r->flags = flags;
    r->shadow = w;
    r->block[0] = t_block, r->block[1] = r->block[2] = 0;
    r->thread[0] = t_thread, r->thread[1] = r->thread[2] = 0;
    __atomic_store_n(&r->seq, k + 1, __ATOMIC_RELEASE);
    return 0;
}

static int nothing_twin(void *userdata, uint64_t pc, void *ptr, uint32_t size, uint32_t flags,
                        const void *new_value) {
    (void)userdata, (void)pc, (void)ptr, (void)size, (void)flags, (void)new_value;
    return 0;
}

static sim_patch_fn twin_named(const char *name) {
    if (name && strcmp(name, VG_MC_CALLBACK_EMPTY) == 0)
        return nothing_twin;
    if (name && strcmp(name, VG_MC_CALLBACK_NOINIT) == 0)
        return memcheck_twin; /* (the same: without initcheck, segments have no bitmap) */
    return name && strcmp(name, VG_MC_CALLBACK) == 0 ? memcheck_twin : NULL;
}

/* ---------------------------------------------------------------------------------------
 * The API
 * ------------------------------------------------------------------------------------- */

VGSIM_API vg_san_result_t sanitizerSubscribe(vg_san_subscriber_t *sub, vg_san_callback_t fn,
                                             void *ud) {
    if (!sub || !fn)
        return ERR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    bool taken = g_sub.fn != NULL;
    if (!taken) {
        g_sub.fn = fn;
        g_sub.ud = ud;
    }
    pthread_mutex_unlock(&g_lock);
    if (taken)
        return ERR_MAX_LIMIT;
    *sub = (vg_san_subscriber_t)&g_sub;
    return VG_SAN_SUCCESS;
}

VGSIM_API vg_san_result_t sanitizerUnsubscribe(vg_san_subscriber_t sub) {
    if (sub != (vg_san_subscriber_t)&g_sub)
        return ERR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    memset(&g_sub, 0, sizeof g_sub);
    pthread_mutex_unlock(&g_lock);
    return VG_SAN_SUCCESS;
}

VGSIM_API vg_san_result_t sanitizerEnableCallback(uint32_t enable, vg_san_subscriber_t sub,
                                                  int domain, uint32_t cbid) {
    if (sub != (vg_san_subscriber_t)&g_sub)
        return ERR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    vg_san_result_t r = VG_SAN_SUCCESS;
    if (domain == VG_SAN_DOMAIN_RESOURCE && cbid == VG_SAN_CBID_MODULE_LOADED)
        g_sub.module_loaded = enable;
    else if (domain == VG_SAN_DOMAIN_RESOURCE && cbid == VG_SAN_CBID_MODULE_UNLOAD_STARTING)
        g_sub.module_unload = enable;
    else if (domain == VG_SAN_DOMAIN_LAUNCH && cbid == VG_SAN_CBID_LAUNCH_BEGIN)
        g_sub.launch_begin = enable;
    else if (domain == VG_SAN_DOMAIN_LAUNCH && cbid == VG_SAN_CBID_LAUNCH_END)
        g_sub.launch_end = enable;
    else if (domain == VG_SAN_DOMAIN_GRAPHS && cbid == VG_SAN_CBID_GRAPHS_NODE_LAUNCH_BEGIN)
        g_sub.graph_node = enable;
    else
        r = ERR_NOT_SUPPORTED; /* (the stand-in has only these) */
    pthread_mutex_unlock(&g_lock);
    return r;
}

VGSIM_API vg_san_result_t sanitizerAddPatches(const void *image, CUcontext ctx) {
    if (!image || !ctx)
        return ERR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    size_t i = 0;
    while (i < 64 && g_patch_ctx[i] && g_patch_ctx[i] != ctx)
        i++;
    if (i < 64)
        g_patch_ctx[i] = ctx;
    pthread_mutex_unlock(&g_lock);
    return i < 64 ? VG_SAN_SUCCESS : ERR_MAX_LIMIT;
}

static patched_t *find(CUmodule m) { /* (g_lock held) */
    for (size_t i = 0; i < g_npatched; i++)
        if (g_patched[i].module == m)
            return &g_patched[i];
    return NULL;
}

static bool patches_added(void) { /* for the current context (g_lock held) */
    CUcontext ctx = NULL;
    cuCtxGetCurrent(&ctx);
    for (size_t i = 0; i < 64 && g_patch_ctx[i]; i++)
        if (g_patch_ctx[i] == ctx)
            return true;
    return false;
}

VGSIM_API vg_san_result_t sanitizerPatchInstructions(int id, CUmodule module, const char *name) {
    if (!module)
        return ERR_INVALID_PARAMETER;
    if (id != VG_SAN_INSTRUCTION_GLOBAL_MEMORY_ACCESS)
        return ERR_NOT_SUPPORTED;
    sim_patch_fn fn = twin_named(name);
    pthread_mutex_lock(&g_lock);
    vg_san_result_t r = fn && patches_added() ? VG_SAN_SUCCESS : ERR_INVALID_PARAMETER;
    patched_t *p = r == VG_SAN_SUCCESS ? find(module) : NULL;
    if (r == VG_SAN_SUCCESS && !p) {
        if (g_npatched == g_cappatched) {
            size_t cap = g_cappatched ? 2 * g_cappatched : 16;
            patched_t *grown = realloc(g_patched, cap * sizeof *grown);
            if (grown) {
                g_patched = grown;
                g_cappatched = cap;
            }
        }
        if (g_npatched < g_cappatched) {
            p = &g_patched[g_npatched++];
            *p = (patched_t){module, NULL, NULL};
        } else {
            r = ERR_MAX_LIMIT;
        }
    }
    if (p)
        p->pending = fn;
    pthread_mutex_unlock(&g_lock);
    return r;
}

VGSIM_API vg_san_result_t sanitizerPatchModule(CUmodule module) {
    pthread_mutex_lock(&g_lock);
    patched_t *p = find(module);
    if (p)
        __atomic_store_n(&p->fn, p->pending, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
    return p ? VG_SAN_SUCCESS : ERR_INVALID_PARAMETER;
}

VGSIM_API vg_san_result_t sanitizerSetCallbackData(CUfunction f, const void *ud) {
    if (!f)
        return ERR_INVALID_PARAMETER;
    t_launch_ud = ud; /* (this launch's: the launch-begin callback runs on its thread) */
    return VG_SAN_SUCCESS;
}

VGSIM_API vg_san_result_t sanitizerSetLaunchCallbackData(vg_san_launch_t launch, CUfunction f,
                                                         vg_san_stream_t stream, const void *ud) {
    (void)launch, (void)stream;
    return sanitizerSetCallbackData(f, ud);
}

/* vgsim has no device code: no pc to give. memcheck names the twin's line instead. */
VGSIM_API vg_san_result_t sanitizerGetFunctionPcAndSize(CUmodule module, const char *name,
                                                        uint64_t *pc, uint64_t *size) {
    (void)module, (void)name, (void)pc, (void)size;
    return ERR_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------------------------------
 * vgsim's side: callbacks at module load and launch, the twin in effect while a kernel runs
 * ------------------------------------------------------------------------------------- */

/* The subscriber's callback if it enabled the one `enabled` points to, else NULL. */
static vg_san_callback_t subscribed(const bool *enabled, void **ud) {
    pthread_mutex_lock(&g_lock);
    vg_san_callback_t fn = *enabled ? g_sub.fn : NULL;
    *ud = g_sub.ud;
    pthread_mutex_unlock(&g_lock);
    return fn;
}

void sim_sanitizer_module_loaded(CUmodule module, CUlibrary library, const char *image) {
    void *ud;
    vg_san_callback_t fn = subscribed(&g_sub.module_loaded, &ud);
    if (!fn)
        return;
    /* The image: a GPU's is the module's cubin; vgsim's, the PTX text it was loaded from. */
    vg_san_module_data_t d = {NULL, module, strlen(image) + 1, image, library};
    cuCtxGetCurrent(&d.context);
    fn(ud, VG_SAN_DOMAIN_RESOURCE, VG_SAN_CBID_MODULE_LOADED, &d);
}

void sim_sanitizer_module_unloading(CUmodule module) {
    void *ud;
    vg_san_callback_t fn = subscribed(&g_sub.module_unload, &ud);
    if (!fn)
        return;
    vg_san_module_data_t d = {NULL, module, 0, NULL, NULL};
    cuCtxGetCurrent(&d.context);
    fn(ud, VG_SAN_DOMAIN_RESOURCE, VG_SAN_CBID_MODULE_UNLOAD_STARTING, &d);
}

static void launch_data(vg_san_launch_data_t *d, CUmodule module, CUfunction f, const char *name,
                        CUstream stream, const vgsim_launch_t *l) {
    memset(d, 0, sizeof *d);
    cuCtxGetCurrent(&d->context);
    d->stream = d->api_stream = stream;
    d->hstream = d->hapi_stream = (vg_san_stream_t)stream;
    d->module = module;
    d->function = f;
    d->function_name = name;
    memcpy(d->grid, l->grid, sizeof d->grid);
    memcpy(d->block, l->block, sizeof d->block);
    d->api_context = d->context;
}

sim_patch_t sim_sanitizer_launch_begin(CUmodule module, CUfunction f, const char *name,
                                       CUstream stream, const vgsim_launch_t *l) {
    sim_patch_t p = {NULL, NULL};
    pthread_mutex_lock(&g_lock);
    vg_san_callback_t fn = g_sub.launch_begin ? g_sub.fn : NULL;
    void *ud = g_sub.ud;
    patched_t *mod = find(module);
    sim_patch_fn twin = mod ? __atomic_load_n(&mod->fn, __ATOMIC_ACQUIRE) : NULL;
    pthread_mutex_unlock(&g_lock);
    t_launch_ud = NULL;
    if (fn) {
        vg_san_launch_data_t d;
        launch_data(&d, module, f, name, stream, l);
        fn(ud, VG_SAN_DOMAIN_LAUNCH, VG_SAN_CBID_LAUNCH_BEGIN, &d);
    }
    if (twin) {
        p.fn = twin;
        p.ud = (void *)t_launch_ud;
    }
    t_launch_ud = NULL;
    return p;
}

sim_patch_fn sim_sanitizer_captured(CUmodule module) {
    pthread_mutex_lock(&g_lock);
    patched_t *mod = find(module);
    sim_patch_fn twin = mod ? __atomic_load_n(&mod->fn, __ATOMIC_ACQUIRE) : NULL;
    pthread_mutex_unlock(&g_lock);
    return twin;
}

/* As a GPU's API: each kernel node of each graph launch gets the node launch callback,
 * with launch data whose handle takes user data for that node's run. */
void sim_sanitizer_graph_node(CUgraphExec x, uint32_t launch_id, sim_op_t *op, CUstream stream) {
    void *ud;
    vg_san_callback_t fn = subscribed(&g_sub.graph_node, &ud);
    if (!fn)
        return;
    vg_san_graph_node_launch_data_t d;
    memset(&d, 0, sizeof d);
    d.graph_exec = x;
    d.launch_id = launch_id;
    d.node = op;
    d.node_type = VG_SAN_GRAPH_NODE_KERNEL;
    launch_data(&d.launch, op->u.kernel.module, op->u.kernel.function, op->u.kernel.name,
                stream, &op->u.kernel.launch);
    d.launch.hlaunch = (vg_san_launch_t)op;
    t_launch_ud = NULL;
    fn(ud, VG_SAN_DOMAIN_GRAPHS, VG_SAN_CBID_GRAPHS_NODE_LAUNCH_BEGIN, &d);
    op->u.kernel.patch_ud = (void *)t_launch_ud;
    t_launch_ud = NULL;
}

void sim_sanitizer_launch_end(CUmodule module, CUfunction f, const char *name, CUstream stream,
                              const vgsim_launch_t *l) {
    void *ud;
    vg_san_callback_t fn = subscribed(&g_sub.launch_end, &ud);
    if (!fn)
        return;
    vg_san_launch_data_t d;
    launch_data(&d, module, f, name, stream, l);
    fn(ud, VG_SAN_DOMAIN_LAUNCH, VG_SAN_CBID_LAUNCH_END, &d);
}

void sim_sanitizer_run(const sim_op_t *op, void (*run)(void *), void *arg) {
    t_patch = op->u.kernel.patch;
    t_patch_ud = op->u.kernel.patch_ud;
    t_block = t_thread = 0;
    run(arg);
    t_patch = NULL;
    t_patch_ud = NULL;
}

VGSIM_API void vgsim_thread(unsigned block, unsigned thread) {
    t_block = block;
    t_thread = thread;
}

VGSIM_API void vgsim_access(const volatile void *p, unsigned size, unsigned flags) {
    if (t_patch)
        t_patch(t_patch_ud, (uint64_t)(uintptr_t)__builtin_return_address(0), (void *)(uintptr_t)p,
                size, flags, NULL);
}
