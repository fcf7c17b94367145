#!/bin/bash
# scripts/sanitizer_probe/run.sh OUT: does the Compute Sanitizer API work from a library
# preloaded with LD_PRELOAD, or only from CUDA_INJECTION64_PATH? (docs/decisions.md G13)
# A driver-API program (app.c) runs kern.cu's kernels plain, then with tool.c (which
# patches every global access with patch.cu's callback and prints what it saw) injected
# each way. Needs the CUDA toolkit with compute-sanitizer and a GPU.
set -u
O=${1:-/tmp}; cd "$(dirname "$0")"
CS=$(dirname "$(find /usr/local -name libsanitizer-public.so 2>/dev/null | head -1)")
echo "compute-sanitizer at $CS"; ls -la "$CS" "$CS/include" 2>&1 | head -60
compute-sanitizer --version | head -3
nvcc --version | tail -2
nvcc --help | grep -i -A2 "tools-patch\|keep-device-functions" | head -20
nvcc -ptx -arch=compute_75 -o kern.ptx kern.cu || exit 1
nvcc --fatbin --keep-device-functions -Xptxas --compile-as-tools-patch -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75 -I"$CS/include" -o patch.fatbin -c patch.cu 2>&1 | head; ls -la *.fatbin
gcc -shared -fPIC -o libprobe.so tool.c -I"$CS/include" -I/usr/local/cuda/include -L"$CS" -lsanitizer-public -Wl,-rpath,"$CS" 2>&1 | head -30
gcc -o app app.c -I/usr/local/cuda/include -lcuda 2>&1 | head
export PROBE_PATCH=$PWD/patch.fatbin
echo "== plain"; timeout 30 ./app kern.ptx
echo "== injection path"; CUDA_INJECTION64_PATH=$PWD/libprobe.so timeout 60 ./app kern.ptx
echo "== LD_PRELOAD constructor"; PROBE_CTOR=1 LD_PRELOAD=$PWD/libprobe.so timeout 60 ./app kern.ptx
echo "== LD_PRELOAD, dlopen'd sanitizer only after cuInit? (constructor off, injection off)"; LD_PRELOAD=$PWD/libprobe.so timeout 30 ./app kern.ptx
