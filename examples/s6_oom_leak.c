/* s6_oom_leak.c — S6: out of memory because a loop keeps what it allocates.
 *
 * Each "step" allocates a 64 MiB activation and keeps it in a list (a leak), until the
 * device is full. Run with a limit to see it quickly on any device:
 *     vramguard run --sim --limit=1G -- ./s6_oom_leak
 * vramguard explains the failure where it happens: the request, what the device has,
 * what is cached, and the top holders by allocation site (this loop).
 */
#include "common.h"

#define MAX_STEPS 4096

static CUresult step(CUdeviceptr *kept) { return cuMemAlloc(kept, 64u << 20); }

int main(void) {
    ex_init();
    static CUdeviceptr kept[MAX_STEPS];
    int i = 0;
    CUresult r = CUDA_SUCCESS;
    while (i < MAX_STEPS && (r = step(&kept[i])) == CUDA_SUCCESS)
        i++;
    printf("s6: %s after %d steps\n", r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "stopped", i);
    for (int k = 0; k < i; k++)
        CK(cuMemFree(kept[k]));
    return 0;
}
