/* dlsym_user.c — a program that finds the driver itself, the ways that would slip past a
 * naive interposer: dlopen("libcuda.so.1") + dlsym, dlsym(RTLD_NEXT) and cuGetProcAddress
 * (how the CUDA runtime does it). It double-frees through each; under `vramguard run`
 * every one must be caught, so each lookup returned vramguard's hook. */
#define _GNU_SOURCE
#include <stdint.h>

#include "driver_lookup.h"

static int leak_and_double_free(alloc_t alloc, free_t fr, const char *how) {
    CUdeviceptr p;
    if (!alloc || !fr || alloc(&p, 4096) != 0) {
        fprintf(stderr, "%s: lookup or allocation failed\n", how);
        return 1;
    }
    fr(p);
    CUresult again = fr(p); /* the double free the hook must see */
    printf("%s: second free returned %d\n", how, again);
    return 0;
}

int main(void) {
    void *h = open_driver();
    if (!h)
        return 1;
    int bad = 0;
    bad |= leak_and_double_free((alloc_t)dlsym(h, "cuMemAlloc_v2"), (free_t)dlsym(h, "cuMemFree_v2"),
                                "dlsym(handle)");
    bad |= leak_and_double_free((alloc_t)dlsym(RTLD_NEXT, "cuMemAlloc_v2"),
                                (free_t)dlsym(RTLD_NEXT, "cuMemFree_v2"), "dlsym(RTLD_NEXT)");
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    void *a = NULL, *f = NULL;
    int st;
    if (!gpa || gpa("cuMemAlloc", &a, 13000, 0, &st) || gpa("cuMemFree", &f, 13000, 0, &st))
        return 1;
    bad |= leak_and_double_free((alloc_t)a, (free_t)f, "cuGetProcAddress");
    return bad;
}
