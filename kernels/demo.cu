// demo.cu — the buggy kernels `vramguard demo` plants (S1, S2, S9). Compiled to demo.ptx by
// regen-ptx.sh; on vgsim, src/cli/demo_kernels.c runs the same kernels on the host.

// x[i] = i for i < n: given the wrong n (a shape computed with one column too many),
// it writes past the end of the tensor (S1).
extern "C" __global__ void demo_iota(float *x, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        x[i] = (float)i;
}

// x[i] = v for i < n: run on a side stream after the tensor was freed (S2).
extern "C" __global__ void demo_fill(float *x, float v, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        x[i] = v;
}

// One thread stores v at x[i] for each of the n indices: with a corrupted index the store
// lands far outside any allocation and the context dies (S9).
extern "C" __global__ void demo_scatter(float *x, const long long *idx, unsigned int n,
                                        float v) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[idx[i]] = v;
}
