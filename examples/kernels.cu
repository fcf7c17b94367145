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

// x[i] = v for i < n, with x and n in a struct, as PyTorch's elementwise kernels get their
// tensors' data pointers (at::detail::Array<char *, N>): the pointer is not a parameter of
// its own.
struct ex_span {
    unsigned long long n;
    float *x;
};
extern "C" __global__ void ex_fill_span(float v, ex_span s) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < s.n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        s.x[i] = v;
}

// *out = the sum of x[i] for first <= i < first + n: reads x, writes nothing of it (one
// thread: the order of the additions, and so the sum, is the same on any GPU and on vgsim).
extern "C" __global__ void ex_sum(const float *x, unsigned long long first, unsigned long long n,
                                  float *out) {
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    float s = 0.0f;
    for (unsigned long long i = first; i < first + n; i++)
        s += x[i];
    *out = s;
}

// *out = the sum of the floats in [begin, end): a begin/end pair, end one past the last.
extern "C" __global__ void ex_sum_range(const float *begin, const float *end, float *out) {
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    float s = 0.0f;
    for (const float *p = begin; p < end; p++)
        s += *p;
    *out = s;
}

// p[i] = v for i < n, bytes: a kernel that touches exactly the last byte of an odd size.
extern "C" __global__ void ex_fill_bytes(unsigned char *p, unsigned char v, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = v;
}

// x[i] = v for i < n, with the data type and element size before the pointer in the
// struct, as PyTorch's loaders and storers carry them (c10::ScalarType::Float is 6): the
// struct's first 8 bytes are two small integers, (6, 4), which read as one word are
// 0x400000006, an address on a GPU whose memory lies near 16 GiB.
struct ex_typed {
    int dtype, elem_size;
    unsigned long long n;
    float *x;
};
extern "C" __global__ void ex_fill_typed(float v, ex_typed s) {
    if (s.dtype != 6 || s.elem_size != (int)sizeof(float))
        return;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < s.n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        s.x[i] = v;
}
