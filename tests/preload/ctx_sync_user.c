/* ctx_sync_user.c — synchronises the way CUDA 13's runtime does for cudaDeviceSynchronize:
 * cuGetProcAddress("cuCtxSynchronize", 13000) answers cuCtxSynchronize_v2(CUcontext).
 * It first overruns a 4096-byte allocation by 4 bytes with a kernel (examples' ex_fill,
 * 1025 floats), so under `vramguard run --mode=guard` the synchronisation's check must
 * report it — which it can only do if that lookup returned vramguard's hook. Every driver
 * function comes from that lookup: the program does not link the driver. */
#define _GNU_SOURCE
#include <stdint.h>

#include "driver_lookup.h"
#include "kernels_ptx.h" /* the examples' kernels (ex_kernels_ptx) */

typedef CUresult (*sync_v2_t)(void *);
typedef CUresult (*load_t)(void **, const void *);
typedef CUresult (*getfn_t)(void **, void *, const char *);
typedef CUresult (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, void *, void **, void **);

/* vgsim runs a kernel as a host function registered under its name (examples/common.h). */
typedef struct launch {
    unsigned grid[3], block[3], shared_mem;
    int nparams;
    void *params[32];
} launch_rec_t;

static void fill_host(const launch_rec_t *l) {
    float *x = *(float **)l->params[0];
    float v = *(float *)l->params[1];
    unsigned long long n = *(unsigned long long *)l->params[2];
    for (unsigned long long i = 0; i < n; i++)
        x[i] = v;
}

int main(void) {
    void *h = open_driver();
    gpa_t gpa = h ? (gpa_t)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa)
        return 1;
    int st;
    void *a = NULL, *f = NULL, *s = NULL, *ld = NULL, *gf = NULL, *lk = NULL;
    if (gpa("cuMemAlloc", &a, 13000, 0, &st) || gpa("cuMemFree", &f, 13000, 0, &st) ||
        gpa("cuCtxSynchronize", &s, 13000, 0, &st) || gpa("cuModuleLoadData", &ld, 13000, 0, &st) ||
        gpa("cuModuleGetFunction", &gf, 13000, 0, &st) || gpa("cuLaunchKernel", &lk, 13000, 0, &st) ||
        !a || !f || !s || !ld || !gf || !lk)
        return 1;
    int (*reg)(const char *, void (*)(const launch_rec_t *)) =
        (int (*)(const char *, void (*)(const launch_rec_t *)))dlsym(h, "vgsim_register_kernel");
    if (reg)
        reg("ex_fill", fill_host);
    void *mod, *fill;
    CUdeviceptr p;
    if (((load_t)ld)(&mod, ex_kernels_ptx) || ((getfn_t)gf)(&fill, mod, "ex_fill") ||
        ((alloc_t)a)(&p, 4096))
        return 1;
    float v = 1.0f;
    unsigned long long n = 4096 / sizeof(float) + 1; /* the bug: one float too many */
    void *params[] = {&p, &v, &n};
    if (((launch_t)lk)(fill, 5, 1, 1, 256, 1, 1, 0, NULL, params, NULL))
        return 1;
    CUresult r = ((sync_v2_t)s)(NULL); /* the current context */
    printf("synchronized: %d\n", r);
    ((free_t)f)(p);
    return r != 0;
}
