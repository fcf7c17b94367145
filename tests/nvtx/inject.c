/* inject.c — a small NVTX tool for the tests (libvgnvtx_inject.so): the injection side
 * of NVTX's protocol, built against the CUDA toolkit's own nvtx3 headers, so it checks
 * vramguard's hand-written client (src/check/nvtx_abi.h, nvtx.c) against NVIDIA's
 * definitions as it runs.
 *
 * Loaded through NVTX_INJECTION64_PATH by every NVTX client of the process, it fills each
 * client's CORE2 table (nvtxDomainCreateA) and Memory extension slots, records the heaps
 * and regions registered and their names, and counts as an error every breach it sees:
 * a struct of the wrong size or compatibility id, a region outside its heap or over
 * another region, an unregistration or a name for no region, a heap unregistered twice, a
 * name longer than compute-sanitizer takes (49 characters).
 * The tests read it all through vgnvtx.h's functions.
 *
 * VGNVTX_FAIL=core|ext|noheap makes it refuse the client, refuse the Memory API, or
 * return no heap: vramguard must go on without it. VGNVTX_NULL=1 makes it a tool that
 * takes every Memory API call and does nothing (the bench: vramguard's own cost).
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgnvtx.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct heap_rec {
    uint64_t lo, size;
    char name[128];
    int alive;
    struct heap_rec *next;
} heap_rec_t;

typedef struct region_rec { /* (small: the array is kept sorted by memmove) */
    uint64_t lo, size;
    heap_rec_t *heap;
    char *name; /* NULL until named */
} region_rec_t;

typedef struct domain_rec {
    char name[64];
    struct domain_rec *next;
} domain_rec_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_rec_t *g_heaps;
static domain_rec_t *g_domains;
static region_rec_t *g_regions; /* sorted by lo */
static size_t g_nregions, g_capregions;
static vgnvtx_counts_t g_counts;
static char g_errors[4096];

static void error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void error(const char *fmt, ...) { /* (g_lock held, or at init) */
    g_counts.errors++;
    size_t used = strlen(g_errors);
    if (used + 2 >= sizeof g_errors)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_errors + used, sizeof g_errors - used - 1, fmt, ap);
    va_end(ap);
    strcat(g_errors, "\n");
}

static int failing(const char *what) {
    const char *f = getenv("VGNVTX_FAIL");
    return f && strcmp(f, what) == 0;
}

/* VGNVTX_NULL=1: a tool that takes every call and does nothing, to measure what talking
 * to a tool costs vramguard itself (bench/RESULTS.md). */
static heap_rec_t g_null_heap;
static nvtxMemHeapHandle_t null_heap_register(nvtxDomainHandle_t d, nvtxMemHeapDesc_t const *h) {
    (void)d, (void)h;
    return (nvtxMemHeapHandle_t)&g_null_heap;
}
static void null_heap(nvtxDomainHandle_t d, nvtxMemHeapHandle_t h) { (void)d, (void)h; }
static void null_register(nvtxDomainHandle_t d, nvtxMemRegionsRegisterBatch_t const *b) {
    (void)d, (void)b;
}
static void null_unregister(nvtxDomainHandle_t d, nvtxMemRegionsUnregisterBatch_t const *b) {
    (void)d, (void)b;
}
static void null_name(nvtxDomainHandle_t d, nvtxMemRegionsNameBatch_t const *b) {
    (void)d, (void)b;
}

/* ---------------------------------------------------------------------------------------
 * Core: domains
 * ------------------------------------------------------------------------------------- */

static nvtxDomainHandle_t domain_create(const char *name) {
    domain_rec_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    snprintf(d->name, sizeof d->name, "%s", name ? name : "");
    pthread_mutex_lock(&g_lock);
    d->next = g_domains;
    g_domains = d;
    pthread_mutex_unlock(&g_lock);
    return (nvtxDomainHandle_t)d;
}

static void domain_destroy(nvtxDomainHandle_t d) { (void)d; /* (kept: handles stay valid) */ }

static int domain_known(nvtxDomainHandle_t h) {
    if (!h)
        return 1; /* the default domain */
    for (domain_rec_t *d = g_domains; d; d = d->next)
        if ((nvtxDomainHandle_t)d == h)
            return 1;
    return 0;
}

/* Every module table a client offers must have NVTX's size, NULL at 0, a slot at each id. */
static int check_module(const NvtxExportTableCallbacks *cb, NvtxCallbackModule m,
                        unsigned want) {
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (!cb->GetModuleFunctionTable(m, &table, &size) || !table) {
        error("client: no function table for module %d", (int)m);
        return 0;
    }
    if (size != want) {
        error("client: module %d table has %u entries, NVTX's has %u", (int)m, size, want);
        return 0;
    }
    if (table[0]) {
        error("client: module %d table's entry 0 is not NULL", (int)m);
        return 0;
    }
    for (unsigned i = 1; i < size; i++)
        if (!table[i]) {
            error("client: module %d has no slot for callback %u", (int)m, i);
            return 0;
        }
    return 1;
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    if (failing("core"))
        return 0;
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    const NvtxExportTableVersionInfo *vi = get(NVTX_ETID_VERSIONINFO);
    pthread_mutex_lock(&g_lock);
    g_counts.core_clients++;
    int ok = cb && cb->struct_size == sizeof *cb && vi && vi->struct_size == sizeof *vi &&
             vi->version == NVTX_VERSION;
    if (!ok)
        error("client: bad export tables (callbacks %p, version info %p)", (const void *)cb,
              (const void *)vi);
    ok = ok && check_module(cb, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_SIZE) &&
         check_module(cb, NVTX_CB_MODULE_CUDA, NVTX_CBID_CUDA_SIZE) &&
         check_module(cb, NVTX_CB_MODULE_OPENCL, NVTX_CBID_OPENCL_SIZE) &&
         check_module(cb, NVTX_CB_MODULE_CUDART, NVTX_CBID_CUDART_SIZE) &&
         check_module(cb, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_SIZE) &&
         check_module(cb, NVTX_CB_MODULE_SYNC, NVTX_CBID_SYNC_SIZE);
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return 0;
    NvtxFunctionTable core2 = NULL;
    unsigned size = 0;
    cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &size);
    *core2[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *core2[NVTX_CBID_CORE2_DomainDestroy] = (NvtxFunctionPointer)domain_destroy;
    if (vi->SetInjectionNvtxVersion)
        vi->SetInjectionNvtxVersion(NVTX_VERSION);
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * The Memory API
 * ------------------------------------------------------------------------------------- */

static int header_ok(const char *what, uint16_t compat, uint16_t size, size_t want) {
    if (compat == NVTX_EXT_COMPATID_MEM && size == want)
        return 1;
    error("%s: extCompatID 0x%x (want 0x%x), structSize %u (want %zu)", what, compat,
          NVTX_EXT_COMPATID_MEM, size, want);
    return 0;
}

static heap_rec_t *heap_find(nvtxMemHeapHandle_t h) {
    for (heap_rec_t *r = g_heaps; r; r = r->next)
        if ((nvtxMemHeapHandle_t)r == h)
            return r;
    return NULL;
}

static nvtxMemHeapHandle_t heap_register(nvtxDomainHandle_t dom, nvtxMemHeapDesc_t const *d) {
    if (failing("noheap"))
        return NULL;
    pthread_mutex_lock(&g_lock);
    heap_rec_t *r = NULL;
    if (!domain_known(dom))
        error("heap register: unknown domain %p", (void *)dom);
    else if (header_ok("heap register", d->extCompatID, d->structSize, sizeof *d)) {
        const nvtxMemVirtualRangeDesc_t *v = d->typeSpecificDesc;
        if (d->usage != NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR ||
            d->type != NVTX_MEM_TYPE_VIRTUAL_ADDRESS || d->typeSpecificDescSize != sizeof *v ||
            !v || !v->ptr || !v->size)
            error("heap register: usage %u type %u desc size %zu", d->usage, d->type,
                  d->typeSpecificDescSize);
        else if ((r = calloc(1, sizeof *r))) {
            r->lo = (uint64_t)(uintptr_t)v->ptr;
            r->size = v->size;
            r->alive = 1;
            if (d->messageType == NVTX_MESSAGE_TYPE_ASCII && d->message.ascii)
                snprintf(r->name, sizeof r->name, "%s", d->message.ascii);
            for (heap_rec_t *o = g_heaps; o; o = o->next)
                if (o->alive && o->lo < r->lo + r->size && r->lo < o->lo + o->size)
                    error("heap register: [0x%llx, +%llu) overlaps a live heap",
                          (unsigned long long)r->lo, (unsigned long long)r->size);
            r->next = g_heaps;
            g_heaps = r;
            g_counts.heaps_registered++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return (nvtxMemHeapHandle_t)r;
}

static void region_drop(size_t i) {
    free(g_regions[i].name);
    memmove(&g_regions[i], &g_regions[i + 1], (g_nregions - i - 1) * sizeof *g_regions);
    g_nregions--;
}

static void heap_unregister(nvtxDomainHandle_t dom, nvtxMemHeapHandle_t h) {
    pthread_mutex_lock(&g_lock);
    heap_rec_t *r = heap_find(h);
    if (!domain_known(dom) || !r || !r->alive) {
        error("heap unregister: %s heap %p", r ? "dead" : "unknown", (void *)h);
    } else {
        r->alive = 0;
        for (size_t i = g_nregions; i-- > 0;) /* its regions go with it */
            if (g_regions[i].heap == r)
                region_drop(i);
    }
    pthread_mutex_unlock(&g_lock);
}

static void heap_reset(nvtxDomainHandle_t dom, nvtxMemHeapHandle_t h) {
    (void)dom;
    pthread_mutex_lock(&g_lock);
    for (size_t i = g_nregions; i-- > 0;)
        if (g_regions[i].heap == (heap_rec_t *)h)
            region_drop(i);
    pthread_mutex_unlock(&g_lock);
}

/* The index of the first region whose end is past lo. */
static size_t region_search(uint64_t lo) {
    size_t a = 0, b = g_nregions;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (g_regions[m].lo + g_regions[m].size <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

static void region_add(heap_rec_t *heap, uint64_t lo, uint64_t size) {
    if (!size || lo < heap->lo || lo + size > heap->lo + heap->size) {
        error("region register: [0x%llx, +%llu) is not inside its heap [0x%llx, +%llu)",
              (unsigned long long)lo, (unsigned long long)size,
              (unsigned long long)heap->lo, (unsigned long long)heap->size);
        return;
    }
    size_t i = region_search(lo);
    if (i < g_nregions && g_regions[i].lo < lo + size) {
        error("region register: [0x%llx, +%llu) overlaps [0x%llx, +%llu)",
              (unsigned long long)lo, (unsigned long long)size,
              (unsigned long long)g_regions[i].lo, (unsigned long long)g_regions[i].size);
        return;
    }
    if (g_nregions == g_capregions) {
        size_t cap = g_capregions ? 2 * g_capregions : 256;
        region_rec_t *r = realloc(g_regions, cap * sizeof *r);
        if (!r) {
            error("out of memory");
            return;
        }
        g_regions = r;
        g_capregions = cap;
    }
    memmove(&g_regions[i + 1], &g_regions[i], (g_nregions - i) * sizeof *g_regions);
    g_regions[i] = (region_rec_t){lo, size, heap, NULL};
    g_nregions++;
    g_counts.regions_registered++;
}

static void regions_register(nvtxDomainHandle_t dom, nvtxMemRegionsRegisterBatch_t const *d) {
    pthread_mutex_lock(&g_lock);
    heap_rec_t *heap = heap_find(d->heap);
    if (!domain_known(dom))
        error("region register: unknown domain");
    else if (!header_ok("region register", d->extCompatID, d->structSize, sizeof *d))
        ;
    else if (!heap || !heap->alive)
        error("region register: %s heap %p", heap ? "dead" : "unknown", (void *)d->heap);
    else if (d->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
             d->regionDescElementSize != sizeof(nvtxMemVirtualRangeDesc_t))
        error("region register: type %u element size %zu", d->regionType,
              d->regionDescElementSize);
    else
        for (size_t k = 0; k < d->regionCount; k++) {
            const nvtxMemVirtualRangeDesc_t *v =
                (const nvtxMemVirtualRangeDesc_t *)d->regionDescElements + k;
            region_add(heap, (uint64_t)(uintptr_t)v->ptr, v->size);
        }
    pthread_mutex_unlock(&g_lock);
}

/* The region that starts at p, or -1. */
static long region_at(const void *p) {
    uint64_t lo = (uint64_t)(uintptr_t)p;
    size_t i = region_search(lo);
    return i < g_nregions && g_regions[i].lo == lo ? (long)i : -1;
}

static void regions_resize(nvtxDomainHandle_t dom, nvtxMemRegionsResizeBatch_t const *d) {
    (void)dom;
    pthread_mutex_lock(&g_lock);
    error("regions resize: not expected from vramguard (%zu)", d->regionDescCount);
    pthread_mutex_unlock(&g_lock);
}

static void regions_unregister(nvtxDomainHandle_t dom,
                               nvtxMemRegionsUnregisterBatch_t const *d) {
    pthread_mutex_lock(&g_lock);
    if (!domain_known(dom))
        error("region unregister: unknown domain");
    else if (!header_ok("region unregister", d->extCompatID, d->structSize, sizeof *d))
        ;
    else if (d->refType != NVTX_MEM_REGION_REF_TYPE_POINTER ||
             d->refElementSize != sizeof(nvtxMemRegionRef_t))
        error("region unregister: ref type %u element size %zu", d->refType,
              d->refElementSize);
    else
        for (size_t k = 0; k < d->refCount; k++) {
            long i = region_at(d->refElements[k].pointer);
            if (i < 0)
                error("region unregister: no region at %p", d->refElements[k].pointer);
            else {
                region_drop((size_t)i);
                g_counts.regions_unregistered++;
            }
        }
    pthread_mutex_unlock(&g_lock);
}

static void regions_name(nvtxDomainHandle_t dom, nvtxMemRegionsNameBatch_t const *d) {
    pthread_mutex_lock(&g_lock);
    if (!domain_known(dom))
        error("region name: unknown domain");
    else if (!header_ok("region name", d->extCompatID, d->structSize, sizeof *d))
        ;
    else if (d->regionElementSize != sizeof(nvtxMemRegionNameDesc_t))
        error("region name: element size %zu", d->regionElementSize);
    else
        for (size_t k = 0; k < d->regionCount; k++) {
            const nvtxMemRegionNameDesc_t *e = &d->regionElements[k];
            long i = e->regionRefType == NVTX_MEM_REGION_REF_TYPE_POINTER
                         ? region_at(e->region.pointer)
                         : -1;
            if (i < 0 || e->nameType != NVTX_MESSAGE_TYPE_ASCII || !e->name.ascii ||
                !*e->name.ascii)
                error("region name: no region at %p, or no ASCII name",
                      e->region.pointer);
            else if (strlen(e->name.ascii) > 49) /* (compute-sanitizer 2025.3 refuses it) */
                error("region name: \"%s\" is longer than 49 characters", e->name.ascii);
            else {
                free(g_regions[i].name);
                g_regions[i].name = strdup(e->name.ascii);
                g_counts.names++;
            }
        }
    pthread_mutex_unlock(&g_lock);
}

EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
    if (failing("ext"))
        return 0;
    pthread_mutex_lock(&g_lock);
    int ok = info && info->structSize == sizeof *info && info->nvtxVer == NVTX_VERSION &&
             info->moduleId == NVTX_EXT_MODULEID_MEM &&
             info->compatId == NVTX_EXT_COMPATID_MEM && info->segmentsCount == 1 &&
             info->segments && info->segments[0].segmentId == 1 &&
             info->segments[0].slotCount > NVTX3EXT_CBID_nvtxMemRegionsName &&
             info->segments[0].functionSlots;
    if (!ok)
        error("extension init: bad module info (module %d, compat 0x%x, size %d)",
              info ? info->moduleId : -1, info ? info->compatId : 0,
              info ? info->structSize : 0);
    else
        g_counts.ext_clients++;
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return 0;
    intptr_t *s = info->segments[0].functionSlots;
    if (getenv("VGNVTX_NULL")) {
        s[NVTX3EXT_CBID_nvtxMemHeapRegister] = (intptr_t)null_heap_register;
        s[NVTX3EXT_CBID_nvtxMemHeapUnregister] = (intptr_t)null_heap;
        s[NVTX3EXT_CBID_nvtxMemRegionsRegister] = (intptr_t)null_register;
        s[NVTX3EXT_CBID_nvtxMemRegionsUnregister] = (intptr_t)null_unregister;
        s[NVTX3EXT_CBID_nvtxMemRegionsName] = (intptr_t)null_name;
        return 1;
    }
    s[NVTX3EXT_CBID_nvtxMemHeapRegister] = (intptr_t)heap_register;
    s[NVTX3EXT_CBID_nvtxMemHeapUnregister] = (intptr_t)heap_unregister;
    s[NVTX3EXT_CBID_nvtxMemHeapReset] = (intptr_t)heap_reset;
    s[NVTX3EXT_CBID_nvtxMemRegionsRegister] = (intptr_t)regions_register;
    s[NVTX3EXT_CBID_nvtxMemRegionsResize] = (intptr_t)regions_resize;
    s[NVTX3EXT_CBID_nvtxMemRegionsUnregister] = (intptr_t)regions_unregister;
    s[NVTX3EXT_CBID_nvtxMemRegionsName] = (intptr_t)regions_name;
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * What the tests read (vgnvtx.h)
 * ------------------------------------------------------------------------------------- */

EXPORT size_t vgnvtx_regions(vgnvtx_region_t *out, size_t max) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nregions && i < max; i++) {
        out[i] = (vgnvtx_region_t){g_regions[i].lo, g_regions[i].size, g_regions[i].heap->lo,
                                   g_regions[i].heap->size, ""};
        snprintf(out[i].name, sizeof out[i].name, "%s",
                 g_regions[i].name ? g_regions[i].name : "");
    }
    size_t n = g_nregions;
    pthread_mutex_unlock(&g_lock);
    return n;
}

static int heap_cmp(const void *a, const void *b) {
    uint64_t x = ((const vgnvtx_heap_t *)a)->lo, y = ((const vgnvtx_heap_t *)b)->lo;
    return x < y ? -1 : x > y;
}

EXPORT size_t vgnvtx_heaps(vgnvtx_heap_t *out, size_t max) {
    pthread_mutex_lock(&g_lock);
    size_t n = 0;
    for (heap_rec_t *r = g_heaps; r; r = r->next) {
        if (!r->alive)
            continue;
        if (n < max) {
            out[n] = (vgnvtx_heap_t){r->lo, r->size, ""};
            memcpy(out[n].name, r->name, sizeof out[n].name);
        }
        n++;
    }
    pthread_mutex_unlock(&g_lock);
    qsort(out, n < max ? n : max, sizeof *out, heap_cmp);
    return n;
}

EXPORT void vgnvtx_counts(vgnvtx_counts_t *out) {
    pthread_mutex_lock(&g_lock);
    *out = g_counts;
    pthread_mutex_unlock(&g_lock);
}

EXPORT void vgnvtx_errors(char *out, size_t n) {
    pthread_mutex_lock(&g_lock);
    snprintf(out, n, "%s", g_errors);
    pthread_mutex_unlock(&g_lock);
}
