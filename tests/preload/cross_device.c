/* cross_device.c — copies between two devices' memory through the plain copy calls
 * (tests/cli interposer_cross_device): cuMemcpyDtoD, cuMemcpyDtoDAsync, cuMemcpy and
 * cuMemcpyAsync, and a batch of one copy (cuMemcpyBatchAsync), each way, with either
 * device's context current. A program may make them
 * with cuMemAlloc memory whether or not the devices reach each other peer to peer (the
 * driver stages the copy); under vramguard they must work too (docs/decisions.md A11).
 *
 * usage: cross_device. Needs two devices (VGSIM_DEVICES=2); exit status 0 when every copy
 * gave the right bytes, 1 otherwise, 77 with one device.
 */
#include "common.h"

enum { N = 64 * 1024 }; /* words: 256 KiB */

static int g_wrong;

/* Both contexts synchronised (the copy ran on the current one's legacy stream), then p's
 * words read back through ctx. */
static void expect(const CUcontext ctx[2], int which, CUdeviceptr p, unsigned want,
                   const char *how) {
    static unsigned host[N];
    for (int d = 0; d < 2; d++) {
        CK(cuCtxSetCurrent(ctx[d]));
        CK(cuCtxSynchronize());
    }
    CK(cuCtxSetCurrent(ctx[which]));
    CK(cuMemcpyDtoH(host, p, sizeof host));
    for (int i = 0; i < N; i++) {
        if (host[i] != want) {
            printf("%s: word %d is %u, expected %u\n", how, i, host[i], want);
            g_wrong++;
            return;
        }
    }
}

int main(void) {
    CK(cuInit(0));
    int n;
    CK(cuDeviceGetCount(&n));
    if (n < 2) {
        printf("cross_device: one device, nothing to do\n");
        return 77;
    }
    CUcontext ctx[2];
    CUdeviceptr p[2];
    CUstream st[2]; /* (a batch may not use the legacy stream) */
    for (int d = 0; d < 2; d++) {
        CUdevice dev;
        CK(cuDeviceGet(&dev, d));
        CK(cuDevicePrimaryCtxRetain(&ctx[d], dev));
        CK(cuCtxSetCurrent(ctx[d]));
        CK(cuMemAlloc(&p[d], N * sizeof(unsigned)));
        CK(cuStreamCreate(&st[d], CU_STREAM_NON_BLOCKING));
        CK(cuMemsetD32(p[d], 0, N));
        CK(cuCtxSynchronize());
    }
    static const char *const calls[] = {"cuMemcpyDtoD", "cuMemcpyDtoDAsync", "cuMemcpy",
                                        "cuMemcpyAsync", "cuMemcpyBatchAsync"};
    unsigned value = 1;
    int copies = 0;
    for (int call = 0; call < 5; call++) {
        for (int from = 0; from < 2; from++) {
            for (int current = 0; current < 2; current++, value++) {
                int to = 1 - from;
                char how[96];
                snprintf(how, sizeof how, "%s from device %d to %d, device %d current",
                         calls[call], from, to, current);
                CK(cuCtxSetCurrent(ctx[from]));
                CK(cuMemsetD32(p[from], value, N));
                CK(cuCtxSynchronize());
                CK(cuCtxSetCurrent(ctx[current]));
                size_t bytes = N * sizeof(unsigned);
                if (call == 0)
                    CK(cuMemcpyDtoD(p[to], p[from], bytes));
                else if (call == 1)
                    CK(cuMemcpyDtoDAsync(p[to], p[from], bytes, NULL));
                else if (call == 2)
                    CK(cuMemcpy(p[to], p[from], bytes));
                else if (call == 3)
                    CK(cuMemcpyAsync(p[to], p[from], bytes, NULL));
                else
                    CK(ex_batch_copy(p[to], p[from], bytes, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
                                     st[current]));
                expect(ctx, to, p[to], value, how);
                copies++;
            }
        }
    }
    for (int d = 0; d < 2; d++) {
        CK(cuCtxSetCurrent(ctx[d]));
        CK(cuMemFree(p[d]));
        CK(cuStreamDestroy(st[d]));
    }
    printf("cross_device: %d copies, %d wrong\n", copies, g_wrong);
    return g_wrong != 0;
}
