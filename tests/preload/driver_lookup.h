/* driver_lookup.h — what the interposer test programs need to use the driver found
 * through dlopen/dlsym/cuGetProcAddress, without cuda.h (they must not link the driver):
 * the types, and opening libcuda.so.1 with device 0's primary context current. */
#ifndef VG_TEST_DRIVER_LOOKUP_H
#define VG_TEST_DRIVER_LOOKUP_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef CUresult (*init_t)(unsigned);
typedef CUresult (*devget_t)(int *, int);
typedef CUresult (*retain_t)(void **, int);
typedef CUresult (*setcur_t)(void *);
typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_t)(CUdeviceptr);
typedef CUresult (*gpa_t)(const char *, void **, int, unsigned long long, int *);

/* dlopen the driver and make device 0's primary context current; NULL on failure. */
static inline void *open_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return NULL;
    }
    int dev;
    void *ctx;
    if (((init_t)dlsym(h, "cuInit"))(0) || ((devget_t)dlsym(h, "cuDeviceGet"))(&dev, 0) ||
        ((retain_t)dlsym(h, "cuDevicePrimaryCtxRetain"))(&ctx, dev) ||
        ((setcur_t)dlsym(h, "cuCtxSetCurrent"))(ctx))
        return NULL;
    return h;
}

#endif /* VG_TEST_DRIVER_LOOKUP_H */
