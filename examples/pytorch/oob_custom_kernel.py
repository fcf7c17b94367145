"""S1 in PyTorch: a custom CUDA kernel writes past the end of its output.

The kernel is launched with rows*cols threads computed from the wrong shape (cols + 1),
so the last `rows` floats land after the tensor. With --fixed the shape is right."""
import sys

import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void fill(float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)i;
}
void launch_fill(torch::Tensor out, int64_t n) {
    fill<<<(n + 255) / 256, 256>>>(out.data_ptr<float>(), (int)n);
}
"""
ext = load_inline(name="vg_oob_fill", cpp_sources="void launch_fill(torch::Tensor out, int64_t n);",
                  cuda_sources=CUDA, functions=["launch_fill"], verbose=False)

rows, cols = 64, 250
out = torch.empty(rows, cols, device="cuda")
n = rows * cols if "--fixed" in sys.argv else rows * (cols + 1)  # the bug: a wrong shape
ext.launch_fill(out, n)
torch.cuda.synchronize()
print("sum", out.sum().item())
