#!/usr/bin/env bash
# perturbed.sh BUILD [SEEDS] — peak reserved memory when a trace's frees arrive in a
# slightly different order (vramguard replay --perturb=SEED: 1 free in 50 delayed by 1-8
# events, as the last frees of PyTorch's backward thread can be), for vramguard and for
# the models of PyTorch's allocator (bench/pytorch_alloc_model.py), default and with
# expandable_segments:True, on the same orders.
# SEEDS default: 0 (the trace's own order) to 8.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:?usage: bench/perturbed.sh BUILD [SEEDS]}
SEEDS=${2:-0,1,2,3,4,5,6,7,8}
printf '| trace | vramguard peak reserved, GB: min / median / max | PyTorch default (model) | PyTorch expandable_segments (model) | orders where vramguard <= both |\n|---|---|---|---|---|\n'
for t in bench/traces/*.csv bench/traces/*.csv.gz; do
    vg=$(for s in ${SEEDS//,/ }; do
        "$B/vramguard" replay --json --repeat=1 --perturb="$s" "$t" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_reserved"])'
    done)
    pt=$(python3 bench/pytorch_alloc_model.py --perturb="$SEEDS" "$t" | awk '{print $6}')
    ex=$(python3 bench/pytorch_alloc_model.py --expandable --perturb="$SEEDS" "$t" | awk '{print $6}')
    python3 - "$t" "$vg" "$pt" "$ex" <<'PY'
import sys
name = sys.argv[1].split("/")[-1].split(".csv")[0]
vg, pt, ex = ([int(x) for x in a.split()] for a in sys.argv[2:5])
def s(v):
    w = sorted(v)
    return "%.3f / %.3f / %.3f" % (w[0] / 1e9, w[len(w) // 2] / 1e9, w[-1] / 1e9)
both = sum(a <= min(b, c) for a, b, c in zip(vg, pt, ex))
print("| %s | %s | %s | %s | %d of %d (default: %d, expandable: %d) |" % (
    name, s(vg), s(pt), s(ex), both, len(vg), sum(a <= b for a, b in zip(vg, pt)),
    sum(a <= c for a, c in zip(vg, ex))))
PY
done
