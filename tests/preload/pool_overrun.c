/* pool_overrun.c — memory from a pool under vramguard (tests/cli interposer_pools).
 *
 * A kernel writes 1001 floats into a 1000-float buffer (4 bytes past its end)
 * allocated in stream order from a memory pool, on the stream the kernel runs on:
 *   (no flag)       a pool the program makes, cuMemAllocFromPoolAsync;
 *   --default-pool  the device's default pool (cuDeviceGetDefaultMemPool), the same call;
 *   --current       the program's pool made the device's current pool, cuMemAllocAsync;
 *   --many          a pool of the program's, after 300 others were made, used, destroyed.
 * Guard mode must report the overrun, as for cuMemAlloc's memory. With --ipc the pool is
 * made for sharing with other processes (a POSIX file descriptor handle type), and
 * --ipc-current makes such a pool current for cuMemAllocAsync: that memory stays the
 * driver's (vramguard's could not be exported), so the kernel writes only the 1000
 * floats, and the program checks the pointer can be exported (on vgsim, which shares
 * nothing, the export is refused as not supported, not as invalid).
 *
 * usage: pool_overrun [--default-pool | --current | --many | --ipc | --ipc-current]. Exit status 0
 * when done, 1 when a call fails.
 */
#include "common.h"

enum { N = 1000 };

static CUmemoryPool make_pool(bool shareable) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    props.handleTypes = shareable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    CUmemoryPool pool;
    CK(cuMemPoolCreate(&pool, &props));
    return pool;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    bool ipc = strncmp(how, "--ipc", 5) == 0;
    bool current = strcmp(how, "--current") == 0 || strcmp(how, "--ipc-current") == 0;
    ex_t e = ex_init();
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; strcmp(how, "--many") == 0 && i < 300; i++) {
        CUmemoryPool gone = make_pool(false);
        CUdeviceptr x;
        CK(cuMemAllocFromPoolAsync(&x, 256, gone, s));
        CK(cuMemFreeAsync(x, s));
        CK(cuStreamSynchronize(s));
        CK(cuMemPoolDestroy(gone));
    }
    CUmemoryPool pool;
    if (strcmp(how, "--default-pool") == 0)
        CK(cuDeviceGetDefaultMemPool(&pool, dev));
    else
        pool = make_pool(ipc);
    CUdeviceptr t;
    if (current) {
        CK(cuDeviceSetMemPool(dev, pool));
        CK(cuMemAllocAsync(&t, N * sizeof(float), s));
    } else {
        CK(cuMemAllocFromPoolAsync(&t, N * sizeof(float), pool, s));
    }
    if (ipc) {
        CUmemPoolPtrExportData data;
        CUresult r = cuMemPoolExportPointer(&data, t);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_SUPPORTED) {
            fprintf(stderr, "pool_overrun: the pool's memory cannot be exported (%d)\n", (int)r);
            return 1;
        }
    }
    CK(ex_fill(&e, t, 1.0f, ipc ? N : N + 1, s)); /* the bug: one float too many */
    CK(cuStreamSynchronize(s));
    CK(cuMemFreeAsync(t, s));
    CK(cuStreamSynchronize(s));
    if (current) {
        CUmemoryPool def;
        CK(cuDeviceGetDefaultMemPool(&def, dev));
        CK(cuDeviceSetMemPool(dev, def));
    }
    if (strcmp(how, "--default-pool") != 0)
        CK(cuMemPoolDestroy(pool));
    CK(cuStreamDestroy(s));
    printf("pool_overrun: done\n");
    return 0;
}
