// kern.cu — the probe's kernels (run.sh compiles them to PTX on the device).
extern "C" __global__ void probe_read(const float *x, long long i, float *out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *out = x[i];
}
extern "C" __global__ void probe_write(float *x, long long i) {
    if (blockIdx.x == 0 && threadIdx.x == 0) x[i] = 1.0f;
}
