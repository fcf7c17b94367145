/* test_tensormaps.c — the region of global memory a tensor map covers, from the arguments
 * of cuTensorMapEncode* (memcheck mode's initcheck counts it as written when a launch
 * carries the map: check/tensormaps.h). The first dimension is contiguous; each other one
 * adds (its extent - 1) strides; packed 4- and 6-bit types take 8 or 16 bytes per 16
 * values; a shape the driver refuses covers nothing. */
#include "check/tensormaps.h"
#include "harness.h"

VG_TEST(dense_and_strided_tensors_cover_their_last_element) {
    cuuint64_t dims1[1] = {1000};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, dims1, NULL), 4000);
    cuuint64_t dims2[2] = {64, 16}, pitch[1] = {256};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, dims2, pitch), 64 * 16 * 4);
    /* rows of 100 floats, 112 apart: the last row ends 12 floats before the pitch would */
    cuuint64_t rows[2] = {100, 40}, wide[1] = {448};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, rows, wide), 39 * 448 + 400);
    /* bf16, 3D: [8][32][128] with padded rows and planes */
    cuuint64_t d3[3] = {128, 32, 8}, s3[2] = {272, 272 * 33};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, d3, s3),
             256 + 31 * 272 + 7 * 272 * 33);
    cuuint64_t d5[5] = {16, 2, 2, 2, 2}, s5[4] = {16, 32, 64, 128};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_UINT8, 5, d5, s5), 16 + 16 + 32 + 64 + 128);
}

VG_TEST(packed_types_take_their_aligned_bytes) {
    cuuint64_t dims[1] = {256};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, 1, dims, NULL), 128);
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, 1, dims, NULL), 256);
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B, 1, dims, NULL), 256);
}

VG_TEST(shapes_the_driver_refuses_cover_nothing) {
    cuuint64_t dims[2] = {64, 16}, pitch[1] = {256}, zero[2] = {64, 0};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 0, dims, pitch), 0);
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 6, dims, pitch), 0);
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, dims, NULL), 0);
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, zero, pitch), 0);
    CHECK_EQ(vg__tensormap_span((CUtensorMapDataType)99, 2, dims, pitch), 0);
    cuuint64_t huge[2] = {64, 1ull << 32}, far[1] = {(1ull << 40) - 16};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, huge, far), 0); /* >2^64 */
    /* (2^32 - 1) strides of 2^32 + 16 bytes: past 2^64, not wrapped to 64 GB */
    cuuint64_t wraps[1] = {(1ull << 32) + 16};
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, huge, wraps), 0);
    cuuint64_t big[2] = {64, 1ull << 20}, wide[1] = {1ull << 30}; /* 2^50 bytes: past 2^48 */
    CHECK_EQ(vg__tensormap_span(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, big, wide), 0);
}
