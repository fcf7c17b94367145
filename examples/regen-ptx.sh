#!/bin/sh
# Regenerate examples/kernels.ptx from kernels.cu, and kernels_tma.ptx from kernels_tma.cu
# (committed: building needs no toolkit). kernels_tma.cu's bulk tensor copies need sm_90.
# -lineinfo: on a GPU the driver's compiler keeps the source lines, so memcheck mode's
# reports name the line of kernels.cu (docs/memcheck.md); the path is made relative to the
# repository, so that the PTX does not depend on where it was generated.
set -e
cd "$(dirname "$0")"
NVCC="${NVCC:-/usr/local/cuda/bin/nvcc}"
"$NVCC" -ptx -arch=compute_75 -lineinfo -o kernels.ptx kernels.cu
"$NVCC" -ptx -arch=compute_90 -lineinfo -o kernels_tma.ptx kernels_tma.cu
for f in kernels kernels_tma; do
    sed -i "s|^\(\s*\.file\s*[0-9]*\s*\)\"[^\"]*/examples/$f.cu\"|\1\"examples/$f.cu\"|" $f.ptx
done
