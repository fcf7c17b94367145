#!/usr/bin/env bash
# bench/ab.sh OLD_BUILD NEW_BUILD [ROUNDS] — the allocator's fast path in two builds, side
# by side: host CPU time per operation of the allocating thread (`vramguard replay --json
# --repeat=15`, cpu_ns_per_op, fast mode, each build on its own vgsim) on every trace of
# bench/traces, the two builds alternating ROUNDS times (default 5) so that the machine's
# noise hits both alike. Prints a Markdown table for bench/RESULTS.md: the minimum (the
# figure to compare when other load comes and goes) and the median of each, and new / old.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: bench/ab.sh OLD_BUILD NEW_BUILD [ROUNDS]}
NEW=${2:?usage: bench/ab.sh OLD_BUILD NEW_BUILD [ROUNDS]}
ROUNDS=${3:-5}
for b in "$OLD" "$NEW"; do
    [ -x "$b/vramguard" ] && [ -e "$b/vgsim/libcuda.so.1" ] ||
        { echo "bench/ab.sh: $b has no vramguard and vgsim/libcuda.so.1: build it first" >&2; exit 2; }
done
one() { # one BUILD TRACE: host ns per op
    "$1/vramguard" replay --json --repeat=15 --driver="$1/vgsim/libcuda.so.1" "$2" |
        grep -oE '"cpu_ns_per_op":[0-9.]+' | head -1 | cut -d: -f2
}
stats() { sort -g | awk '{v[NR] = $0} END {printf "%.1f %.1f\n", v[1], v[int((NR + 1) / 2)]}'; }
echo "| trace | old, min / median | new, min / median | new / old (min) |"
echo "|---|---|---|---|"
for t in bench/traces/*.csv bench/traces/*.csv.gz; do
    : >/tmp/vg_ab_old; : >/tmp/vg_ab_new
    for r in $(seq "$ROUNDS"); do
        one "$OLD" "$t" >>/tmp/vg_ab_old
        one "$NEW" "$t" >>/tmp/vg_ab_new
    done
    read -r omin omed < <(stats </tmp/vg_ab_old)
    read -r nmin nmed < <(stats </tmp/vg_ab_new)
    printf "| %s | %s / %s | %s / %s | %.3f |\n" "$(basename "$t" .csv)" "$omin" "$omed" \
        "$nmin" "$nmed" "$(echo "$nmin / $omin" | bc -l)"
done
