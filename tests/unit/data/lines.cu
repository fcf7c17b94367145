// Source of lines.cubin (test_cubin_lines.c), built with line information:
//   nvcc -cubin -arch=sm_90 -lineinfo -o lines.cubin lines.cu
// The test knows the line of each access below: keep them where they are.
#include "lines_helper.cuh"

extern "C" __global__ void read_past(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i + 1];
}

__device__ __noinline__ void store_one(float *p, int i, float v) {
    p[i] = v;
}

__global__ void scale(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        store_one(out, i, twice_at(in, i));
}
