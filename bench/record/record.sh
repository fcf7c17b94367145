#!/usr/bin/env bash
# Record CPU allocation traces of PyTorch workloads into bench/traces/NAME.csv.
#
#   bench/record/record.sh [NAME...]     (default: every workload of workloads.py)
#
# Builds alloc_log.so (the c10 allocation logger) and blas_dnnl.so (sgemm_ through
# oneDNN's dnnl_sgemm, for speed: Debian's libblas.so.3 is the reference BLAS) into a
# temporary directory, runs `workloads.py NAME` under both, then checks each trace and
# prints its events and peak live bytes. glibc.malloc.hugetlb=1 has glibc back its blocks
# with transparent huge pages: first touches of fresh 4 KiB pages cost ~2 s per GiB on the
# VM these were recorded on. Neither changes what c10 asks for, only how fast it runs. PYTHON picks the interpreter (default
# /usr/bin/python3, the one Debian's python3-torch is installed for); VG_NO_DNNL_BLAS=1
# leaves the BLAS alone.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
traces="$here/../traces"
python="${PYTHON:-/usr/bin/python3}"
all=(cnn_train cnn_train_eval unet_train lstm_lm gpt_train gpt_train_accum gen_small gen_large mixed_batch)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
gcc -std=c11 -O2 -Wall -Wextra -shared -fPIC -o "$tmp/alloc_log.so" "$here/alloc_log.c" -ldl -lpthread
preload="$tmp/alloc_log.so"
if [ "${VG_NO_DNNL_BLAS:-0}" != 1 ]; then
    gcc -std=c11 -O2 -Wall -Wextra -shared -fPIC -o "$tmp/blas_dnnl.so" "$here/blas_dnnl.c" -l:libdnnl.so.2
    preload="$preload:$tmp/blas_dnnl.so"
fi

export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"

out=()
for name in "${names[@]}"; do
    echo "== $name"
    start=$(date +%s%N)
    VG_ALLOC_LOG="$traces/$name.csv" LD_PRELOAD="$preload" "$python" "$here/workloads.py" "$name"
    ms=$((($(date +%s%N) - start) / 1000000))
    printf '%s: recorded in %d.%d s, %s bytes\n' "$name" $((ms / 1000)) $((ms % 1000 / 100)) \
        "$(stat -c %s "$traces/$name.csv")"
    out+=("$traces/$name.csv")
done
"$python" "$here/check_trace.py" "${out[@]}"
