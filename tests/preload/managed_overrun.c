/* managed_overrun.c — managed memory (cudaMallocManaged) under vramguard (tests/cli
 * interposer_managed).
 *
 * The host fills a 1000-float managed buffer with 2.0, a kernel then writes 1.0 into it on
 * a stream, and after a synchronisation the host reads the kernel's values back through
 * the same pointer, as Unified Memory programs do. The bugs:
 *   (no flag)   the kernel writes 1001 floats (4 bytes past the end);
 *   --host      the host writes one float past the end (the kernel writes 1000);
 *   --uaf       after cuMemFree, a kernel writes the buffer again;
 *   --host-attached  the first bug, the buffer allocated attached to the host
 *               (CU_MEM_ATTACH_HOST) and then attached to the stream (length 0, then its
 *               size: CU_MEM_ATTACH_SINGLE, then GLOBAL).
 * The correct version:
 *   --attach    no bug; the buffer is attached to the stream as above, prefetched to the
 *               device and advised read-mostly, and its pointer's attributes are checked
 *               (managed; its range is the allocation).
 * Guard mode must report each bug as it does for cuMemAlloc's memory, and keep the correct
 * version's output.
 *
 * usage: managed_overrun [--host | --uaf | --attach | --host-attached]. Exit status 0 when
 * done, 1 when a call fails or the host reads a wrong value.
 */
#include "common.h"

enum { N = 1000 };

static int check_attributes(CUdeviceptr m) {
    unsigned managed = 0;
    CUdeviceptr base = 0;
    size_t size = 0;
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 40));
    CK(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, m + 40));
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, m + 40));
    CUdeviceptr b2 = 0;
    size_t s2 = 0;
    CK(cuMemGetAddressRange(&b2, &s2, m + 40));
    if (!managed || base != m || size != N * sizeof(float) || b2 != m || s2 != size) {
        fprintf(stderr, "managed_overrun: attributes: managed %u, range %#llx+%zu and "
                "%#llx+%zu for an allocation at %#llx of %zu bytes\n", managed,
                (unsigned long long)base, size, (unsigned long long)b2, s2,
                (unsigned long long)m, N * sizeof(float));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    bool attach = strcmp(how, "--attach") == 0, host_attached = strcmp(how, "--host-attached") == 0;
    ex_t e = ex_init();
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr m;
    CK(cuMemAllocManaged(&m, N * sizeof(float), host_attached ? CU_MEM_ATTACH_HOST
                                                               : CU_MEM_ATTACH_GLOBAL));
    float *h = (float *)(uintptr_t)m;
    for (int i = 0; i < N; i++)
        h[i] = 2.0f;
    if (strcmp(how, "--host") == 0)
        h[N] = 3.0f; /* the bug: one float past the end, on the host */
    if (attach && check_attributes(m))
        return 1;
    if (attach || host_attached) {
        CK(cuStreamAttachMemAsync(s, m, 0, CU_MEM_ATTACH_SINGLE));
        CK(cuStreamAttachMemAsync(s, m, N * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    }
    if (attach) {
        CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, (int)dev};
        CK(cuMemAdvise(m, N * sizeof(float), CU_MEM_ADVISE_SET_READ_MOSTLY, loc));
        CK(cuMemPrefetchAsync(m, N * sizeof(float), loc, 0, s));
    }
    bool over = how[0] == '\0' || host_attached;
    CK(ex_fill(&e, m, 1.0f, over ? N + 1 : N, s)); /* (the first bug: one float too many) */
    CK(cuStreamSynchronize(s));
    double sum = 0;
    for (int i = 0; i < N; i++)
        sum += h[i];
    if (sum != N) {
        fprintf(stderr, "managed_overrun: the host read a sum of %g after the kernel, not %d\n",
                sum, N);
        return 1;
    }
    CK(cuMemFree(m));
    if (strcmp(how, "--uaf") == 0) {
        CK(ex_fill(&e, m, 4.0f, N, s)); /* the bug: the buffer was freed */
        CK(cuStreamSynchronize(s));
    }
    CK(cuStreamDestroy(s));
    printf("managed_overrun: done, sum %g\n", sum);
    return 0;
}
