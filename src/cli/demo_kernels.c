/* demo_kernels.c — the demo's kernels: kernels/demo.ptx for a GPU, and the same kernels
 * as host functions for vgsim (registered by name, run in stream order by its workers). */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "../../vgsim/vgsim.h"
#include "../driver/driver.h"
#include "demo.h"
#include "demo_ptx.h" /* generated from kernels/demo.ptx: demo_ptx[] */

static uint64_t arg_u64(const vgsim_launch_t *l, int i) {
    uint64_t v;
    memcpy(&v, l->params[i], sizeof v);
    return v;
}

static float arg_f32(const vgsim_launch_t *l, int i) {
    float v;
    memcpy(&v, l->params[i], sizeof v);
    return v;
}

/* Threads in the launch's grid: the kernels' loops stop at min(n, threads) like a GPU's. */
static uint64_t threads(const vgsim_launch_t *l) {
    return (uint64_t)l->grid[0] * l->grid[1] * l->grid[2] * l->block[0] * l->block[1] *
           l->block[2];
}

static void sim_iota(const vgsim_launch_t *l) {
    float *x = (float *)(uintptr_t)arg_u64(l, 0);
    uint64_t n = arg_u64(l, 1);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)i;
}

static void sim_fill(const vgsim_launch_t *l) {
    float *x = (float *)(uintptr_t)arg_u64(l, 0);
    float v = arg_f32(l, 1);
    uint64_t n = arg_u64(l, 2);
    for (uint64_t i = 0; i < n; i++)
        x[i] = v;
}

static void sim_scatter(const vgsim_launch_t *l) {
    float *x = (float *)(uintptr_t)arg_u64(l, 0);
    const long long *idx = (const long long *)(uintptr_t)arg_u64(l, 1);
    uint32_t n;
    memcpy(&n, l->params[2], sizeof n);
    float v = arg_f32(l, 3);
    for (uint64_t i = 0; i < n && i < threads(l); i++)
        x[idx[i]] = v; /* a stray index faults: vgsim makes it CUDA_ERROR_ILLEGAL_ADDRESS */
}

CUresult demo_kernels_load(demo_t *d) {
    if (vg__drv.is_vgsim) {
        vgsim_register_kernel_fn reg =
            (vgsim_register_kernel_fn)dlsym(vg__drv.handle, "vgsim_register_kernel");
        if (!reg || reg("demo_iota", sim_iota) || reg("demo_fill", sim_fill) ||
            reg("demo_scatter", sim_scatter))
            return CUDA_ERROR_NOT_FOUND;
    }
    CUresult r = vg__cuModuleLoadData(&d->module, demo_ptx);
    if (r == CUDA_SUCCESS)
        r = vg__cuModuleGetFunction(&d->iota, d->module, "demo_iota");
    if (r == CUDA_SUCCESS)
        r = vg__cuModuleGetFunction(&d->fill, d->module, "demo_fill");
    if (r == CUDA_SUCCESS)
        r = vg__cuModuleGetFunction(&d->scatter, d->module, "demo_scatter");
    return r;
}
