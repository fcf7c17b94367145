/* resolve.c — how calls reach the hooks: dlsym(), cuGetProcAddress, start-up, pass-through.
 *
 * A program reaches a driver function in one of four ways, and each leads to the hook:
 *   1. a direct call (linked against libcuda): the dynamic linker binds it to this
 *      library's export, which LD_PRELOAD puts first;
 *   2. dlsym(handle-of-libcuda / RTLD_DEFAULT / RTLD_NEXT, "cuMemAlloc_v2"): our dlsym()
 *      asks the real one, and if the answer is the driver's definition of a hooked
 *      symbol, returns the hook instead;
 *   3. cuGetProcAddress("cuMemAlloc", version, flags) — how the CUDA runtime (shared or
 *      static) finds every driver function: the real driver answers, and if its answer
 *      is the driver's definition of a hooked symbol (or of its per-thread twin), the
 *      hook (or twin) is returned instead;
 *   4. the runtime finds cuGetProcAddress itself through dlsym: case 2.
 * Functions not in hooks.h, and older ABI versions of hooked ones (cuMemAlloc v1 takes a
 * 32-bit size), are returned as the driver gave them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "check/guard.h"
#include "api/init.h"
#include "base/options.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

/* ---------------------------------------------------------------------------------------
 * The hook table
 * ------------------------------------------------------------------------------------- */

typedef struct hook {
    const char *name, *sym; /* the api name, the ABI symbol */
    void *fn;
    bool ptsz;  /* a per-thread-default-stream twin */
    bool other; /* another ABI version, not in the driver table (hooks.h) */
} hook_t;

static const hook_t g_hooks[] = {
#define VG_X(api, symbol) {#api, #symbol, (void *)&symbol, false, false},
    VG_HOOKS(VG_X)
#undef VG_X
#define VG_X(api, symbol) {#api, #symbol, (void *)&symbol, false, true},
    VG_HOOKS_LATER(VG_X)
#undef VG_X
#define VG_X(api, symbol, params, args) {#api, #symbol, (void *)&symbol, false, true},
    VG_DRIVER_OLDER(VG_X)
#undef VG_X
#define VG_X(api, symbol, twin) {#api, #twin, (void *)&twin, true, false},
    VG_HOOKS_PTSZ(VG_X)
#undef VG_X
};
#define NHOOKS (sizeof g_hooks / sizeof g_hooks[0])

/* dlsym() is called by sanitizer runtimes while they start, before their shadow memory
 * exists: what it runs must not be instrumented. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) && __clang_major__ >= 14
#define VG_TSAN_BUILD 1
#endif
#endif
#ifdef VG_TSAN_BUILD /* (TSan instruments function entry even under no_sanitize("thread")) */
#define VG_NO_SANITIZE __attribute__((disable_sanitizer_instrumentation))
#else
#define VG_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
#endif

VG_NO_SANITIZE static const hook_t *hook_by_symbol(const char *name) {
    for (size_t i = 0; i < NHOOKS; i++)
        if (strcmp(g_hooks[i].sym, name) == 0)
            return &g_hooks[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * The real dlsym, and the next definition of a symbol
 * ------------------------------------------------------------------------------------- */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn g_real_dlsym;

VG_NO_SANITIZE static dlsym_fn real_dlsym(void) {
    if (!g_real_dlsym) {
        /* dlvsym is not overridden; ask for dlsym's versions, newest first. */
        static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
        for (size_t i = 0; i < 3 && !g_real_dlsym; i++)
            g_real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    }
    return g_real_dlsym;
}

void *vgp_next(const char *symbol, void **slot) {
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f || !real_dlsym())
        return f;
    f = g_real_dlsym(RTLD_NEXT, symbol);
    if (!f) {
        /* The program does not link the driver (it dlopen()s it, as the CUDA runtime
         * does): ask the driver vramguard loaded. */
        vgp_ready();
        if (vg__drv.handle)
            f = g_real_dlsym(vg__drv.handle, symbol);
    }
    if (f)
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    return f;
}

/* Does f belong to a CUDA driver library (the real libcuda, or vgsim)? */
VG_NO_SANITIZE static bool from_driver(void *f) {
    Dl_info info;
    if (!f || !dladdr(f, &info) || !info.dli_fname)
        return false;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    return strncmp(base, "libcuda.so", 10) == 0 || strncmp(base, "libvgsim.so", 11) == 0;
}

/* RTLD_NEXT means "after the object that called dlsym", and glibc finds that object from
 * dlsym's return address. So a lookup that is not ours must reach the real dlsym as a
 * tail call (a jump), which keeps the program's return address. (GCC, without musttail,
 * makes sibling calls only when it optimises: in a -O0 build, this function gets -O1.) */
#if defined(__clang__)
#define VG_MUSTTAIL __attribute__((musttail))
#define VG_SIBCALLS
#elif defined(__OPTIMIZE__)
#define VG_MUSTTAIL
#define VG_SIBCALLS __attribute__((optimize("optimize-sibling-calls")))
#else
#define VG_MUSTTAIL
#define VG_SIBCALLS __attribute__((optimize("O1", "optimize-sibling-calls")))
#endif

VG_API VG_SIBCALLS VG_NO_SANITIZE void *dlsym(void *handle, const char *name) {
    dlsym_fn real = real_dlsym();
    if (!real)
        return NULL;
    const hook_t *h = name[0] == 'c' && name[1] == 'u' ? hook_by_symbol(name) : NULL;
    if (handle == RTLD_NEXT) {
        if (h) /* for anyone after this library, the next definition is the hook */
            return h->fn;
        VG_MUSTTAIL return real(handle, name);
    }
    void *f = real(handle, name);
    if (!f || name[0] != 'c' || name[1] != 'u')
        return f;
    if (h && f != h->fn && from_driver(f))
        return h->fn;
    if (!h && strcmp(name, "cuGetProcAddress") == 0 && from_driver(f))
        return (void *)&cuGetProcAddress; /* the CUDA 11.3 entry point (below) */
    return f;
}

/* ---------------------------------------------------------------------------------------
 * cuGetProcAddress
 * ------------------------------------------------------------------------------------- */

/* The hook (or twin) for what the driver answered for `api`, or NULL. */
static void *hook_for(const char *api, void *driver_fn) {
    if (!driver_fn || !real_dlsym())
        return NULL;
    void *lib = vg__drv.handle;
    for (size_t i = 0; i < NHOOKS; i++) {
        if (strcmp(g_hooks[i].name, api) != 0)
            continue;
        /* Only if the driver gave exactly the version the hook implements. */
        void *same = lib ? g_real_dlsym(lib, g_hooks[i].sym) : NULL;
        if (same == driver_fn)
            return g_hooks[i].fn;
    }
    return NULL;
}

VG_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
    static void *next;
    typedef CUresult (*fn_t)(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *);
    fn_t real = (fn_t)vgp_next("cuGetProcAddress_v2", &next);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(symbol, pfn, cudaVersion, flags, status);
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol && vgp_ready()) {
        void *h = hook_for(symbol, *pfn);
        if (h)
            *pfn = h;
    }
    return r;
}

/* CUDA 11.3-11.8's cuGetProcAddress (no status argument). Exported under its own name;
 * cuda.h of CUDA 12+ maps cuGetProcAddress to the _v2 above. */
VG_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags) {
    static void *next;
    typedef CUresult (*fn_t)(const char *, void **, int, cuuint64_t);
    fn_t real = (fn_t)vgp_next("cuGetProcAddress", &next);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol && vgp_ready()) {
        void *h = hook_for(symbol, *pfn);
        if (h)
            *pfn = h;
    }
    return r;
}

/* ---------------------------------------------------------------------------------------
 * Start-up
 * ------------------------------------------------------------------------------------- */

static _Atomic int g_state; /* 0 not tried, 1 running, -1 passing through */
static pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;

/* Check that hooks.h names the same ABI symbols as the driver table, and the same twins. */
static bool table_consistent(void) {
    for (size_t i = 0; i < NHOOKS; i++) {
        if (g_hooks[i].other)
            continue;
        bool found = false;
#define VG_X(api, symbol, need, params, args)                                               \
    if (!g_hooks[i].ptsz && strcmp(#api, g_hooks[i].name) == 0 &&                          \
        strcmp(#symbol, g_hooks[i].sym) == 0)                                               \
        found = true;
        VG_DRIVER_FUNCS(VG_X)
#undef VG_X
#define VG_X(api, symbol, twin)                                                             \
    if (g_hooks[i].ptsz && strcmp(#api, g_hooks[i].name) == 0 &&                           \
        strcmp(#twin, g_hooks[i].sym) == 0)                                                 \
        found = true;
        VG_DRIVER_TWINS(VG_X)
#undef VG_X
        if (!found) {
            vg__log("interposer: hook %s (%s) does not match the driver table; passing "
                    "every call through",
                    g_hooks[i].name, g_hooks[i].sym);
            return false;
        }
    }
    return true;
}

/* Which processes are guarded. The program `vramguard run` starts may be a wrapper — a
 * shell script, pyenv's `python` shim, a launcher such as torchrun — that never touches
 * the GPU itself and execs or starts the real program. So the preload stays in the
 * environment of a process until it first calls the driver through a hook; from then on
 * (this process is the GPU program) the processes it starts are left alone, unless
 * follow_children asks for them too.
 *
 * The environment is changed while other threads may read it: the variable keeps its
 * place (setenv of an existing name swaps one pointer; glibc keeps the old string), and
 * an emptied list stays set, to "", rather than be removed (which would move entries). */
static void stop_following(void) {
    const char *follow = getenv("VRAMGUARD_FOLLOW_CHILDREN");
    const char *pre = getenv("LD_PRELOAD");
    if ((follow && strcmp(follow, "1") == 0) || !pre || !strstr(pre, "libvramguard_preload.so"))
        return;
    char *copy = strdup(pre), *out = calloc(1, strlen(pre) + 1);
    if (copy && out) {
        for (char *save = NULL, *tok = strtok_r(copy, ": ", &save); tok;
             tok = strtok_r(NULL, ": ", &save)) {
            if (strstr(tok, "libvramguard_preload.so"))
                continue;
            if (*out)
                strcat(out, ":");
            strcat(out, tok);
        }
        setenv("LD_PRELOAD", out, 1);
    }
    free(copy);
    free(out);
}

/* At exit, before vramguard's own exit work: reports the signal handler left, and the
 * program's memory and SIGSEGV handler as they were. */
static void at_exit(void) {
    vgp_flush_deferred();
    vgp_race_release();
}

/* Set by `vramguard run` (cmd_run.c): the user asked for this program to be checked. */
static bool required(void) {
    const char *v = getenv("VRAMGUARD_REQUIRED");
    return v && strcmp(v, "1") == 0;
}

bool vgp_ready(void) {
    int s = atomic_load_explicit(&g_state, memory_order_acquire);
    if (s)
        return s > 0;
    pthread_mutex_lock(&g_start_lock);
    if (!(s = atomic_load(&g_state))) {
        bool ok = vg__ensure_init() == VG_OK && table_consistent();
        if (!ok && required()) {
            /* `vramguard run` was asked for a check: never run the program without one. */
            fprintf(stderr, "vramguard: cannot check this program, so it is stopped here, at "
                            "its first CUDA call (vramguard run never runs a program "
                            "unchecked): %s\n",
                    vg_last_error());
            fflush(NULL);
            _exit(2);
        }
        if (!ok)
            fprintf(stderr, "vramguard: not active in this process: the program runs "
                            "unguarded, with no checks and no reports: %s\n",
                    vg_last_error());
        s = ok ? 1 : -1;
        stop_following();
        atomic_store_explicit(&g_state, s, memory_order_release);
        if (ok) {
            vg__guard_launches_seen(); /* guard work may wait for the program's launches */
            atexit(at_exit); /* (runs before vramguard's own exit work) */
            vgp_signals_install();
        }
    }
    pthread_mutex_unlock(&g_start_lock);
    return s > 0;
}

/* At load: the driver layer must look symbols up with the real dlsym. */
__attribute__((constructor)) static void preload_start(void) { vg__real_dlsym = real_dlsym(); }

/* ---------------------------------------------------------------------------------------
 * Results
 * ------------------------------------------------------------------------------------- */

static bool kills_context(CUresult r) {
    switch ((int)r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case 716: /* CUDA_ERROR_MISALIGNED_ADDRESS */
    case 715: /* CUDA_ERROR_ILLEGAL_INSTRUCTION */
    case 714: /* CUDA_ERROR_HARDWARE_STACK_ERROR */
    case 717: /* CUDA_ERROR_INVALID_ADDRESS_SPACE */
    case 718: /* CUDA_ERROR_INVALID_PC */
    case 710: /* CUDA_ERROR_ASSERT */
        return true;
    default:
        return false;
    }
}

static _Atomic int g_sticky; /* the error that killed the context, once seen */

CUresult vgp_sticky(void) { return (CUresult)atomic_load_explicit(&g_sticky, memory_order_relaxed); }

CUresult vgp_check(CUresult r, const char *call) {
    if (r != CUDA_SUCCESS && kills_context(r)) {
        atomic_store(&g_sticky, (int)r);
        if (atomic_load(&g_state) > 0)
            vg_cuda_error((int)r, call);
    }
    vgp_flush_deferred();
    return r;
}

CUresult vgp_cu_result(int st) {
    switch (st) {
    case VG_OK: return CUDA_SUCCESS;
    case VG_ERR_OUT_OF_MEMORY: return CUDA_ERROR_OUT_OF_MEMORY;
    case VG_ERR_NO_DRIVER: return CUDA_ERROR_NOT_INITIALIZED;
    default:
        if (st >= VG_ERR_CUDA_BASE)
            return (CUresult)(st - VG_ERR_CUDA_BASE);
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* An allocation failed: say why where the program's allocation failed (S6, S7). */
CUresult vgp_alloc_result(int st) {
    if (st == VG_ERR_OUT_OF_MEMORY && !vg__guard_on()) /* (guard mode reports it itself) */
        vg__log("%s", vg_last_error());
    return vgp_cu_result(st);
}
