/* spawn_after_cuda.c PROGRAM [ARGS...] — a GPU program that starts another: it allocates
 * device memory (so vramguard is active in it), then runs PROGRAM as a child and exits
 * with its status. Under `vramguard run` the child is guarded only with
 * --follow-children (cli:run_through_a_wrapper). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vgsim_cuda.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: spawn_after_cuda PROGRAM [ARGS...]\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuMemAlloc(&p, 4096) != CUDA_SUCCESS) {
        fprintf(stderr, "spawn_after_cuda: no device memory\n");
        return 1;
    }
    cuMemFree(p);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
