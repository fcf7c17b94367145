"""S1 in PyTorch: a custom CUDA kernel writes past the end of its output.

The kernel is launched with rows*cols threads computed from the wrong shape (cols + 1),
so the last `rows` floats land after the tensor. With --read the kernel instead reads
past the end of its input (a copy from an input of the wrong shape into an output big
enough): nothing is damaged, so only a checker of accesses sees it (compute-sanitizer,
told vramguard's allocations: docs/compute-sanitizer.md). With --fixed the shape is right."""
import sys

import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void fill(float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)i;
}
__global__ void copy(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
void launch_fill(torch::Tensor out, int64_t n) {
    fill<<<(n + 255) / 256, 256>>>(out.data_ptr<float>(), (int)n);
}
void launch_copy(torch::Tensor in, torch::Tensor out, int64_t n) {
    copy<<<(n + 255) / 256, 256>>>(in.data_ptr<float>(), out.data_ptr<float>(), (int)n);
}
"""
ext = load_inline(name="vg_oob_fill_copy",
                  cpp_sources="void launch_fill(torch::Tensor out, int64_t n);\n"
                              "void launch_copy(torch::Tensor in, torch::Tensor out, int64_t n);",
                  cuda_sources=CUDA, functions=["launch_fill", "launch_copy"],
                  extra_cuda_cflags=["-lineinfo"], verbose=False)

rows, cols = 64, 250
fixed = "--fixed" in sys.argv
n = rows * cols if fixed else rows * (cols + 1)  # the bug: a wrong shape
if "--read" in sys.argv:
    x = torch.ones(rows, cols, device="cuda")
    out = torch.zeros(rows, cols + 1, device="cuda")
    ext.launch_copy(x, out, n)  # reads x past its end unless fixed
else:
    out = torch.empty(rows, cols, device="cuda")
    ext.launch_fill(out, n)
torch.cuda.synchronize()
print("sum", out.sum().item())
