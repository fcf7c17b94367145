#!/bin/sh
# Regenerate the committed PTX of the conformance kernels (needs the CUDA toolkit).
# compute_75 is the oldest target CUDA 13 supports; the driver JIT-compiles it for newer GPUs.
set -e
cd "$(dirname "$0")"
"${NVCC:-/usr/local/cuda/bin/nvcc}" -ptx -arch=compute_75 -o kernels.ptx kernels.cu
