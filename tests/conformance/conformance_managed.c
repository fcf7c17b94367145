/* conformance_managed.c — conformance cases of managed memory (cuMemAllocManaged and its
 * kin; see conformance.c): the host and kernels reach it through one pointer, what a
 * pointer to it says of itself, and which ranges a stream association, a prefetch and
 * advice accept. Under `vramguard run` (cli:conformance_under_run) the same must hold of
 * the managed memory guard mode serves (src/preload/hooks_memory.c).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "conformance.h"

enum { N = 4096 };

/* The host writes managed memory, a kernel adds to it, and after a synchronisation the
 * host reads the kernel's result through the same pointer; cuMemFree releases it.
 * Neither a size of 0 nor flags other than GLOBAL or HOST are accepted. */
VG_TEST(managed_memory_is_shared_by_host_and_kernels) {
    setup();
    int supported = 0;
    CHECK_CU(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0));
    CHECK(supported == 1);
    CUdeviceptr m;
    CHECK_CU_EQ(cuMemAllocManaged(&m, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU_EQ(cuMemAllocManaged(&m, N * 4, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU_EQ(cuMemAllocManaged(&m, N * 4, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocManaged(&m, N * 4, CU_MEM_ATTACH_GLOBAL));
    unsigned *h = (unsigned *)(uintptr_t)m;
    for (unsigned i = 0; i < N; i++)
        h[i] = i;
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(launch_add(s, m, 5, N));
    CHECK_CU(cuStreamSynchronize(s));
    unsigned bad = 0;
    for (unsigned i = 0; i < N; i++)
        bad += h[i] != i + 5;
    CHECK(bad == 0);
    EXPECT_U32(m + 4 * 100, 1, 105); /* (a copy from it reads the same) */
    CHECK_CU(cuMemFree(m));
    CHECK_CU(cuStreamDestroy(s));
}

/* CU_POINTER_ATTRIBUTE_IS_MANAGED is 1 anywhere in managed memory and 0 in cuMemAlloc's;
 * the range of a pointer into managed memory is its allocation. */
VG_TEST(managed_pointer_attributes) {
    setup();
    CUdeviceptr m, d;
    CHECK_CU(cuMemAllocManaged(&m, 3000, CU_MEM_ATTACH_GLOBAL));
    CHECK_CU(cuMemAlloc(&d, 3000));
    unsigned managed = 7;
    CHECK_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 2999));
    CHECK(managed == 1);
    CHECK_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
    CHECK(managed == 0);
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK_CU(cuMemGetAddressRange(&base, &size, m + 1234));
    CHECK(base == m && size == 3000);
    CHECK_CU(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, m + 17));
    CHECK_CU(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, m + 17));
    CHECK(base == m && size == 3000);
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuMemFree(m));
}

/* A stream association changes the whole allocation: length 0 or the allocation's size,
 * from its start; a part of it, or device memory, is refused. Prefetches and advice take
 * any range inside managed memory (and refuse device memory). */
VG_TEST(managed_attach_prefetch_and_advise) {
    setup();
    CUdevice dev;
    CHECK_CU(cuCtxGetDevice(&dev));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr m, d;
    CHECK_CU(cuMemAllocManaged(&m, N * 4, CU_MEM_ATTACH_HOST));
    CHECK_CU(cuMemAlloc(&d, N * 4));
    CHECK_CU(cuStreamAttachMemAsync(s, m, 0, CU_MEM_ATTACH_SINGLE));
    CHECK_CU(cuStreamAttachMemAsync(s, m, N * 4, CU_MEM_ATTACH_GLOBAL));
    CHECK_CU_EQ(cuStreamAttachMemAsync(s, m, N * 2, CU_MEM_ATTACH_GLOBAL),
                CUDA_ERROR_INVALID_VALUE);
    CHECK_CU_EQ(cuStreamAttachMemAsync(s, d, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    CUmemLocation here = {CU_MEM_LOCATION_TYPE_DEVICE, (int)dev};
    CUmemLocation host = {CU_MEM_LOCATION_TYPE_HOST, 0};
    CHECK_CU(cuMemAdvise(m, N * 4, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, here));
    CHECK_CU(cuMemAdvise(m + 4096, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, here));
    CHECK_CU(cuMemPrefetchAsync(m, N * 4, here, 0, s));
    CHECK_CU(launch_fill(s, m, 9, N));
    CHECK_CU(cuMemPrefetchAsync(m + 4096, 4096, host, 0, s));
    CHECK_CU(cuStreamSynchronize(s));
    unsigned *h = (unsigned *)(uintptr_t)m;
    CHECK(h[0] == 9 && h[N - 1] == 9);
    CHECK(cuMemPrefetchAsync(d, N * 4, here, 0, s) != CUDA_SUCCESS);
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuMemFree(m));
    CHECK_CU(cuStreamDestroy(s));
}

/* A pool of managed memory (CUDA 13: allocType CU_MEM_ALLOCATION_TYPE_MANAGED, the device
 * its preferred location) gives managed memory: the pointer says so, and the host reads
 * what a kernel wrote through it. (Skipped where the driver has no managed pools.) */
VG_TEST(managed_pool_allocations_are_managed) {
    setup();
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool = NULL;
    CUresult r = cuMemPoolCreate(&pool, &props);
    if (r != CUDA_SUCCESS && !g_on_vgsim)
        vgt_skip("cuMemPoolCreate of a managed pool: error %d (no managed pools)", (int)r);
    CHECK_CU(r);
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr m;
    CHECK_CU(cuMemAllocFromPoolAsync(&m, N * 4, pool, s));
    CHECK_CU(cuStreamSynchronize(s));
    unsigned managed = 0;
    CHECK_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    CHECK(managed == 1);
    unsigned *h = (unsigned *)(uintptr_t)m;
    for (unsigned i = 0; i < N; i++)
        h[i] = i;
    CHECK_CU(launch_add(s, m, 3, N));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK(h[0] == 3 && h[N - 1] == N + 2);
    CHECK_CU(cuMemFreeAsync(m, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemPoolDestroy(pool));
    CHECK_CU(cuStreamDestroy(s));
}
