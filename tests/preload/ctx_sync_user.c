/* ctx_sync_user.c — synchronises the way CUDA 13's runtime does for cudaDeviceSynchronize:
 * cuGetProcAddress("cuCtxSynchronize", 13000) answers cuCtxSynchronize_v2(CUcontext).
 * It first overruns a 4096-byte allocation by 4 bytes with a memset (a kernel's stray
 * write), so under `vramguard run --mode=guard` the synchronisation's check must report
 * it — which it can only do if that lookup returned vramguard's hook. */
#define _GNU_SOURCE
#include "driver_lookup.h"

typedef CUresult (*memset_t)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*sync_v2_t)(void *);

int main(void) {
    void *h = open_driver();
    gpa_t gpa = h ? (gpa_t)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa)
        return 1;
    int st;
    void *a = NULL, *f = NULL, *m = NULL, *s = NULL;
    if (gpa("cuMemAlloc", &a, 13000, 0, &st) || gpa("cuMemFree", &f, 13000, 0, &st) ||
        gpa("cuMemsetD8", &m, 13000, 0, &st) || gpa("cuCtxSynchronize", &s, 13000, 0, &st) ||
        !a || !f || !m || !s)
        return 1;
    CUdeviceptr p;
    if (((alloc_t)a)(&p, 4096) || ((memset_t)m)(p, 0x5a, 4100))
        return 1;
    CUresult r = ((sync_v2_t)s)(NULL); /* the current context */
    printf("synchronized: %d\n", r);
    ((free_t)f)(p);
    return r != 0;
}
