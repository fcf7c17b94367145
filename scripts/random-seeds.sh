#!/usr/bin/env bash
# random-seeds.sh BUILD FIRST LAST [STEPS] — the random programs of tests/preload
# (random_clean and random_clean_ptds) over many seeds, beyond the few CI runs: for each
# seed, the correct program alone and under `vramguard run --sim` in both modes (same
# output, no message), then each bug that can be planted, in guard mode (reported as
# planted, and nothing else). Every third seed runs four threads. Prints one line per
# failure and "seed N done" after each seed; exits 1 if anything failed.
# About a minute a seed on a 2-core machine. Needs python3 (the JSON reports).
set -u
B=$(cd "${1:?usage: random-seeds.sh BUILD FIRST LAST [STEPS]}" && pwd)
FIRST=${2:?first seed} LAST=${3:?last seed} STEPS=${4:-1500}
HERE=$(cd "$(dirname "$0")/.." && pwd)
VG=$B/vramguard
export VGSIM_MEMORY=${VGSIM_MEMORY:-80G}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bad=0
failed() { echo "FAIL $*"; bad=1; }
for seed in $(seq "$FIRST" "$LAST"); do
    threads=$((seed % 3 == 0 ? 4 : 1))
    for prog in random_clean random_clean_ptds; do
        P=$B/tests/preload/$prog
        [ -x "$P" ] || continue
        LD_LIBRARY_PATH=$B/vgsim "$P" "$seed" "$STEPS" "$threads" >"$T/plain" 2>&1 ||
            failed "$prog seed $seed: the program alone"
        for m in fast guard; do
            "$VG" run --sim --mode=$m --error_exitcode=3 -- "$P" "$seed" "$STEPS" "$threads" \
                >"$T/out" 2>"$T/err"
            rc=$?
            if [ $rc != 0 ] || ! cmp -s "$T/plain" "$T/out" ||
                grep -v 'ERROR SUMMARY: 0 errors\|^==vramguard== *$\|no errors' "$T/err" | grep -q .; then
                failed "$prog seed $seed, $threads thread(s), $m mode: exit $rc, or other output"
                head -30 "$T/err"
            fi
        done
        for plant in overrun underrun copy_overrun freed double_free unordered host_race; do
            # (with four threads, those whose guard work differs with threads about)
            [ $threads != 1 ] && case $plant in overrun | underrun | double_free | unordered) continue ;; esac
            "$VG" run --sim --mode=guard --report_json="$T/r.json" -- \
                "$P" "$seed" $((STEPS * 2 / 3)) "$threads" $plant >"$T/out" 2>"$T/err"
            IFS=$'\t' read -r -a want < <(grep "^planted:" "$T/out") ||
                { failed "$prog seed $seed $plant: nothing planted"; continue; }
            python3 "$HERE/tests/cli/check_report.py" "$T/r.json" 1 "${want[@]:2}" >/dev/null 2>&1 ||
                { failed "$prog seed $seed, $threads thread(s), $plant: not reported as planted"; tail -5 "$T/err"; }
            grep -Eq "ERROR SUMMARY: (1 error: 1 ${want[2]}|2 errors: 1 use_after_free, 1 unordered_free)$" "$T/err" ||
                { failed "$prog seed $seed, $threads thread(s), $plant: other reports"; grep 'ERROR SUMMARY' "$T/err"; }
        done
    done
    echo "seed $seed done"
done
exit $bad
