// lines_helper.cuh — a device function in a second file, for lines.cu (test_cubin_lines.c).
__device__ __forceinline__ float twice_at(const float *p, int i) {
    return 2.f * p[i];
}
