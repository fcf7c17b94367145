/* mempool.c — memory pools: cuMemPoolCreate, cuMemAllocFromPoolAsync and their kin.
 *
 * A pool here is bookkeeping over vgsim's ordinary allocations: each allocation from it
 * is its own region (memory.c) that remembers the pool, and the pool counts what is out.
 * vgsim keeps no freed memory, so a pool's reserved bytes are its used bytes, the release
 * threshold and the reuse policies are stored and read back but change nothing, and
 * cuMemPoolTrimTo has nothing to trim. What programs can observe is modelled: a device's
 * default and current pool (cuMemAllocAsync allocates from the current one), a pool's
 * maxSize (an allocation past it fails with CUDA_ERROR_OUT_OF_MEMORY), the attributes
 * and their high watermarks, access from other devices, and
 * CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE. Pools live on devices only (no host or NUMA
 * pools), and no pool can be shared with another process. A pool the program makes may
 * hold managed memory (CUDA 13: allocType CU_MEM_ALLOCATION_TYPE_MANAGED, with a device
 * as its preferred location), whose allocations are managed memory (managed.c); the
 * default and current managed pools are not modelled.
 *
 * A pool's handle is its address; handles are checked against the list of live pools,
 * and a destroyed pool's struct is kept (memory from it may still be out, and a racing
 * cuMemAllocAsync may hold it).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

struct sim_pool {
    sim_device_t *dev;
    CUmemPoolProps props;
    cuuint64_t threshold;
    int reuse[3];             /* the three CU_MEMPOOL_ATTR_REUSE_* policies */
    uint64_t used, used_high, reserved_high;
    unsigned access;          /* other devices granted read-write access (bit d) */
    bool is_default, destroyed;
    struct sim_pool *next;    /* g_sim.pools */
};

static sim_pool_t *pool_new(sim_device_t *d, const CUmemPoolProps *props) { /* lock held */
    sim_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->dev = d;
    p->props = *props;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->next = g_sim.pools;
    g_sim.pools = p;
    return p;
}

static sim_pool_t *default_pool(sim_device_t *d) { /* lock held */
    if (!d->default_pool) {
        CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, d->ordinal}};
        d->default_pool = pool_new(d, &props);
        if (d->default_pool)
            d->default_pool->is_default = true;
    }
    return d->default_pool;
}

/* A device's current pool (lock held), or NULL: no memory for the default one. */
static sim_pool_t *device_pool(sim_device_t *d) {
    return d->current_pool ? d->current_pool : default_pool(d);
}

bool sim_pool_take(sim_pool_t *p, uint64_t bytes) {
    if (p->props.maxSize && bytes > p->props.maxSize - MIN(p->used, p->props.maxSize))
        return false;
    p->used += bytes;
    p->used_high = MAX(p->used_high, p->used);
    p->reserved_high = MAX(p->reserved_high, p->used); /* (nothing is kept: see above) */
    return true;
}

void sim_pool_give(sim_pool_t *p, uint64_t bytes) { p->used -= MIN(bytes, p->used); }

/* The live pool a handle names (lock held), or NULL. */
static sim_pool_t *pool_find(CUmemoryPool h) {
    for (sim_pool_t *p = g_sim.pools; p; p = p->next)
        if ((CUmemoryPool)p == h && !p->destroyed)
            return p;
    return NULL;
}

static sim_device_t *device_at(const CUmemLocation *loc) {
    if (!loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE || loc->id < 0 ||
        loc->id >= g_sim.ndevices)
        return NULL;
    return &g_sim.devices[loc->id];
}

/* ---------------------------------------------------------------------------------------
 * A device's default and current pool
 * ------------------------------------------------------------------------------------- */

/* Which pool of location `loc` (DEVICE and PINNED only here) a query names. */
static CUresult get_pool(CUmemoryPool *out, const CUmemLocation *loc, bool current) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_device_t *d = device_at(loc);
    if (!out || !d)
        return loc && loc->type != CU_MEM_LOCATION_TYPE_DEVICE && out ? CUDA_ERROR_NOT_SUPPORTED
                                                                    : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = current ? device_pool(d) : default_pool(d);
    pthread_mutex_unlock(&g_sim.lock);
    *out = (CUmemoryPool)p;
    return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult set_pool(const CUmemLocation *loc, CUmemoryPool h) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_device_t *d = device_at(loc);
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_find(h);
    if (p && p->dev == d) /* "the memory pool must be local to the specified device" */
        d->current_pool = p->is_default ? NULL : p;
    pthread_mutex_unlock(&g_sim.lock);
    return p && p->dev == d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static bool pinned_type(CUmemAllocationType type) { return type == CU_MEM_ALLOCATION_TYPE_PINNED; }

VGSIM_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    CUresult r = get_pool(pool, &loc, false);
    return r == CUDA_ERROR_INVALID_VALUE && pool ? CUDA_ERROR_INVALID_DEVICE : r;
}

VGSIM_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    CUresult r = get_pool(pool, &loc, true);
    return r == CUDA_ERROR_INVALID_VALUE && pool ? CUDA_ERROR_INVALID_DEVICE : r;
}

VGSIM_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    return set_pool(&loc, pool);
}

VGSIM_API CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                          CUmemAllocationType type) {
    return pinned_type(type) ? get_pool(pool, location, false) : CUDA_ERROR_NOT_SUPPORTED;
}

VGSIM_API CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                   CUmemAllocationType type) {
    return pinned_type(type) ? get_pool(pool, location, true) : CUDA_ERROR_NOT_SUPPORTED;
}

VGSIM_API CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                   CUmemoryPool pool) {
    return pinned_type(type) ? set_pool(location, pool) : CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------------------------------
 * Pools made by the program
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || !props ||
        (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED &&
         props->allocType != CU_MEM_ALLOCATION_TYPE_MANAGED) ||
        props->win32SecurityAttributes ||
        (props->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof props->reserved; i++)
        if (props->reserved[i])
            return CUDA_ERROR_INVALID_VALUE;
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return props->location.type == CU_MEM_LOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE
                                                                    : CUDA_ERROR_NOT_SUPPORTED;
    sim_device_t *d = device_at(&props->location);
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_new(d, props);
    pthread_mutex_unlock(&g_sim.lock);
    *pool = (CUmemoryPool)p;
    return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

bool sim_pool_managed(const sim_pool_t *p) {
    return p->props.allocType == CU_MEM_ALLOCATION_TYPE_MANAGED;
}

/* Memory still out stays valid; the device's current pool falls back to its default. */
VGSIM_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_find(pool);
    bool ok = p && !p->is_default;
    if (ok) {
        p->destroyed = true;
        if (p->dev->current_pool == p)
            p->dev->current_pool = NULL;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A stream-ordered allocation from pool h (NULL: the stream's device's current pool),
 * made at once; its memory is on the pool's device whatever the stream's. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool h, CUstream stream) {
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (atomic_load(&s->capture))
        return CUDA_ERROR_NOT_SUPPORTED; /* graph memory nodes are not modelled (graph.c) */
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = h ? pool_find(h) : device_pool(c->dev);
    pthread_mutex_unlock(&g_sim.lock);
    if (!p)
        return h ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    return sim_mem_alloc_pool(p->dev, p, dptr, bytesize);
}

VGSIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    return alloc_async(dptr, bytesize, NULL, stream);
}

VGSIM_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream stream) {
    return pool ? alloc_async(dptr, bytesize, pool, stream) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult attribute_set(sim_pool_t *p, CUmemPool_attribute attr, const void *value) {
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(const int *)value != 0;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->threshold = *(const cuuint64_t *)value;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: /* a watermark is only ever reset to 0 */
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(const cuuint64_t *)value != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
            p->used_high = p->used;
        else
            p->reserved_high = p->used;
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult attribute_get(const sim_pool_t *p, CUmemPool_attribute attr, void *value) {
    cuuint64_t *v = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *v = p->threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *v = p->used; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *v = p->reserved_high; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *v = p->used_high; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value, bool set) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_find(pool);
    r = !p ? CUDA_ERROR_INVALID_VALUE
           : set ? attribute_set(p, attr, value) : attribute_get(p, attr, value);
    pthread_mutex_unlock(&g_sim.lock);
    return r;
}

VGSIM_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                         void *value) {
    return attribute(pool, attr, value, true);
}

VGSIM_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                         void *value) {
    return attribute(pool, attr, value, false);
}

VGSIM_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    (void)minBytesToKeep;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_find(pool);
    pthread_mutex_unlock(&g_sim.lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; /* (nothing kept to release) */
}

/* The pool's own device always has read-write access; another gets it or loses it, if
 * it can reach the device at all. */
VGSIM_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map,
                                      size_t count) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!map && count)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_find(pool);
    unsigned access = p ? p->access : 0;
    r = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++) {
        sim_device_t *d = device_at(&map[i].location);
        CUmemAccess_flags f = map[i].flags;
        if (!d || (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            r = CUDA_ERROR_INVALID_VALUE;
        else if (d == p->dev)
            r = f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
        else if (!g_sim.p2p)
            r = CUDA_ERROR_INVALID_DEVICE;
        else if (f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            access |= 1u << d->ordinal;
        else
            access &= ~(1u << d->ordinal);
    }
    if (r == CUDA_SUCCESS)
        p->access = access; /* (all or nothing) */
    pthread_mutex_unlock(&g_sim.lock);
    return r;
}

VGSIM_API CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool pool,
                                      CUmemLocation *location) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_device_t *d = device_at(location);
    if (!flags || !d)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_find(pool);
    if (p)
        *flags = d == p->dev || (p->access >> d->ordinal & 1) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                                              : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    pthread_mutex_unlock(&g_sim.lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Processes do not share vgsim's memory: a pool made for sharing cannot export. */
VGSIM_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *data, CUdeviceptr ptr) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    CUmemoryPool pool = NULL;
    if (!data || cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr) !=
                     CUDA_SUCCESS || !pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    sim_pool_t *p = pool_find(pool);
    bool shareable = p && p->props.handleTypes != CU_MEM_HANDLE_TYPE_NONE;
    pthread_mutex_unlock(&g_sim.lock);
    return shareable ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}
