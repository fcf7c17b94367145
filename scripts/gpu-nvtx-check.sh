#!/usr/bin/env bash
# gpu-nvtx-check.sh BUILD [OUTDIR] — does compute-sanitizer see vramguard's allocations
# through NVTX (docs/decisions.md G12, docs/compute-sanitizer.md)? On a machine with an
# NVIDIA GPU and compute-sanitizer; builds nothing: BUILD is a build folder holding
# `vramguard`, `libvramguard_preload.so` and `examples/nvtx_oob` (cmake --build BUILD
# --target vramguard_cli vramguard_preload nvtx_oob).
#
# examples/nvtx_oob reads or writes 16 bytes past a 4000-byte cuMemAlloc'd tensor (read,
# write), reads a freed one (read-freed), or stays in bounds (clean). Each mode runs
#   plain      compute-sanitizer memcheck on the program alone (the driver's allocation:
#              memcheck's own answer, the reference)
#   no-nvtx    memcheck --nvtx no over `vramguard run --mode=fast` (expected: missed, the
#              bytes lie in vramguard's mapped segment)
#   nvtx       memcheck --nvtx yes over `vramguard run --mode=fast` (expected: found, and
#              no NVTX call of vramguard's refused by the tool)
#   nvtx-guard the same in guard mode (expected: found by memcheck; vramguard says in one
#              line that its own device checks are off)
# and, once, compute-sanitizer's environment for the program (does it set
# NVTX_INJECTION64_PATH?) and initcheck --track-unused-memory on the clean program. Where
# nvcc is, tests/nvtx/probe_pool.cu shows what compute-sanitizer makes of an NVTX pool
# over cuMemAlloc, managed and virtual-memory memory, and of a 49- and a 50-character
# region name (2025.3.1 refused the VMM pools and the 50: docs/decisions.md G12).
# Every run has a time limit (T seconds, default 120). A summary table ends the log
# (OUTDIR/gpu-nvtx-check.log, default /tmp/vg-gpu); exit 0 when every expectation held.
# SIM=1 runs the programs on vgsim instead (with COMPUTE_SANITIZER naming a stand-in), to
# check this script itself on a machine without a GPU.
# PYTORCH=1 also runs examples/pytorch/oob_custom_kernel.py under
# `compute-sanitizer --nvtx yes python -m vramguard run` (minutes: it compiles a kernel).
set -u
cd "$(dirname "$0")/.."
B=$(cd "${1:?usage: gpu-nvtx-check.sh BUILD [OUTDIR]}" && pwd)
O=${2:-/tmp/vg-gpu}
T=${T:-120}
mkdir -p "$O"
LOG="$O/gpu-nvtx-check.log"
: >"$LOG"
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
PROG="$B/examples/nvtx_oob"
for f in "$CS" "$B/vramguard" "$B/libvramguard_preload.so" "$PROG"; do
    [ -e "$f" ] || { echo "gpu-nvtx-check: $f not found" | tee -a "$LOG"; exit 2; }
done
echo "### $(date -u '+%Y-%m-%d %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version \
    --format=csv,noheader 2>/dev/null | head -1); $("$CS" --version 2>/dev/null | tail -1)" |
    tee -a "$LOG"

summary=()
failed=0
# run NAME EXPECT COMMAND...: EXPECT is found (memcheck errors > 0), missed (0) or any.
run() {
    local name=$1 expect=$2
    shift 2
    local out="$O/nvtx-$name.txt" t0=$(date +%s)
    echo "=== $name: $*" >>"$LOG"
    timeout -k 5 "$T" "$@" >"$out" 2>&1
    local rc=$? secs=$(( $(date +%s) - t0 ))
    cat "$out" >>"$LOG"
    local errors; errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$out" | tail -1 | grep -oE '[0-9]+$')
    local accesses; accesses=$(grep -cE 'Invalid __global__ (read|write)' "$out")
    local named="no"; grep -qE "called (vramguard|probe region)" "$out" && named="yes"
    local refused; refused=$(grep -cE "Call to nvtxMem[A-Za-z]+ failed|cannot exceed" "$out")
    local verdict="ok"
    # (A program memcheck stops at a bad access ends early; one that runs clean must end.)
    [ "$expect" = found ] || grep -qE 'nvtx_oob [a-z-]+: done|^sum |^probe .*: done' "$out" ||
        verdict="DID-NOT-RUN"
    [ "$verdict" = ok ] && case "$expect" in
    found) [ "${errors:-0}" -gt 0 ] && [ "$accesses" -gt 0 ] || verdict="UNEXPECTED" ;;
    missed) [ -n "$errors" ] && [ "$errors" -eq 0 ] || verdict="UNEXPECTED" ;;
    esac
    # (vramguard must make no NVTX call the tool refuses: each counts as an error.)
    [[ $name != probe-* ]] && [ "$refused" -gt 0 ] && verdict="NVTX-REFUSED"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict="TIMEOUT"
    [ "$verdict" = ok ] || failed=1
    summary+=("$(printf '%-24s exit %-3s %4ss  errors %-4s invalid accesses %-3s named %-3s NVTX calls refused %-2s expected %-6s %s' \
        "$name" "$rc" "$secs" "${errors:-?}" "$accesses" "$named" "$refused" "$expect" "$verdict")")
}

# Does compute-sanitizer set NVTX_INJECTION64_PATH for the program it runs (vramguard's
# client reads it at the first segment)?
timeout -k 5 "$T" "$CS" --tool memcheck --nvtx yes /usr/bin/env >"$O/nvtx-env.txt" 2>&1
echo "=== compute-sanitizer --nvtx yes env: $(grep -E '^NVTX_INJECTION(64|32)_PATH=' \
    "$O/nvtx-env.txt" || echo 'no NVTX_INJECTION64_PATH')" | tee -a "$LOG"

MC=("$CS" --tool memcheck --target-processes all --show-backtrace device)
RUN=("$B/vramguard" run)
if [ "${SIM:-0}" = 1 ]; then
    RUN+=(--sim)
    export LD_LIBRARY_PATH="$B/vgsim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
for mode in read write read-freed clean; do
    want=found
    [ $mode = clean ] && want=missed
    run "$mode-plain" $want "${MC[@]}" "$PROG" $mode
    run "$mode-no-nvtx" missed "${MC[@]}" --nvtx no "${RUN[@]}" --mode=fast -- "$PROG" $mode
    run "$mode-nvtx" $want "${MC[@]}" --nvtx yes "${RUN[@]}" --mode=fast -- "$PROG" $mode
    run "$mode-nvtx-guard" $want "${MC[@]}" --nvtx yes "${RUN[@]}" --mode=guard -- \
        "$PROG" $mode
done
# initcheck: unused memory is reported per allocation (named), not per segment.
run "clean-initcheck-nvtx" any "$CS" --tool initcheck --track-unused-memory --nvtx yes \
    --target-processes all "${RUN[@]}" --mode=fast -- "$PROG" clean
run "clean-initcheck-no-nvtx" any "$CS" --tool initcheck --track-unused-memory --nvtx no \
    --target-processes all "${RUN[@]}" --mode=fast -- "$PROG" clean
# The guard-mode note (one line) under the tool:
grep -h "guard mode under an NVTX memory checker" "$O"/nvtx-*-nvtx-guard.txt | head -1 |
    sed 's/^/=== guard note: /' | tee -a "$LOG"

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ "${SIM:-0}" != 1 ] && [ -x "$NVCC" ] &&
    "$NVCC" -o "$O/probe_pool" tests/nvtx/probe_pool.cu -lcuda >"$O/probe-build.txt" 2>&1; then
    for kind in alloc managed vmm page; do
        run "probe-$kind" any "$CS" --tool memcheck --nvtx yes --leak-check full \
            --show-backtrace no "$O/probe_pool" $kind oob
    done
    run "probe-name-49" any "$CS" --tool memcheck --nvtx yes --leak-check full \
        --show-backtrace no "$O/probe_pool" alloc in 49
    run "probe-name-50" any "$CS" --tool memcheck --nvtx yes --leak-check full \
        --show-backtrace no "$O/probe_pool" alloc in 50
else
    echo "=== probe_pool: not built (no nvcc, or SIM=1; $O/probe-build.txt)" | tee -a "$LOG"
fi

if [ "${PYTORCH:-0}" = 1 ]; then
    T=${T_PYTORCH:-900}
    export VRAMGUARD_CLI="$B/vramguard" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
    run "pytorch-oob-nvtx" found "${MC[@]}" --nvtx yes python3 -m vramguard run \
        examples/pytorch/oob_custom_kernel.py
    run "pytorch-oob-fixed-nvtx" missed "${MC[@]}" --nvtx yes python3 -m vramguard run \
        examples/pytorch/oob_custom_kernel.py --fixed
fi

{
    echo
    echo "### summary (outputs: $O/nvtx-*.txt)"
    printf '%s\n' "${summary[@]}"
    [ $failed = 0 ] && echo "every expectation held" || echo "SOME EXPECTATIONS FAILED"
} | tee -a "$LOG"
exit $failed
