#!/bin/sh
# Regenerate kernels/guard.ptx (committed, so that vramguard builds without the toolkit).
# compute_75 is the oldest target CUDA 13 supports; the driver JIT-compiles it for newer
# GPUs at module load.
set -e
cd "$(dirname "$0")"
"${NVCC:-/usr/local/cuda/bin/nvcc}" -ptx -arch=compute_75 -o guard.ptx guard.cu
