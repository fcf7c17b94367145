/* driver.c — loading the CUDA driver at run time and naming its errors.
 *
 * Each function of VG_DRIVER_FUNCS is looked up by its exact ABI symbol: dlsym of the
 * versioned name in driver_funcs.h (e.g. cuMemAlloc_v2), which the real driver and vgsim
 * both export. cuGetProcAddress is not used for this: asked for CUDA 13000, it answers
 * "cuCtxGetDevice" with cuCtxGetDevice_v2(CUdevice *, CUcontext) and "cuCtxSynchronize"
 * with cuCtxSynchronize_v2(CUcontext), while cuda.h keeps those names on their
 * one-argument versions (found on an H100, driver 580; docs/gpu-validation.md).
 * When vramguard is preloaded into a program it overrides dlsym(); vg__real_dlsym is
 * set by the interposer so that the driver layer always sees the real driver.
 */
#define _GNU_SOURCE
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "base/options.h"

vg_driver_t vg__drv;

_Atomic long vg__fault_countdown;
CUresult vg__fault_error = CUDA_ERROR_OUT_OF_MEMORY;
static _Atomic long g_fault_calls;

void *(*vg__real_dlsym)(void *, const char *) = NULL;

static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_load_state; /* 0: not tried, 1: loaded, -1: failed */
static char g_load_error[1024];

/* ---------------------------------------------------------------------------------------
 * Error names (our own table: works without a driver)
 * ------------------------------------------------------------------------------------- */

const char *vg__cu_error_name(CUresult r) {
    switch ((int)r) {
#define VG_X(name, value, text)                                                             \
    case value: return #name;
        VG_CU_ERRORS(VG_X)
#undef VG_X
    default: {
        char *buf = vg__tbuf()->cu_name;
        snprintf(buf, sizeof vg__tbuf()->cu_name, "CUDA_ERROR_%d", (int)r);
        return buf;
    }
    }
}

const char *vg__cu_error_text(CUresult r) {
    switch ((int)r) {
#define VG_X(name, value, text)                                                             \
    case value: return text;
        VG_CU_ERRORS(VG_X)
#undef VG_X
    default: return "unrecognised CUDA error";
    }
}

/* ---------------------------------------------------------------------------------------
 * Fault injection
 * ------------------------------------------------------------------------------------- */

VG_API void vg__fault_inject(long n, int error) {
    vg__fault_error = (CUresult)error;
    atomic_store(&g_fault_calls, 0);
    atomic_store(&vg__fault_countdown, n);
}

VG_API long vg__fault_calls(void) { return atomic_load(&g_fault_calls); }

CUresult vg__fault_fire(void) {
    atomic_fetch_add(&g_fault_calls, 1);
    long prev = atomic_load(&vg__fault_countdown);
    while (prev > 0) {
        if (atomic_compare_exchange_weak(&vg__fault_countdown, &prev, prev - 1))
            return prev == 1 ? vg__fault_error : CUDA_SUCCESS;
    }
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------- */

void *vg__dlsym(void *h, const char *name) {
    return vg__real_dlsym ? vg__real_dlsym(h, name) : dlsym(h, name);
}

static vg_status_t load_locked(const char *path) {
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(g_load_error, sizeof g_load_error,
                 "cannot load the CUDA driver '%s' (%s). This machine may have no NVIDIA "
                 "driver: to run on the CPU simulator instead, use 'vramguard run --sim -- "
                 "CMD', or set VRAMGUARD_OPTIONS=driver=<build>/vgsim/libcuda.so.1",
                 path, why ? why : "unknown reason");
        return VG_ERR_NO_DRIVER;
    }

    vg_driver_t d;
    memset(&d, 0, sizeof d);
    const char *missing = NULL;

#define VG_REQ 1
#define VG_OPT 0
#define VG_X(api, symbol, need, params, args)                                               \
    {                                                                                       \
        void *fn = vg__dlsym(h, #symbol);                                                         \
        *(void **)&d.api = fn;                                                              \
        if (!fn && VG_##need && !missing)                                                   \
            missing = #symbol;                                                              \
    }
    VG_DRIVER_FUNCS(VG_X)
#undef VG_X
#undef VG_REQ
#undef VG_OPT

    if (missing) {
        snprintf(g_load_error, sizeof g_load_error,
                 "the CUDA driver '%s' lacks %s, which vramguard needs (is it a stub library "
                 "or a very old driver?)",
                 path, missing);
        dlclose(h);
        return VG_ERR_NO_DRIVER;
    }
    d.handle = h;
    snprintf(d.path, sizeof d.path, "%s", path);
    d.is_vgsim = vg__dlsym(h, "vgsim_version") != NULL;
    CUresult r = d.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(g_load_error, sizeof g_load_error,
                 "the CUDA driver '%s' failed to initialise: %s (%s)%s", path,
                 vg__cu_error_name(r), vg__cu_error_text(r),
                 r == CUDA_ERROR_STUB_LIBRARY || r == CUDA_ERROR_NO_DEVICE
                     ? ". To run on the CPU simulator instead, use 'vramguard run --sim -- CMD'"
                     : "");
        dlclose(h);
        return VG_ERR_NO_DRIVER;
    }
    if (d.cuDriverGetVersion(&d.version) != CUDA_SUCCESS)
        d.version = 0;
    vg__drv = d;
    return VG_OK;
}

vg_status_t vg__driver_load(const char *path) {
    pthread_mutex_lock(&g_load_lock);
    if (g_load_state == 0) {
        if (!path)
            path = vg__opt.driver[0] ? vg__opt.driver : "libcuda.so.1";
        g_load_state = load_locked(path) == VG_OK ? 1 : -1;
    }
    int state = g_load_state;
    pthread_mutex_unlock(&g_load_lock);
    if (state == 1)
        return VG_OK;
    return vg__error(VG_ERR_NO_DRIVER, "%s", g_load_error);
}

bool vg__driver_loaded(void) {
    pthread_mutex_lock(&g_load_lock);
    bool ok = g_load_state == 1;
    pthread_mutex_unlock(&g_load_lock);
    return ok;
}

/* The public name of a status; a CUDA error's with the driver's own name and text. */
VG_API const char *vg_strerror(vg_status_t st) {
    switch ((int)st) {
#define VG_X(name, value, msg)                                                              \
    case value: return msg;
        VG_STATUS_LIST(VG_X)
#undef VG_X
    default: break;
    }
    if ((int)st >= VG_ERR_CUDA_BASE) {
        /* "CUDA_ERROR_X: text" built once per code in a small static table. */
        char *buf = vg__tbuf()->strerror;
        CUresult r = (CUresult)((int)st - VG_ERR_CUDA_BASE);
        snprintf(buf, sizeof vg__tbuf()->strerror, "%s: %s", vg__cu_error_name(r),
                 vg__cu_error_text(r));
        return buf;
    }
    return "unknown vramguard status";
}
