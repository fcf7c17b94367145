#!/usr/bin/env bash
# bench/run.sh [BUILD_DIR] — every benchmark, side by side, as Markdown for bench/RESULTS.md.
#   1. allocator: vramguard (fast) vs glibc malloc vs uncached cuMemAlloc, and peak
#      reserved/allocated vs PyTorch's own figure, on every trace (bench_replay).
#   2. guard mode vs fast mode on the same traces: host CPU time per operation of the
#      allocating thread in the steady state (median of 15 repeats: guard mode's layout
#      settles over its first two), both modes run alternately (5 rounds, median) so that
#      the machine's noise hits both alike.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
T=bench/traces
echo "## $(date -u +%Y-%m-%d) on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "### Allocator (bench_replay, REPEAT=${REPEAT:-7})"
echo
"$B/bench/bench_replay" "$B/vgsim" $T/*.csv $T/*.csv.gz
echo
echo "### Guard mode vs fast mode (vramguard replay --json --repeat=15, 5 alternating rounds, median)"
echo
echo "| trace | fast host ns/op | guard host ns/op | guard / fast | guard wall ns/op (vgsim does the device work on the CPU) | guard reserved/allocated | guard max RSS |"
echo "|---|---|---|---|---|---|---|"
field() { grep -oE "\"$1\":[-0-9.e]+" | head -1 | cut -d: -f2; }
median() { sort -g | awk '{v[NR] = $0} END {print v[int((NR + 1) / 2)]}'; }
for t in $T/*.csv $T/*.csv.gz; do
    : >/tmp/vg_bench_fast; : >/tmp/vg_bench_guard; : >/tmp/vg_bench_wall; : >/tmp/vg_bench_rss
    for round in 1 2 3 4 5; do
        "$B/vramguard" replay --json --repeat=15 "$t" | field cpu_ns_per_op >>/tmp/vg_bench_fast
        out=$(/usr/bin/time -f "rss=%M" "$B/vramguard" replay --json --repeat=15 --mode=guard "$t" 2>/tmp/vg_bench_err)
        echo "$out" | field cpu_ns_per_op >>/tmp/vg_bench_guard
        echo "$out" | field ns_per_op >>/tmp/vg_bench_wall
        ratio=$(echo "$out" | field reserved_over_allocated)
        grep -oE "rss=[0-9]+" /tmp/vg_bench_err | cut -d= -f2 >>/tmp/vg_bench_rss
    done
    f=$(median </tmp/vg_bench_fast); g=$(median </tmp/vg_bench_guard)
    w=$(median </tmp/vg_bench_wall); r=$(median </tmp/vg_bench_rss)
    printf "| %s | %.0f | %.0f | %.1f | %.0f | %s | %d MiB |\n" "$(basename "$t" .csv)" "$f" "$g" \
        "$(echo "$g / $f" | bc -l)" "$w" "$ratio" "$((r / 1024))"
done
echo
echo "### vramguard run (fast mode) on a clean launch-heavy program (bench/launch_heavy.c, 3 alternating rounds, median)"
echo
echo "| workload | without vramguard ns/step | with vramguard run ns/step | ratio |"
echo "|---|---|---|---|"
for mode in launch alloc batch; do
    : >/tmp/vg_bench_plain; : >/tmp/vg_bench_run
    arg=$([ $mode = alloc ] && echo all || echo $mode)
    for round in 1 2 3; do
        LD_LIBRARY_PATH="$B/vgsim" "$B/bench/launch_heavy" 200000 $arg | cut -d' ' -f1 >>/tmp/vg_bench_plain
        "$B/vramguard" run --sim -- "$B/bench/launch_heavy" 200000 $arg | cut -d' ' -f1 >>/tmp/vg_bench_run
    done
    p=$(median </tmp/vg_bench_plain); r=$(median </tmp/vg_bench_run)
    case $mode in
    launch) label="a kernel launch per step" ;;
    alloc) label="allocate (stream-ordered), launch, free per step" ;;
    *) label="a cuMemcpyBatchAsync of 8 device-to-device copies per step" ;;
    esac
    printf "| %s | %s | %s | %.2f |\n" "$label" "$p" "$r" "$(echo "$r / $p" | bc -l)"
done
echo
echo "### Peak reserved when frees arrive in another order (vramguard replay --perturb, seeds 0-8), beside a model of PyTorch's allocator"
echo
bench/perturbed.sh "$B"
