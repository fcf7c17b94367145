/* memory.c — vgsim: device memory, virtual memory management, pinned host memory.
 *
 * Address space: each device's arena is carved into regions by a first-fit list of free
 * extents (page granularity for cuMemAlloc, 2 MiB for reservations). Regions sit in one
 * table sorted by address, so "which allocation holds this pointer" is a binary search.
 *
 * Physical memory: a sparse memfd per device with a bump pointer (offsets are never
 * reused; released ranges are hole-punched, which returns the RAM). The bytes counted
 * against the device are page-rounded cuMemAlloc sizes and cuMemCreate sizes.
 *
 * Reservations keep a page table (one slot per 2 MiB granule) pointing at mappings, so
 * map/unmap/access checks cost O(granules touched), whatever the reservation's size.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PHYS_SPACE (1ull << 46) /* size of each device's sparse memfd */

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* ---------------------------------------------------------------------------------------
 * Arena extents (lock held)
 * ------------------------------------------------------------------------------------- */

static bool extents_reserve(sim_device_t *d, size_t n) {
    if (d->nfree + n <= d->capfree)
        return true;
    size_t cap = d->capfree ? d->capfree * 2 : 64;
    while (cap < d->nfree + n)
        cap *= 2;
    sim_extent_t *p = realloc(d->free, cap * sizeof *p);
    if (!p)
        return false;
    d->free = p;
    d->capfree = cap;
    return true;
}

/* Take `size` bytes aligned to `align` (first fit), preferring `hint` if it is free. */
static uint64_t extent_take(sim_device_t *d, uint64_t size, uint64_t align, uint64_t hint) {
    if (!extents_reserve(d, 1))
        return 0;
    for (size_t i = 0; i < d->nfree; i++) {
        sim_extent_t *e = &d->free[i];
        uint64_t start = align_up(e->start, align);
        if (hint && hint >= e->start && hint + size <= e->end && (hint & (align - 1)) == 0)
            start = hint;
        else if (hint)
            continue;
        if (start + size > e->end || start + size < start)
            continue;
        uint64_t old_end = e->end;
        if (start == e->start && start + size == old_end) {
            memmove(e, e + 1, (d->nfree - i - 1) * sizeof *e);
            d->nfree--;
        } else if (start == e->start) {
            e->start += size;
        } else if (start + size == old_end) {
            e->end = start;
        } else {
            memmove(e + 2, e + 1, (d->nfree - i - 1) * sizeof *e);
            d->nfree++;
            e->end = start;
            e[1].start = start + size;
            e[1].end = old_end;
        }
        return start;
    }
    return hint ? extent_take(d, size, align, 0) : 0;
}

static void extent_give(sim_device_t *d, uint64_t start, uint64_t size) {
    uint64_t end = start + size;
    size_t lo = 0, hi = d->nfree;
    while (lo < hi) { /* first extent with start > our start */
        size_t mid = (lo + hi) / 2;
        if (d->free[mid].start > start)
            hi = mid;
        else
            lo = mid + 1;
    }
    bool join_prev = lo > 0 && d->free[lo - 1].end == start;
    bool join_next = lo < d->nfree && d->free[lo].start == end;
    if (join_prev && join_next) {
        d->free[lo - 1].end = d->free[lo].end;
        memmove(&d->free[lo], &d->free[lo + 1], (d->nfree - lo - 1) * sizeof d->free[0]);
        d->nfree--;
    } else if (join_prev) {
        d->free[lo - 1].end = end;
    } else if (join_next) {
        d->free[lo].start = start;
    } else if (extents_reserve(d, 1)) {
        memmove(&d->free[lo + 1], &d->free[lo], (d->nfree - lo) * sizeof d->free[0]);
        d->free[lo].start = start;
        d->free[lo].end = end;
        d->nfree++;
    } /* else: the range is lost to the arena, never reused; memory is still correct */
}

CUresult sim_memory_init_device(sim_device_t *d) {
    uint64_t arena = align_up(d->total * 8, VGSIM_GRANULE);
    if (arena < (64ull << 30))
        arena = 64ull << 30;
    /* Over-reserve by one granule so the arena can start on a granule boundary.
     * VGSIM_ARENA_AT=ADDR puts device 0's arena there (a GPU's addresses can lie low:
     * near 16 GiB on an H200, where two small integers read as one word are an address). */
    const char *at = d->ordinal == 0 ? getenv("VGSIM_ARENA_AT") : NULL;
    void *want = at ? (void *)(uintptr_t)strtoull(at, NULL, 0) : NULL;
    void *p = mmap(want, arena + VGSIM_GRANULE, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (want ? MAP_FIXED_NOREPLACE : 0),
                   -1, 0);
    if (p == MAP_FAILED || (want && p != want)) {
        if (want)
            fprintf(stderr, "vgsim: VGSIM_ARENA_AT=%s: cannot place device 0's memory there "
                    "(%s)\n", at, p == MAP_FAILED ? strerror(errno) : "the kernel put it elsewhere");
        if (p != MAP_FAILED)
            munmap(p, arena + VGSIM_GRANULE);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t base = align_up((uint64_t)(uintptr_t)p, VGSIM_GRANULE);
    char name[32];
    snprintf(name, sizeof name, "vgsim-device-%d", d->ordinal);
    d->memfd = memfd_create(name, MFD_CLOEXEC);
    if (d->memfd < 0 || ftruncate(d->memfd, (off_t)PHYS_SPACE) != 0) {
        munmap(p, arena + VGSIM_GRANULE);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    d->arena = (char *)(uintptr_t)base;
    d->arena_size = arena;
    d->phys_next = 0;
    d->nfree = 0;
    /* Leave the first granule unused so that no device address is the arena base. */
    if (!extents_reserve(d, 1))
        return CUDA_ERROR_OUT_OF_MEMORY;
    d->free[0].start = base + VGSIM_GRANULE;
    d->free[0].end = base + arena;
    d->nfree = 1;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------
 * Physical memory (lock held)
 * ------------------------------------------------------------------------------------- */

static CUresult phys_take(sim_device_t *d, uint64_t size, uint64_t align, uint64_t *off) {
    if (atomic_load(&d->used) + size > d->total)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t o = align_up(d->phys_next, align);
    if (o + size > PHYS_SPACE)
        return CUDA_ERROR_OUT_OF_MEMORY;
    d->phys_next = o + size;
    atomic_fetch_add(&d->used, size);
    *off = o;
    return CUDA_SUCCESS;
}

static void phys_give(sim_device_t *d, uint64_t off, uint64_t size) {
    fallocate(d->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)size);
    atomic_fetch_sub(&d->used, size);
}

static bool map_phys(sim_device_t *d, uint64_t va, uint64_t size, uint64_t off, int prot) {
    void *p = mmap((void *)(uintptr_t)va, size, prot, MAP_SHARED | MAP_FIXED, d->memfd,
                   (off_t)off);
    return p != MAP_FAILED;
}

static void unmap_to_reserved(uint64_t va, uint64_t size) {
    mmap((void *)(uintptr_t)va, size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

/* ---------------------------------------------------------------------------------------
 * The region table (lock held)
 * ------------------------------------------------------------------------------------- */

static size_t region_lower_bound(uint64_t addr) { /* first region with base > addr */
    size_t lo = 0, hi = g_sim.nregions;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_sim.regions[mid]->base > addr)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

sim_region_t *sim_region_find(uint64_t addr) {
    size_t i = region_lower_bound(addr);
    if (i == 0)
        return NULL;
    sim_region_t *r = g_sim.regions[i - 1];
    return addr < r->base + r->size ? r : NULL;
}

static bool region_insert(sim_region_t *r) {
    if (g_sim.nregions == g_sim.capregions) {
        size_t cap = g_sim.capregions ? g_sim.capregions * 2 : 256;
        sim_region_t **p = realloc(g_sim.regions, cap * sizeof *p);
        if (!p)
            return false;
        g_sim.regions = p;
        g_sim.capregions = cap;
    }
    size_t i = region_lower_bound(r->base);
    memmove(&g_sim.regions[i + 1], &g_sim.regions[i],
            (g_sim.nregions - i) * sizeof g_sim.regions[0]);
    g_sim.regions[i] = r;
    g_sim.nregions++;
    return true;
}

static void region_remove(sim_region_t *r) {
    size_t i = region_lower_bound(r->base);
    if (i == 0 || g_sim.regions[i - 1] != r)
        return;
    memmove(&g_sim.regions[i - 1], &g_sim.regions[i],
            (g_sim.nregions - i) * sizeof g_sim.regions[0]);
    g_sim.nregions--;
}

static bool range_accessible_locked(uint64_t addr, size_t n) {
    sim_region_t *r = sim_region_find(addr);
    if (!r || n == 0)
        return r != NULL;
    if (addr + n < addr || addr + n > r->base + r->size)
        return false;
    if (r->kind == REGION_ALLOC) /* (its bytes as asked for, not its rounding: the H200,
                                   conformance:copies_and_memsets_past_an_allocation) */
        return addr + n <= r->base + r->user_size;
    for (uint64_t g = (addr - r->base) / VGSIM_GRANULE;
         g <= (addr + n - 1 - r->base) / VGSIM_GRANULE; g++) {
        sim_mapping_t *m = r->pages[g];
        if (!m || m->prot == PROT_NONE)
            return false;
    }
    return true;
}

bool sim_device_range_ok(uint64_t addr, size_t n) {
    pthread_mutex_lock(&g_sim.lock);
    bool ok = range_accessible_locked(addr, n);
    pthread_mutex_unlock(&g_sim.lock);
    return ok;
}

static sim_device_t *arena_device(uint64_t addr) {
    for (int i = 0; i < g_sim.ndevices; i++) {
        uint64_t b = (uint64_t)(uintptr_t)g_sim.devices[i].arena;
        if (addr >= b && addr < b + g_sim.devices[i].arena_size)
            return &g_sim.devices[i];
    }
    return NULL;
}

bool sim_is_device_addr(uint64_t addr) { return arena_device(addr) != NULL; }

/* The VMM mapping at addr, or NULL (not reserved memory, or a hole); *reg gets the region
 * holding addr, if any. Lock held. */
static sim_mapping_t *mapping_at(uint64_t addr, sim_region_t **reg) {
    *reg = sim_region_find(addr);
    return *reg && (*reg)->kind == REGION_RESERVE
               ? (*reg)->pages[(addr - (*reg)->base) / VGSIM_GRANULE] : NULL;
}

sim_device_t *sim_memory_device(uint64_t addr) {
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *r;
    sim_mapping_t *m = mapping_at(addr, &r);
    sim_device_t *d = m ? m->handle->dev : r && r->kind == REGION_ALLOC ? r->dev : NULL;
    pthread_mutex_unlock(&g_sim.lock);
    return d;
}

/* ---------------------------------------------------------------------------------------
 * cuMemAlloc / cuMemFree and queries
 * ------------------------------------------------------------------------------------- */

static CUresult mem_alloc(sim_device_t *d, size_t size, sim_ctx_t *owner, struct sim_pool *pool,
                          CUdeviceptr *out) {
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t bytes = align_up(size, VGSIM_PAGE);
    if (bytes < size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_region_t *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_sim.lock);
    uint64_t off = 0, va = 0;
    CUresult res = pool && !sim_pool_take(pool, bytes) ? CUDA_ERROR_OUT_OF_MEMORY
                                                       : phys_take(d, bytes, VGSIM_PAGE, &off);
    bool counted = pool && res == CUDA_SUCCESS;
    if (res == CUDA_SUCCESS) {
        va = extent_take(d, bytes, VGSIM_PAGE, 0);
        if (!va) {
            phys_give(d, off, bytes);
            res = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (res == CUDA_SUCCESS && !map_phys(d, va, bytes, off, PROT_READ | PROT_WRITE)) {
        extent_give(d, va, bytes);
        phys_give(d, off, bytes);
        res = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (res == CUDA_SUCCESS) {
        *r = (sim_region_t){.base = va, .size = bytes, .kind = REGION_ALLOC, .dev = d,
                            .user_size = size, .phys_off = off, .owner = owner, .pool = pool,
                            .managed = pool && sim_pool_managed(pool)};
        if (!region_insert(r)) {
            unmap_to_reserved(va, bytes);
            extent_give(d, va, bytes);
            phys_give(d, off, bytes);
            res = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (counted && res != CUDA_SUCCESS)
        sim_pool_give(pool, bytes);
    pthread_mutex_unlock(&g_sim.lock);
    if (res != CUDA_SUCCESS) {
        free(r);
        return res;
    }
    *out = va;
    return CUDA_SUCCESS;
}

CUresult sim_mem_alloc(sim_ctx_t *c, CUdeviceptr *dptr, size_t bytesize, bool owned) {
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    return mem_alloc(c->dev, bytesize, owned ? c : NULL, NULL, dptr);
}

CUresult sim_mem_alloc_pool(sim_device_t *d, struct sim_pool *pool, CUdeviceptr *dptr,
                            size_t bytesize) {
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    return mem_alloc(d, bytesize, NULL, pool, dptr);
}

VGSIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    SIM_UNSAFE_DURING_CAPTURE();
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    return sim_mem_alloc(c, dptr, bytesize, true);
}

VGSIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                      size_t height, unsigned int elemsize) {
    SIM_UNSAFE_DURING_CAPTURE();
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || !pitch || width == 0 || height == 0 ||
        (elemsize != 4 && elemsize != 8 && elemsize != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (size_t)align_up(width, 512);
    if (height > SIZE_MAX / p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = mem_alloc(c->dev, p * height, c, NULL, dptr);
    if (r == CUDA_SUCCESS)
        *pitch = p;
    return r;
}

/* Give back an ALLOC region's memory and address range (g_sim.lock held). */
static void region_release_locked(sim_region_t *r) {
    if (r->pool)
        sim_pool_give(r->pool, r->size);
    region_remove(r);
    unmap_to_reserved(r->base, r->size);
    phys_give(r->dev, r->phys_off, r->size);
    extent_give(r->dev, r->base, r->size);
}

/* Release a cuMemAlloc region; the caller has synchronised. */
CUresult sim_free_device_ptr(CUdeviceptr p) {
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *r = sim_region_find(p);
    if (!r || r->kind != REGION_ALLOC || r->base != p) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    region_release_locked(r);
    pthread_mutex_unlock(&g_sim.lock);
    free(r);
    return CUDA_SUCCESS;
}

void sim_free_ctx_memory(sim_ctx_t *c) {
    pthread_mutex_lock(&g_sim.lock);
    for (size_t i = g_sim.nregions; i-- > 0;) {
        sim_region_t *r = g_sim.regions[i];
        if (r->kind == REGION_ALLOC && r->owner == c) {
            region_release_locked(r);
            free(r);
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
}

VGSIM_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
    SIM_UNSAFE_DURING_CAPTURE();
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    /* cuMemFree does not return before work that may use the memory has finished. */
    r = sim_ctx_synchronize(c);
    if (r != CUDA_SUCCESS)
        return r;
    return sim_free_device_ptr(dptr);
}

VGSIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t used = atomic_load(&c->dev->used);
    *total = c->dev->total;
    *free_bytes = used >= c->dev->total ? 0 : c->dev->total - used;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg = sim_region_find(dptr);
    uint64_t base = 0, size = 0;
    if (reg && reg->kind == REGION_ALLOC && dptr < reg->base + reg->user_size) {
        base = reg->base;
        size = reg->user_size;
    } else if (reg && reg->kind == REGION_RESERVE) {
        sim_mapping_t *m = reg->pages[(dptr - reg->base) / VGSIM_GRANULE];
        if (m) {
            base = m->va;
            size = m->size;
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (!size)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                                         CUdeviceptr ptr) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg = sim_region_find(ptr);
    sim_pinned_t *pin = reg ? NULL : sim_pinned_find((void *)(uintptr_t)ptr);
    int ordinal = reg ? reg->dev->ordinal : 0;
    CUmemoryPool pool = reg ? (CUmemoryPool)reg->pool : NULL;
    bool managed = reg && reg->managed;
    pthread_mutex_unlock(&g_sim.lock);
    if (!reg && !pin)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr base = 0;
    size_t size = 0;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = reg ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = (void *)(uintptr_t)ptr; /* unified addressing */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = ordinal;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = 1;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned *)data = managed;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)sim_current_ctx();
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: /* (NULL: not from a pool) */
        *(CUmemoryPool *)data = pool;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        if (pin) {
            base = (CUdeviceptr)(uintptr_t)pin->base;
            size = pin->size;
        } else if (cuMemGetAddressRange_v2(&base, &size, ptr) != CUDA_SUCCESS) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *(CUdeviceptr *)data = base;
        else
            *(size_t *)data = size;
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Not a CUDA pointer: every attribute reads as zero, and the call still succeeds. */
VGSIM_API CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attributes,
                                          void **data, CUdeviceptr ptr) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if (!data[i])
            continue;
        r = cuPointerGetAttribute(data[i], attributes[i], ptr);
        if (r == CUDA_ERROR_INVALID_VALUE) /* (pointer sizes of the attributes used here) */
            memset(data[i], 0, attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE ||
                                       attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ||
                                       attributes[i] == CU_POINTER_ATTRIBUTE_MAPPED ||
                                       attributes[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED
                                   ? sizeof(int)
                                   : sizeof(void *));
    }
    return CUDA_SUCCESS;
}

/* Processes do not share vgsim's memory. */
VGSIM_API CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    (void)dptr;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return handle ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------------------------------
 * Virtual memory management
 * ------------------------------------------------------------------------------------- */

static CUresult vmm_check(void) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return g_sim.vmm ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

VGSIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                                 const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option) {
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    (void)option;
    if (!granularity || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id >= g_sim.ndevices)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = VGSIM_GRANULE;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags) {
    SIM_UNSAFE_DURING_CAPTURE();
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ptr || size == 0 || size % VGSIM_GRANULE || flags != 0 ||
        (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t align = alignment > VGSIM_GRANULE ? alignment : VGSIM_GRANULE;
    /* Reservations are per process on a GPU; vgsim takes them from device 0's arena. */
    sim_device_t *d = &g_sim.devices[0];
    size_t ngran = size / VGSIM_GRANULE;
    sim_region_t *reg = calloc(1, sizeof *reg);
    sim_mapping_t **pages = calloc(ngran, sizeof *pages);
    if (!reg || !pages) {
        free(reg);
        free(pages);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&g_sim.lock);
    uint64_t va = extent_take(d, size, align, addr);
    if (va) {
        *reg = (sim_region_t){.base = va, .size = size, .kind = REGION_RESERVE, .dev = d,
                              .pages = pages};
        if (!region_insert(reg)) {
            extent_give(d, va, size);
            va = 0;
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (!va) {
        free(reg);
        free(pages);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = va;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    SIM_UNSAFE_DURING_CAPTURE();
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg = sim_region_find(ptr);
    if (!reg || reg->kind != REGION_RESERVE || reg->base != ptr || reg->size != size) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t g = 0; g < size / VGSIM_GRANULE; g++) {
        if (reg->pages[g]) { /* still mapped */
            pthread_mutex_unlock(&g_sim.lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    region_remove(reg);
    extent_give(reg->dev, reg->base, reg->size);
    pthread_mutex_unlock(&g_sim.lock);
    free(reg->pages);
    free(reg);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
    SIM_UNSAFE_DURING_CAPTURE();
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle || !prop || size == 0 || size % VGSIM_GRANULE || flags != 0 ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= g_sim.ndevices)
        return CUDA_ERROR_INVALID_VALUE;
    sim_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_device_t *d = &g_sim.devices[prop->location.id];
    pthread_mutex_lock(&g_sim.lock);
    r = phys_take(d, size, VGSIM_GRANULE, &h->phys_off);
    pthread_mutex_unlock(&g_sim.lock);
    if (r != CUDA_SUCCESS) {
        free(h);
        return r;
    }
    h->dev = d;
    h->size = size;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

static void handle_maybe_free(sim_handle_t *h) { /* lock held */
    if (h->released && h->maps == 0) {
        phys_give(h->dev, h->phys_off, h->size);
        free(h);
    }
}

VGSIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    SIM_UNSAFE_DURING_CAPTURE();
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    sim_handle_t *h = (sim_handle_t *)(uintptr_t)handle;
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    if (h->released) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    h->released = true; /* freed now, or when its last mapping goes */
    handle_maybe_free(h);
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
    SIM_UNSAFE_DURING_CAPTURE();
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    sim_handle_t *h = (sim_handle_t *)(uintptr_t)handle;
    /* cuda.h: "offset ... currently must be zero". */
    if (!h || size == 0 || flags != 0 || ptr % VGSIM_GRANULE || size % VGSIM_GRANULE ||
        offset != 0 || size > h->size)
        return CUDA_ERROR_INVALID_VALUE;
    sim_mapping_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg = sim_region_find(ptr);
    if (h->released || !reg || reg->kind != REGION_RESERVE || ptr + size > reg->base + reg->size) {
        pthread_mutex_unlock(&g_sim.lock);
        free(m);
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t g0 = (ptr - reg->base) / VGSIM_GRANULE, n = size / VGSIM_GRANULE;
    for (size_t g = g0; g < g0 + n; g++) {
        if (reg->pages[g]) { /* "only ... on VA ranges that are not currently mapped";
                              * driver 580 answers CUDA_ERROR_NOT_SUPPORTED */
            pthread_mutex_unlock(&g_sim.lock);
            free(m);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if (!map_phys(h->dev, ptr, size, h->phys_off + offset, PROT_NONE)) {
        pthread_mutex_unlock(&g_sim.lock);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *m = (sim_mapping_t){.va = ptr, .size = size, .offset = offset, .handle = h,
                         .prot = PROT_NONE};
    for (size_t g = g0; g < g0 + n; g++)
        reg->pages[g] = m;
    h->maps++;
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    SIM_UNSAFE_DURING_CAPTURE();
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    if (size == 0 || ptr % VGSIM_GRANULE || size % VGSIM_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg = sim_region_find(ptr);
    if (!reg || reg->kind != REGION_RESERVE || ptr + size > reg->base + reg->size) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t g0 = (ptr - reg->base) / VGSIM_GRANULE, n = size / VGSIM_GRANULE;
    /* The range must consist of whole mappings. */
    for (size_t g = g0; g < g0 + n; g++) {
        sim_mapping_t *m = reg->pages[g];
        if (!m || m->va < ptr || m->va + m->size > ptr + size) {
            pthread_mutex_unlock(&g_sim.lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    unmap_to_reserved(ptr, size);
    for (size_t g = g0; g < g0 + n;) {
        sim_mapping_t *m = reg->pages[g];
        size_t mg = m->size / VGSIM_GRANULE;
        for (size_t k = 0; k < mg; k++)
            reg->pages[g + k] = NULL;
        g += mg;
        m->handle->maps--;
        handle_maybe_free(m->handle);
        free(m);
    }
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                  size_t count) {
    SIM_UNSAFE_DURING_CAPTURE();
    CUresult r = vmm_check();
    if (r != CUDA_SUCCESS)
        return r;
    if (!desc || count == 0 || size == 0 || ptr % VGSIM_GRANULE || size % VGSIM_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    unsigned devices = 0;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
            desc[i].location.id >= g_sim.ndevices)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            devices |= 1u << desc[i].location.id;
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            prot = PROT_READ | PROT_WRITE;
        else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
            prot = PROT_READ;
        else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
                 desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg = sim_region_find(ptr);
    if (!reg || reg->kind != REGION_RESERVE || ptr + size > reg->base + reg->size) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t g0 = (ptr - reg->base) / VGSIM_GRANULE, n = size / VGSIM_GRANULE;
    for (size_t g = g0; g < g0 + n; g++) {
        if (!reg->pages[g]) {
            pthread_mutex_unlock(&g_sim.lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
        unsigned peers = devices & ~(1u << reg->pages[g]->handle->dev->ordinal);
        if (peers && !g_sim.p2p) { /* (a device that cannot reach the memory's) */
            pthread_mutex_unlock(&g_sim.lock);
            return CUDA_ERROR_INVALID_DEVICE;
        }
    }
    if (mprotect((void *)(uintptr_t)ptr, size, prot) != 0) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t g = g0; g < g0 + n; g++) {
        reg->pages[g]->prot = prot;
        reg->pages[g]->devices = devices;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

VGSIM_API unsigned vgsim_access_devices(unsigned long long p) {
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg;
    sim_mapping_t *m = mapping_at(p, &reg);
    unsigned devices = m ? m->devices : 0;
    pthread_mutex_unlock(&g_sim.lock);
    return devices;
}

bool sim_reaches(uint64_t addr, const sim_device_t *d) {
    pthread_mutex_lock(&g_sim.lock);
    sim_region_t *reg;
    sim_mapping_t *m = mapping_at(addr, &reg);
    bool ok = !m || (m->devices & (1u << d->ordinal));
    pthread_mutex_unlock(&g_sim.lock);
    return ok;
}

/* ---------------------------------------------------------------------------------------
 * Pinned host memory
 * ------------------------------------------------------------------------------------- */

static size_t pinned_lower_bound(const char *p) { /* first entry with base > p */
    size_t lo = 0, hi = g_sim.npinned;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_sim.pinned[mid].base > p)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

sim_pinned_t *sim_pinned_find(const void *p) {
    size_t i = pinned_lower_bound(p);
    if (i == 0)
        return NULL;
    sim_pinned_t *e = &g_sim.pinned[i - 1];
    return (const char *)p < e->base + e->size ? e : NULL;
}

bool sim_is_pinned(const void *p, size_t n) {
    pthread_mutex_lock(&g_sim.lock);
    sim_pinned_t *e = sim_pinned_find(p);
    bool ok = e && (const char *)p + n <= e->base + e->size;
    pthread_mutex_unlock(&g_sim.lock);
    return ok;
}

static bool ranges_overlap_pinned(const char *p, size_t n) {
    size_t i = pinned_lower_bound(p + n - 1);
    return i > 0 && g_sim.pinned[i - 1].base + g_sim.pinned[i - 1].size > p;
}

static CUresult pinned_insert(sim_pinned_t e) { /* lock held */
    if (ranges_overlap_pinned(e.base, e.size))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (g_sim.npinned == g_sim.cappinned) {
        size_t cap = g_sim.cappinned ? g_sim.cappinned * 2 : 64;
        sim_pinned_t *p = realloc(g_sim.pinned, cap * sizeof *p);
        if (!p)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g_sim.pinned = p;
        g_sim.cappinned = cap;
    }
    size_t i = pinned_lower_bound(e.base);
    memmove(&g_sim.pinned[i + 1], &g_sim.pinned[i], (g_sim.npinned - i) * sizeof e);
    g_sim.pinned[i] = e;
    g_sim.npinned++;
    return CUDA_SUCCESS;
}

static bool pinned_remove(const void *base, int kind, sim_pinned_t *out) { /* lock held */
    sim_pinned_t *e = sim_pinned_find(base);
    if (!e || e->base != base || e->kind != kind)
        return false;
    *out = *e;
    size_t i = (size_t)(e - g_sim.pinned);
    memmove(e, e + 1, (g_sim.npinned - i - 1) * sizeof *e);
    g_sim.npinned--;
    return true;
}

VGSIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pp || bytesize == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = (size_t)align_up(bytesize, VGSIM_PAGE);
    /* Two views of the same pages: the program's, and the copy engine's alias, so that
     * copies still work while a race detector has protected the program's view. */
    int fd = memfd_create("vgsim-pinned", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *user = MAP_FAILED, *alias = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0) {
        user = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (user == MAP_FAILED || alias == MAP_FAILED) {
        if (user != MAP_FAILED)
            munmap(user, size);
        if (alias != MAP_FAILED)
            munmap(alias, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&g_sim.lock);
    r = pinned_insert((sim_pinned_t){.base = user, .size = size, .alias = alias,
                                     .kind = PINNED_HOSTALLOC});
    pthread_mutex_unlock(&g_sim.lock);
    if (r != CUDA_SUCCESS) {
        munmap(user, size);
        munmap(alias, size);
        return r;
    }
    *pp = user;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
    return cuMemHostAlloc(pp, bytesize, 0);
}

VGSIM_API CUresult cuMemFreeHost(void *p) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    /* Like cuMemFree, wait for work that may still read or write the buffer. */
    r = sim_ctx_synchronize(c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_pinned_t e;
    pthread_mutex_lock(&g_sim.lock);
    bool found = pinned_remove(p, PINNED_HOSTALLOC, &e);
    pthread_mutex_unlock(&g_sim.lock);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;
    munmap(e.base, e.size);
    munmap(e.alias, e.size);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!p || bytesize == 0 || (flags & ~0xfu))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    if (g_sim.procmem_fd < 0)
        g_sim.procmem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    r = pinned_insert((sim_pinned_t){.base = p, .size = bytesize, .kind = PINNED_REGISTERED});
    pthread_mutex_unlock(&g_sim.lock);
    return r;
}

VGSIM_API CUresult cuMemHostUnregister(void *p) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    r = sim_ctx_synchronize(c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_pinned_t e;
    pthread_mutex_lock(&g_sim.lock);
    bool found = pinned_remove(p, PINNED_REGISTERED, &e);
    pthread_mutex_unlock(&g_sim.lock);
    return found ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

VGSIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pdptr || flags != 0 || !sim_is_pinned(p, 1))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------
 * The copy engine's view of host memory
 * ------------------------------------------------------------------------------------- */

/* Translate a host pointer to the address the copy engine should use, and say whether
 * it lies in registered memory (which has no alias). */
static char *engine_view(const void *p, size_t n, bool *registered) {
    *registered = false;
    pthread_mutex_lock(&g_sim.lock);
    sim_pinned_t *e = sim_pinned_find(p);
    char *out = (char *)p;
    if (e && (const char *)p + n <= e->base + e->size) {
        if (e->kind == PINNED_HOSTALLOC)
            out = e->alias + ((const char *)p - e->base);
        else
            *registered = g_sim.procmem_fd >= 0;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return out;
}

static bool procmem_io(bool write_it, void *host, void *buf, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = write_it ? pwrite(g_sim.procmem_fd, (char *)buf + done, n - done,
                                      (off_t)(uintptr_t)host + (off_t)done)
                             : pread(g_sim.procmem_fd, (char *)buf + done, n - done,
                                     (off_t)(uintptr_t)host + (off_t)done);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return false;
        }
        done += (size_t)k;
    }
    return true;
}

void sim_host_copy(void *dst, const void *src, size_t n) {
    bool dst_dev = sim_is_device_addr((uint64_t)(uintptr_t)dst);
    bool src_dev = sim_is_device_addr((uint64_t)(uintptr_t)src);
    bool reg_dst = false, reg_src = false;
    char *d = dst_dev ? dst : engine_view(dst, n, &reg_dst);
    const char *s = src_dev ? src : engine_view(src, n, &reg_src);
    if (reg_dst && !dst_dev && procmem_io(true, d, (void *)s, n))
        return;
    if (reg_src && !src_dev && procmem_io(false, (void *)s, d, n))
        return;
    memmove(d, s, n);
}
