#!/usr/bin/env bash
# run_fuzz.sh FUZZER SEED_CORPUS SECONDS — a short libFuzzer run (CI), from a copy of the
# seed corpus (the repository's copy is never written). Prints the figures libFuzzer gives.
set -u
fuzzer=$1 seeds=$2 secs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$seeds"/. "$work/"
"$fuzzer" -max_total_time="$secs" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work" 2>"$work.log"
rc=$?
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$work.log" | tail -4
if [ $rc -ne 0 ]; then
    tail -40 "$work.log"
    for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
        [ -e "$a" ] && { echo "reproducer: $(basename "$a") ($(wc -c <"$a") bytes):"; xxd "$a" | head -8; }
    done
fi
rm -f "$work.log"
exit $rc
