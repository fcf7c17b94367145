/* driver.h — the one door to the GPU: the CUDA driver API, loaded at run time (D1).
 *
 * Contract
 *  - vg__driver_load() dlopen()s the driver library (default "libcuda.so.1", or the
 *    `driver=PATH` option) and resolves every function of VG_DRIVER_FUNCS, preferring
 *    cuGetProcAddress when the driver offers it and dlsym() of the versioned symbol
 *    otherwise. It is idempotent and thread safe; the first result (success or the
 *    error text) sticks for the life of the process.
 *  - A REQ function that is missing makes the load fail; an OPT function that is missing
 *    stays NULL and vg__drv_has(api) says so (the VMM fallback relies on this).
 *  - Every call goes through the generated wrappers vg__cuXxx(...), never through the
 *    table directly: they are where fault injection (tests) sits. A wrapper for a
 *    missing OPT function returns CUDA_ERROR_NOT_SUPPORTED.
 *  - Driver errors become vg_ statuses with vg__cu_status(); the driver's own name for
 *    the error (CUDA_ERROR_...) is kept (vg_strerror prints it).
 *  - Nothing here allocates device memory or touches it; nothing here prints.
 */
#ifndef VG_DRIVER_H
#define VG_DRIVER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "driver_funcs.h"
#include "vramguard.h"

typedef struct vg_driver {
#define VG_X(api, sym, need, params, args) CUresult (*api) params;
    VG_DRIVER_FUNCS(VG_X)
#undef VG_X
    void *handle;       /* dlopen handle of the driver library */
    char path[512];     /* what was loaded, as asked for */
    int version;        /* cuDriverGetVersion, e.g. 13000 */
    bool is_vgsim;      /* the driver is vgsim (it exports vgsim_version) */
} vg_driver_t;

/* The loaded table. Valid (all REQ entries non-NULL) after vg__driver_load() succeeded. */
extern vg_driver_t vg__drv;

/* Load the driver once. `path` NULL means the `driver` option's value. On failure returns
 * VG_ERR_NO_DRIVER and sets the thread's last-error message to a sentence that says what
 * was tried and how to use vgsim instead. */
vg_status_t vg__driver_load(const char *path);

/* The interposer overrides dlsym(): it sets this to the real one, which the driver layer
 * then uses (so it always sees the real driver's functions). */
extern void *(*vg__real_dlsym)(void *, const char *);

/* dlsym, past the interposer's own (every lookup vramguard makes for itself). */
void *vg__dlsym(void *handle, const char *name);

/* True once the driver is loaded. */
bool vg__driver_loaded(void);

/* Convert a driver result into a vg_ status (VG_OK for CUDA_SUCCESS). */
static inline vg_status_t vg__cu_status(CUresult r) {
    return r == CUDA_SUCCESS ? VG_OK : (vg_status_t)(VG_ERR_CUDA_BASE + (int)r);
}

/* The driver's name and description of an error, from our own table (never calls the
 * driver, so it works when the driver is gone). Unknown codes give "CUDA_ERROR_<n>". */
const char *vg__cu_error_name(CUresult r);
const char *vg__cu_error_text(CUresult r);

/* ---------------------------------------------------------------------------------------
 * Fault injection (tests): make the Nth driver call from now on fail with `error`.
 * n == 0 disarms. Counts only calls made through the vg__cu* wrappers.
 * ------------------------------------------------------------------------------------- */
extern _Atomic long vg__fault_countdown;
extern CUresult vg__fault_error;
VG_API void vg__fault_inject(long n, int error);
VG_API long vg__fault_calls(void); /* driver calls made since the last vg__fault_inject */
CUresult vg__fault_fire(void);

#define VG_DRIVER_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The wrappers: vg__cuMemAlloc(&p, n) etc. */
#define VG_X(api, sym, need, params, args)                                                  \
    static inline CUresult vg__##api params {                                               \
        if (VG_DRIVER_UNLIKELY(atomic_load_explicit(&vg__fault_countdown,                   \
                                                    memory_order_relaxed) != 0)) {          \
            CUresult vg_fault_r = vg__fault_fire();                                         \
            if (vg_fault_r != CUDA_SUCCESS)                                                 \
                return vg_fault_r;                                                          \
        }                                                                                   \
        if (VG_DRIVER_UNLIKELY(vg__drv.api == NULL))                                        \
            return CUDA_ERROR_NOT_SUPPORTED;                                                \
        return vg__drv.api args;                                                            \
    }
VG_DRIVER_FUNCS(VG_X)
#undef VG_X

#define vg__drv_has(api) (vg__drv.api != NULL)

#endif /* VG_DRIVER_H */
