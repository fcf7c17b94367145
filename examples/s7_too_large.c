/* s7_too_large.c — S7: an allocation larger than the device (or the limit).
 *
 * The request fails with CUDA_ERROR_OUT_OF_MEMORY and an explanation; nothing already
 * allocated is disturbed (the program checks its earlier buffer).
 */
#include "common.h"

int main(void) {
    ex_init();
    CUdevice dev;
    size_t total;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDeviceTotalMem(&total, dev));
    unsigned data[1024], back[1024];
    for (unsigned i = 0; i < 1024; i++)
        data[i] = i * 2654435761u;
    CUdeviceptr small, huge;
    CK(cuMemAlloc(&small, sizeof data));
    CK(cuMemcpyHtoD(small, data, sizeof data));
    CUresult r = cuMemAlloc(&huge, 2 * total); /* twice the device */
    CK(cuMemcpyDtoH(back, small, sizeof back));
    printf("s7: the huge allocation %s; the earlier buffer is %s\n",
           r == CUDA_ERROR_OUT_OF_MEMORY ? "failed cleanly" : "did not fail",
           memcmp(data, back, sizeof data) == 0 ? "intact" : "DAMAGED");
    CK(cuMemFree(small));
    return 0;
}
