// Source of two_kernels.cubin (test_kernel_names.c): nvcc -cubin -arch=sm_90 -o two_kernels.cubin two_kernels.cu
extern "C" __global__ void first_kernel(float *p) { p[threadIdx.x] = 1.f; }
__global__ void gather_rows(const float *a, const int *i, float *o) { o[threadIdx.x] = a[i[threadIdx.x]]; }
