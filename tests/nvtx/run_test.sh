#!/usr/bin/env bash
# run_test.sh VRAMGUARD TOOL PROGRAM — `vramguard run --sim` with an NVTX tool named (the
# tests' own, libvgnvtx_inject.so), as compute-sanitizer names its own: the interposer
# library loads the tool, registers its segments and allocations, and the program runs
# as before; in guard mode, vramguard says in one line that its own checks are off (G12).
set -u
VG=$1 TOOL=$2 PROG=$3
out=$(NVTX_INJECTION64_PATH="$TOOL" "$VG" run --sim --verbose=1 -- "$PROG" read 2>&1) ||
    { echo "$out"; echo "FAIL: fast mode exited $?"; exit 1; }
grep -q "NVTX: the tool takes vramguard's segments as heaps" <<<"$out" &&
    grep -q "nvtx_oob read: done" <<<"$out" ||
    { echo "$out"; echo "FAIL: fast mode: the tool was not taken, or the program did not run"; exit 1; }
out=$(NVTX_INJECTION64_PATH="$TOOL" "$VG" run --sim --mode=guard -- "$PROG" write 2>&1) ||
    { echo "$out"; echo "FAIL: guard mode exited $?"; exit 1; }
[ "$(grep -c "guard mode under an NVTX memory checker" <<<"$out")" = 1 ] &&
    grep -q "nvtx_oob write: done" <<<"$out" ||
    { echo "$out"; echo "FAIL: guard mode: no single note, or the program did not run"; exit 1; }
out=$("$VG" run --sim --mode=guard -- "$PROG" write 2>&1)
grep -q "out-of-bounds write" <<<"$out" ||
    { echo "$out"; echo "FAIL: without a tool, guard mode did not report the overrun"; exit 1; }
echo "ok"
