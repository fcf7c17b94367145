/* sleeper.c — leaks a device buffer, says "ready", and sleeps: the test kills it with
 * SIGTERM / SIGINT and checks the reports were still written. */
#include <stdio.h>
#include <unistd.h>

#include "vgsim_cuda.h"

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr leak;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuMemAlloc(&leak, 4096))
        return 1;
    printf("ready\n");
    fflush(stdout);
    sleep(60);
    return 0;
}
