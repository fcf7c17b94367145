#!/usr/bin/env bash
# bench/waste.sh — how much memory vramguard reserves beyond what is allocated, on every
# trace of bench/traces, beside PyTorch's own allocator on the same events (the figures in
# each trace's .json, recorded under PyTorch), and guard mode's cost in memory on GPT-2.
# The README's opening figures come from here (tests/cli readme_excerpts checks them).
# Uses the `vramguard` on PATH (or $VG). Deterministic: a replay's placement depends only
# on the trace. Takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
VG=${VG:-vramguard}
field() { grep -oE "\"$1\":[-0-9.e]+" | head -1 | cut -d: -f2; }
printf 'peak reserved above peak allocated (vramguard replay --json --repeat=1, fast mode):\n'
printf '%-34s %10s %12s\n' trace vramguard "PyTorch's"
rows=$(for t in bench/traces/*.csv; do
    [ -f "${t%.csv}.json" ] || continue # (PyTorch's own figures: the traces recorded on GPUs)
    j=$("$VG" replay --json --repeat=1 "$t")
    vg=$(echo "$j" | field reserved_over_allocated)
    pr=$(echo "$j" | field pytorch_peak_reserved)
    pa=$(echo "$j" | field pytorch_peak_allocated)
    awk -v n="$(basename "$t" .csv)" -v v="$vg" -v r="$pr" -v a="$pa" \
        'BEGIN { printf "%s %.4f %.4f\n", n, (v - 1) * 100, (r / a - 1) * 100 }'
done)
echo "$rows" | awk '{ printf "%-34s %9.1f%% %11.1f%%\n", $1, $2, $3 }'
# The traces where vramguard wastes under 2%, as a range beside PyTorch's on the same ones.
echo "$rows" | awk '$2 < 2 { n++; if (!lo || $2 < lo) lo = $2; if ($2 > hi) hi = $2;
                             if (!plo || $3 < plo) plo = $3; if ($3 > phi) phi = $3 }
    END { printf "on %d of %d traces: %.1f–%.1f%% (PyTorch'"'"'s allocator: %.1f–%.1f%%)\n",
                 n, NR, lo, hi, plo, phi }'
g=bench/traces/gpt2_small_train.csv
fast=$("$VG" replay --json --repeat=1 "$g" | field peak_reserved)
guard=$("$VG" replay --json --repeat=1 --mode=guard "$g" 2>/dev/null | field peak_reserved)
awk -v f="$fast" -v g="$guard" 'BEGIN { printf "guard mode on gpt2_small_train: %.2f GB reserved at peak against %.2f GB in fast mode (+%.0f%%)\n", g / 1e9, f / 1e9, (g / f - 1) * 100 }'
