#!/usr/bin/env bash
# bench/suite_under_load.sh BUILD [RUNS] — the whole suite RUNS times (default 10) in a row,
# each beside two busy loops (one per core of the 2-core CI machine), to show that no test
# depends on an idle machine (issue 35). Prints one line per run: ctest's verdict, the
# time, and the failed or timed-out tests if any; the busy loops end with the script.
set -u
B=${1:?usage: bench/suite_under_load.sh BUILD [RUNS]}
RUNS=${2:-10}
busy=()
for i in 1 2; do (while :; do :; done) & busy+=($!); done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
for r in $(seq "$RUNS"); do
    t0=$SECONDS
    log=$(mktemp)
    ctest --test-dir "$B" -j2 >"$log" 2>&1
    echo "run $r: $(grep -E 'tests passed' "$log") ($((SECONDS - t0)) s)" \
         "$(grep -E '\*\*\*Failed|\*\*\*Timeout|\(Failed\)' "$log" | tr '\n' ' ')"
    rm -f "$log"
done
