/* pinned_lookup_user.c — a program that pins host memory through the driver functions it
 * finds itself, as the CUDA runtime does for cudaHostAlloc, cudaMallocHost and
 * cudaHostRegister: dlopen("libcuda.so.1") + dlsym, dlsym(RTLD_NEXT) and cuGetProcAddress.
 * It pins 1 MiB each way and frees none: under `vramguard run --mode=guard` each must be a
 * leak of pinned host memory, so each lookup returned vramguard's hook. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "driver_lookup.h"

typedef CUresult (*hostalloc_t)(void **, size_t, unsigned);
typedef CUresult (*allochost_t)(void **, size_t);
typedef CUresult (*hostregister_t)(void *, size_t, unsigned);

#define MiB ((size_t)1 << 20)

static int pinned(CUresult r, const char *how) {
    printf("%s: %s\n", how, r == 0 ? "pinned 1 MiB" : "failed");
    return r != 0;
}

int main(void) {
    void *h = open_driver();
    if (!h)
        return 1;
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    void *by_gpa_alloc = NULL, *by_gpa_register = NULL;
    int st;
    if (!gpa || gpa("cuMemHostAlloc", &by_gpa_alloc, 13000, 0, &st) ||
        gpa("cuMemHostRegister", &by_gpa_register, 13000, 0, &st))
        return 1;
    hostalloc_t by_handle = (hostalloc_t)dlsym(h, "cuMemHostAlloc");
    allochost_t by_next = (allochost_t)dlsym(RTLD_NEXT, "cuMemAllocHost_v2");
    if (!by_handle || !by_next)
        return 1;
    void *a, *b, *c, *d = aligned_alloc(4096, MiB);
    int bad = pinned(by_handle(&a, MiB, 0), "dlsym(handle) cuMemHostAlloc");
    bad |= pinned(by_next(&b, MiB), "dlsym(RTLD_NEXT) cuMemAllocHost_v2");
    bad |= pinned(((hostalloc_t)by_gpa_alloc)(&c, MiB, 0), "cuGetProcAddress cuMemHostAlloc");
    bad |= pinned(d ? ((hostregister_t)by_gpa_register)(d, MiB, 0) : 1,
                  "cuGetProcAddress cuMemHostRegister");
    return bad; /* (the bug: nothing is freed) */
}
