/* vgnvtx.h — what the test NVTX tool (inject.c, libvgnvtx_inject.so) recorded, for
 * test_nvtx.c: the heaps and regions NVTX clients registered, their names, the clients
 * that attached, and every breach of the protocol it saw. The test finds these functions
 * with dlsym in the copy its NVTX client loaded (NVTX_INJECTION64_PATH).
 */
#ifndef VG_TESTS_VGNVTX_H
#define VG_TESTS_VGNVTX_H

#include <stddef.h>
#include <stdint.h>

typedef struct vgnvtx_region {
    uint64_t lo, size;
    uint64_t heap_lo, heap_size; /* the heap it was registered in */
    char name[256];              /* "" until named */
} vgnvtx_region_t;

typedef struct vgnvtx_heap {
    uint64_t lo, size;
    char name[128];
} vgnvtx_heap_t;

typedef struct vgnvtx_counts {
    int core_clients;      /* InitializeInjectionNvtx2 calls (one per NVTX client) */
    int ext_clients;       /* InitializeInjectionNvtxExtension calls for the Memory API */
    uint64_t heaps_registered, regions_registered, regions_unregistered, names;
    uint64_t errors;       /* protocol breaches (vgnvtx_errors_fn gives their text) */
} vgnvtx_counts_t;

/* The live regions, sorted by address (up to max; returns how many there are). */
typedef size_t (*vgnvtx_regions_fn)(vgnvtx_region_t *out, size_t max);
/* The live heaps, sorted by address. */
typedef size_t (*vgnvtx_heaps_fn)(vgnvtx_heap_t *out, size_t max);
typedef void (*vgnvtx_counts_fn)(vgnvtx_counts_t *out);
/* The first errors' text, one a line. */
typedef void (*vgnvtx_errors_fn)(char *out, size_t n);

#endif /* VG_TESTS_VGNVTX_H */
