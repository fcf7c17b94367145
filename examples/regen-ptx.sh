#!/bin/sh
# Regenerate examples/kernels.ptx from kernels.cu (committed: building needs no toolkit).
set -e
cd "$(dirname "$0")"
"${NVCC:-/usr/local/cuda/bin/nvcc}" -ptx -arch=compute_75 -o kernels.ptx kernels.cu
