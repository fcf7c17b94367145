#!/usr/bin/env bash
# cli_test.sh CASE — tests of the `vramguard` command line, run by CTest (tests/cli).
# Env: VG (the vramguard executable), TRACES (bench/traces), VGSIM (vgsim's libcuda.so.1).
set -u
CASE=$1
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL $CASE: $*" >&2; exit 1; }

# run EXPECTED_RC CMD... : run, keep stdout/stderr in $TMP, check the exit status
run() {
    local want=$1; shift
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$TMP/out" "$TMP/err" >&2; fail "exit status $rc, expected $want: $*"; }
}
# one_line_error PATTERN : stderr is one line and matches PATTERN
one_line_error() {
    [ "$(wc -l <"$TMP/err")" = 1 ] || { cat "$TMP/err" >&2; fail "expected a one-line error"; }
    grep -qE "$1" "$TMP/err" || { cat "$TMP/err" >&2; fail "error does not match '$1'"; }
}
json_field() { grep -oE "\"$1\":[-0-9.e]+" "$TMP/out" | head -1 | cut -d: -f2; }
# A correct program alone, then under `vramguard run --sim` in both modes: the same output
# (the program's alone stays in $TMP/plain), exit 0, and nothing on stderr but the summary.
same_under_vramguard() { # PROGRAM ARGS...   (MODES: the modes, default fast and guard;
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$@" #  ALLOW: a pattern of notes that may appear)
    cp "$TMP/out" "$TMP/plain"
    for m in ${MODES:-fast guard}; do
        run 0 "$VG" run --sim --mode=$m --error_exitcode=3 -- "$@"
        cmp -s "$TMP/plain" "$TMP/out" ||
            { cat "$TMP/plain" "$TMP/out" >&2; fail "${*#$BUILD/}: the output differs ($m mode)"; }
        if grep -v "ERROR SUMMARY: no errors found" "$TMP/err" |
                grep -Ev "${ALLOW:-^\$}" | grep -q .; then
            cat "$TMP/err" >&2; fail "${*#$BUILD/}: a message ($m mode)"
        fi
    done
}

# A random program with a bug planted, in guard mode: exactly the report it says it planted
# ("planted:" and check_report.py's arguments), and no other (the unordered free's late
# write may be reported too: DESIGN.md S2).
reported_as_planted() { # PROGRAM SEED STEPS THREADS PLANT
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$@"
    local want what="${1##*/} seed $2, $4 thread(s), $5"
    IFS=$'\t' read -r -a want < <(grep "^planted:" "$TMP/out") ||
        fail "$what: nothing planted: $(cat "$TMP/out")"
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 "${want[@]:2}" ||
        { cat "$TMP/err" >&2; fail "$what: not reported as planted"; }
    # (A kernel given a freed buffer is reported at its launch too: launch_with_freed_pointer.)
    grep -Eq "ERROR SUMMARY: (1 error: 1 ${want[2]}|2 errors: 1 use_after_free, 1 (unordered_free|launch_with_freed_pointer))$" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "$what: other reports"; }
}

case $CASE in
demo)
    run 0 "$VG" demo --sim
    grep -q "5 of 5 scenarios caught as expected" "$TMP/out" || fail "not every scenario caught"
    for k in "out-of-bounds write after the end" "write to freed memory" "grows every step" \
             "double free" "CUDA_ERROR_ILLEGAL_ADDRESS"; do
        grep -q "$k" "$TMP/err" || fail "no report containing '$k'"
    done
    grep -q "the kernel demo_scatter among the last launches" "$TMP/out" ||
        fail "the demo does not say what S9's check found"
    # Stacks end where the program starts: no frame of the C library's start-up.
    ! grep -qE "__libc_start|#[0-9]+ _start" "$TMP/err" || fail "a stack shows libc's start-up" ;;
replay_json_*)
    t=${CASE#replay_json_}
    run 0 "$VG" replay --json --repeat=2 "$TRACES/$t.csv"
    for k in events ns_per_op peak_allocated peak_reserved reserved_over_allocated ooms; do
        [ -n "$(json_field $k)" ] || fail "no key $k in $(cat "$TMP/out")"
    done
    awk -v r="$(json_field reserved_over_allocated)" 'BEGIN { exit !(r <= 1.02) }' ||
        fail "reserved/allocated $(json_field reserved_over_allocated) > 1.02"
    [ "$(json_field ooms)" = 0 ] || fail "OOMs during the replay" ;;
guard_replay_under_limit)
    # GPT-2's training trace needs 17.45 GiB in fast mode, 18.3 GiB in guard mode. Under an
    # 18 GiB limit the quarantine must shrink rather than make allocation after allocation
    # move pages (~72,000 page moves per pass before it did, when guard mode needed
    # 26 GiB; under 1,000 now). No OOM, no false report.
    run 0 "$VG" replay --json --mode=guard --repeat=1 --limit=18G "$TRACES/gpt2_small_train.csv"
    grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || { cat "$TMP/err" >&2; fail "guard mode reported errors"; }
    grep -q "quarantine of freed blocks shrinks" "$TMP/err" || fail "the quarantine did not shrink"
    grep -q '"ooms":0,' "$TMP/out" || fail "OOMs during the replay"
    moves=$(grep -oE '"num_device_free":[0-9]+' "$TMP/out" | cut -d: -f2)
    [ "$moves" -lt 20000 ] || fail "$moves page moves: guard mode thrashes under the limit" ;;
replay_lag)
    # Stream 1 frees 64 MiB; 80 operations later stream 2 asks for 64 MiB. With the device
    # 1000 events behind, stream 1's work has not run, so its block must not be handed
    # over: new memory is mapped. (That an idle device's block is handed over is
    # unit_heap:another_streams_completed_frees_serve_before_memory_grows.)
    { echo "Thread,Time,Action,Pointer,Size,Stream"
      echo "0,0,allocate,0x1000,67108864,1"; echo "0,1,free,0x1000,67108864,1"
      echo "0,2,allocate,0x2000,4096,2"
      for i in $(seq 40); do echo "0,3,allocate,0x3000,4096,2"; echo "0,4,free,0x3000,4096,2"; done
      echo "0,5,allocate,0x4000,67108864,2"; } >"$TMP/two_streams.csv"
    run 0 "$VG" replay --json --repeat=1 --lag=1000 "$TMP/two_streams.csv"
    [ "$(json_field lag)" = 1000 ] || fail "no lag in $(cat "$TMP/out")"
    [ "$(json_field peak_reserved)" -ge $((128 << 20)) ] ||
        fail "busy device: stream 2 got stream 1's block before its work ran"
    run 0 "$VG" replay --mode=guard --repeat=1 --lag=300 "$TRACES/transformer_ctx128_forward_mixed.csv"
    grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || { cat "$TMP/err" >&2; fail "guard mode reported errors"; }
    grep -q "300 events behind the host" "$TMP/out" || fail "the lag is not reported"
    run 2 "$VG" replay --lag=-1 "$TMP/two_streams.csv"; one_line_error "'-1' for --lag"
    run 2 "$VG" replay --lag=soon "$TMP/two_streams.csv"; one_line_error "'soon' for --lag" ;;
replay_perturbed_gpt2)
    # GPT-2's training loop with a few frees arriving late, as the last frees of PyTorch's
    # backward thread can (--perturb): vramguard must reserve no more than PyTorch's
    # allocator did on this loop, whatever the order (slots, docs/decisions.md A5; before
    # them, these four orders needed 18.93-19.09 GB).
    pt=$(grep -oE '"pytorch_peak_reserved": *[0-9]+' "$TRACES/gpt2_small_train.json" | grep -oE '[0-9]+$')
    for seed in 1 3 4 7; do
        run 0 "$VG" replay --json --repeat=1 --perturb=$seed "$TRACES/gpt2_small_train.csv"
        [ "$(json_field perturb)" = $seed ] || fail "no perturb in $(cat "$TMP/out")"
        [ "$(json_field peak_reserved)" -le "$pt" ] ||
            fail "seed $seed: peak reserved $(json_field peak_reserved) > PyTorch's $pt"
    done
    run 2 "$VG" replay --perturb=-3 "$TRACES/gpt2_small_train.csv"; one_line_error "'-3' for --perturb" ;;
replay_guard_*)
    t=${CASE#replay_guard_}
    run 0 "$VG" replay --mode=guard --repeat=1 "$TRACES/$t.csv"
    grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || { cat "$TMP/err" >&2; fail "guard mode reported errors"; }
    grep -q "out-of-memory failures: 0" "$TMP/out" || fail "OOMs during the replay" ;;
pkgconfig_build_tree)
    # Before any install, pkg-config finds vramguard in the build tree (its -uninstalled
    # .pc): the include folder is the source's, the library the build's.
    PKG_CONFIG_PATH="$BUILD" pkg-config --exists vramguard || fail "no vramguard.pc in $BUILD"
    inc=$(PKG_CONFIG_PATH="$BUILD" pkg-config --cflags vramguard | sed 's/^-I//; s/ *$//')
    [ -e "$inc/vramguard.h" ] || fail "pkg-config's include folder '$inc' has no vramguard.h"
    printf '#include <stdio.h>\n#include <vramguard.h>\nint main(void) { void *p = NULL;\n  if (vg_malloc(&p, 1000, NULL) != VG_OK || vg_free(p, NULL) != VG_OK) {\n    fprintf(stderr, "%%s\\n", vg_last_error()); return 1; }\n  puts("build tree works"); return 0; }\n' >"$TMP/use.c"
    cc "$TMP/use.c" -o "$TMP/use" $(PKG_CONFIG_PATH="$BUILD" pkg-config --cflags --libs vramguard) ||
        fail "building with the build tree's pkg-config failed"
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$TMP/use"
    grep -q "build tree works" "$TMP/out" || fail "$(cat "$TMP/out" "$TMP/err")" ;;
c_api_example)
    # The README's C example is a whole program (examples/c_api.c): correct, it exits 0 with
    # no report; with its kernel writing past the allocation, guard mode's check names the
    # allocation, its line and the kernel, and the program exits 1.
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$EXAMPLES/c_api"
    grep -q "c_api: 0 errors found" "$TMP/out" || fail "correct: $(cat "$TMP/out")"
    grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || fail "correct: $(cat "$TMP/err")"
    grep -q "vramguard CUDA memory summary, device ID 0" "$TMP/out" || fail "no summary"
    LD_LIBRARY_PATH="$VGSIM_DIR" run 1 "$EXAMPLES/c_api" overrun
    for want in "64 bytes overwritten right after the end of a 4000-byte allocation" \
                "#0 main (.*c_api.c:26)" "ex_fill on stream" "1 error: 1 out_of_bounds_after"; do
        grep -qE "$want" "$TMP/err" || { cat "$TMP/err" >&2; fail "overrun: no '$want'"; }
    done ;;
replay_rmm_log)
    # A log as RMM's logging_resource_adaptor writes it (its code, 2024-2026: OS thread ids,
    # the clock time of day, `allocate failure` with (nil), streams 0 or hex), and the
    # same events as 2021-2024 RMM wrote them (0x0 for a null pointer and the default
    # stream) and as 2020 RMM did (a colon before the microseconds).
    { echo "Thread,Time,Action,Pointer,Size,Stream"
      echo "2342727,15:47:02.841961,allocate,0x10012400000,1048576,0"
      echo "2342731,15:47:02.841970,allocate,0x10012500000,4096,0x55d5c8a0b2c0"
      echo "2342727,15:47:02.841977,free,0x10012400000,1048576,0"
      echo "2342731,15:47:03.000123,allocate failure,(nil),1099511627776,0x55d5c8a0b2c0"
      echo "2342731,15:47:03.000200,free,0x10012500000,4096,0x55d5c8a0b2c0"
      echo "2342727,23:59:59.999999,allocate,0x10012600000,512,0x1"; } >"$TMP/rmm.csv"
    sed -e 's/(nil)/0x0/; s/,0$/,0x0/' "$TMP/rmm.csv" >"$TMP/rmm2021.csv"
    sed -e 's/\(:[0-9][0-9]\)\.\([0-9]\{6\}\)/\1:\2/' "$TMP/rmm.csv" >"$TMP/rmm2020.csv"
    grep -q "^2342727,15:47:02:841961,allocate" "$TMP/rmm2020.csv" || fail "the 2020 log was not made"
    for log in rmm rmm2021 rmm2020; do
        run 0 "$VG" replay --json --repeat=1 "$TMP/$log.csv"
        [ "$(json_field events)" = 5 ] || fail "$log: $(cat "$TMP/out")"
        [ "$(json_field threads)" = 2 ] || fail "$log: threads in $(cat "$TMP/out")"
        [ "$(json_field log_failures)" = 1 ] || fail "$log: failures in $(cat "$TMP/out")"
    done
    run 0 "$VG" replay --repeat=1 "$TMP/rmm.csv"
    grep -q "2 threads in the log" "$TMP/out" || fail "threads not said: $(cat "$TMP/out")"
    grep -q "1 allocation failure in the log" "$TMP/out" || fail "failure not said"
    sed -e '3s/15:47:02.841970/15:47:02/' "$TMP/rmm.csv" >"$TMP/badtime.csv"
    run 2 "$VG" replay "$TMP/badtime.csv"; one_line_error "line 3: bad time '15:47:02'"
    sed -e '3s/,0x55d5c8a0b2c0$/,stream7/' "$TMP/rmm.csv" >"$TMP/badstream.csv"
    run 2 "$VG" replay "$TMP/badstream.csv"; one_line_error "line 3: bad stream 'stream7'"
    sed -e '3s/,allocate,/,deallocate,/' "$TMP/rmm.csv" >"$TMP/badaction.csv"
    run 2 "$VG" replay "$TMP/badaction.csv"; one_line_error "line 3: action must be" ;;
trace_rmm_format)
    # trace= writes RMM's format exactly (tests/cli/check_rmm_log.py checks it as RMM's
    # code writes and its replay benchmark parses it), from every thread of a program
    # (access_user threads: 8 threads, a stream each), and vramguard replays it.
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$VG" run --sim --trace="$TMP/trace.csv" -- \
        "$BUILD/tests/preload/access_user" threads
    run 0 python3 "$HERE/check_rmm_log.py" "$TMP/trace.csv"
    threads=$(grep -oE ", [0-9]+ threads" "$TMP/out" | grep -oE "[0-9]+")
    [ "$threads" -ge 2 ] || fail "one thread in the trace: $(cat "$TMP/out")"
    streams=$(tail -n +2 "$TMP/trace.csv" | cut -d, -f6 | sort -u | wc -l)
    [ "$streams" -ge 2 ] || fail "one stream in the trace"
    run 0 "$VG" replay --json --repeat=1 "$TMP/trace.csv"
    [ "$(json_field threads)" = "$threads" ] || fail "replay saw $(json_field threads) threads"
    [ "$(json_field replay_threads)" = 1 ] || fail "not replayed on one thread"
    [ "$(json_field ooms)" = 0 ] || fail "OOMs replaying the trace"
    events=$(json_field events)
    # --threads=log: each of the log's threads on its own, in the log's order (the same
    # events, the same peaks: the order is the log's), in both modes.
    peak=$(json_field peak_allocated)
    for m in fast guard; do
        run 0 "$VG" replay --json --repeat=2 --threads=log --mode=$m "$TMP/trace.csv"
        [ "$(json_field replay_threads)" = "$threads" ] || fail "$m: $(cat "$TMP/out")"
        [ "$(json_field events)" = "$events" ] || fail "$m: other events"
        [ "$(json_field peak_allocated)" = "$peak" ] || [ $m = guard ] ||
            fail "$m: peak allocated $(json_field peak_allocated), one thread: $peak"
        [ "$(json_field ooms)" = 0 ] || fail "$m: OOMs"
    done
    grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || { cat "$TMP/err" >&2; fail "guard mode reported errors"; }
    run 2 "$VG" replay --threads=many "$TMP/trace.csv"; one_line_error "'many' for --threads"
    run 2 "$VG" replay --threads=log --lag=5 "$TMP/trace.csv"; one_line_error "without --lag" ;;
replay_malformed)
    printf 'Thread,Time,Action,Pointer,Size,Stream\n0,0,allocate,0x1000,512,0\n0,1,allocate,0x2000,-5,0\n' >"$TMP/neg.csv"
    run 2 "$VG" replay "$TMP/neg.csv"; one_line_error "line 3"
    printf 'Thread,Time,Action,Pointer,Size,Stream\n0,0,free,0x1000,512,0\n' >"$TMP/unknown.csv"
    run 2 "$VG" replay "$TMP/unknown.csv"; one_line_error "line 2"
    printf 'Thread,Time,Action\n0,0,allocate\n' >"$TMP/cols.csv"
    run 2 "$VG" replay "$TMP/cols.csv"; one_line_error "line 1"
    head -c 3000 /dev/urandom >"$TMP/garbage.csv"
    run 2 "$VG" replay "$TMP/garbage.csv"; one_line_error "garbage.csv"
    printf 'Thread,Time,Action,Pointer,Size,Stream\n0,0,allocate,0x1000,512,0\n0,1,allocate,0x10' >"$TMP/trunc.csv"
    run 2 "$VG" replay "$TMP/trunc.csv"; one_line_error "line 3"
    run 2 "$VG" replay "$TMP/does-not-exist.csv"; one_line_error "does-not-exist.csv"
    run 2 "$VG" replay "$TMP"; one_line_error "cannot read '$TMP': it is a folder"
    run 2 "$VG" report "$TMP"; one_line_error "cannot read '$TMP': it is a folder" ;;
bad_options)
    run 2 "$VG" replay --frobnicate=1 "$TRACES/transformer_ctx128_forward_mixed.csv"
    one_line_error "frobnicate"
    run 2 "$VG" replay --mode=turbo "$TRACES/transformer_ctx128_forward_mixed.csv"
    one_line_error "'mode'"
    run 2 "$VG" replay --redzone=12Q "$TRACES/transformer_ctx128_forward_mixed.csv"
    one_line_error "'redzone'"
    VRAMGUARD_OPTIONS="limit=lots" run 2 "$VG" demo --sim
    one_line_error "'limit'"
    VRAMGUARD_OPTIONS="colour=blue" run 2 "$VG" demo --sim
    one_line_error "colour"
    run 2 "$VG" frobnicate
    one_line_error "frobnicate"
    run 2 "$VG" replay --json=3 x.csv
    one_line_error "json" ;;
help)
    # Every verb documents every flag it accepts, on --help, -h and `help VERB`.
    for verb in demo replay run report; do
        run 0 "$VG" help $verb; cp "$TMP/out" "$TMP/help"
        grep -q "^usage: vramguard $verb " "$TMP/help" || fail "help $verb: no usage line"
        run 0 "$VG" $verb --help; cmp -s "$TMP/out" "$TMP/help" || fail "$verb --help differs"
        run 0 "$VG" $verb -h; cmp -s "$TMP/out" "$TMP/help" || fail "$verb -h differs"
        [ ! -s "$TMP/err" ] || fail "$verb -h wrote to stderr"
    done
    run 0 "$VG" help replay
    for f in device-memory=SIZE repeat=N lag=N perturb=SEED json validate; do
        grep -q -- "--$f " "$TMP/out" || fail "help replay does not document --$f"
    done
    run 0 "$VG" help options
    awk 'length > 100 { exit 1 }' "$TMP/out" || fail "help options has lines over 100 columns"
    grep -q "^slot_min " "$TMP/out" || fail "help options does not list slot_min"
    # After "--", --help belongs to the program.
    run 7 "$VG" run --sim -- "$BUILD/tests/preload/exit_with" 7 --help
    run 2 "$VG" help frobnicate; one_line_error "no help on 'frobnicate'"
    run 2 "$VG" replay --frobnicate "$TRACES/resnet50_train.csv"
    one_line_error "see 'vramguard help replay'"
    run 2 "$VG" report --html; one_line_error "needs a value \\(--html=OUT.html\\)" ;;
replay_beside_expandable)
    # ResNet-50's loop and a transformer training step, in their recorded order: no more
    # reserved than PyTorch's expandable_segments:True (bench/pytorch_alloc_model.py
    # --expandable, which gives the H100's own 6.172 GB on the ResNet-50 trace). Both
    # needed more before small requests had their own range (docs/decisions.md A6).
    command -v python3 >/dev/null || { echo "skipped: no python3 for the model"; exit 77; }
    for t in resnet50_train transformer_ctx128_fullstep; do
        f=$TRACES/$t.csv
        ex=$(python3 "$HERE/../../bench/pytorch_alloc_model.py" --expandable "$f" | awk '{print $6}')
        run 0 "$VG" replay --json --repeat=1 "$f"
        [ "$(json_field peak_reserved)" -le "$ex" ] ||
            fail "$t: vramguard reserved $(json_field peak_reserved) bytes, expandable segments $ex"
    done ;;
replay_pytorch_figures)
    # The .json beside a trace gives PyTorch's figures on the same events: replay prints
    # them beside its own; a sidecar it cannot read is named, and the replay goes on.
    pt=$(grep -oE '"pytorch_peak_reserved": *[0-9]+' "$TRACES/resnet50_train.json" | grep -oE '[0-9]+$')
    run 0 "$VG" replay --json --repeat=1 "$TRACES/resnet50_train.csv"
    [ "$(json_field pytorch_peak_reserved)" = "$pt" ] || fail "pytorch_peak_reserved is not $pt: $(cat "$TMP/out")"
    run 0 "$VG" replay --repeat=1 "$TRACES/resnet50_train.csv"
    grep -q "PyTorch's allocator: peak reserved" "$TMP/out" || fail "no PyTorch figure in $(cat "$TMP/out")"
    grep -qE "vramguard / PyTorch peak reserved: 0\.[0-9]+" "$TMP/out" || fail "no ratio"
    head -200 "$TRACES/resnet50_train.csv" >"$TMP/t.csv"; echo '{"pytorch_peak_reserved": ' >"$TMP/t.json"
    run 0 "$VG" replay --repeat=1 "$TMP/t.csv"; one_line_error "ignoring .*t.json"
    grep -q "PyTorch's allocator" "$TMP/out" && fail "figures from a broken sidecar"
    rm "$TMP/t.json"; run 0 "$VG" replay --json --repeat=1 "$TMP/t.csv"
    grep -q pytorch_peak "$TMP/out" && fail "PyTorch figures without a sidecar"
    [ ! -s "$TMP/err" ] || fail "a message without a sidecar: $(cat "$TMP/err")" ;;
replay_plan_learn)
    # plan=learn (docs/decisions.md A13): replay finds each training loop's step, the
    # same one bench/cyclic_plan_model.py finds, and packs two steps' tensors in no more
    # than their peak; a generation loop, whose cache grows every token, has none.
    for tc in resnet50_train.csv:1186:4690 gpt2_small_train.csv:1258:4726 \
              unet_train.csv.gz:1311:4624 gpt_train.csv.gz:1468:5151; do
        IFS=: read -r f per at <<EOF2
$tc
EOF2
        run 0 "$VG" replay --json --repeat=1 --plan=learn "$TRACES/$f"
        [ "$(json_field step_requests)" = "$per" ] || fail "$f: step $(json_field step_requests), not $per"
        [ "$(json_field step_found_at)" = "$at" ] || fail "$f: found at $(json_field step_found_at), not $at"
        pk=$(json_field plan_peak_bytes); h=$(json_field plan_bytes); ll=$(json_field long_lived_bytes)
        [ "$pk" -gt 0 ] && [ "$h" -ge "$pk" ] && [ "$h" -le $((pk + pk / 50)) ] ||
            fail "$f: a plan of $h bytes for a peak of $pk"
        alloc=$(json_field peak_allocated)
        [ "$ll" -gt 0 ] && [ $((ll + pk)) -le $((alloc + alloc / 100)) ] ||
            fail "$f: $ll bytes long-lived beside a $pk-byte peak, $alloc allocated at most"
    done
    run 0 "$VG" replay --repeat=1 --plan=learn "$TRACES/resnet50_train.csv"
    grep -q "training step:    1186 requests, found at allocation 4690" "$TMP/out" || fail "text: $(cat "$TMP/out")"
    grep -qE "a plan of two: .*placement unchanged" "$TMP/out" || fail "no plan line"
    run 0 "$VG" replay --json --repeat=1 --plan=learn "$TRACES/gen_large.csv.gz"
    grep -q step_requests "$TMP/out" && fail "a step in a generation loop: $(cat "$TMP/out")"
    run 0 "$VG" replay --json --repeat=1 --plan=off "$TRACES/resnet50_train.csv"
    grep -q step_requests "$TMP/out" && fail "a step learnt with plan=off"
    run 2 "$VG" replay --repeat=1 --plan=follow "$TRACES/resnet50_train.csv"
    grep -q "plan" "$TMP/err" || fail "a bad plan= value is not named: $(cat "$TMP/err")" ;;
replay_plan_on)
    # plan=on (docs/decisions.md A13, src/alloc/arena.c): once the step is found its plan
    # places the tensors. unet in its own order, every operation validated: every planned
    # request placed, none missed, no page moved in the last quarter, and peak reserved
    # within 3.1 % of peak allocated (plan=off: 1.035; bench/RESULTS.md, ninth session).
    run 0 "$VG" replay --json --repeat=1 --validate --plan=on "$TRACES/unet_train.csv.gz"
    [ "$(json_field plan_missed)" = 0 ] || fail "unet: $(json_field plan_missed) missed"
    [ "$(json_field plan_placed)" -ge 14000 ] || fail "unet: $(json_field plan_placed) placed"
    [ "$(json_field pages_moved_last_quarter)" = 0 ] ||
        fail "unet: $(json_field pages_moved_last_quarter) pages moved in the last quarter"
    res=$(json_field peak_reserved); alloc=$(json_field peak_allocated)
    [ $((res * 1000)) -le $((alloc * 1031)) ] || fail "unet: $res reserved for $alloc allocated"
    # ResNet-50 with frees delayed (a perturbed order): the late tensors' successors miss
    # their places, the plan goes on, and the misses' pages are moved, not made.
    run 0 "$VG" replay --json --repeat=1 --perturb=1 --plan=on "$TRACES/resnet50_train.csv"
    [ "$(json_field plan_missed)" -gt 0 ] || fail "resnet50 perturbed: no miss"
    [ "$(json_field steps_found)" = 1 ] || fail "resnet50 perturbed: the plan was dropped"
    res=$(json_field peak_reserved); alloc=$(json_field peak_allocated)
    [ $((res * 1000)) -le $((alloc * 1010)) ] || fail "resnet50: $res reserved for $alloc allocated"
    run 0 "$VG" replay --repeat=1 --plan=on "$TRACES/cnn_train.csv.gz"
    grep -qE "placed by plan:   [0-9]+ requests, 0 missed" "$TMP/out" || fail "text: $(cat "$TMP/out")"
    grep -qE "pages moved:      [0-9]+, 0 of them in the last quarter" "$TMP/out" ||
        fail "no moves line: $(cat "$TMP/out")"
    # A generation loop has no step: once it has moved four times its memory, it settles
    # (heap.h, vg__heap_settling). 122,500 moves before; 6,000-27,000 since, most runs
    # none in the last quarter (the count depends on when frees are known complete).
    run 0 "$VG" replay --json --repeat=1 --plan=on --verbose=1 "$TRACES/gen_large.csv.gz"
    grep -q "found no step to follow and settled" "$TMP/err" || fail "gen_large: not settled"
    [ "$(json_field pages_moved)" -le 60000 ] || fail "gen_large: $(json_field pages_moved) moves"
    res=$(json_field peak_reserved); alloc=$(json_field peak_allocated)
    [ $((res * 1000)) -le $((alloc * 1020)) ] || fail "gen_large: $res reserved for $alloc"
    # Training with an evaluation after every 10th step: the plan waits through each
    # evaluation and is taken up again (2 of the 3: the third ends the trace), the step
    # is never learnt anew (1.038 of peak allocated; 1.054 before, fourteenth session), and
    # the trace replayed twice in one process (a notebook's cell run again) reserves at
    # most a page more than once.
    run 0 "$VG" replay --json --repeat=1 --plan=on "$TRACES/cnn_train_eval.csv.gz"
    [ "$(json_field plan_resumed)" = 2 ] || fail "eval: $(json_field plan_resumed) resumed"
    [ "$(json_field steps_found)" = 1 ] || fail "eval: $(json_field steps_found) steps found"
    once=$(json_field peak_reserved); alloc=$(json_field peak_allocated)
    [ $((once * 1000)) -le $((alloc * 1040)) ] || fail "eval: $once reserved for $alloc"
    run 0 "$VG" replay --json --repeat=2 --plan=on "$TRACES/cnn_train_eval.csv.gz"
    [ "$(json_field peak_reserved)" -le $((once + 2 * 1048576)) ] ||
        fail "eval run twice: $(json_field peak_reserved) reserved, $once once"
    # Gradient accumulation whose step (9,724 requests) is longer than the longest looked
    # for: a micro-batch is found and followed in each optimizer step; once its plan has
    # been dropped at two optimizer steps, the whole step is looked for, and found before
    # the recorded trace ends. Below plan=off (1.0647 of peak allocated) and expandable
    # segments (1.058, bench/pytorch_alloc_model.py): 1.0436.
    run 0 "$VG" replay --repeat=1 --plan=on --verbose=1 "$TRACES/gpt_train_accum.csv.gz"
    grep -qE "training step:    9724 requests, found at allocation" "$TMP/out" ||
        fail "accumulation: $(cat "$TMP/out")"
    grep -q "device 0: a training step of 9724 requests, found at allocation" "$TMP/err" ||
        fail "accumulation, verbose: $(cat "$TMP/err")"
    ! grep -q "found no step to follow" "$TMP/err" ||
        fail "accumulation: a step found, and said to be none: $(cat "$TMP/err")"
    run 0 "$VG" replay --json --repeat=1 --plan=on "$TRACES/gpt_train_accum.csv.gz"
    [ "$(json_field plan_placed)" -ge 20000 ] || fail "accum: $(json_field plan_placed) placed"
    [ "$(json_field steps_found)" -ge 2 ] || fail "accum: $(json_field steps_found) steps found"
    res=$(json_field peak_reserved); alloc=$(json_field peak_allocated)
    [ $((res * 1000)) -le $((alloc * 1050)) ] || fail "accum: $res reserved for $alloc"
    # Twelve optimizer steps (bench/long_trace.py --from): the whole step's plan is
    # followed to the end, no page moves in the last quarter, and the peak stays that of
    # the first optimizer step, 1.0436 (learning the micro-batch anew at each optimizer
    # step: 11 steps found, 203 moves in the last quarter and 1.0788, above expandable
    # segments' 1.058).
    run 0 python3 "$TRACES/../long_trace.py" --from=10600 "$TRACES/gpt_train_accum.csv.gz" \
        "$TMP/accum.csv" 9724 4
    run 0 "$VG" replay --json --repeat=1 --plan=on "$TMP/accum.csv"
    [ "$(json_field step_requests)" = 9724 ] || fail "accum x12: step $(json_field step_requests)"
    [ "$(json_field steps_found)" -le 6 ] || fail "accum x12: $(json_field steps_found) found"
    [ "$(json_field pages_moved_last_quarter)" = 0 ] ||
        fail "accum x12: $(json_field pages_moved_last_quarter) moves in the last quarter"
    res=$(json_field peak_reserved); alloc=$(json_field peak_allocated)
    [ $((res * 1000)) -le $((alloc * 1050)) ] || fail "accum x12: $res reserved for $alloc" ;;
bench_long_eval_trace)
    # bench/long_eval_trace.py makes a trace's runs of batches long (docs/decisions.md A13):
    # each of cnn_train_eval's three evaluations 20 batches; every free matches a live
    # allocation of its size and times never go back (check_trace.py), and what is live
    # at the end is what the recorded trace leaves (100.6 MB).
    run 0 python3 "$TRACES/../long_eval_trace.py" "$TRACES/cnn_train_eval.csv.gz" "$TMP/t.csv" \
        7077888 20
    grep -q "3 runs of batches made 20 batches long$" "$TMP/out" || fail "$(cat "$TMP/out")"
    [ "$(grep -c ',allocate,[^,]*,7077888,' "$TMP/t.csv")" = 60 ] || fail "not 3 x 20 batches"
    run 0 python3 "$TRACES/../record/check_trace.py" "$TMP/t.csv"
    grep -q "live at end 100.6 MB" "$TMP/out" || fail "check_trace: $(cat "$TMP/out")"
    run 1 python3 "$TRACES/../long_eval_trace.py" "$TRACES/cnn_train.csv.gz" "$TMP/u.csv" \
        7077888 20
    grep -q "no run of four batches or more" "$TMP/err" || fail "$(cat "$TMP/err")" ;;
replay_gzip)
    # A gzip-compressed trace (bench/traces keeps long ones so) replays exactly as the plain
    # one, with the NAME.json beside NAME.csv.gz; a truncated one is a clear error.
    t=$TRACES/resnet50_train
    run 0 "$VG" replay --json --repeat=1 "$t.csv"; cp "$TMP/out" "$TMP/plain"
    gzip -c "$t.csv" >"$TMP/r.csv.gz"; cp "$t.json" "$TMP/r.json"
    run 0 "$VG" replay --json --repeat=1 "$TMP/r.csv.gz"
    for k in events peak_reserved peak_requested pytorch_peak_reserved; do
        want=$(grep -oE "\"$k\":[0-9]+" "$TMP/plain")
        [ -n "$want" ] && grep -q "$want" "$TMP/out" || fail "$k differs from the plain trace's ($want)"
    done
    head -c 30000 "$TMP/r.csv.gz" >"$TMP/cut.csv.gz"
    run 2 "$VG" replay --repeat=1 "$TMP/cut.csv.gz"
    grep -q "cut.csv.gz' is not a whole gzip file" "$TMP/err" || fail "no clear error: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" = 1 ] || fail "more than one line for a cut file: $(cat "$TMP/err")"
    # Bytes gzip ignores after the data (its warning, exit status 2): the trace is whole.
    cp "$TMP/r.csv.gz" "$TMP/tail.csv.gz"; printf 'XYZ' >>"$TMP/tail.csv.gz"
    run 0 "$VG" replay --json --repeat=1 "$TMP/tail.csv.gz"
    grep -q "$(grep -oE '"peak_reserved":[0-9]+' "$TMP/plain")" "$TMP/out" || fail "trailing bytes"
    # Through a pipe: a plain trace is read whole (its first bytes too); a compressed one
    # cannot be read twice, and says what to do.
    run 0 sh -c "cat '$t.csv' | '$VG' replay --json --repeat=1 /dev/stdin"
    grep -q "$(grep -oE '"peak_reserved":[0-9]+' "$TMP/plain")" "$TMP/out" || fail "a pipe: $(cat "$TMP/err")"
    run 2 sh -c "cat '$TMP/r.csv.gz' | '$VG' replay --repeat=1 /dev/stdin"
    grep -q "is gzip-compressed and not a file that can be read twice: decompress it first" "$TMP/err" ||
        fail "a compressed pipe: $(cat "$TMP/err")" ;;
missing_driver)
    run 2 "$VG" replay --driver=/nonexistent/libcuda.so.1 "$TRACES/transformer_ctx128_forward_mixed.csv"
    one_line_error "cannot load the CUDA driver.*vgsim" ;;
exported_symbols)
    # Only vg_ symbols leave libvramguard.so. (Global or weak ones: a sanitizer build's
    # linker may also list local section bounds, __start___sancov_cntrs, which nothing
    # outside can bind to.)
    others=$(nm -D --defined-only "$BUILD/libvramguard.so" | awk '$2 ~ /^[A-Z]$/ {print $3}' |
             grep -v '^vg_' || true)
    [ -z "$others" ] || fail "symbols exported without the vg_ prefix: $others"
    nm -D --defined-only "$BUILD/libvramguard.so" | grep -q ' vg_malloc$' || fail "vg_malloc not exported" ;;
dlopen)
    # PyTorch loads libvramguard.so with dlopen: its static TLS must fit what glibc keeps
    # for dlopen'ed libraries (docs/decisions.md A4), and it must load and answer.
    cat >"$TMP/dl.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    const char *(*se)(int) = (const char *(*)(int))dlsym(h, "vg_strerror");
    if (!se) return 1;
    puts(se(0));
    return 0;
}
C
    cc "$TMP/dl.c" -o "$TMP/dl" -ldl || fail "cannot build the dlopen test"
    run 0 "$TMP/dl" "$BUILD/libvramguard.so"
    grep -q success "$TMP/out" || fail "vg_strerror(0) did not answer" ;;
install)
    # cmake --install to a fresh prefix; a program built against it with pkg-config and
    # one with find_package(vramguard) both run on the installed vgsim.
    cmake --install "$BUILD" --prefix "$TMP/p" >/dev/null || fail "cmake --install failed"
    for f in bin/vramguard include/vramguard.h lib/libvramguard.so lib/pkgconfig/vramguard.pc \
             lib/cmake/vramguard/vramguardConfig.cmake lib/vramguard/vgsim/libcuda.so.1; do
        [ -e "$TMP/p/$f" ] || fail "not installed: $f"
    done
    cat >"$TMP/use.c" <<'C'
#include <stdio.h>
#include <vramguard.h>
int main(int argc, char **argv) {
    char opts[4200];
    snprintf(opts, sizeof opts, "driver=%s", argv[1]);
    void *p = NULL;
    if (argc < 2 || vg_init(opts) != VG_OK || vg_malloc(&p, 1000, NULL) != VG_OK ||
        vg_free(p, NULL) != VG_OK) {
        fprintf(stderr, "%s\n", vg_last_error());
        return 1;
    }
    puts("installed vramguard works");
    return 0;
}
C
    PKG_CONFIG_PATH="$TMP/p/lib/pkgconfig" cc "$TMP/use.c" -o "$TMP/use_pc" \
        $(PKG_CONFIG_PATH="$TMP/p/lib/pkgconfig" pkg-config --cflags --libs vramguard) ||
        fail "building with pkg-config failed"
    LD_LIBRARY_PATH="$TMP/p/lib" run 0 "$TMP/use_pc" "$TMP/p/lib/vramguard/vgsim/libcuda.so.1"
    mkdir -p "$TMP/cm"
    cat >"$TMP/cm/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.16)
project(use C)
find_package(vramguard REQUIRED)
add_executable(use ../use.c)
target_link_libraries(use PRIVATE vramguard::vramguard)
C
    cmake -S "$TMP/cm" -B "$TMP/cm/b" -DCMAKE_PREFIX_PATH="$TMP/p" >/dev/null &&
        cmake --build "$TMP/cm/b" >/dev/null || fail "building with find_package failed"
    LD_LIBRARY_PATH="$TMP/p/lib" run 0 "$TMP/cm/b/use" "$TMP/p/lib/vramguard/vgsim/libcuda.so.1"
    run 0 "$TMP/p/bin/vramguard" demo --sim ;;
report_replay)
    # A snapshot of a trace replay -> the text summary, HTML, SVG and a Chrome trace that
    # parses as the trace-event format Perfetto reads.
    command -v python3 >/dev/null || { echo "skipped: no python3 to check the outputs"; exit 77; }
    run 0 "$VG" replay --repeat=1 --snapshot="$TMP/s.json" "$TRACES/transformer_ctx128_forward_mixed.csv"
    run 0 "$VG" report "$TMP/s.json" --html "$TMP/r.html" --svg "$TMP/r.svg" --chrome-trace "$TMP/r.trace.json"
    for k in "fragmentation: reserved / allocated at peak" "timeline:" "errors: none"; do
        grep -q "$k" "$TMP/out" || fail "the text summary lacks '$k'"
    done
    python3 "$HERE/check_outputs.py" chrome "$TMP/r.trace.json" || fail "bad Chrome trace"
    python3 "$HERE/check_outputs.py" svg "$TMP/r.svg" || fail "bad SVG"
    python3 "$HERE/check_outputs.py" html "$TMP/r.html" || fail "bad HTML" ;;
report_dropped_events)
    # With only the last 3000 events kept, the memory allocated before them is still drawn
    # (from the statistics): the window's peak is the program's 22 GiB, not the 3 GiB the
    # kept events alone add up to; and reserved memory starts where it was.
    run 0 "$VG" replay --repeat=1 --snapshot="$TMP/s.json" --snapshot_events=3000 \
        "$TRACES/transformer_ctx128_forward_mixed.csv"
    run 0 "$VG" report "$TMP/s.json" --html "$TMP/r.html"
    grep -qE "3000 events kept \([0-9]+ earlier ones dropped.*peak live 2[0-9]\.[0-9]+ GiB in them" "$TMP/out" ||
        fail "the kept events' peak lacks the older allocations: $(grep timeline "$TMP/out")"
    grep -q "allocated before the events kept" "$TMP/r.html" || fail "no series for the older allocations" ;;
report_ranks)
    # Snapshot file names expand %r; several snapshots merge into one view, a row per rank.
    RANK=0 run 0 "$VG" replay --repeat=1 --snapshot="$TMP/snap_%r.json" "$TRACES/transformer_ctx128_forward_mixed.csv"
    RANK=1 run 0 "$VG" replay --repeat=1 --snapshot="$TMP/snap_%r.json" "$TRACES/transformer_ctx128_fullstep.csv"
    [ -s "$TMP/snap_0.json" ] && [ -s "$TMP/snap_1.json" ] || fail "%r was not expanded"
    run 0 "$VG" report "$TMP/snap_0.json" "$TMP/snap_1.json" --html "$TMP/r.html" --svg "$TMP/r.svg"
    grep -qE "^rank 0 +0 " "$TMP/out" && grep -qE "^rank 1 +0 " "$TMP/out" || { cat "$TMP/out" >&2; fail "no row per rank"; }
    [ "$(grep -o 'rank [01], device 0' "$TMP/r.svg" | sort -u | wc -l)" = 2 ] || fail "the SVG lacks a panel per rank" ;;
report_malformed)
    run 0 "$VG" replay --repeat=1 --snapshot="$TMP/s.json" "$TRACES/transformer_ctx128_forward_mixed.csv"
    head -c 5000 "$TMP/s.json" >"$TMP/cut.json"
    run 2 "$VG" report "$TMP/cut.json"; one_line_error "cut.json.*truncated"
    printf '{"format":"vramguard-snapshot","version":1,"pid":1,"rank":0,"devices":"no"}' >"$TMP/wrong.json"
    run 2 "$VG" report "$TMP/wrong.json"; one_line_error "wrong.json.*'devices' is a string, expected an array"
    run 2 "$VG" report "$TMP/none.json"; one_line_error "none.json"
    run 2 "$VG" report; one_line_error "usage"
    run 2 "$VG" report "$TMP/s.json" --svg /nonexistent-dir/x.svg; one_line_error "cannot write '/nonexistent-dir/x.svg'" ;;
browser)
    # The HTML page in a real headless browser: it renders without console errors, draws
    # as many timeline series as its data holds, and the screenshot is not blank.
    CHROME=$(command -v chromium || command -v chromium-browser || true)
    [ -n "$CHROME" ] || { echo "skipped: no chromium (scripts/test-all.sh installs it)"; exit 77; }
    command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
    run 0 "$VG" demo --sim --snapshot="$TMP/d.json" --leaks=on
    [ -s "$TMP/d.json" ] || fail "the demo wrote no snapshot"
    run 0 "$VG" replay --repeat=1 --snapshot="$TMP/s.json" "$TRACES/transformer_ctx128_fullstep.csv"
    run 0 "$VG" report "$TMP/s.json" "$TMP/d.json" --group=size --html "$TMP/r.html"
    flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions
           --user-data-dir="$TMP/profile" --window-size=1200,1400)
    timeout 120 "$CHROME" "${flags[@]}" --enable-logging=stderr --v=0 --virtual-time-budget=5000 \
        --dump-dom "file://$TMP/r.html" >"$TMP/dom.html" 2>"$TMP/console.log" || fail "chromium failed"
    if grep -E "CONSOLE|Uncaught" "$TMP/console.log" | grep -qiE "error|uncaught"; then
        grep -E "CONSOLE|Uncaught" "$TMP/console.log" >&2; fail "console errors"
    fi
    timeout 120 "$CHROME" "${flags[@]}" --virtual-time-budget=5000 --screenshot="$TMP/shot.png" \
        "file://$TMP/r.html" >/dev/null 2>&1 || fail "chromium could not take a screenshot"
    python3 "$HERE/check_outputs.py" dom "$TMP/dom.html" "$TMP/r.html" || fail "the page did not render as expected"
    # A small program's page: live memory on its own scale, the reserved line marked as
    # above it, and the address range with nothing mapped said to hold no memory.
    run 0 "$VG" run --sim --snapshot="$TMP/small.json" -- "$EXAMPLES/s1_overrun"
    run 0 "$VG" report "$TMP/small.json" --html "$TMP/small.html"
    timeout 120 "$CHROME" "${flags[@]}" --virtual-time-budget=5000 --dump-dom \
        "file://$TMP/small.html" >"$TMP/small-dom.html" 2>/dev/null || fail "chromium failed"
    grep -q "reserved: 2.00 MiB, above this scale" "$TMP/small-dom.html" || fail "no off-scale note"
    grep -q ">4 KiB<" "$TMP/small-dom.html" || fail "the axis does not fit live memory"
    grep -q "of addresses reserved for large requests, nothing mapped: no memory is held" \
        "$TMP/small-dom.html" || fail "the unmapped range is not explained"
    python3 "$HERE/check_outputs.py" png "$TMP/shot.png" || fail "the screenshot is blank" ;;
s2_variants)
    # S2's correct versions (an event wait, an event polled, a stream synchronisation, the
    # legacy stream's implicit order, a synchronous copy, a flag written by one stream and
    # waited for by the other) under guard mode: no report, in particular no
    # unordered_free (G7), while the racy version gives one (example_s2_use_after_free).
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    for fix in --event --query --sync --legacy --memcpy --flag; do
        run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s2_use_after_free" $fix
        grep -q "s2: done with $fix" "$TMP/out" || fail "$fix: the program did not finish: $(cat "$TMP/out")"
        python3 "$HERE/check_report.py" "$TMP/r.json" 0 all || { cat "$TMP/err" >&2; fail "$fix gave a report"; }
    done
    # The side kernel given the pointer inside a struct (as PyTorch's kernels are): the same.
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s2_use_after_free" --struct
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 unordered_free kernel.name=ex_fill_span \
        kernel.argument=1 kernel.argument_byte=8 kernel.offset=0 "summary~argument 1 (bytes 8-15)" ||
        { cat "$TMP/err" >&2; fail "--struct: no unordered_free naming the struct argument"; }
    # The same kernel as the CUDA runtime launches PyTorch's (a library's CUkernel cast to
    # CUfunction, which the cuFunc* queries refuse): named, its struct argument read.
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s2_use_after_free" --library
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 unordered_free kernel.name=ex_fill_span \
        kernel.argument=1 kernel.argument_byte=8 kernel.offset=0 ||
        { cat "$TMP/err" >&2; fail "--library: no unordered_free naming the library's kernel"; }
    # The side stream's use an asynchronous memset instead of a kernel: the same report.
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s2_use_after_free" --copy
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 unordered_free \
        "kernel.name=cuMemsetD32Async of 1048576 bytes" kernel.argument=0 kernel.offset=0 \
        "summary~while cuMemsetD32Async of 1048576 bytes" kernel.launched_at~s2_use_after_free.c ||
        { cat "$TMP/err" >&2; fail "--copy: no unordered_free naming the memset"; }
    # free_order=off: the racy version's free is not judged; the write is still found.
    run 0 "$VG" run --sim --mode=guard --free_order=off --report_json="$TMP/r.json" -- "$EXAMPLES/s2_use_after_free"
    python3 "$HERE/check_report.py" "$TMP/r.json" 0 unordered_free || fail "free_order=off still reported" ;;
example_*)
    # An example program under `vramguard run --sim --mode=guard`: the report it must give.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    ex=${CASE#example_}
    extra=()
    [ "$ex" = s6_oom_leak ] && extra=(--limit=1G)
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" "${extra[@]}" -- "$EXAMPLES/$ex"
    chk() { python3 "$HERE/check_report.py" "$TMP/r.json" "$@" || { cat "$TMP/err" >&2; fail "report"; }; }
    case $ex in
    s1_overrun) chk 1 out_of_bounds_after allocation.size=4000 damage.first_offset=4000 damage.bytes=16 \
                    kernels_since_last_clean_check~ex_fill ;;
    s2_use_after_free) chk 1 use_after_free allocation.size=1048576 damage.first_offset=0 \
                           allocation.freed_at~s2_use_after_free.c
                       # (launched_at: ex_fill is an inline helper; main's line must show)
                       chk 1 unordered_free allocation.size=1048576 kernel.name=ex_fill \
                           kernel.argument=0 kernel.offset=0 allocation.freed_at~s2_use_after_free.c \
                           kernel.launched_at~s2_use_after_free.c ;;
    s3_h2d_race) chk 1 host_race "detail~byte 4000 of the source of cuMemcpyHtoDAsync (1048576 bytes" \
                     detail~s3_h2d_race.c ;;
    s4_d2h_race) chk 1 host_race "detail~the host read" \
                     "detail~byte 0 of the destination of cuMemcpyDtoHAsync (1048576 bytes"
                 grep -q "s4: read 7" "$TMP/out" || fail "the program did not read the copied value" ;;
    s6_oom_leak) chk 1 out_of_memory detail~67108864 detail~s6_oom_leak.c
                 grep -q "out of memory after 15 steps" "$TMP/out" || fail "unexpected output: $(cat "$TMP/out")" ;;
    s7_too_large) chk 1 out_of_memory "detail~larger than the whole device"
                  grep -q "failed cleanly; the earlier buffer is intact" "$TMP/out" || fail "$(cat "$TMP/out")" ;;
    s8_bad_frees) chk 1 double_free allocation.size=4096 allocation.freed_at~s8_bad_frees.c
                  chk 1 interior_free allocation.size=8192 ;;
    s9_illegal_address) chk 1 cuda_error detail~CUDA_ERROR_ILLEGAL_ADDRESS detail~ex_scatter \
                            "detail~allocation #1 (4000 bytes" ;;
    s11_pinned_staging)
        line=$(grep -n "/\* PIN \*/" "$HERE/../../examples/s11_pinned_staging.c" | cut -d: -f1)
        chk 1 leak pinned_host=True bytes=20971520 count=10 device=-1 \
            "allocated_at~s11_pinned_staging.c:$line" "message~pinned host memory" ;;
    clean_program) chk 0 all ;;
    *) fail "no expectation for $ex" ;;
    esac ;;
pinned_leak)
    # S11, the issue's acceptance: the loader's 10 staging buffers never freed, 20 MiB of
    # pinned host memory, reported as a leak from the line that pinned them, the run's exit
    # status error_exitcode's; verbose mode's exit line has the peak. In fast mode, or
    # with leaks=off, no report.
    src="$HERE/../../examples/s11_pinned_staging.c"
    line=$(grep -n "/\* PIN \*/" "$src" | cut -d: -f1)
    run 99 "$VG" run --sim --mode=guard --error_exitcode=99 --verbose -- "$EXAMPLES/s11_pinned_staging"
    for k in "ERROR: pinned host memory still allocated at exit" \
             " 20.00 MiB of pinned host memory in 10 allocations from:" \
             "#0 pinned_batch \(.*s11_pinned_staging.c:$line\)" \
             "pinned host memory at exit: peak 20.00 MiB .*20 pinned, 10 freed" \
             "ERROR SUMMARY: 1 error: 1 leak"; do
        grep -qE "$k" "$TMP/err" || { cat "$TMP/err" >&2; fail "no line matching '$k'"; }
    done
    grep -q "^s11: 20 batches staged" "$TMP/out" || fail "the program's output: $(cat "$TMP/out")"
    run 0 "$VG" run --sim --error_exitcode=99 -- "$EXAMPLES/s11_pinned_staging"
    [ ! -s "$TMP/err" ] || { cat "$TMP/err" >&2; fail "fast mode reported something"; }
    run 0 "$VG" run --sim --mode=guard --leaks=off --error_exitcode=99 -- "$EXAMPLES/s11_pinned_staging"
    grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || { cat "$TMP/err" >&2; fail "leaks=off"; }
    # A registered buffer (cuMemHostRegister) counts the same, from its own line.
    line=$(grep -n "/\* REGISTER \*/" "$src" | cut -d: -f1)
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s11_pinned_staging" --register
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 leak pinned_host=True bytes=20971520 \
        "allocated_at~s11_pinned_staging.c:$line" || { cat "$TMP/err" >&2; fail "--register"; }
    # Growth: the line's pinned memory grows at each of the program's steps (vg_step).
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s11_pinned_staging" --steps
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 growth pinned_host=True growth_per_step=2097152 \
        steps=5 bytes=10485760 "message~pinned host memory" || { cat "$TMP/err" >&2; fail "--steps"; }
    # A correct loader: nothing pinned at exit, nothing reported.
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s11_pinned_staging" --free-queued
    python3 "$HERE/check_report.py" "$TMP/r.json" 0 all || { cat "$TMP/err" >&2; fail "--free-queued"; } ;;
pinned_snapshot)
    # Snapshots carry the pinned host memory (pinned_host), and vramguard report shows it
    # as a timeline of its own in the text, the SVG, the HTML page and the Chrome trace.
    run 99 "$VG" run --sim --mode=guard --error_exitcode=99 --snapshot="$TMP/s.json" -- \
        "$EXAMPLES/s11_pinned_staging"
    run 0 "$VG" report "$TMP/s.json" --svg "$TMP/s.svg" --html "$TMP/s.html" --chrome-trace "$TMP/s.ct.json"
    for k in "^  pinned host memory \(the host has .* of RAM\)" \
             "pinned: 20.00 MiB now in 10 allocations, peak 20.00 MiB; 20 pinned, 10 freed" \
             "20.00 MiB in 10 allocations from pinned_batch \(s11_pinned_staging.c:[0-9]+\)" \
             "timeline: 30 events kept, peak live 20.00 MiB"; do
        grep -qE "$k" "$TMP/out" || { cat "$TMP/out" >&2; fail "report: no line matching '$k'"; }
    done
    grep -q "class=\"title\">pid [0-9]*, pinned host memory<" "$TMP/s.svg" || fail "no SVG panel"
    grep -q "pinned host memory" "$TMP/s.html" || fail "no HTML panel"
    python3 - "$TMP/s.ct.json" <<'PY' || fail "the Chrome trace's pinned track"
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
track = [e["args"]["pinned"] for e in ev if e.get("name") == "pinned host memory" and e.get("ph") == "C"]
assert max(track) == 20 << 20 and track[-1] == 20 << 20, track
PY
    ;;
pinned_limit)
    # pinned_limit=16M: a 64 MiB cuMemHostAlloc fails as the driver fails for lack of
    # memory, and the explanation says it is pinned host memory and the cap; in guard mode
    # it is a report (out_of_memory, pinned_host). Under a larger cap it succeeds.
    run 0 "$VG" run --sim --pinned_limit=16M -- "$EXAMPLES/s11_pinned_staging" --big
    grep -q "cuMemHostAlloc of 64 MiB: CUDA_ERROR_OUT_OF_MEMORY" "$TMP/out" || fail "$(cat "$TMP/out")"
    for k in "out of pinned host memory: cuMemHostAlloc cannot pin 64.00 MiB \(67108864 bytes\)" \
             "page-locked host RAM, not device memory" \
             "why: pinned_limit=16.00 MiB, and 0 bytes is pinned already"; do
        grep -qE "$k" "$TMP/err" || { cat "$TMP/err" >&2; fail "no line matching '$k'"; }
    done
    run 0 "$VG" run --sim --mode=guard --pinned_limit=16M --report_json="$TMP/r.json" -- \
        "$EXAMPLES/s11_pinned_staging" --big
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 out_of_memory pinned_host=True \
        "message=out of pinned host memory" "detail~pinned_limit=16.00 MiB" \
        call_at~s11_pinned_staging.c || { cat "$TMP/err" >&2; fail "guard mode's report"; }
    run 0 "$VG" run --sim --pinned_limit=64M -- "$EXAMPLES/s11_pinned_staging" --big
    grep -q "cuMemHostAlloc of 64 MiB: CUDA_SUCCESS" "$TMP/out" || fail "under 64M: $(cat "$TMP/out")"
    # The staging loader under 16M: the ninth buffer would pass it, with the holders named.
    run 1 "$VG" run --sim --pinned_limit=16M -- "$EXAMPLES/s11_pinned_staging"
    grep -qE "why: pinned_limit=16.00 MiB, and 16.00 MiB is pinned already" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "no explanation at the ninth buffer"; }
    grep -qE "16.00 MiB in 8 allocations from:" "$TMP/err" || { cat "$TMP/err" >&2; fail "no holders"; }
    # Bad values stop the run before the program starts.
    for bad in pinned_limit=lots pinned_warn=150% pinned_warn=-1% pinned_warn=half; do
        run 2 "$VG" run --sim --$bad -- "$EXAMPLES/s11_pinned_staging"
        grep -q "'${bad%%=*}'" "$TMP/err" || { cat "$TMP/err" >&2; fail "--$bad not named"; }
    done ;;
pinned_warn)
    # pinned_warn: one warning when the process's pinned memory first passes it, naming the
    # threshold and the holders; as a share of the host's RAM too; never with 0.
    run 0 "$VG" run --sim --pinned_warn=7M -- "$EXAMPLES/s11_pinned_staging"
    [ "$(grep -c "warning: the process has pinned" "$TMP/err")" = 1 ] ||
        { cat "$TMP/err" >&2; fail "not one warning"; }
    grep -qE "warning: the process has pinned 8.00 MiB of host memory, past pinned_warn=7.00 MiB" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "the warning's figures"; }
    grep -qE "in 4 allocations from:" "$TMP/err" || { cat "$TMP/err" >&2; fail "no holders"; }
    run 0 "$VG" run --sim --pinned_warn=0.00001% -- "$EXAMPLES/s11_pinned_staging"
    grep -qE "past pinned_warn=1e-05% of the host's RAM \([0-9.]+ [KM]iB\)" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "a share of the RAM"; }
    run 0 "$VG" run --sim --pinned_warn=0 -- "$EXAMPLES/s11_pinned_staging"
    [ ! -s "$TMP/err" ] || { cat "$TMP/err" >&2; fail "pinned_warn=0 warned"; }
    # The default (50% of the RAM) says nothing of 20 MiB.
    run 0 "$VG" run --sim -- "$EXAMPLES/s11_pinned_staging"
    [ ! -s "$TMP/err" ] || { cat "$TMP/err" >&2; fail "the default warned"; } ;;
pinned_free_waits)
    # The driver makes a free of a pinned buffer wait for a copy still queued on it
    # (docs/decisions.md G14): verbose mode says so once, naming both lines, in either mode;
    # without verbose, nothing.
    src="$HERE/../../examples/s11_pinned_staging.c"
    for m in fast guard; do
        run 0 "$VG" run --sim --mode=$m --verbose -- "$EXAMPLES/s11_pinned_staging" --free-queued
        [ "$(grep -c "note: cuMemFreeHost(" "$TMP/err")" = 1 ] || { cat "$TMP/err" >&2; fail "$m: not one note"; }
        grep -qE "note: cuMemFreeHost\(0x[0-9a-f]+\) waited [0-9.]+ ms for cuMemcpyHtoDAsync of 2.00 MiB on stream" "$TMP/err" ||
            { cat "$TMP/err" >&2; fail "$m: the note"; }
        grep -A4 "note: cuMemFreeHost" "$TMP/err" | grep -q "s11_pinned_staging.c" || fail "$m: no line named"
        grep -q "pinned host memory at exit: peak 2.00 MiB" "$TMP/err" || { cat "$TMP/err" >&2; fail "$m: the peak"; }
    done
    run 0 "$VG" run --sim -- "$EXAMPLES/s11_pinned_staging" --free-queued
    [ ! -s "$TMP/err" ] || { cat "$TMP/err" >&2; fail "a note without verbose"; } ;;
race_other_copies)
    # S3 through cuMemcpyAsync, the host pointer a unified address (cudaMemcpyAsync with
    # cudaMemcpyDefault): the same race, the copy named as the program made it.
    # The same through cuMemcpy2DAsync and cuMemcpy3DAsync (rows back to back), and the
    # batched copies; a batched copy that reads its source during the call is no race.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    for how in generic:cuMemcpyAsync 2d:cuMemcpy2DAsync 3d:cuMemcpy3DAsync \
               batch:cuMemcpyBatchAsync batch-3d:cuMemcpy3DBatchAsync; do
        run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s3_h2d_race" --${how%%:*}
        python3 "$HERE/check_report.py" "$TMP/r.json" 1 host_race \
            "detail~byte 4000 of the source of ${how#*:} (1048576 bytes" detail~s3_h2d_race.c ||
            { cat "$TMP/err" >&2; fail "report (--${how%%:*})"; }
    done
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s3_h2d_race" \
        --batch-during-call
    python3 "$HERE/check_report.py" "$TMP/r.json" 0 all ||
        { cat "$TMP/err" >&2; fail "a source read during the call reported"; } ;;
interposer_batch_overrun)
    # A batched copy past the end of a buffer allocated just before it on its stream: the
    # whole batch is refused before anything is queued (CUDA_ERROR_INVALID_VALUE), in either
    # mode, and the report names the copy of the batch, its destination, how far past the
    # end it runs, and the program's line.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    for how in "":cuMemcpyBatchAsync --3d:cuMemcpy3DBatchAsync; do
        for m in fast guard; do
            run 0 "$VG" run --sim --mode=$m --report_json="$TMP/r.json" -- \
                "$BUILD/tests/preload/batch_overrun" ${how%%:*}
            grep -q "batch: CUDA_ERROR_INVALID_VALUE, its first copy not made" "$TMP/out" ||
                fail "${how%%:*} $m: $(cat "$TMP/out")"
            python3 "$HERE/check_report.py" "$TMP/r.json" 1 out_of_bounds_copy allocation.size=4000 \
                access.call=${how#*:} access.operation=write access.range=destination \
                access.copy=1 access.copies=3 access.past_end=16 access.offset=0 \
                "summary~the destination of copy 2 of 3: bytes 0 to 4015 of a 4000-byte allocation, 16 of them past its end" \
                "call_at~batch_overrun.c:" ||
                { cat "$TMP/err" >&2; fail "report (${how%%:*} $m)"; }
        done
    done ;;
interposer_pools)
    # Memory from a pool (one the program makes, also after 300 others came and went,
    # the default pool, a pool made current for cuMemAllocAsync) is vramguard's, so guard mode finds the overrun and names the
    # allocation; a pool made for sharing with other processes keeps the driver's memory,
    # which the program can still export, in both modes.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    for how in "" --default-pool --current --many; do
        run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- \
            "$BUILD/tests/preload/pool_overrun" $how
        python3 "$HERE/check_report.py" "$TMP/r.json" 1 all kind=out_of_bounds_after \
            allocation.size=4000 damage.first_offset=4000 damage.bytes=4 \
            "allocation.allocated_at~pool_overrun.c:" ||
            { cat "$TMP/err" >&2; fail "report (${how:-a pool made by the program})"; }
    done
    for how in --ipc --ipc-current; do
        same_under_vramguard "$BUILD/tests/preload/pool_overrun" $how
    done
    # A pool's maxSize still bounds it, and the refusal says why.
    run 0 "$VG" run --sim -- "$BUILD/tests/conformance/conformance" pool_max_size_bounds_it
    grep -q "48.00 MiB from memory pool .* past its maxSize of 64.00 MiB (48.00 MiB of it in use)" \
        "$TMP/err" || { cat "$TMP/err" >&2; fail "the maxSize refusal is not explained"; } ;;
interposer_managed)
    # Managed memory (cudaMallocManaged) in guard mode is vramguard's: an overrun by a
    # kernel or by the host, and a kernel's write after cuMemFree, are reported as for
    # device memory, the allocation marked managed, also when it was first attached to
    # the host; the host still reads the kernel's values through the pointer. The correct
    # version, which attaches, prefetches and advises, gives the same output in both
    # modes. On a device where
    # the host may not touch managed memory while kernels run, the memory stays the
    # driver's: the program runs as without vramguard (its overrun unseen).
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    for how in "":out_of_bounds_after --host:out_of_bounds_after --uaf:use_after_free \
               --host-attached:out_of_bounds_after; do
        run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- \
            "$BUILD/tests/preload/managed_overrun" ${how%%:*}
        grep -q "managed_overrun: done, sum 1000" "$TMP/out" || fail "${how%%:*}: the program did not finish"
        first=4000 count=1; [ "${how%%:*}" = --uaf ] && first=0 count=2
        # (--uaf: the kernel given the freed memory is reported at its launch too)
        python3 "$HERE/check_report.py" "$TMP/r.json" $count all ||
            { cat "$TMP/err" >&2; fail "report count (${how%%:*})"; }
        python3 "$HERE/check_report.py" "$TMP/r.json" 1 "${how#*:}" allocation.size=4000 \
            allocation.managed=True damage.first_offset=$first \
            "allocation.allocated_at~managed_overrun.c:" ||
            { cat "$TMP/err" >&2; fail "report (${how%%:*})"; }
        [ $count = 1 ] || python3 "$HERE/check_report.py" "$TMP/r.json" 1 launch_with_freed_pointer \
            allocation.size=4000 allocation.managed=True kernel.name=ex_fill kernel.argument=0 \
            kernel.offset=0 || { cat "$TMP/err" >&2; fail "the launch with the freed managed memory"; }
    done
    grep -q "on device 0 (managed memory)" "$TMP/err" || fail "the report does not say the memory is managed"
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s1_overrun" --managed
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 all kind=out_of_bounds_after allocation.size=4000 \
        allocation.managed=True damage.first_offset=4000 damage.bytes=16 \
        kernels_since_last_clean_check~ex_fill || { cat "$TMP/err" >&2; fail "S1 in managed memory"; }
    # (The launch is in an out-of-line copy of a header's function: with LLVM's symbolizer
    # its file is the header, where GNU addr2line 2.40 names the including file; the
    # report adds the wrapper's caller. Where the compiler inlined it, the caller too.)
    if command -v llvm-addr2line >/dev/null; then
        grep -qE "launched at ex_fill \(.*examples/common.h:[0-9]*\),? (called from|inlined into) main \(.*s1_overrun.c:" "$TMP/err" ||
            { cat "$TMP/err" >&2; fail "the header function's frame names the wrong file"; }
    fi
    same_under_vramguard "$BUILD/tests/preload/managed_overrun" --attach
    # A snapshot shows the managed memory as an entry of its own, which the report names.
    run 0 "$VG" run --sim --mode=guard --snapshot="$TMP/m.json" -- \
        "$BUILD/tests/preload/managed_overrun" --attach
    run 0 "$VG" report "$TMP/m.json"
    grep -q "device 0 (.*, managed memory, 80.00 GiB)" "$TMP/out" &&
        grep -q "timeline: nothing was allocated here" "$TMP/out" &&
        grep -q "timeline: 3 events kept, peak live 3.91 KiB" "$TMP/out" ||
        { cat "$TMP/out" >&2; fail "the report of a snapshot with managed memory"; }
    VGSIM_CONCURRENT_MANAGED=0 run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- \
        "$BUILD/tests/preload/managed_overrun"
    python3 "$HERE/check_report.py" "$TMP/r.json" 0 all ||
        { cat "$TMP/err" >&2; fail "managed memory served without concurrent managed access"; } ;;
interposer_launch_ex)
    # S1 with its kernel launched through cuLaunchKernelEx (cudaLaunchKernelEx, cluster
    # launches): the report names the kernel and the guard work precedes it.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s1_overrun" --launch-ex
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 out_of_bounds_after allocation.size=4000 \
        damage.first_offset=4000 damage.bytes=16 kernels_since_last_clean_check~ex_fill ||
        { cat "$TMP/err" >&2; fail "report"; }
    grep -q "launched at ex_fill_ex" "$TMP/err" || fail "the launch site is not the program's" ;;
interposer_streams_and_graphs)
    # S1 with the buffer from cuMemAlloc and the overrunning kernel on a non-blocking stream
    # (no order with the legacy stream: the fill of a synchronous allocation must not wait
    # in the legacy stream's queue); from cuMemAllocAsync on the legacy stream with the
    # kernel on a blocking stream (which waits for the legacy stream: the fill waiting in
    # its queue must be launched first); then captured into a CUDA graph launched twice (the
    # report names the captured kernel, given the pointer, and the graph launches).
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    for how in --stream --blocking --graph; do
        run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/s1_overrun" $how
        python3 "$HERE/check_report.py" "$TMP/r.json" 1 out_of_bounds_after allocation.size=4000 \
            damage.first_offset=4000 damage.bytes=16 kernels_since_last_clean_check~ex_fill ||
            { cat "$TMP/err" >&2; fail "report ($how)"; }
    done
    grep -q "ex_fill (captured into a CUDA graph)" "$TMP/err" || fail "the captured kernel is not named"
    grep -q "(cuGraphLaunch) on stream" "$TMP/err" || fail "the graph launches are not listed"
    grep -A1 "given a pointer into this allocation" "$TMP/err" | grep -q "captured into a CUDA graph" ||
        fail "the captured kernel is not named as the likely writer" ;;
interposer_sync_calls)
    # cuMemFree waits for the device's work and cuMemAlloc returns memory any stream may
    # use at once; a program that counts on it gets the same results under vramguard (in
    # guard mode too, with no report: the poison of the freed buffer follows its kernel).
    for how in --free --alloc; do
        LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$BUILD/tests/preload/sync_calls" $how
        for m in fast guard; do
            run 0 "$VG" run --sim --mode=$m -- "$BUILD/tests/preload/sync_calls" $how
            if grep -q "ERROR:" "$TMP/err"; then cat "$TMP/err" >&2; fail "a report ($how, $m mode)"; fi
        done
    done
    # cudaMalloc, a kernel on a non-blocking stream, cudaFree, in a loop: guard mode
    # reported thousands of writes to freed memory here before.
    run 0 "$VG" run --sim --mode=guard --error_exitcode=3 -- "$BUILD/bench/launch_heavy" 300 sync ;;
interposer_pointer_queries)
    # A pointer's range is the allocation whichever call asks (cuMemGetAddressRange,
    # cuPointerGetAttribute, cuPointerGetAttributes), and a CUDA IPC export of vramguard's
    # memory fails with the reason said once, instead of sharing the wrong memory.
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$BUILD/tests/preload/pointer_user"
    for m in fast guard; do
        run 0 "$VG" run --sim --mode=$m -- "$BUILD/tests/preload/pointer_user"
        grep -q "range the allocation's; cuIpcGetMemHandle: CUDA_ERROR_NOT_SUPPORTED" "$TMP/out" ||
            { cat "$TMP/out" "$TMP/err" >&2; fail "answers ($m mode)"; }
        [ "$(grep -c "cannot be shared with another process through CUDA IPC" "$TMP/err")" = 1 ] ||
            { cat "$TMP/err" >&2; fail "the IPC refusal is not explained once ($m mode)"; }
    done ;;
interposer_contexts)
    # 70 contexts created and destroyed in turn, each with 4 MiB allocated (half of it
    # left to cuCtxDestroy to free) and 4 KiB of managed memory (in guard mode, a heap of
    # its own each time): every round works, and nothing outlives its context
    # (vramguard's pages come from cuMemCreate, which cuCtxDestroy does not free; before,
    # they were kept, and the 65th context's first allocation failed).
    # In guard mode, what a context's destruction freed is reported as leaked, once, when
    # it happens (every other round leaves 4 MiB to it). (Under a sanitizer, guard mode's
    # run has 20 contexts: it took 160 s with 70.)
    n=70
    [ -n "${VG_SANITIZE:-}" ] && n=20
    for m in fast guard; do
        [ $m = fast ] && c=70 || c=$n
        if [ "$c" != "${plain_for:-}" ]; then
            LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$BUILD/tests/preload/contexts" $c
            cp "$TMP/out" "$TMP/plain"
            plain_for=$c
        fi
        run 0 "$VG" run --sim --mode=$m -- "$BUILD/tests/preload/contexts" $c
        cmp -s "$TMP/plain" "$TMP/out" || { cat "$TMP/out" >&2; fail "output differs ($m mode)"; }
        if [ $m = fast ] && grep -q "ERROR" "$TMP/err"; then
            cat "$TMP/err" >&2
            fail "a report in fast mode"
        fi
    done
    grep -q "ERROR SUMMARY: $((n / 2)) errors: $((n / 2)) leak$" "$TMP/err" || { cat "$TMP/err" >&2; fail "leaks"; }
    [ "$(grep -c "ERROR: memory still allocated when its context was destroyed" "$TMP/err")" = $((n / 2)) ] ||
        fail "the leaks are not reported as the contexts are destroyed" ;;
interposer_device_reset)
    # cudaDeviceReset (cuDevicePrimaryCtxReset) between phases and before exit: every
    # phase works, nothing outlives a reset, the exit after the last one is clean; in
    # guard mode, each reset's unfreed 4 MiB is reported as leaked when it happens.
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$BUILD/tests/preload/device_reset"
    cp "$TMP/out" "$TMP/plain"
    run 0 "$VG" run --sim -- "$BUILD/tests/preload/device_reset"
    cmp -s "$TMP/plain" "$TMP/out" || { cat "$TMP/out" >&2; fail "output differs (fast mode)"; }
    if grep -q "ERROR" "$TMP/err"; then cat "$TMP/err" >&2; fail "a report in fast mode"; fi
    run 0 "$VG" run --sim --mode=guard -- "$BUILD/tests/preload/device_reset"
    cmp -s "$TMP/plain" "$TMP/out" || { cat "$TMP/out" >&2; fail "output differs (guard mode)"; }
    grep -q "ERROR SUMMARY: 3 errors: 3 leak$" "$TMP/err" || { cat "$TMP/err" >&2; fail "leaks"; }
    [ "$(grep -c "ERROR: memory still allocated when its context was reset" "$TMP/err")" = 3 ] ||
        fail "the leaks are not reported at the resets" ;;
interposer_random_clean)
    # Correct multi-stream programs drawn from seeds (sync and async allocations and
    # frees, event hand-offs, lagging streams, copies, pinned and pageable host memory,
    # graphs, streams destroyed and created again): the same reads as without vramguard,
    # and no report nor message. The code before docs/decisions.md A9 read wrong values
    # in 4 of 5 seeds in fast mode and reported 9-14 false errors in each in guard mode;
    # before G3's destroyed-stream rule, guard mode dropped checks with a message.
    # (Under a sanitizer, which slows vgsim's simulated device too, two shorter programs.)
    seeds="1 2 3 4" steps=3000
    [ -n "${VG_SANITIZE:-}" ] && seeds="1 2" steps=1200
    for seed in $seeds; do
        same_under_vramguard "$BUILD/tests/preload/random_clean" $seed $steps
    done ;;
interposer_random_threads)
    # Four threads, each such a program with its own streams (one the per-thread default
    # stream) in one context: one thread's cudaDeviceSynchronize and cudaFree happen while
    # the others allocate, free and launch (docs/decisions.md A9). Then the same on two
    # devices, two threads on each. Also run under TSan.
    runs="1:1 2:1 1:2" steps=1500
    [ -n "${VG_SANITIZE:-}" ] && runs="1:2" steps=600
    for r in $runs; do
        seed=${r%:*}
        export VGSIM_DEVICES=${r#*:}
        same_under_vramguard "$BUILD/tests/preload/random_clean" $seed $steps 4
        grep -q "^4 thread(s) on $VGSIM_DEVICES device(s)" "$TMP/plain" || fail "$(head -1 "$TMP/plain")"
    done ;;
interposer_random_planted)
    # One bug planted halfway through such a program (random_clean's PLANT: an overrun, an
    # underrun, a synchronous copy past the end of a buffer just allocated (refused at the
    # call, whichever copy call makes it), a kernel's write to a buffer just freed (reported
    # at the launch and by its damage), a double free, a free unordered with
    # another stream's kernel, the host writing the source of an async copy), with one
    # thread and with four: exactly that report, with what the program printed it must
    # say (the allocation's size, the damage's offset and length, the kernel, the byte).
    # The unordered free's late write may be reported too (DESIGN.md S2); with four
    # threads, another thread's synchronisation may order that free, so one thread only.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    plants="overrun underrun copy_overrun freed double_free unordered host_race"
    runs="1:1 1:4" steps=1000
    [ -n "${VG_SANITIZE:-}" ] && runs="1:1" steps=600
    for r in $runs; do
        seed=${r%:*} threads=${r#*:}
        for plant in $plants; do
            # (with four threads, those whose guard work differs with threads about)
            [ $threads != 1 ] && case $plant in overrun|underrun|double_free|unordered) continue ;; esac
            reported_as_planted "$BUILD/tests/preload/random_clean" $seed $steps $threads $plant
        done
    done ;;
interposer_random_ptds)
    # The same programs built for the per-thread default stream (random_clean_ptds: cuda.h
    # maps every call to its _ptsz or _ptds twin, as nvcc --default-stream per-thread
    # builds do): the same reads as without vramguard, no message; and bugs planted there
    # are reported as planted: the synchronous copy past a new buffer's end refused at its
    # _ptds twin's call, a kernel's write to freed memory at its _ptsz launch and by its
    # damage, the host's write to a source in flight.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    prog="$BUILD/tests/preload/random_clean_ptds"
    [ -x "$prog" ] || { echo "skipped: built without the toolkit's cuda.h"; exit 77; }
    runs="1:1 2:4" steps=1500
    [ -n "${VG_SANITIZE:-}" ] && runs="1:2" steps=600
    for r in $runs; do
        same_under_vramguard "$prog" ${r%:*} $steps ${r#*:}
    done
    # (Not under TSan: a planted bug's write races the device's reads of that memory by
    # design, and vgsim's device is host threads.)
    [ "${VG_SANITIZE:-}" = thread ] && exit 0
    plant_threads="1 4" plants="copy_overrun freed host_race"
    [ -n "${VG_SANITIZE:-}" ] && plant_threads=1 plants=copy_overrun
    for threads in $plant_threads; do
        for plant in $plants; do
            reported_as_planted "$prog" 1 $((steps * 2 / 3)) $threads $plant
        done
    done ;;
clean_identical)
    # A correct program: the same output without vramguard, and under it in both modes,
    # no report, and exit status 0.
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$EXAMPLES/clean_program"; cp "$TMP/out" "$TMP/plain"
    for m in fast guard; do
        run 0 "$VG" run --sim --mode=$m -- "$EXAMPLES/clean_program"
        cmp -s "$TMP/plain" "$TMP/out" || fail "output differs in $m mode"
        if grep -q "ERROR:" "$TMP/err"; then cat "$TMP/err" >&2; fail "a report in $m mode"; fi
    done ;;
interposer_dlsym)
    # dlopen + dlsym, dlsym(RTLD_NEXT) and cuGetProcAddress all lead to the hooks.
    command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$BUILD/tests/preload/dlsym_user"
    python3 "$HERE/check_report.py" "$TMP/r.json" 3 double_free allocation.size=4096 || fail "not every lookup was hooked" ;;
interposer_pinned_lookups)
    # Pinned memory reached as the CUDA runtime reaches it (dlsym, RTLD_NEXT,
    # cuGetProcAddress) is counted: four 1 MiB leaks of pinned host memory, one per call.
    command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$BUILD/tests/preload/pinned_lookup_user"
    python3 "$HERE/check_report.py" "$TMP/r.json" 4 leak pinned_host=True bytes=1048576 count=1 \
        allocated_at~pinned_lookup_user.c || { cat "$TMP/err" >&2; fail "not every lookup was hooked"; }
    python3 - "$TMP/r.json" <<'PY' || fail "a lookup's leak was not pinned host memory"
import json, sys
assert all(r.get("pinned_host") for r in json.load(open(sys.argv[1]))), "device leak"
PY
    ;;
interposer_ctx_sync_v2)
    # CUDA 13's runtime synchronises a device through cuCtxSynchronize_v2, which it gets
    # from cuGetProcAddress: the hook runs the synchronisation's check (check_sync).
    command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
    run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$BUILD/tests/preload/ctx_sync_user"
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 out_of_bounds_after allocation.size=4096 \
        damage.first_offset=4096 "found~context synchronisation" ||
        fail "the synchronisation through cuCtxSynchronize_v2 was not hooked" ;;
interposer_cross_device)
    # Copies between two devices' memory through the plain copy calls and a batched copy,
    # either way, either context current: the same bytes under vramguard, no message, with
    # the devices reaching each other peer to peer (vramguard's pages mapped for both: A11)
    # and without
    # (VGSIM_P2P=0: vgsim refuses a plain copy of VMM pages the other device cannot reach,
    # and vramguard makes it with cuMemcpyPeer instead; without that, "invalid argument").
    export VGSIM_DEVICES=2
    for p2p in 1 0; do
        export VGSIM_P2P=$p2p
        same_under_vramguard "$BUILD/tests/preload/cross_device"
        grep -q "^cross_device: 20 copies, 0 wrong" "$TMP/plain" || fail "P2P=$p2p: $(cat "$TMP/plain")"
    done ;;
preload_hooks_defined)
    # Every driver function the hook tables list is defined in the preload library itself:
    # a hook declared (hooks.h) but never written would bind to the driver's function when
    # the library loads, and its calls would pass through unguarded, unseen.
    command -v nm >/dev/null || { echo "skipped: no nm"; exit 77; }
    und=$(nm -D --undefined-only "$(dirname "$VG")/libvramguard_preload.so" | awk '$2 ~ /^cu/ {print $2}')
    [ -z "$und" ] || fail "driver functions the preload library uses but does not define: $und" ;;
signals)
    # SIGTERM to `vramguard run` reaches the program, whose reports (here a leak) are
    # written before it dies of the signal. (SIGINT works the same way from a terminal; a
    # shell starts background jobs with SIGINT ignored, so this test cannot send it.)
    command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
    for sig in TERM; do
        rm -f "$TMP/r.json"
        "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$BUILD/tests/preload/sleeper" \
            >"$TMP/out" 2>"$TMP/err" &
        runner=$!
        # (until the program is ready, however long a loaded machine takes, or has exited)
        until grep -q ready "$TMP/out" 2>/dev/null || ! kill -0 $runner 2>/dev/null; do sleep 0.1; done
        kill -$sig $runner
        wait $runner
        rc=$?
        want=143
        [ $rc = $want ] || { cat "$TMP/err" >&2; fail "SIG$sig: exit status $rc, expected $want"; }
        python3 "$HERE/check_report.py" "$TMP/r.json" 1 leak "allocated_at~sleeper.c" ||
            fail "SIG$sig: the leak report was not written"
        grep -q "ERROR SUMMARY: 1 error" "$TMP/err" || fail "SIG$sig: no summary"
    done ;;
setuid_ignores_environment)
    # A set-uid program (here owned by root, run by nobody) reads no option from the
    # environment of whoever runs it (secure_getenv): mode stays fast.
    [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null ||
        { echo "skipped: needs root, the nobody user and setpriv"; exit 77; }
    cp "$BUILD/tests/preload/print_mode" "$TMP/print_mode"
    chmod 755 "$TMP"; chown root "$TMP/print_mode"; chmod 4755 "$TMP/print_mode"
    drv="driver=$VGSIM_DIR/libcuda.so.1"
    VRAMGUARD_OPTIONS="$drv,mode=guard" run 0 "$TMP/print_mode"
    grep -q "mode guard" "$TMP/out" || fail "the control run did not read the environment: $(cat "$TMP/out")"
    VRAMGUARD_OPTIONS="$drv,mode=guard" run 0 setpriv --reuid=nobody --regid=nogroup --clear-groups "$TMP/print_mode"
    if grep -q "mode guard" "$TMP/out"; then
        [ -n "$(findmnt -no OPTIONS -T "$TMP" 2>/dev/null | grep nosuid)" ] &&
            { echo "skipped: $TMP is mounted nosuid"; exit 77; }
        fail "a set-uid program took its options from the environment"
    fi
    # (nothing from the environment: not even driver=, so the default libcuda.so.1 is tried)
    grep -q "mode fast" "$TMP/out" && grep -q "'libcuda.so.1'" "$TMP/out" ||
        fail "unexpected: $(cat "$TMP/out")" ;;
rtld_next_relative)
    # Code that is not CUDA keeps its dlsym(RTLD_NEXT) semantics under the interposer.
    d="$BUILD/tests/preload"
    LD_LIBRARY_PATH="$d" run 0 "$d/next_user"
    grep -q "second library: 3" "$TMP/out" || fail "without vramguard: $(cat "$TMP/out")"
    LD_LIBRARY_PATH="$d" run 0 "$VG" run --sim -- "$d/next_user"
    grep -q "second library: 3" "$TMP/out" || fail "under vramguard run: $(cat "$TMP/out")" ;;
run_validates_every_source)
    # Under `vramguard run` every option from every source is checked before the program
    # starts: a bad one stops the run (exit 2) naming the source, the key and the value,
    # and the program is not started. A good flag does not save a bad environment.
    chk() { # PATTERN: one line, the program not started
        one_line_error "$1"
        grep -q "the program was not started" "$TMP/err" || fail "does not say it did not start"
        [ ! -s "$TMP/out" ] || fail "the program ran: $(cat "$TMP/out")"
    }
    VRAMGUARD_OPTIONS=mode=gaurd,error_exitcode=9 run 2 "$VG" run --sim -- "$EXAMPLES/s1_overrun"
    chk "bad value 'gaurd' for option 'mode'.*in VRAMGUARD_OPTIONS"
    VRAMGUARD_OPTIONS=mode=gaurd run 2 "$VG" run --sim --mode=guard -- "$EXAMPLES/s1_overrun"
    chk "'gaurd'.*in VRAMGUARD_OPTIONS"
    run 2 "$VG" run --sim --mode=gaurd -- "$EXAMPLES/s1_overrun"
    chk "'gaurd'.*on the command line"
    printf 'double_free:x\nbad\n' >"$TMP/bad.supp"
    VRAMGUARD_OPTIONS=mode=guard,suppressions=$TMP/bad.supp run 2 "$VG" run --sim -- "$EXAMPLES/s1_overrun"
    chk "suppressions=.*line 2: 'bad'.*in VRAMGUARD_OPTIONS"
    VRAMGUARD_OPTIONS=report_json=$TMP/none/r.json run 2 "$VG" run --sim -- "$EXAMPLES/s1_overrun"
    chk "report_json=.*folder '$TMP/none' does not exist.*in VRAMGUARD_OPTIONS"
    run 2 "$VG" run --sim --log="$TMP" -- "$EXAMPLES/s1_overrun"
    chk "log=$TMP: that is a folder"
    # Should vramguard still fail to start inside the program (here: its driver cannot be
    # loaded), the program is stopped at its first CUDA call, never run unguarded.
    run 2 "$VG" run --sim --mode=guard --driver="$TMP/none/libcuda.so.1" -- "$EXAMPLES/s1_overrun"
    grep -q "cannot check this program, so it is stopped" "$TMP/err" || fail "$(cat "$TMP/err")"
    [ ! -s "$TMP/out" ] || fail "the program ran: $(cat "$TMP/out")"
    # Where a user asked nothing of `vramguard run` (LD_PRELOAD alone), the program runs
    # on, and the message says plainly that it runs unguarded.
    VRAMGUARD_OPTIONS=mode=gaurd LD_PRELOAD="$(dirname "$VG")/libvramguard_preload.so" \
        LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$EXAMPLES/s1_overrun"
    one_line_error "not active in this process: the program runs unguarded.*'gaurd'"
    grep -q "filled" "$TMP/out" || fail "the program did not run" ;;
run_without_a_driver)
    # No driver on the machine: say so, and how to run on vgsim; the program not started.
    LD_LIBRARY_PATH=/nonexistent run 2 "$VG" run --mode=guard -- "$EXAMPLES/s1_overrun"
    one_line_error "no CUDA driver found: cannot load libcuda.so.1.*vramguard run --sim"
    grep -q "not started" "$TMP/err" || fail "does not say the program was not started"
    run 2 "$VG" run --driver="$TMP/libcuda.so.1" -- "$EXAMPLES/s1_overrun"
    one_line_error "no CUDA driver found: cannot load $TMP/libcuda.so.1" ;;
runtime_program_on_vgsim)
    # vgsim runs driver-API programs only: a CUDA runtime program (static or shared
    # libcudart) is stopped at its first call with one line saying so, and a non-zero
    # exit status (125); never a clean summary over a program that could not run.
    d="$BUILD/tests/preload"
    [ -x "$d/runtime_user_static" ] || { echo "skipped: no CUDA toolkit runtime"; exit 77; }
    for p in runtime_user_static runtime_user_shared; do
        LD_LIBRARY_PATH="$VGSIM_DIR:/usr/local/cuda/lib64" run 125 "$d/$p"
        one_line_error "vgsim: $p uses the CUDA runtime.*driver API.*only"
        for m in fast guard; do
            LD_LIBRARY_PATH=/usr/local/cuda/lib64 run 125 "$VG" run --sim --mode=$m -- "$d/$p"
            one_line_error "vgsim: $p uses the CUDA runtime"
            grep -q "runtime_user: starting" "$TMP/out" || fail "the program's output was lost"
        done
    done ;;
report_small_program)
    # A program that allocates a few KiB holds one 2 MiB page: the picture fits live
    # memory and marks the reserved line as above its scale; the text does not call the
    # page fragmentation.
    run 0 "$VG" run --sim --snapshot="$TMP/s.json" -- "$EXAMPLES/s1_overrun"
    run 0 "$VG" report "$TMP/s.json" --svg "$TMP/s.svg"
    grep -q "reserved: 2.00 MiB, above this scale" "$TMP/s.svg" || fail "no off-scale note in the SVG"
    grep -q ">4 KiB</text>" "$TMP/s.svg" || fail "the SVG's axis does not fit live memory"
    grep -q "fragmentation: .*(less than one 2 MiB page unused" "$TMP/out" ||
        fail "the summary calls one page fragmentation: $(grep fragmentation "$TMP/out")" ;;
init_failure_is_told)
    # vg_init that fails (no driver) says why in the log, once, beside its status: a C
    # program may never print vg_last_error().
    VRAMGUARD_OPTIONS=driver=$TMP/none/libcuda.so.1 run 0 "$BUILD/tests/preload/print_mode"
    one_line_error "vg_init failed, vramguard is not active: cannot load the CUDA driver '$TMP/none/libcuda.so.1'"
    grep -q "init cannot load the CUDA driver" "$TMP/out" || fail "status: $(cat "$TMP/out")" ;;
replay_oom_explained)
    # A replay on a device too small for the trace says what its numbers are: failures per
    # repeat and in all, peaks that are what fitted, no ratio passed off as a comparison;
    # and the hint fits the heap (no "vmm=on" where virtual memory is already in use).
    t="$TRACES/transformer_ctx128_forward_mixed.csv"
    run 1 "$VG" replay --device-memory=20G --repeat=2 "$t"
    grep -qE "out-of-memory failures: [0-9]+ of the 3027 allocations in each repeat \([0-9]+ in all\): the trace needs more than the simulated 20.00 GiB device" "$TMP/out" ||
        fail "$(grep out-of-memory "$TMP/out")"
    grep -q "peak reserved: .*(not a comparison: allocations failed here" "$TMP/out" ||
        fail "the ratio is given as a comparison"
    grep -q "why: .*cached and free, but in pieces" "$TMP/out" || fail "no explanation"
    ! grep -q "vmm=on" "$TMP/out" || fail "vmm=on suggested with virtual memory in use"
    run 1 "$VG" replay --device-memory=20G --repeat=1 --vmm=off "$t"
    grep -q "vmm=off was given" "$TMP/out" || fail "$(grep "why:" "$TMP/out")" ;;
readme_excerpts)
    # Every excerpt and figure the README quotes comes from a command and still matches
    # what the command prints (addresses, times and absolute paths masked).
    command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
    # (The README quotes the default build, RelWithDebInfo: a Release build names no
    # lines of vramguard's own, a Debug one inlines nothing, so their stacks differ.)
    [ "${BUILD_TYPE:-RelWithDebInfo}" = RelWithDebInfo ] ||
        { echo "skipped: the README quotes the default build (RelWithDebInfo), this is $BUILD_TYPE"; exit 77; }
    python3 "$HERE/check_readme.py" "$HERE/../../README.md" >"$TMP/out" 2>"$TMP/err" ||
        { cat "$TMP/err" "$TMP/out" >&2; fail "the README no longer matches"; } ;;
access_planted)
    # Every access the API shows, checked (docs/decisions.md G11): a copy or memset past an
    # allocation, far past it or into freed memory is refused at the call in either mode
    # (CUDA_ERROR_INVALID_VALUE) and reported, read or write, how far, the call's line; in
    # guard mode a kernel given a freed buffer, which it only reads, is reported at the
    # launch, and a kernel given a pointer into a redzone is named by a later report about
    # the allocation.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    p="$BUILD/tests/preload/access_user"
    chk() { python3 "$HERE/check_report.py" "$TMP/r.json" "$@" || { cat "$TMP/err" >&2; fail "$c ($m)"; }; }
    # (Without vramguard the driver refuses each of these calls the same way: vgsim does as
    # the H200 did, conformance:copies_and_memsets_past_an_allocation.)
    for c in copy_read_past memset_past copy2d_past copy_far copy_freed; do
        LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$p" $c
        grep -q "^$c: CUDA_ERROR_INVALID_VALUE$" "$TMP/out" || fail "$c without vramguard: $(cat "$TMP/out")"
    done
    for m in fast guard; do
        for c in copy_read_past memset_past copy2d_past copy_far copy_freed; do
            run 0 "$VG" run --sim --mode=$m --leaks=off --report_json="$TMP/r.json" -- "$p" $c
            grep -q "^$c: CUDA_ERROR_INVALID_VALUE$" "$TMP/out" || fail "$c ($m): $(cat "$TMP/out")"
            chk 1 all
            case $c in
            copy_read_past) chk 1 out_of_bounds_copy access.call=cuMemcpyDtoD access.operation=read \
                access.range=source access.bytes=4096 access.past_end=96 allocation.size=4000 \
                "call_at~access_user.c:" "allocation.allocated_at~access_user.c:" ;;
            memset_past) chk 1 out_of_bounds_copy access.call=cuMemsetD32 access.operation=write \
                access.past_end=4 allocation.size=4000 "message~memset writes past the end" ;;
            copy2d_past) chk 1 out_of_bounds_copy access.call=cuMemcpy2D access.operation=write \
                access.range=destination access.past_end=96 allocation.size=4000 ;;
            copy_far) chk 1 out_of_bounds_copy access.call=cuMemcpyDtoHAsync access.operation=read \
                access.offset=1052576 allocation.size=4000 \
                "summary~256 bytes starting 1048576 bytes past the end of a 4000-byte allocation" ;;
            copy_freed) chk 1 use_after_free access.call=cuMemcpyDtoH access.operation=read \
                allocation.size=4000 "message~copy reads freed memory" ;;
            esac
        done
    done
    m=guard c=freed_arg
    run 0 "$VG" run --sim --mode=guard --leaks=off --report_json="$TMP/r.json" -- "$p" $c
    chk 1 all
    chk 1 launch_with_freed_pointer kernel.name=ex_sum kernel.argument=0 kernel.offset=0 \
        allocation.size=4000 "allocation.freed_at~access_user.c:" "call_at~access_user.c:"
    c=redzone_arg_overrun
    run 0 "$VG" run --sim --mode=guard --leaks=off --report_json="$TMP/r.json" -- "$p" $c
    chk 1 all
    chk 1 out_of_bounds_after allocation.size=4000 damage.first_offset=4000 \
        "kernels_given_this_allocation~\"name\": \"ex_sum\", \"stream\": \"0x0\", \"argument\": 0, \"offset\": -16"
    grep -q "ex_sum on the default stream, argument 0 = 16 bytes before the allocation (in its redzone)" \
        "$TMP/err" || fail "the redzone pointer is not named" ;;
viewer_semantics)
    # Every kind of snapshot vramguard writes, in PyTorch's structure, replayed as PyTorch's
    # memory viewer replays it (scripts/viewer_check.py, issue 33): replays in both modes and
    # with events dropped, the demo, examples in guard mode (an OOM, bad frees, an overrun),
    # several streams, a correct program.
    command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
    t="$TRACES/transformer_ctx128_fullstep.csv"
    run 0 "$VG" replay --repeat=1 --snapshot="$TMP/replay.json" "$t"
    run 0 "$VG" replay --repeat=1 --mode=guard --snapshot="$TMP/replay_guard.json" "$t"
    run 0 "$VG" replay --repeat=1 --snapshot_events=3000 --snapshot="$TMP/replay_dropped.json" "$t"
    run 0 "$VG" demo --sim --snapshot="$TMP/demo.json"
    for ex in s1_overrun s6_oom_leak s8_bad_frees clean_program; do
        run 0 "$VG" run --sim --mode=guard --limit=1G --snapshot="$TMP/$ex.json" -- "$EXAMPLES/$ex"
    done
    run 0 "$VG" run --sim --snapshot="$TMP/multistream.json" -- "$BUILD/bench/multistream" random 200
    run 0 "$VG" run --sim --mode=memcheck --snapshot="$TMP/memcheck.json" -- \
        "$BUILD/tests/preload/memcheck_user" clean
    python3 "$HERE/../../scripts/viewer_check.py" "$TMP"/*.json >"$TMP/check" 2>&1 ||
        { cat "$TMP/check" >&2; fail "drawn wrongly"; }
    [ "$(grep -c "as the viewer expects" "$TMP/check")" = 10 ] || { cat "$TMP/check" >&2; fail "count"; } ;;
memcheck_planted)
    # memcheck mode (docs/memcheck.md): a kernel's own reads and writes past an
    # allocation, before it, far past it (a bad index), into freed memory, through
    # cuMemAlloc, cuMemAllocAsync, a pool, a library kernel, another stream and a CUDA
    # graph: each one
    # report naming the kernel, read or write, the offset, the allocation and the lines.
    command -v python3 >/dev/null || { echo "skipped: no python3 to read the JSON report"; exit 77; }
    p="$BUILD/tests/preload/memcheck_user"
    chk() { python3 "$HERE/check_report.py" "$TMP/r.json" "$@" || { cat "$TMP/err" >&2; fail "$c"; }; }
    for c in read_past read_far read_before write_far read_freed write_freed write_freed_many \
             async_past pool_past library_past other_stream torch_past graph_past graph_pool_past \
             graph_pool_released graph_output_past; do
        run 0 "$VG" run --sim --mode=memcheck --leaks=off --report_json="$TMP/r.json" -- "$p" $c
        grep -q "^$c: launched$" "$TMP/out" || fail "$c: $(cat "$TMP/out")"
        case $c in
        read_past) chk 1 all; chk 1 out_of_bounds_after access.operation=read access.kernel=ex_sum \
            access.offset=4000 access.past_end=4 access.accesses=5 allocation.size=4000 \
            access.checked_on_device=True "call_at~memcheck_user.c:" \
            "allocation.allocated_at~memcheck_user.c:" \
            "summary~reads 4 bytes starting 0 bytes past the end of a 4000-byte allocation" ;;
        read_far) chk 1 all; chk 1 out_of_bounds_after access.operation=read access.offset=1052576 \
            "summary~reads 4 bytes starting 1048576 bytes past the end of a 4000-byte allocation" ;;
        read_before) chk 1 all; chk 1 out_of_bounds_before access.operation=read \
            access.kernel=ex_sum_range access.before_start=4 \
            "summary~reads 4 bytes starting 4 bytes before the start of a 4000-byte allocation" ;;
        write_far) chk 1 all; chk 1 out_of_bounds_after access.operation=write \
            access.kernel=ex_scatter "message~kernel writes past the end" ;;
        # (the launch is checked on the device: guard mode's check of its arguments is left
        # out, so no launch_with_freed_pointer beside the use_after_free)
        read_freed|other_stream) chk 1 all; chk 1 use_after_free access.operation=read \
            access.kernel=ex_sum access.offset=0 allocation.size=4000 "message~kernel reads freed" \
            "allocation.freed_at~memcheck_user.c:" ;;
        write_freed) chk 1 all; chk 1 use_after_free access.operation=write access.kernel=ex_fill \
            "message~kernel writes to freed memory" ;;
        write_freed_many) chk 1 all; chk 1 use_after_free access.accesses=1024
            grep -q "memcheck: 1048576 bad accesses in all, 1 report .*1047552 of them came while the log was full" \
                "$TMP/err" || { cat "$TMP/err" >&2; fail "$c: the count"; } ;;
        async_past|pool_past) chk 1 all; chk 1 out_of_bounds_after access.operation=read \
            access.offset=4000 allocation.size=4000 ;;
        library_past) chk 1 all; chk 1 out_of_bounds_after access.kernel=ex_sum access.offset=4000 ;;
        torch_past) chk 1 all; chk 1 out_of_bounds_after access.kernel=ex_sum access.offset=4000 \
            access.accesses=4 allocation.size=4000 ;;
        graph_past) # each of the graph's 3 launches checked (4 bad reads each), one report
            # naming the line of cuGraphLaunch (not that of the captured launch)
            line=$(grep -n 'CK(cuGraphLaunch(exec, s));' "$HERE/../preload/memcheck_user.c" | cut -d: -f1)
            chk 1 all; chk 1 out_of_bounds_after access.operation=read access.kernel=ex_sum \
                access.offset=4000 access.accesses=12 "call_at~memcheck_user.c:$line)" ;;
        graph_pool_past) # the buffer allocated in the capture, from vramguard's graph pool
            chk 1 all; chk 1 out_of_bounds_after access.operation=read access.kernel=ex_sum \
                access.offset=4000 access.accesses=12 allocation.size=4000 \
                "allocation.allocated_at~past_body (" ;;
        # once the pool is released its memory is the program's again, to the byte: what
        # the capture freed is freed memory, and the kept output has its redzone back
        graph_pool_released) chk 1 all; chk 1 use_after_free access.operation=read \
            access.kernel=ex_sum access.offset=6000 allocation.size=8000 ;;
        graph_output_past) chk 1 all; chk 1 out_of_bounds_after access.operation=read \
            access.kernel=ex_sum access.offset=2000 allocation.size=2000 ;;
        esac
    done
    # initcheck=1: a read of bytes nothing wrote since the allocation (a kernel, a memset
    # and a copy wrote the first half; the read of the second half is the bug); off: no report.
    c=uninit_read
    run 0 "$VG" run --sim --mode=memcheck --initcheck=1 --leaks=off --report_json="$TMP/r.json" \
        -- "$p" $c
    chk 1 all
    chk 1 uninitialized_read access.operation=read access.kernel=ex_sum access.offset=2000 \
        access.accesses=500 allocation.size=4000 \
        "summary~reads bytes 2000 to 2003 of a 4000-byte allocation, which nothing has written"
    run 0 "$VG" run --sim --mode=memcheck --leaks=off --report_json="$TMP/r.json" -- "$p" $c
    chk 0 all
    # initcheck and the tensor memory accelerator (Hopper's bulk tensor copies, which the
    # API reports as no store, as cuBLAS writes a matmul's output): the region of each tensor
    # map a launch carries counts as written. A read of the rows a map covered is fine, one
    # of a row beyond it is not; buffers written whole through maps, one moved by
    # cuTensorMapReplaceAddress, give no report.
    c=tma_unwritten
    run 0 "$VG" run --sim --mode=memcheck --initcheck=1 --leaks=off --report_json="$TMP/r.json" \
        -- "$p" $c
    grep -q "^$c: launched$" "$TMP/out" || fail "$c: $(cat "$TMP/out")"
    chk 1 all
    chk 1 uninitialized_read access.operation=read access.kernel=ex_sum access.offset=4096 \
        access.accesses=8 allocation.size=8192
    c=tma_written
    run 0 "$VG" run --sim --mode=memcheck --initcheck=1 --verbose=1 --leaks=off \
        --report_json="$TMP/r.json" -- "$p" $c
    chk 0 all
    grep -q "^tma_written: all sums right$" "$TMP/out" || fail "$c: $(cat "$TMP/out")"
    grep -q "memcheck: initcheck: 5 tensor maps built; 5 launches carried one" "$TMP/err" &&
        grep -q "device callback vg_memcheck_access$" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "$c: the counts"; }
    # A kernel that writes past the end is reported once, by memcheck, not again by guard
    # mode's redzone check (S1 as it is).
    run 0 "$VG" run --sim --mode=memcheck --report_json="$TMP/r.json" -- "$EXAMPLES/s1_overrun"
    c=s1_overrun chk 1 all
    c=s1_overrun chk 1 out_of_bounds_after access.operation=write access.kernel=ex_fill \
        access.offset=4000
    # Its graph launched twice from one line, which the compiler unrolls into two calls (two
    # launch sites that read the same): one report, as on an H200 it was not (two).
    run 0 "$VG" run --sim --mode=memcheck --report_json="$TMP/r.json" -- "$EXAMPLES/s1_overrun" --graph
    c="s1_overrun --graph" chk 1 all
    c="s1_overrun --graph" chk 1 out_of_bounds_after access.operation=write access.kernel=ex_fill
    # Narrowed for long runs. memcheck_kernels: only the named kernels are checked, and a
    # module defining none of them is not patched at all (it runs at full speed); the bug
    # is caught when its kernel is named, not otherwise. memcheck_every: launches skipped.
    c=read_past
    run 0 "$VG" run --sim --mode=memcheck --verbose=1 --leaks=off --memcheck_kernels='ex_fi*,ex_su?' \
        --report_json="$TMP/r.json" -- "$p" $c
    chk 1 out_of_bounds_after access.kernel=ex_sum access.offset=4000
    grep -q "memcheck: 1 modules patched; [1-9][0-9]* launches checked.*device callback vg_memcheck_access_noinit$" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "memcheck_kernels naming ex_sum: the counts"; }
    run 0 "$VG" run --sim --mode=memcheck --verbose=1 --leaks=off --memcheck_kernels=ex_fill \
        --report_json="$TMP/r.json" -- "$p" $c
    chk 0 all
    grep -q "memcheck: 1 modules patched;" "$TMP/err" || { cat "$TMP/err" >&2; fail "ex_fill: patched"; }
    run 0 "$VG" run --sim --mode=memcheck --verbose=1 --leaks=off --memcheck_kernels='*gather*' \
        --report_json="$TMP/r.json" -- "$p" $c
    chk 0 all
    grep -q "memcheck: 0 modules patched, 1 left unpatched (no kernel memcheck_kernels names" \
        "$TMP/err" || { cat "$TMP/err" >&2; fail "*gather*: the module was patched"; }
    run 0 "$VG" run --sim --mode=memcheck --verbose=1 --leaks=off --memcheck_every=1000000 \
        --report_json="$TMP/r.json" -- "$p" $c
    chk 0 all
    grep -q "memcheck: 1 modules patched; 0 launches checked, [1-9][0-9]* not" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "memcheck_every: the counts"; }
    # The cost measurements' splits (VRAMGUARD_MEMCHECK_SPLIT, docs/gpu-validation.md):
    # the module patched with the callback or with the empty function, no launch taken,
    # nothing reported; or the launches taken and nothing patched.
    for split in patch-only patch-empty callbacks-only; do
        run 0 env VRAMGUARD_MEMCHECK_SPLIT=$split "$VG" run --sim --mode=memcheck --verbose=1 \
            --leaks=off --report_json="$TMP/r.json" -- "$p" $c
        chk 0 all
        case $split in callbacks-only) want="0 modules patched; 0 launches checked, [1-9][0-9]* not" ;;
                       patch-empty) want="1 modules patched; 0 launches checked, 0 not.*callback vg_memcheck_nothing" ;;
                       *) want="1 modules patched; 0 launches checked, 0 not" ;; esac
        grep -q "SPLIT=$split: nothing is checked" "$TMP/err" && grep -q "memcheck: $want" "$TMP/err" ||
            { cat "$TMP/err" >&2; fail "$split: $(grep 'modules patched' "$TMP/err")"; }
    done
    # A launch the device does not check keeps guard mode's check of its arguments: the
    # read of a freed buffer, skipped by memcheck_every, is still reported at its launch.
    run 0 "$VG" run --sim --mode=memcheck --leaks=off --memcheck_every=1000000 \
        --report_json="$TMP/r.json" -- "$p" read_freed
    chk 1 all; chk 1 launch_with_freed_pointer kernel.name=ex_sum
    # Without the API: the run stops with one line saying what is missing (exit 2).
    run 2 env VRAMGUARD_OPTIONS=sanitizer_lib=/nonexistent/libsanitizer-public.so "$VG" run --sim \
        --mode=memcheck -- "$p" clean
    grep -q "mode=memcheck needs NVIDIA's Compute Sanitizer API" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "no API: $(cat "$TMP/err")"; } ;;
memcheck_clean)
    # Correct kernels under memcheck mode: begin/end pairs, odd sizes written to their last
    # byte, memory freed and reused, async allocations on two streams, the accesses of
    # access_user's correct cases and the clean example: no report, the same output.
    # (guard mode says that it left some of a CUDA graph's checks out: the graph pool case)
    MODES="fast guard memcheck" ALLOW="guard mode: 2 allocations and frees made while a CUDA graph was captured" \
        same_under_vramguard "$BUILD/tests/preload/memcheck_user" clean
    MODES="fast guard memcheck" same_under_vramguard "$BUILD/tests/preload/memcheck_user" tma_written
    for c in redzone_arg begin_end last_byte pitched_2d threads; do
        MODES=memcheck same_under_vramguard "$BUILD/tests/preload/access_user" $c
    done
    MODES=memcheck same_under_vramguard "$EXAMPLES/clean_program"
    for prog in "$BUILD/tests/preload/memcheck_user clean" "$BUILD/tests/preload/access_user begin_end" \
                "$BUILD/tests/preload/access_user pitched_2d" "$EXAMPLES/clean_program"; do
        run 0 "$VG" run --sim --mode=memcheck --initcheck=1 --error_exitcode=3 -- $prog
        grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || { cat "$TMP/err" >&2; fail "initcheck: $prog"; }
    done ;;
access_clean)
    # The correct accesses: begin/end pairs, pointers into redzones that read inside,
    # odd sizes touched to the last byte, pitched 2D copies and memsets, threads with their
    # own streams: the same output with and without vramguard, no report, either mode.
    for c in redzone_arg begin_end last_byte pitched_2d threads; do
        same_under_vramguard "$BUILD/tests/preload/access_user" $c
    done
    # Device memory near 16 GiB, as on an H200 (under a sanitizer that address range is
    # its shadow): a struct argument's two small integers, (6, 4), read as 0x400000006,
    # inside a freed buffer, are no pointer (GPT-2 in guard mode gave 27 such reports).
    if [ -z "${VG_SANITIZE:-}" ]; then
        for m in guard memcheck; do
            VGSIM_ARENA_AT=0x380000000 run 0 "$VG" run --sim --mode=$m --error_exitcode=3 -- \
                "$BUILD/tests/preload/access_user" small_ints_arg
            grep -q "a freed buffer held 0x400000006" "$TMP/out" ||
                { cat "$TMP/out" "$TMP/err" >&2; fail "small_ints_arg: no buffer at 16 GiB ($m)"; }
            grep -q "ERROR SUMMARY: no errors found" "$TMP/err" ||
                { cat "$TMP/err" >&2; fail "small_ints_arg: a report ($m mode)"; }
        done
    fi ;;
race_line_at_each_level)
    # A host race is reported at the line of the faulting access, not the next one (the
    # faulting pc is the instruction itself, not a return address), at -O0, -O1 and -O2.
    # (Under a sanitizer only -O0: clang's instrumented -O1 and -O2 code gives the load the
    # S4 program faults on no line at all, line 0, which names the function alone.)
    levels="0 1 2"
    [ -n "${VG_SANITIZE:-}" ] && levels=0
    for ex in s3_h2d_race s4_d2h_race; do
        line=$(grep -n "the bug" "$HERE/../../examples/$ex.c" | cut -d: -f1)
        for o in $levels; do
            run 0 "$VG" run --sim --mode=guard --report_json="$TMP/r.json" -- "$EXAMPLES/${ex}_O$o"
            python3 "$HERE/check_report.py" "$TMP/r.json" 1 host_race "call_at~$ex.c:$line)" ||
                { cat "$TMP/err" >&2; fail "$ex at -O$o: not at line $line"; }
        done
    done ;;
passthrough_when_inactive)
    # vramguard cannot start inside the program (here a bad option set behind `vramguard
    # run`'s back): one message, and every hook passes the call through — same output.
    LD_LIBRARY_PATH="$VGSIM_DIR" run 0 "$EXAMPLES/clean_program"; cp "$TMP/out" "$TMP/plain"
    pre=$(dirname "$VG")/libvramguard_preload.so
    VRAMGUARD_OPTIONS="mode=sideways" LD_PRELOAD="$pre" LD_LIBRARY_PATH="$VGSIM_DIR" \
        run 0 "$EXAMPLES/clean_program"
    cmp -s "$TMP/plain" "$TMP/out" || fail "the output changed"
    [ "$(grep -c "not active in this process: the program runs unguarded" "$TMP/err")" = 1 ] || { cat "$TMP/err" >&2; fail "expected one message"; } ;;
fork_children)
    # A threaded CUDA program that forks 50 children (which exit through atexit) and runs
    # a command: no child hangs or reports the parent's state; one summary, the parent's.
    # (Not with LeakSanitizer, whose check at exit hangs in a forked child of a threaded
    # process: ASan's own limitation, not vramguard's.)
    export ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}"
    for m in fast guard; do
        run 0 "$VG" run --sim --mode=$m -- "$BUILD/tests/preload/fork_child"
        grep -q "50 children exited cleanly" "$TMP/out" || fail "$(cat "$TMP/out")"
        n=$(grep -c "ERROR SUMMARY" "$TMP/err" || true)
        want=0
        [ "$m" = guard ] && want=1
        [ "$n" = "$want" ] || { cat "$TMP/err" >&2; fail "$n summaries in $m mode, expected $want"; }
    done ;;
run_through_a_wrapper)
    # The program vramguard runs may be a wrapper (a shell script, pyenv's python shim, a
    # launcher) that starts the GPU program: every process is guarded until it uses the
    # GPU itself; after that, the processes it starts only with --follow-children.
    # (starter is built like the examples, so that the ASan build can preload into it.)
    s8="$EXAMPLES/s8_bad_frees"
    starter="$BUILD/tests/preload/starter"
    run 0 "$VG" run --sim --mode=guard -- "$starter" "$starter" "$s8"
    grep -q "s8: double free rejected" "$TMP/out" || fail "s8 did not run: $(cat "$TMP/out")"
    [ "$(grep -c "ERROR SUMMARY" "$TMP/err")" = 1 ] || { cat "$TMP/err" >&2; fail "one summary expected, s8's"; }
    grep -q "ERROR SUMMARY: 2 errors: 1 double_free" "$TMP/err" || { cat "$TMP/err" >&2; fail "s8 behind two wrappers was not guarded"; }
    run 0 "$VG" run --sim --mode=guard -- "$starter" --gpu "$s8"
    grep -q "s8: double free rejected" "$TMP/out" || fail "s8 did not run: $(cat "$TMP/out")"
    ! grep -q "double_free" "$TMP/err" || { cat "$TMP/err" >&2; fail "a GPU program's child was guarded"; }
    run 0 "$VG" run --sim --mode=guard --follow-children -- "$starter" --gpu "$s8"
    grep -q "ERROR SUMMARY: 2 errors: 1 double_free" "$TMP/err" || { cat "$TMP/err" >&2; fail "--follow-children did not reach the child"; }
    if [ -z "${VG_SANITIZE:-}" ]; then # a real shell script too (uninstrumented: not under ASan)
        run 0 "$VG" run --sim --mode=guard -- sh -c "$s8 && $s8"
        [ "$(grep -c "ERROR SUMMARY: 2 errors" "$TMP/err")" = 2 ] || { cat "$TMP/err" >&2; fail "two guarded s8 runs expected"; }
    fi ;;
conformance_under_run)
    # The driver-API conformance suite, run as an unmodified program under vramguard in
    # both modes, still passes: the interposer changes nothing a program can rely on.
    # (Except two cases by design: a caching allocator keeps freed memory, and the memory
    # after an allocation, mapped, so a copy into it succeeds; guard mode poisons and checks
    # it instead.)
    cf="$BUILD/tests/conformance/conformance"
    for c in $(cat "$HERE"/../conformance/conformance*.c | grep -oE '^VG_TEST\(([a-z0-9_]+)\)' |
               sed 's/VG_TEST(\(.*\))/\1/'); do
        case $c in copy_to_freed_memory_is_rejected | copy_3d_past_the_allocation_is_rejected) continue ;; esac
        # (Three cases read or write a buffer while a copy gated on this very thread is
        # in flight: guard mode's wait gives up after host_race_wait_ms.)
        for m in fast guard; do
            run 0 "$VG" run --sim --mode=$m --host_race_wait_ms=300 -- "$cf" "$c"
        done
    done
    run 0 "$VG" run --sim --mode=guard --host_race_wait_ms=300 -- "$cf" async_copy_not_complete_until_synchronized
    grep -q "waited 300 ms for the copy (host_race_wait_ms), then stopped guarding" "$TMP/err" ||
        { cat "$TMP/err" >&2; fail "a copy that never completes: the wait's end was not reported"; }
    # The peer copies again between two devices: vramguard's pages of each (A11), copied
    # from one to the other.
    export VGSIM_DEVICES=2
    for c in peer_copies_order_with_both_contexts copy_3d_peer_sub_box; do
        for m in fast guard; do
            run 0 "$VG" run --sim --mode=$m -- "$cf" "$c"
        done
    done ;;
run_exit_status)
    # The program's status comes through; error_exitcode replaces it when errors were found;
    # a missing program is 127.
    run 0 "$VG" run --sim -- "$EXAMPLES/s1_overrun"
    run 3 "$VG" run --sim --mode=guard --error_exitcode=3 -- "$EXAMPLES/s1_overrun"
    run 0 "$VG" run --sim --mode=guard --error_exitcode=3 -- "$EXAMPLES/clean_program"
    run 127 "$VG" run --sim -- "$TMP/no-such-program"
    run 2 "$VG" run --sim --mode=sideways -- "$EXAMPLES/clean_program"; one_line_error "'mode'"
    run 2 "$VG" run --sim; one_line_error "usage"
    run 1 "$VG" run --sim -- "$BUILD/tests/preload/exit_with" 1
    run 42 "$VG" run --sim -- "$BUILD/tests/preload/exit_with" 42 ;;
suppressions)
    # Rules KIND:PATTERN hide matching reports from the log, the JSON and the exit status,
    # and the summary says so; a bad file stops the run before the program starts.
    printf '# third-party code\ndouble_free:s8_bad_frees.c:15\n' >"$TMP/supp.txt"
    run 3 "$VG" run --sim --mode=guard --error_exitcode=3 --suppressions="$TMP/supp.txt" \
        --report_json="$TMP/r.json" -- "$EXAMPLES/s8_bad_frees"
    grep -q "ERROR SUMMARY: 1 error: 1 interior_free" "$TMP/err" || fail "summary: $(cat "$TMP/err")"
    grep -q "1 report suppressed (suppressions=$TMP/supp.txt): 1 double_free:s8_bad_frees.c:15" \
        "$TMP/err" || fail "no line on what was suppressed"
    ! grep -q "ERROR: double free" "$TMP/err" || fail "the double free was printed"
    ! grep -q double_free "$TMP/r.json" || fail "the double free is in the JSON"
    printf '*:s8_bad_frees\n' >"$TMP/all.txt" # (the program's file: every report)
    run 0 "$VG" run --sim --mode=guard --error_exitcode=3 --suppressions="$TMP/all.txt" -- \
        "$EXAMPLES/s8_bad_frees"
    grep -q "ERROR SUMMARY: no errors found" "$TMP/err" || fail "not all suppressed"
    printf 'leak:libfoo\nuse_after_fre:x\n' >"$TMP/bad.txt"
    run 2 "$VG" run --sim --suppressions="$TMP/bad.txt" -- "$EXAMPLES/s8_bad_frees"
    one_line_error "line 2: unknown report kind 'use_after_fre'"
    [ ! -s "$TMP/out" ] || fail "the program ran: $(cat "$TMP/out")"
    run 2 "$VG" replay --suppressions="$TMP/none.txt" "$TRACES/resnet50_train.csv"
    one_line_error "cannot read it" ;;
halt_on_error)
    # The process stops at the first error, the JSON and the summary written: abort()
    # (128 + SIGABRT through vramguard run), or error_exitcode when it is set.
    run 134 "$VG" run --sim --mode=guard --halt_on_error=1 --report_json="$TMP/r.json" -- \
        "$EXAMPLES/s8_bad_frees"
    grep -q "stopping at the first error (halt_on_error=1)" "$TMP/err" || fail "no note"
    grep -q "ERROR SUMMARY: 1 error: 1 double_free" "$TMP/err" || fail "summary: $(cat "$TMP/err")"
    python3 "$HERE/check_report.py" "$TMP/r.json" 1 double_free || fail "the JSON"
    ! grep -q interior_free "$TMP/r.json" || fail "it went on after the first error"
    run 7 "$VG" run --sim --mode=guard --halt_on_error=1 --error_exitcode=7 -- \
        "$EXAMPLES/s8_bad_frees"
    run 0 "$VG" run --sim --mode=guard --halt_on_error=1 -- "$EXAMPLES/clean_program" ;;
verbose)
    # verbose=1 says what vramguard loaded and made of each device, and each device's
    # figures at exit; on stderr only. clean_program frees on another stream than it
    # allocates on: its memory must be reused (it reserved 22 MiB for 1 MiB live when
    # blocks freed in different epochs merged).
    run 0 "$VG" run --sim --verbose --limit=1G -- "$EXAMPLES/clean_program"
    grep -q "^clean_program: sum" "$TMP/out" || fail "the program's output"
    for k in "options \([0-9]+\):" "  halt_on_error +=  *0 " "driver: .*libcuda.so.1 \(CUDA [0-9]+\.[0-9]\), vgsim" \
             "device 0 \(vgsim.*, 80.00 GiB\), limit 1.00 GiB \(option limit\)" \
             "virtual-memory segments in 2.00 MiB pages; requests up to 1.00 MiB in a range" \
             "device 0 at exit: peak allocated 1.08 MiB, peak reserved [0-9.]+ MiB"; do
        grep -qE "$k" "$TMP/err" || { cat "$TMP/err" >&2; fail "no line matching '$k'"; }
    done
    mib=$(grep -oE "peak reserved [0-9.]+ MiB" "$TMP/err" | grep -oE "[0-9.]+")
    awk -v m="$mib" 'BEGIN { exit !(m <= 8) }' || fail "clean_program reserved $mib MiB"
    run 0 "$VG" run --sim --verbose --vmm=off -- "$EXAMPLES/clean_program"
    grep -q "cuMemAlloc segments (vmm=off)" "$TMP/err" || fail "vmm=off not described"
    run 0 "$VG" run --sim -- "$EXAMPLES/clean_program"
    [ ! -s "$TMP/err" ] || { cat "$TMP/err" >&2; fail "fast mode without verbose printed something"; } ;;
multistream_reserved)
    # Three streams replacing eight buffers of 1-16 MiB (bench/multistream.c), with context
    # synchronisations vramguard sees: 1.5-1.7 times the peak allocated is reserved in
    # every pattern. Neighbours that completed after they were freed stayed apart until a
    # free beside them, and frees of different epochs merged: 3.7-4.2 times before.
    for p in single own next random; do
        run 0 "$VG" run --sim --verbose -- "$BUILD/bench/multistream" $p
        line=$(grep "at exit: peak allocated" "$TMP/err") || fail "$p: no exit line"
        ratio=$(echo "$line" | grep -oE "reserved / allocated [0-9.]+" | grep -oE "[0-9.]+$")
        awk -v r="$ratio" 'BEGIN { exit !(r <= 2.25) }' || fail "$p: $line"
    done ;;
*) fail "unknown case" ;;
esac
echo "ok $CASE"
