#!/bin/sh
# Regenerate the committed PTX (so that vramguard builds without the toolkit):
#   guard.ptx  guard mode's kernels (library)
#   demo.ptx   the buggy kernels `vramguard demo` plants
# compute_75 is the oldest target CUDA 13 supports; the driver JIT-compiles it for newer
# GPUs at module load.
set -e
cd "$(dirname "$0")"
for k in guard demo; do
    "${NVCC:-/usr/local/cuda/bin/nvcc}" -ptx -arch=compute_75 -o $k.ptx $k.cu
done
