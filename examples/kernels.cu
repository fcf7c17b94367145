// kernels.cu — the kernels of the example programs (examples/*.c). regen-ptx.sh compiles
// them to kernels.ptx; on vgsim, common.h registers host versions under the same names.

// x[i] = v for i < n
extern "C" __global__ void ex_fill(float *x, float v, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        x[i] = v;
}

// x[idx[i]] = v for i < n
extern "C" __global__ void ex_scatter(float *x, const long long *idx, unsigned int n, float v) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[idx[i]] = v;
}
