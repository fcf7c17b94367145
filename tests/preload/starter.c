/* starter.c [--gpu] PROGRAM [ARGS...] — starts PROGRAM as a child and exits with its
 * status: a wrapper (as a shell script or a python shim is) without --gpu; a GPU program
 * that starts another with --gpu (it allocates device memory first, so vramguard is
 * active in it). Under `vramguard run` the child is guarded in the first case, and in
 * the second only with --follow-children (cli:run_through_a_wrapper). */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vgsim_cuda.h"

static int use_the_gpu(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuMemAlloc(&p, 4096) != CUDA_SUCCESS) {
        fprintf(stderr, "starter: no device memory\n");
        return -1;
    }
    cuMemFree(p);
    return 0;
}

int main(int argc, char **argv) {
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--gpu") == 0) {
        if (use_the_gpu() != 0)
            return 1;
        first = 2;
    }
    if (argc <= first) {
        fprintf(stderr, "usage: starter [--gpu] PROGRAM [ARGS...]\n");
        return 2;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[first], argv + first);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
