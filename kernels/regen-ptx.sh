#!/bin/sh
# Regenerate the committed device code (so that vramguard builds without the toolkit):
#   guard.ptx        guard mode's kernels (library)
#   demo.ptx         the buggy kernels `vramguard demo` plants
#   memcheck.fatbin  memcheck mode's device callback, a Compute Sanitizer patch: machine
#                    code for each architecture CUDA 13 builds (sm_75 to sm_120) and PTX
#                    of the newest, which the API compiles for GPUs newer still
# compute_75 is the oldest target CUDA 13 supports; the driver JIT-compiles the PTX for
# newer GPUs at module load.
set -e
cd "$(dirname "$0")"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
for k in guard demo; do
    "$NVCC" -ptx -arch=compute_75 -o $k.ptx $k.cu
done
gencode=""
for sm in 75 80 86 89 90 100 120; do
    gencode="$gencode -gencode arch=compute_$sm,code=sm_$sm"
done
"$NVCC" --fatbin --keep-device-functions -Xptxas --compile-as-tools-patch $gencode \
    -gencode arch=compute_120,code=compute_120 -o memcheck.fatbin -c memcheck.cu
