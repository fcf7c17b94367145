/* conformance_pool.c — conformance cases of memory pools (cuMemPoolCreate,
 * cuMemAllocFromPoolAsync and their kin; see conformance.c): which pool an allocation
 * comes from, what a pool's figures count, maxSize, the current pool, attributes.
 * Under `vramguard run` (cli:conformance_under_run) the same must hold of the pools
 * vramguard stands in for (src/preload/hooks_pool.c).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "conformance.h"

enum { MiB = 1 << 20 };

static CUmemoryPool make_pool(size_t max_size) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    props.maxSize = max_size;
    CUmemoryPool pool = NULL;
    CHECK_CU(cuMemPoolCreate(&pool, &props));
    CHECK(pool != NULL);
    return pool;
}

static cuuint64_t pool_figure(CUmemoryPool pool, CUmemPool_attribute attr) {
    cuuint64_t v = ~0ull;
    CHECK_CU(cuMemPoolGetAttribute(pool, attr, &v));
    return v;
}

static CUmemoryPool pointer_pool(CUdeviceptr p) {
    CUmemoryPool pool = (CUmemoryPool)(uintptr_t)1;
    CHECK_CU(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
    return pool;
}

/* A device's current pool is its default pool until another is set, and the default pool
 * cannot be destroyed; cuMemAllocAsync allocates from the current pool; destroying the
 * current pool makes the default one current again. */
VG_TEST(pool_default_and_current) {
    setup();
    CUdevice dev;
    CHECK_CU(cuCtxGetDevice(&dev));
    CUmemoryPool def = NULL, cur = NULL;
    CHECK_CU(cuDeviceGetDefaultMemPool(&def, dev));
    CHECK_CU(cuDeviceGetMemPool(&cur, dev));
    CHECK(def != NULL && cur == def);
    CHECK_CU_EQ(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    CHECK_CU(cuMemAllocAsync(&a, MiB, s));
    CHECK(pointer_pool(a) == def);

    CUmemoryPool mine = make_pool(0);
    CHECK_CU(cuDeviceSetMemPool(dev, mine));
    CHECK_CU(cuDeviceGetMemPool(&cur, dev));
    CHECK(cur == mine);
    CHECK_CU(cuMemAllocAsync(&b, MiB, s));
    CHECK(pointer_pool(b) == mine);
    CHECK_CU(launch_fill(s, b, 7, MiB / 4));
    CHECK_CU(cuMemFreeAsync(b, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemPoolDestroy(mine));
    CHECK_CU(cuDeviceGetMemPool(&cur, dev));
    CHECK(cur == def);
    CHECK_CU(cuMemFreeAsync(a, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuStreamDestroy(s));
}

/* A pool's used bytes count its allocations until their frees complete, its high
 * watermark keeps the most, and only a reset to 0 is accepted; memory from it works as
 * any device memory (a kernel fills it, a copy reads it back). */
VG_TEST(pool_counts_its_allocations) {
    setup();
    CUmemoryPool pool = make_pool(0);
    CHECK_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    CHECK_CU(cuMemAllocFromPoolAsync(&a, MiB, pool, s));
    CHECK_CU(cuMemAllocFromPoolAsync(&b, 3 * MiB, pool, s));
    CHECK(pointer_pool(a) == pool && pointer_pool(b) == pool);
    CHECK_CU(launch_fill(s, b, 0xC0FFEE, 3 * MiB / 4));
    CHECK_CU(cuStreamSynchronize(s));
    EXPECT_U32(b, 3 * MiB / 4, 0xC0FFEE);
    cuuint64_t used = pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    CHECK(used >= 4 * MiB && used < 8 * MiB);
    CHECK(pool_figure(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= used);
    CHECK_CU(cuMemFreeAsync(b, s));
    CHECK_CU(cuStreamSynchronize(s));
    cuuint64_t left = pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    CHECK(left >= MiB && left < 3 * MiB);
    CHECK_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), used);
    cuuint64_t nonzero = 1, zero = 0;
    CHECK_CU_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &nonzero),
                CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    CHECK_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), left);
    CHECK_CU(cuMemFreeAsync(a, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_EQ(pool_figure(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    CHECK_CU(cuMemPoolTrimTo(pool, 0));
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemPoolDestroy(pool));
}

/* A pool with a maxSize refuses an allocation that would take it past it, and serves one
 * again once memory has come back. */
VG_TEST(pool_max_size_bounds_it) {
    setup();
    CUmemoryPool pool = make_pool(64 * MiB);
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b = 0;
    CHECK_CU(cuMemAllocFromPoolAsync(&a, 48 * MiB, pool, s));
    CHECK_CU_EQ(cuMemAllocFromPoolAsync(&b, 48 * MiB, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemFreeAsync(a, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemAllocFromPoolAsync(&b, 48 * MiB, pool, s));
    CHECK_CU(cuMemFreeAsync(b, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemPoolDestroy(pool));
}

/* Attributes read back what was set (the release threshold, the reuse policies); an
 * attribute a program cannot set is refused; the pool's own device has read-write
 * access. */
VG_TEST(pool_attributes_round_trip) {
    setup();
    CUmemoryPool pool = make_pool(0);
    cuuint64_t threshold = 256ull * MiB, got = 0;
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CHECK_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &got));
    CHECK_EQ(got, threshold);
    int on = -1, off = 0;
    CHECK_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on));
    CHECK_EQ(on, 1);
    CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off));
    CHECK_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on));
    CHECK_EQ(on, 0);
    cuuint64_t v = 0;
    CHECK_CU_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v),
                CUDA_ERROR_INVALID_VALUE);
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUmemLocation here = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CHECK_CU(cuMemPoolGetAccess(&flags, pool, &here));
    CHECK_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemPoolDestroy(pool));
}
