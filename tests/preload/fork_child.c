/* fork_child.c — a CUDA program with a second thread that forks; the child exits normally
 * (running atexit handlers) and execs a shell command too. Under `vramguard run` the
 * child must neither hang nor report the parent's state, and the parent must finish. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vgsim_cuda.h"

static volatile int g_stop;

static void *allocator_thread(void *arg) {
    (void)arg;
    CUcontext ctx;
    CUdevice dev;
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    while (!g_stop) { /* keeps vramguard's locks busy while the main thread forks */
        CUdeviceptr p;
        if (cuMemAlloc(&p, 4096) == CUDA_SUCCESS)
            cuMemFree(p);
    }
    return NULL;
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
        return 1;
    CUdeviceptr kept;
    cuMemAlloc(&kept, 1 << 20);
    pthread_t t;
    pthread_create(&t, NULL, allocator_thread, NULL);
    int bad = 0;
    for (int i = 0; i < 50; i++) {
        pid_t pid = fork();
        if (pid == 0)
            exit(i % 2 ? 0 : 3); /* atexit handlers run in the child */
        int st;
        waitpid(pid, &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != (i % 2 ? 0 : 3);
    }
    int rc = system("true"); /* fork + exec of a child program */
    g_stop = 1;
    pthread_join(t, NULL);
    cuMemFree(kept);
    printf("fork_child: %s\n", bad || rc != 0 ? "a child misbehaved" : "50 children exited cleanly");
    return bad || rc != 0;
}
