/* tensormap.c — vgsim: tensor maps (cuTensorMapEncodeTiled, ...Im2col, ...Im2colWide,
 * cuTensorMapReplaceAddress), the descriptors a Hopper kernel's tensor memory accelerator
 * copies tiles with.
 *
 * The arguments are checked by the driver manual's rules (cuda.h): the map aligned to 64
 * bytes; rank 1-5 (3 or more with interleave); the address aligned to 16 bytes, 32 with
 * 32-byte interleave or the 16-byte packed types; extents 1 to 2^32 (packed types: whole
 * pairs, or rows of 128); strides multiples of 16 (or 32 as the address) below 2^40;
 * boxes of 1-256 elements whose first dimension fills whole 16-byte units within the
 * swizzle's span; element strides 1-8; 32-byte interleave with 32-byte swizzle. Not
 * modelled: the im2col corners' ranges.
 * The 128 bytes written are vgsim's own encoding, scrambled so that nothing outside vgsim
 * can read it as a layout (the driver's format is undocumented: vramguard must not depend
 * on one). vgsim_tensor_map() decodes it for kernels' host twins (vgsim.h).
 */
#include <string.h>

#include "internal.h"
#include "vgsim.h"

#define MAGIC 0x76677469u /* "vgti" */
#define KEY 0x9e3779b97f4a7c15ull

typedef struct encoded {
    uint32_t magic;
    uint8_t rank, data_type, interleave, pad;
    uint64_t address;
    uint64_t dims[5];
    uint64_t strides[4]; /* bytes, of dimensions 1 to rank - 1 */
    uint32_t box[5];
} encoded_t;
_Static_assert(sizeof(encoded_t) <= sizeof(CUtensorMap), "fits a tensor map");

static void scramble(uint64_t *q) {
    for (int i = 0; i < CU_TENSOR_MAP_NUM_QWORDS; i++)
        q[i] ^= KEY * (uint64_t)(i + 1);
}

static void store(CUtensorMap *map, const encoded_t *e) {
    memset(map, 0, sizeof *map);
    memcpy(map->opaque, e, sizeof *e);
    scramble(map->opaque);
}

static bool load(const void *map, encoded_t *e) {
    uint64_t q[CU_TENSOR_MAP_NUM_QWORDS];
    memcpy(q, map, sizeof q);
    scramble(q);
    memcpy(e, q, sizeof *e);
    return e->magic == MAGIC && e->rank >= 1 && e->rank <= 5;
}

/* Bytes per element, 0 for the packed 4- and 6-bit types. */
static unsigned elem_bytes(CUtensorMapDataType t) {
    static const unsigned size[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4, 0, 0, 0};
    return (unsigned)t < sizeof size / sizeof size[0] ? size[t] : 0;
}

/* The packed types whose 16 values take 16 bytes: 32-byte alignment, 128-value rows. */
static bool packed16(CUtensorMapDataType t) {
    return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

/* The checks every encoding shares, and the fields they fill. */
static CUresult encode_common(encoded_t *e, CUtensorMap *map, CUtensorMapDataType type,
                              cuuint32_t rank, void *address, const cuuint64_t *dims,
                              const cuuint64_t *strides, const cuuint32_t *element_strides,
                              CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                              CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    uint64_t a = (uint64_t)(uintptr_t)address;
    bool i32 = interleave == CU_TENSOR_MAP_INTERLEAVE_32B;
    unsigned align = i32 || packed16(type) ? 32 : 16; /* (address and strides) */
    if (!map || (uintptr_t)map % 64 || !address || !dims || !element_strides || rank < 1 ||
        rank > 5 || (rank > 1 && !strides) ||
        (unsigned)type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
        (unsigned)interleave > CU_TENSOR_MAP_INTERLEAVE_32B ||
        (unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
        (unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (unsigned)fill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA ||
        (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3) ||
        (i32 && swizzle != CU_TENSOR_MAP_SWIZZLE_32B) ||
        (type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B &&
         interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) ||
        a % align)
        return CUDA_ERROR_INVALID_VALUE;
    memset(e, 0, sizeof *e);
    e->magic = MAGIC;
    e->rank = (uint8_t)rank;
    e->data_type = (uint8_t)type;
    e->interleave = (uint8_t)interleave;
    e->address = a;
    for (cuuint32_t i = 0; i < rank; i++) {
        if (dims[i] == 0 || dims[i] > (1ull << 32) || element_strides[i] < 1 ||
            element_strides[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;
        e->dims[i] = dims[i];
    }
    if ((packed16(type) && dims[0] % 128) ||
        (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dims[0] % 2))
        return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t i = 0; i + 1 < rank; i++) {
        if (strides[i] % align || strides[i] >= (1ull << 40))
            return CUDA_ERROR_INVALID_VALUE;
        e->strides[i] = strides[i];
    }
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type,
                                          cuuint32_t rank, void *address,
                                          const cuuint64_t *dims, const cuuint64_t *strides,
                                          const cuuint32_t *box,
                                          const cuuint32_t *element_strides,
                                          CUtensorMapInterleave interleave,
                                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                          CUtensorMapFloatOOBfill fill) {
    encoded_t e;
    CUresult r = encode_common(&e, map, type, rank, address, dims, strides, element_strides,
                               interleave, swizzle, l2, fill);
    if (r != CUDA_SUCCESS)
        return r;
    if (!box)
        return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t i = 0; i < rank; i++) {
        if (box[i] < 1 || box[i] > 256)
            return CUDA_ERROR_INVALID_VALUE;
        e.box[i] = box[i];
    }
    /* the box's first dimension: whole 16-byte units, within the swizzle's span */
    unsigned size = elem_bytes(type), inner = box[0] * size;
    static const unsigned span[] = {0, 32, 64, 128, 128, 128, 128};
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && size &&
        (inner % 16 || (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && inner > span[swizzle])))
        return CUDA_ERROR_INVALID_VALUE;
    if (packed16(type) && box[0] != 128)
        return CUDA_ERROR_INVALID_VALUE;
    store(map, &e);
    return CUDA_SUCCESS;
}

/* An im2col map's own checks (`corners_ok`: its pixel box, and mode), then stored. */
static CUresult im2col_store(CUtensorMap *map, encoded_t *e, cuuint32_t rank, bool corners_ok,
                             cuuint32_t channels, cuuint32_t pixels) {
    if (rank < 3 || !corners_ok || channels < 1 || channels > 256 || pixels < 1 ||
        pixels > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    e->box[0] = channels;
    e->box[1] = pixels;
    store(map, e);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuTensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType type,
                                           cuuint32_t rank, void *address,
                                           const cuuint64_t *dims, const cuuint64_t *strides,
                                           const int *lower, const int *upper,
                                           cuuint32_t channels, cuuint32_t pixels,
                                           const cuuint32_t *element_strides,
                                           CUtensorMapInterleave interleave,
                                           CUtensorMapSwizzle swizzle,
                                           CUtensorMapL2promotion l2,
                                           CUtensorMapFloatOOBfill fill) {
    encoded_t e;
    CUresult r = encode_common(&e, map, type, rank, address, dims, strides, element_strides,
                               interleave, swizzle, l2, fill);
    if (r != CUDA_SUCCESS)
        return r;
    return im2col_store(map, &e, rank, lower && upper, channels, pixels);
}

VGSIM_API CUresult cuTensorMapEncodeIm2colWide(
    CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *address,
    const cuuint64_t *dims, const cuuint64_t *strides, int lower, int upper,
    cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *element_strides,
    CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill) {
    encoded_t e;
    CUresult r = encode_common(&e, map, type, rank, address, dims, strides, element_strides,
                               interleave, swizzle, l2, fill);
    if (r != CUDA_SUCCESS)
        return r;
    return im2col_store(map, &e, rank,
                        lower <= upper && (unsigned)mode <= CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128,
                        channels, pixels);
}

VGSIM_API CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *address) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    encoded_t e;
    uint64_t a = (uint64_t)(uintptr_t)address;
    if (!map || (uintptr_t)map % 64 || !address || !load(map, &e) ||
        a % (e.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ||
                     packed16((CUtensorMapDataType)e.data_type) ? 32 : 16))
        return CUDA_ERROR_INVALID_VALUE;
    e.address = a;
    store(map, &e);
    return CUDA_SUCCESS;
}

VGSIM_API int vgsim_tensor_map(const void *map, vgsim_tensor_map_t *out) {
    encoded_t e;
    if (!map || !out || !load(map, &e))
        return -1;
    memset(out, 0, sizeof *out);
    out->address = (void *)(uintptr_t)e.address;
    out->rank = e.rank;
    out->data_type = e.data_type;
    out->elem_bytes = elem_bytes((CUtensorMapDataType)e.data_type);
    for (int i = 0; i < e.rank; i++) {
        out->dims[i] = e.dims[i];
        out->box[i] = e.box[i];
    }
    for (int i = 0; i + 1 < e.rank; i++)
        out->strides[i] = e.strides[i];
    return 0;
}
