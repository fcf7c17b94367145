// kernels.cu — the conformance suite's kernels for real GPUs.
// Regenerate kernels.ptx with:  tests/conformance/regen-ptx.sh
// vgsim runs host twins of these (conformance.c registers them under the same names).
extern "C" __global__ void cf_store_u32(unsigned int *p, unsigned int v) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *p = v;
}

extern "C" __global__ void cf_fill_u32(unsigned int *p, unsigned int v, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = v;
}

extern "C" __global__ void cf_add_u32(unsigned int *p, unsigned int v, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] += v;
}
