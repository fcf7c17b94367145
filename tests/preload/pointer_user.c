/* pointer_user.c — what a library asks of a pointer (tests/cli interposer_pointer_queries):
 * its range through cuMemGetAddressRange, cuPointerGetAttribute and cuPointerGetAttributes
 * must agree and name the allocation (under vramguard, not its segment or page), and an
 * attempt to export it with cuIpcGetMemHandle must fail cleanly rather than share the
 * wrong memory. Prints what it found; exit status 0 when the answers agree.
 */
#include "common.h"

static int failures;

#define EXPECT(cond, ...)                                                                   \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            printf("wrong: " __VA_ARGS__);                                                  \
            printf("\n");                                                                   \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 1000));
    CK(cuMemAlloc(&b, 5000));
    CUdeviceptr inside = b + 100, base = 0, attr_base = 0;
    size_t size = 0, attr_size = 0;
    CK(cuMemGetAddressRange(&base, &size, inside));
    EXPECT(base == b, "cuMemGetAddressRange base %#llx, the allocation is %#llx", base, b);
    EXPECT(size >= 5000, "cuMemGetAddressRange size %zu for a 5000-byte allocation", size);
    CK(cuPointerGetAttribute(&attr_base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside));
    CK(cuPointerGetAttribute(&attr_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside));
    EXPECT(attr_base == base && attr_size == size,
           "cuPointerGetAttribute says %#llx + %zu, cuMemGetAddressRange %#llx + %zu",
           attr_base, attr_size, base, size);
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                    CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned int type = 0;
    CUdeviceptr many_base = 0;
    size_t many_size = 0;
    void *data[3] = {&type, &many_base, &many_size};
    CK(cuPointerGetAttributes(3, attrs, data, inside));
    EXPECT(type == CU_MEMORYTYPE_DEVICE, "memory type %u", type);
    EXPECT(many_base == base && many_size == size,
           "cuPointerGetAttributes says %#llx + %zu, cuMemGetAddressRange %#llx + %zu",
           many_base, many_size, base, size);
    CUipcMemHandle h;
    CUresult r = cuIpcGetMemHandle(&h, b);
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("range %s; cuIpcGetMemHandle: %s\n", failures ? "inconsistent" : "the allocation's",
           name);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    return failures != 0;
}
