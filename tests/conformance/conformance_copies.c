/* conformance_copies.c — conformance cases of 2D, 3D and peer copies (see conformance.c).
 *
 * Peer copies run between device 0's primary context and a context of the last device:
 * a second device where there is one (vgsim with VGSIM_DEVICES=2), else a second context
 * on device 0, which the driver treats as another context all the same.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conformance.h"

/* ---------------------------------------------------------------------------------------
 * 2D and 3D copies
 * ------------------------------------------------------------------------------------- */

VG_TEST(copy_2d_sub_rectangle_round_trip) {
    setup();
    enum { W = 100, H = 3, HP = 160, BP = 256 };
    unsigned char *host, back[(H + 1) * BP];
    CHECK_CU(cuMemAllocHost((void **)&host, H * HP));
    for (int i = 0; i < H * HP; i++)
        host[i] = (unsigned char)(i * 7 + 1);
    CUdeviceptr d;
    size_t pitch;
    CHECK_CU(cuMemAllocPitch(&d, &pitch, 256, H + 1, 4));
    CHECK_CU(cuMemsetD8(d, 0xEE, pitch * (H + 1)));
    CHECK_CU(cuCtxSynchronize()); /* (the memset does not order a non-blocking stream) */
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.srcXInBytes = 8;
    c.srcPitch = HP;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d;
    c.dstXInBytes = 16;
    c.dstY = 1;
    c.dstPitch = pitch;
    c.WidthInBytes = W;
    c.Height = H;
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuMemcpy2DAsync(&c, s));
    CHECK_CU(cuStreamSynchronize(s));
    memset(back, 0, sizeof back);
    CUDA_MEMCPY2D b;
    memset(&b, 0, sizeof b);
    b.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    b.srcDevice = d;
    b.srcPitch = pitch;
    b.dstMemoryType = CU_MEMORYTYPE_HOST;
    b.dstHost = back;
    b.dstPitch = BP;
    b.WidthInBytes = BP;
    b.Height = H + 1;
    CHECK_CU(cuMemcpy2D(&b));
    for (int y = 0; y < H + 1; y++)
        for (int x = 0; x < BP; x++) {
            int inside = y >= 1 && x >= 16 && x < 16 + W;
            unsigned char want = inside ? host[(y - 1) * HP + 8 + (x - 16)] : 0xEE;
            CHECK_EQ(back[y * BP + x], want);
        }
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuMemFreeHost(host));
}

/* A box of W x H x D bytes from a packed host array to a pitched 3D layout on the device,
 * at an offset in each dimension, then back with one copy of the whole layout: the box
 * lands exactly where it should, and nothing around it changes. */
VG_TEST(copy_3d_box_round_trip) {
    setup();
    enum { W = 40, H = 5, D = 3, X = 24, Y = 2, Z = 1, ROWS = 8, SLICES = 5 };
    unsigned char *box;
    CHECK_CU(cuMemAllocHost((void **)&box, W * H * D));
    for (int i = 0; i < W * H * D; i++)
        box[i] = (unsigned char)(i * 13 + 5);
    CUdeviceptr d;
    size_t pitch;
    CHECK_CU(cuMemAllocPitch(&d, &pitch, 96, ROWS * SLICES, 4));
    size_t total = pitch * ROWS * SLICES;
    CHECK_CU(cuMemsetD8(d, 0xEE, total));
    CHECK_CU(cuCtxSynchronize());
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = box;
    c.srcPitch = W;
    c.srcHeight = H;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d;
    c.dstXInBytes = X;
    c.dstY = Y;
    c.dstZ = Z;
    c.dstPitch = pitch;
    c.dstHeight = ROWS;
    c.WidthInBytes = W;
    c.Height = H;
    c.Depth = D;
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuMemcpy3DAsync(&c, s));
    CHECK_CU(cuStreamSynchronize(s));
    unsigned char *back = malloc(total);
    CHECK(back != NULL);
    CUDA_MEMCPY3D b;
    memset(&b, 0, sizeof b);
    b.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    b.srcDevice = d;
    b.srcPitch = pitch;
    b.srcHeight = ROWS;
    b.dstMemoryType = CU_MEMORYTYPE_HOST;
    b.dstHost = back;
    b.dstPitch = pitch;
    b.dstHeight = ROWS;
    b.WidthInBytes = pitch;
    b.Height = ROWS;
    b.Depth = SLICES;
    CHECK_CU(cuMemcpy3D(&b));
    for (size_t z = 0; z < SLICES; z++)
        for (size_t y = 0; y < ROWS; y++)
            for (size_t x = 0; x < pitch; x++) {
                bool in = z >= Z && z < Z + D && y >= Y && y < Y + H && x >= X && x < X + W;
                unsigned char want =
                    in ? box[((z - Z) * H + (y - Y)) * W + (x - X)] : (unsigned char)0xEE;
                CHECK_EQ(back[(z * ROWS + y) * pitch + x], want);
            }
    free(back);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuMemFreeHost(box));
}

/* A copy of 2 slices of 4 rows of 64 bytes, packed, from host to d. */
static CUDA_MEMCPY3D slices_to_device(const void *host, CUdeviceptr d) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.srcPitch = c.dstPitch = c.WidthInBytes = 64;
    c.srcHeight = c.dstHeight = c.Height = 4;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d;
    c.Depth = 2;
    return c;
}

/* The layouts the driver manual forbids are refused, and nothing is copied. */
VG_TEST(copy_3d_refuses_bad_layouts) {
    setup();
    enum { N = 4096 };
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, N));
    CHECK_CU(cuMemsetD8(d, 0x11, N));
    unsigned char host[N];
    memset(host, 0x22, sizeof host);
    CUDA_MEMCPY3D c = slices_to_device(host, d);
    CUDA_MEMCPY3D bad = c;
    bad.dstPitch = 32; /* narrower than a row */
    CHECK_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = c;
    bad.dstHeight = 3; /* a slice shorter than the rows copied into it */
    CHECK_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = c;
    bad.dstLOD = 1; /* must be 0 */
    CHECK_EQ(cuMemcpy3D(&bad), CUDA_ERROR_INVALID_VALUE);
    unsigned char back[N];
    CHECK_CU(cuMemcpyDtoH(back, d, N));
    for (int i = 0; i < N; i++)
        CHECK_EQ(back[i], 0x11);
    CHECK_CU(cuMemcpy3D(&c)); /* the same copy, well formed */
    CHECK_CU(cuMemcpyDtoH(back, d, N));
    for (int i = 0; i < N; i++)
        CHECK_EQ(back[i], i < 64 * 4 * 2 ? 0x22 : 0x11);
    CHECK_CU(cuMemFree(d));
}

/* A copy whose last slice runs past the end of the allocation is refused (as vgsim does
 * for every copy; a caching allocator keeps the memory after it mapped, so under vramguard
 * the copy succeeds and guard mode reports the overrun instead). */
VG_TEST(copy_3d_past_the_allocation_is_rejected) {
    setup();
    if (!g_on_vgsim)
        vgt_skip("what the real driver checks of a 3D copy's range is not documented");
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 4096));
    unsigned char host[4096];
    CUDA_MEMCPY3D c = slices_to_device(host, d);
    c.dstZ = 4096 / (64 * 4) - 1; /* the last of its 16 slices, and one more */
    CHECK_EQ(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(d));
}

/* ---------------------------------------------------------------------------------------
 * Peer copies
 * ------------------------------------------------------------------------------------- */

/* A context of the last device (see the header), not current when this returns. */
static CUcontext other_context(void) {
    int n;
    CHECK_CU(cuDeviceGetCount(&n));
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, n - 1));
    CUcontext ctx;
    CHECK_CU(cuCtxCreate(&ctx, NULL, 0, dev));
    CHECK_CU(cuCtxSetCurrent(g_ctx));
    return ctx;
}

/* If a call made the host wait for a gate only the test can open, the test would hang:
 * a valve opens the gate after 3 s instead, and the test fails. */
typedef struct valve {
    gate_t *gate;
    pthread_t thread;
    pthread_mutex_t m;
    pthread_cond_t c;
    bool passed, opened;
} valve_t;

static void *valve_main(void *arg) {
    valve_t *v = arg;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 3;
    pthread_mutex_lock(&v->m);
    while (!v->passed && pthread_cond_timedwait(&v->c, &v->m, &t) == 0) {
    }
    v->opened = !v->passed;
    pthread_mutex_unlock(&v->m);
    if (v->opened)
        gate_open(v->gate);
    return NULL;
}

static void valve_arm(valve_t *v, gate_t *g) {
    *v = (valve_t){.gate = g};
    pthread_mutex_init(&v->m, NULL);
    pthread_cond_init(&v->c, NULL);
    CHECK_EQ(pthread_create(&v->thread, NULL, valve_main, v), 0);
}

/* The call returned: the valve is not needed. */
static void valve_pass(valve_t *v, const char *call, int line) {
    pthread_mutex_lock(&v->m);
    v->passed = true;
    pthread_cond_signal(&v->c);
    pthread_mutex_unlock(&v->m);
    CHECK_EQ(pthread_join(v->thread, NULL), 0);
    if (v->opened)
        vgt_fail(__FILE__, line, "%s made the host wait for the other context's work", call);
}

static void expect_words(CUdeviceptr d, unsigned first, unsigned rest, int line) {
    enum { N = 1024 };
    unsigned got[N];
    if (cuMemcpyDtoH(got, d, sizeof got) != CUDA_SUCCESS)
        vgt_fail(__FILE__, line, "cuMemcpyDtoH failed");
    for (int i = 0; i < N; i++)
        if (got[i] != (i == 0 ? first : rest))
            vgt_fail(__FILE__, line, "word %d is %u, expected %u", i, got[i], i ? rest : first);
}

static void sync_both(CUcontext other) {
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuCtxPushCurrent(other));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuCtxPopCurrent(NULL));
}

/* cuMemcpyPeer is serialised with the work queued in both contexts, before it and after
 * it, without making the host wait; cuMemcpyPeerAsync runs on its stream. */
VG_TEST(peer_copies_order_with_both_contexts) {
    setup();
    enum { N = 1024 };
    CUcontext other = other_context();
    CUdeviceptr a7, a8, a, b;
    CHECK_CU(cuMemAlloc(&a7, N * 4));
    CHECK_CU(cuMemAlloc(&a8, N * 4));
    CHECK_CU(cuMemAlloc(&a, N * 4));
    CHECK_CU(cuMemsetD32(a7, 7, N));
    CHECK_CU(cuMemsetD32(a8, 8, N));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuCtxPushCurrent(other));
    CHECK_CU(cuMemAlloc(&b, N * 4));
    /* 1. Work queued before: in the other context a gate, then 5s everywhere in b; the
     * copy of the 7s waits for them. */
    gate_t gb, ga;
    gate_init(&gb);
    gate_init(&ga);
    valve_t v;
    CHECK_CU(cuLaunchHostFunc(NULL, gate_fn, &gb));
    CHECK_CU(cuMemsetD32Async(b, 5, N, NULL));
    CHECK_CU(cuCtxPopCurrent(NULL));
    valve_arm(&v, &gb);
    CHECK_CU(cuMemcpyPeer(b, other, a7, g_ctx, N * 4));
    valve_pass(&v, "cuMemcpyPeer", __LINE__);
    EXPECT_BLOCKED(NULL); /* (this context's legacy stream: the copy waits) */
    gate_open(&gb);
    sync_both(other);
    expect_words(b, 7, 7, __LINE__);
    /* 2. Work queued after: the copy of the 8s waits for a gate here; a 9 written into b's
     * first word afterwards in the other context waits for the copy. */
    CHECK_CU(cuLaunchHostFunc(NULL, gate_fn, &ga));
    valve_arm(&v, &ga);
    CHECK_CU(cuMemcpyPeer(b, other, a8, g_ctx, N * 4));
    valve_pass(&v, "cuMemcpyPeer", __LINE__);
    CHECK_CU(cuCtxPushCurrent(other));
    CHECK_CU(cuMemsetD32Async(b, 9, 1, NULL));
    EXPECT_BLOCKED(NULL); /* (the other context's legacy stream) */
    CHECK_CU(cuCtxPopCurrent(NULL));
    gate_open(&ga);
    sync_both(other);
    expect_words(b, 9, 8, __LINE__);
    /* 3. Back, asynchronously, on a stream of this context. */
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuMemcpyPeerAsync(a, g_ctx, b, other, N * 4, s));
    CHECK_CU(cuStreamSynchronize(s));
    expect_words(a, 9, 8, __LINE__);
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuMemFree(a7));
    CHECK_CU(cuMemFree(a8));
    CHECK_CU(cuMemFree(a));
    CHECK_CU(cuCtxDestroy(other)); /* (frees b) */
}

/* A 3D peer copy of a sub-box, from this context's device memory to the other's. */
VG_TEST(copy_3d_peer_sub_box) {
    setup();
    enum { P = 64, ROWS = 4, SLICES = 3, N = P * ROWS * SLICES };
    CUcontext other = other_context();
    unsigned char src[N], back[N];
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 3 + 1);
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc(&a, N));
    CHECK_CU(cuMemcpyHtoD(a, src, N));
    CHECK_CU(cuCtxPushCurrent(other));
    CHECK_CU(cuMemAlloc(&b, N));
    CHECK_CU(cuMemsetD8(b, 0, N));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuCtxPopCurrent(NULL));
    CUDA_MEMCPY3D_PEER c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = a;
    c.srcContext = g_ctx;
    c.srcPitch = P;
    c.srcHeight = ROWS;
    c.srcXInBytes = 8;
    c.srcY = 1;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = b;
    c.dstContext = other;
    c.dstPitch = P;
    c.dstHeight = ROWS;
    c.dstXInBytes = 16;
    c.dstY = 2;
    c.dstZ = 1;
    c.WidthInBytes = 32;
    c.Height = 2;
    c.Depth = 2;
    CHECK_CU(cuMemcpy3DPeer(&c));
    CHECK_CU(cuCtxPushCurrent(other));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuCtxPopCurrent(NULL));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(back, b, N));
    for (int z = 0; z < SLICES; z++)
        for (int y = 0; y < ROWS; y++)
            for (int x = 0; x < P; x++) {
                bool in = z >= 1 && y >= 2 && x >= 16 && x < 48;
                int sz = z - 1, sy = y - 2 + 1, sx = x - 16 + 8;
                unsigned char want = in ? src[(sz * ROWS + sy) * P + sx] : 0;
                CHECK_EQ(back[(z * ROWS + y) * P + x], want);
            }
    CHECK_CU(cuMemFree(a));
    CHECK_CU(cuCtxDestroy(other));
}
