#!/usr/bin/env bash
# perturbed.sh BUILD [SEEDS] — peak reserved memory when a trace's frees arrive in a
# slightly different order (vramguard replay --perturb=SEED: 1 free in 50 delayed by 1-8
# events, as the last frees of PyTorch's backward thread can be), for vramguard and for
# the model of PyTorch's allocator (bench/pytorch_alloc_model.py) on the same orders.
# SEEDS default: 0 (the trace's own order) to 8.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:?usage: bench/perturbed.sh BUILD [SEEDS]}
SEEDS=${2:-0,1,2,3,4,5,6,7,8}
printf '| trace | vramguard peak reserved, GB: min / median / max | PyTorch model: min / median / max | orders where vramguard <= PyTorch |\n|---|---|---|---|\n'
for t in bench/traces/*.csv; do
    vg=$(for s in ${SEEDS//,/ }; do
        "$B/vramguard" replay --json --repeat=1 --perturb="$s" "$t" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_reserved"])'
    done)
    pt=$(python3 bench/pytorch_alloc_model.py --perturb="$SEEDS" "$t" | awk '{print $6}')
    python3 - "$t" "$vg" "$pt" <<'PY'
import sys
name = sys.argv[1].split("/")[-1][:-4]
vg = [int(x) for x in sys.argv[2].split()]
pt = [int(x) for x in sys.argv[3].split()]
def s(v):
    w = sorted(v)
    return "%.3f / %.3f / %.3f" % (w[0] / 1e9, w[len(w) // 2] / 1e9, w[-1] / 1e9)
print("| %s | %s | %s | %d of %d |" % (name, s(vg), s(pt), sum(a <= b for a, b in zip(vg, pt)), len(vg)))
PY
done
