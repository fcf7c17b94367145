/* hooks_pool.c — stream-ordered allocation: cuMemAllocAsync, and memory pools
 * (cuMemAllocFromPoolAsync and the calls that name, make, query and trim pools).
 *
 * vramguard stands in for a pool when what the program can do with the pool's memory is
 * what it can do with vramguard's: a device pool of device memory (not managed memory,
 * which the host reaches too) with no handle types (the device's default pool is one)
 * and no special usage. Its allocations come from vramguard's
 * allocator (guarded in guard mode) and its figures (used and reserved bytes, their high
 * watermarks) count them; a pool's maxSize still bounds it. Any other pool — made for
 * sharing with other processes, a host or NUMA pool, one made before vramguard could
 * see it, a pool of another device than the current context's — keeps the driver's
 * allocations, and cuMemAllocAsync goes to the driver while such a pool is its device's
 * current pool. docs/decisions.md A12.
 *
 * Bookkeeping costs a program nothing until it names a pool (asks for a handle, makes
 * one): from then on each allocation made for a pool is remembered until it is freed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/common.h"
#include "alloc/heap.h"
#include "diag/order.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

enum { MAX_POOLS = 256, MAX_DEVICES = 64, NBUCKETS = 4096 };

typedef struct pool {
    CUmemoryPool handle;
    int device;          /* its location's device (-1: not a device pool) */
    bool ours;           /* vramguard stands in for it */
    bool dead;           /* destroyed (its slot stays: memory from it may still be out) */
    uint64_t max_size;   /* 0: no bound */
    uint64_t used, used_high;
} pool_t;

/* An allocation vramguard made for a pool, until it is freed. */
typedef struct out {
    CUdeviceptr ptr;
    uint64_t bytes;
    pool_t *pool;
    struct out *next;
} out_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_t g_pools[MAX_POOLS];
static int g_npools;
static pool_t *g_default[MAX_DEVICES]; /* each device's default pool, once named */
static pool_t *g_current[MAX_DEVICES]; /* cuDeviceSetMemPool's pool (NULL: the default) */
static pool_t g_unknown;               /* a current pool vramguard never saw made (not ours) */
static out_t *g_out[NBUCKETS], *g_spare;
static atomic_bool g_named;            /* the program has named a pool */
static atomic_size_t g_nout;           /* entries in g_out */

/* The pool of a handle (lock held), or NULL. */
static pool_t *pool_of(CUmemoryPool h) {
    for (int i = g_npools - 1; i >= 0; i--) /* (the newest first: a handle may be reused) */
        if (g_pools[i].handle == h && !g_pools[i].dead)
            return &g_pools[i];
    return NULL;
}

/* Remember pool h (lock held). A handle seen again keeps its record. */
static pool_t *pool_add(CUmemoryPool h, int device, bool ours, uint64_t max_size) {
    pool_t *p = pool_of(h);
    if (p || !h)
        return p;
    atomic_store(&g_named, true);
    for (int i = 0; i < g_npools && g_npools == MAX_POOLS && !p; i++)
        if (g_pools[i].dead && g_pools[i].used == 0) /* (nothing out refers to it) */
            p = &g_pools[i];
    if (!p && g_npools == MAX_POOLS)
        return NULL; /* (then it is not ours: passed through) */
    if (!p)
        p = &g_pools[g_npools++];
    *p = (pool_t){.handle = h, .device = device, .ours = ours, .max_size = max_size};
    return p;
}

static int current_device(void) {
    CUdevice d = -1;
    return vg__cuCtxGetDevice(&d) == CUDA_SUCCESS ? d : -1;
}

static size_t bucket(CUdeviceptr p) { return (size_t)((p >> 9) * 0x9E3779B97F4A7C15ull >> 52); }

static void remember(CUdeviceptr ptr, uint64_t bytes, pool_t *p) { /* lock held */
    out_t *o = g_spare;
    if (o)
        g_spare = o->next;
    else if (!(o = malloc(sizeof *o)))
        return; /* (the pool's figures then miss it; the allocation itself is fine) */
    *o = (out_t){.ptr = ptr, .bytes = bytes, .pool = p, .next = g_out[bucket(ptr)]};
    g_out[bucket(ptr)] = o;
    atomic_fetch_add(&g_nout, 1);
    p->used += bytes;
    p->used_high = VG_MAX(p->used_high, p->used);
}

void vgp_pool_forget(CUdeviceptr ptr) {
    if (atomic_load_explicit(&g_nout, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&g_lock);
    for (out_t **link = &g_out[bucket(ptr)]; *link; link = &(*link)->next) {
        out_t *o = *link;
        if (o->ptr != ptr)
            continue;
        o->pool->used -= o->bytes;
        *link = o->next;
        o->next = g_spare;
        g_spare = o;
        atomic_fetch_sub(&g_nout, 1);
        break;
    }
    pthread_mutex_unlock(&g_lock);
}

/* Is some device's current pool one vramguard does not stand in for? (lock held) */
static bool foreign_current(void) {
    for (int d = 0; d < MAX_DEVICES; d++)
        if (g_current[d] && !g_current[d]->ours)
            return true;
    return false;
}

/* The pool a cuMemAllocFromPoolAsync (h) or cuMemAllocAsync (h NULL: the current
 * device's current pool) allocates from, if vramguard stands in for it: *pool is then that
 * pool, or NULL when the program never named the device's default pool (nothing to
 * count). False: the driver's. */
static bool stand_in(CUmemoryPool h, pool_t **pool) {
    *pool = NULL;
    if (!h && !atomic_load_explicit(&g_named, memory_order_relaxed))
        return true; /* (the usual case: cuMemAllocAsync in a program that names no pool) */
    int dev = current_device();
    pthread_mutex_lock(&g_lock);
    bool ours;
    if (h) {
        pool_t *p = pool_of(h);
        ours = p && p->ours && p->device == dev;
        *pool = ours ? p : NULL;
    } else if (dev < 0 || dev >= MAX_DEVICES) {
        ours = !foreign_current();
    } else if (g_current[dev]) {
        ours = g_current[dev]->ours;
        *pool = ours ? g_current[dev] : NULL;
    } else { /* the default pool: counted if the program has named it */
        ours = true;
        *pool = g_default[dev];
    }
    pthread_mutex_unlock(&g_lock);
    return ours;
}

/* ---------------------------------------------------------------------------------------
 * Allocation
 * ------------------------------------------------------------------------------------- */

static CUresult alloc_for(CUdeviceptr *dptr, size_t bytesize, pool_t *pool, CUstream stream) {
    if (vgp_sticky())
        return vgp_sticky();
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (pool && pool->max_size) { /* (an estimate: the driver counts its own granules) */
        pthread_mutex_lock(&g_lock);
        uint64_t used = pool->used;
        pthread_mutex_unlock(&g_lock);
        if (bytesize > pool->max_size - VG_MIN(used, pool->max_size)) {
            char a[32], b[32], c[32];
            vg__log("out of memory: %s from memory pool %p would take it past its maxSize of "
                    "%s (%s of it in use); the allocation fails with CUDA_ERROR_OUT_OF_MEMORY, "
                    "as the driver's would",
                    vg__fmt_bytes(a, bytesize), (void *)pool->handle,
                    vg__fmt_bytes(b, pool->max_size), vg__fmt_bytes(c, used));
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    void *p = NULL;
    vg_status_t st = vg_malloc(&p, bytesize, stream);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    if (st == VG_OK && pool) {
        pthread_mutex_lock(&g_lock);
        remember(*dptr, bytesize, pool);
        pthread_mutex_unlock(&g_lock);
    }
    return vgp_alloc_result(st);
}

/* In a stream being captured, cuMemAllocAsync and cuMemFreeAsync make the graph's memory
 * nodes, which the graph allocates and frees at every replay: the driver's, not vramguard's
 * (docs/decisions.md A7). */
VG_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    pool_t *pool;
    if (!vgp_ready() || vg__stream_capturing(hStream) || !stand_in(NULL, &pool))
        NEXT(cuMemAllocAsync, dptr, bytesize, hStream);
    return alloc_for(dptr, bytesize, pool, hStream);
}

VG_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return cuMemAllocAsync(dptr, bytesize, VGP_PT(hStream));
}

VG_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream) {
    pool_t *p;
    if (!vgp_ready() || vg__stream_capturing(hStream) || !pool || !stand_in(pool, &p))
        NEXT(cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream);
    return alloc_for(dptr, bytesize, p, hStream);
}

VG_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                             CUmemoryPool pool, CUstream hStream) {
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, VGP_PT(hStream));
}

/* ---------------------------------------------------------------------------------------
 * Naming, making and choosing pools: remembered
 * ------------------------------------------------------------------------------------- */

/* A device's default pool was named (`current`: its current pool was asked for, which is
 * the default one unless the program set another): a device pool without handle types. */
static void seen_default(CUresult r, CUmemoryPool *pool, int device, bool current) {
    if (r != CUDA_SUCCESS || !pool || !vgp_ready() || device < 0 || device >= MAX_DEVICES)
        return;
    pthread_mutex_lock(&g_lock);
    if (!current || !g_current[device]) {
        pool_t *p = pool_add(*pool, device, true, 0);
        if (p)
            g_default[device] = p;
    }
    pthread_mutex_unlock(&g_lock);
}

static void set_current(CUresult r, int device, CUmemoryPool h) {
    if (r != CUDA_SUCCESS || !vgp_ready() || device < 0 || device >= MAX_DEVICES)
        return;
    pthread_mutex_lock(&g_lock);
    atomic_store(&g_named, true);
    pool_t *p = pool_of(h);
    g_current[device] = !p ? &g_unknown : p == g_default[device] ? NULL : p;
    pthread_mutex_unlock(&g_lock);
}

static int location_device(const CUmemLocation *loc) {
    return loc && loc->type == CU_MEM_LOCATION_TYPE_DEVICE ? loc->id : -1;
}

VG_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    CUresult r;
    CALL_NEXT(r, cuDeviceGetDefaultMemPool, pool, dev);
    seen_default(r, pool, dev, false);
    return r;
}

VG_API CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                       CUmemAllocationType type) {
    CUresult r;
    CALL_NEXT(r, cuMemGetDefaultMemPool, pool, location, type);
    if (type == CU_MEM_ALLOCATION_TYPE_PINNED)
        seen_default(r, pool, location_device(location), false);
    return r;
}

VG_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    CUresult r;
    CALL_NEXT(r, cuDeviceGetMemPool, pool, dev);
    seen_default(r, pool, dev, true);
    return r;
}

VG_API CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                CUmemAllocationType type) {
    CUresult r;
    CALL_NEXT(r, cuMemGetMemPool, pool, location, type);
    if (type == CU_MEM_ALLOCATION_TYPE_PINNED)
        seen_default(r, pool, location_device(location), true);
    return r;
}

VG_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    CUresult r;
    CALL_NEXT(r, cuDeviceSetMemPool, dev, pool);
    set_current(r, dev, pool);
    return r;
}

VG_API CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                CUmemoryPool pool) {
    CUresult r;
    CALL_NEXT(r, cuMemSetMemPool, location, type, pool);
    if (type == CU_MEM_ALLOCATION_TYPE_PINNED)
        set_current(r, location_device(location), pool);
    return r;
}

VG_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    CUresult r;
    CALL_NEXT(r, cuMemPoolCreate, pool, props);
    if (r != CUDA_SUCCESS || !pool || !props || !vgp_ready())
        return r;
    bool ours = props->allocType == CU_MEM_ALLOCATION_TYPE_PINNED && /* (not managed) */
                props->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                props->handleTypes == CU_MEM_HANDLE_TYPE_NONE && props->usage == 0;
    pthread_mutex_lock(&g_lock);
    pool_add(*pool, location_device(&props->location), ours, props->maxSize);
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Memory still out stays valid (and counted until freed); a device whose current pool
 * it was is back on its default pool, as in the driver. */
VG_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    CUresult r;
    CALL_NEXT(r, cuMemPoolDestroy, pool);
    if (r != CUDA_SUCCESS || !vgp_ready())
        return r;
    pthread_mutex_lock(&g_lock);
    pool_t *p = pool_of(pool);
    if (p) {
        p->dead = true;
        for (int d = 0; d < MAX_DEVICES; d++)
            if (g_current[d] == p)
                g_current[d] = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* ---------------------------------------------------------------------------------------
 * A pool's figures include what vramguard holds for it
 * ------------------------------------------------------------------------------------- */

VG_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    CUresult r;
    CALL_NEXT(r, cuMemPoolGetAttribute, pool, attr, value);
    if (r != CUDA_SUCCESS || !value || !vgp_ready())
        return r;
    pthread_mutex_lock(&g_lock);
    pool_t *p = pool_of(pool);
    if (p && (attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ||
              attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT))
        *(cuuint64_t *)value += p->used;
    else if (p && (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ||
                   attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH))
        *(cuuint64_t *)value += p->used_high;
    pthread_mutex_unlock(&g_lock);
    return r;
}

VG_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    CUresult r;
    CALL_NEXT(r, cuMemPoolSetAttribute, pool, attr, value);
    if (r != CUDA_SUCCESS || !vgp_ready() ||
        (attr != CU_MEMPOOL_ATTR_USED_MEM_HIGH && attr != CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH))
        return r;
    pthread_mutex_lock(&g_lock);
    pool_t *p = pool_of(pool);
    if (p) /* (the driver accepted the reset, so the value was 0) */
        p->used_high = p->used;
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Trimming a pool vramguard stands in for to nothing gives back vramguard's cache too:
 * the program wants the memory it is not using returned. */
VG_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    CUresult r;
    CALL_NEXT(r, cuMemPoolTrimTo, pool, minBytesToKeep);
    if (r != CUDA_SUCCESS || minBytesToKeep != 0 || !vgp_ready())
        return r;
    pthread_mutex_lock(&g_lock);
    pool_t *p = pool_of(pool);
    bool ours = p && p->ours;
    pthread_mutex_unlock(&g_lock);
    if (ours)
        vg_empty_cache();
    return r;
}

/* The pool of a pointer, asked as an attribute: true if ptr is a vramguard allocation
 * made for a pool, and *data is set to that pool. */
bool vgp_pool_attribute(CUdeviceptr ptr, CUmemoryPool *data) {
    if (atomic_load_explicit(&g_nout, memory_order_relaxed) == 0)
        return false;
    bool found = false;
    pthread_mutex_lock(&g_lock);
    for (out_t *o = g_out[bucket(ptr)]; o && !found; o = o->next)
        if (o->ptr == ptr) {
            *data = o->pool->handle;
            found = true;
        }
    pthread_mutex_unlock(&g_lock);
    return found;
}
