#!/bin/sh
# Regenerate examples/kernels.ptx from kernels.cu (committed: building needs no toolkit).
# -lineinfo: on a GPU the driver's compiler keeps the source lines, so memcheck mode's
# reports name the line of kernels.cu (docs/memcheck.md); the path is made relative to the
# repository, so that the PTX does not depend on where it was generated.
set -e
cd "$(dirname "$0")"
"${NVCC:-/usr/local/cuda/bin/nvcc}" -ptx -arch=compute_75 -lineinfo -o kernels.ptx kernels.cu
sed -i 's|^\(\s*\.file\s*[0-9]*\s*\)"[^"]*/examples/kernels.cu"|\1"examples/kernels.cu"|' kernels.ptx
