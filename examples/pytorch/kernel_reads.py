"""Two reads that only a checker of every access sees (memcheck mode, docs/memcheck.md).

--gather  a custom gather kernel takes its indices from a tensor that holds one index
          past the end of the table (an off-by-one in a vocabulary size): the kernel reads
          4 bytes past the table. Nothing is written out of place, PyTorch's allocator
          hides the read in its cache, and the result is silently wrong.
--stream  a tensor is freed (del) while a kernel on a side stream that reads it is queued
          behind a long kernel, with no record_stream: the caching allocator may hand the
          memory to the next tensor before the side stream reads it.
--fixed   the right vocabulary size / record_stream.

    python -m vramguard run --mode=memcheck examples/pytorch/kernel_reads.py --gather"""
import sys

import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void gather(const float *table, const long *idx, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = table[idx[i]];
}
__global__ void spin_sum(const float *x, float *out, int n, long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    float s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    atomicAdd(out, s);
}
void launch_gather(torch::Tensor table, torch::Tensor idx, torch::Tensor out) {
    int n = (int)idx.numel();
    gather<<<(n + 255) / 256, 256>>>(table.data_ptr<float>(), idx.data_ptr<long>(),
                                     out.data_ptr<float>(), n);
}
void launch_spin_sum(torch::Tensor x, torch::Tensor out, int64_t cycles) {
    spin_sum<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), (int)x.numel(), (long long)cycles);
}
"""
HEADERS = "#include <ATen/cuda/CUDAContext.h>\n"
ext = load_inline(name="vg_kernel_reads",
                  cpp_sources="void launch_gather(torch::Tensor t, torch::Tensor i, torch::Tensor o);\n"
                              "void launch_spin_sum(torch::Tensor x, torch::Tensor o, int64_t c);",
                  cuda_sources=HEADERS + CUDA, functions=["launch_gather", "launch_spin_sum"],
                  extra_cuda_cflags=["-lineinfo"], verbose=False)

fixed = "--fixed" in sys.argv
if "--stream" in sys.argv:
    side = torch.cuda.Stream()
    x = torch.ones(1 << 16, device="cuda")
    out = torch.zeros(1, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ext.launch_spin_sum(x, out, 200_000_000)  # reads x after a long spin
    if fixed:
        x.record_stream(side)
    del x  # the bug (without record_stream): x's memory is free while side still reads it
    y = torch.full((1 << 16,), 2.0, device="cuda")  # may take x's memory
    torch.cuda.synchronize()
    print("sum", out.item(), "(65536 expected)")
else:
    vocab = 1000
    table = torch.arange(vocab, dtype=torch.float32, device="cuda")
    idx = torch.tensor([0, 10, vocab - 1 if fixed else vocab], device="cuda")  # the bug: vocab
    out = torch.empty(3, device="cuda")
    ext.launch_gather(table, idx, out)
    torch.cuda.synchronize()
    print("gathered", out.tolist())
