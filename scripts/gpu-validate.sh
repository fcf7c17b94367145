#!/usr/bin/env bash
# gpu-validate.sh PART [OUTDIR] — the runs recorded in docs/gpu-validation.md, on a machine
# with an NVIDIA GPU, the CUDA toolkit, compute-sanitizer and PyTorch. Every step runs
# under a time limit and goes on after a failure; the log says what each printed, its
# exit status and how long it took. PART is one of
#   c        build; driver-API conformance suite; demo; guard unit tests on the real driver;
#            the C examples under vramguard run and under compute-sanitizer; replays
#   pytorch  the scripts of examples/pytorch (bug and --fixed) without vramguard and
#            under python -m vramguard run --mode=guard (which runs them under vramguard
#            run too); two with the package alone (--interpose=off), the copy races under
#            vramguard run alone, and the out-of-bounds script under compute-sanitizer
#   graphs   a CUDA graph training step (examples/pytorch/cuda_graph_step.py) plain, under
#            vramguard fast and guard, under vramguard run, and with torch.compile
#            (mode="reduce-overhead")
#   train    bench/pytorch_train.py: GPT-2 small and ResNet-50 with PyTorch's allocator,
#            expandable segments, vramguard fast and guard mode; allocation traces
#            (ONLY=gpt2: GPT-2 alone)
#   recheck  the re-runs after the fixes the first runs led to
#   next     (or next-guard, next-twins, next-memcheck, next-stream: its parts, one at a time)
#            what the changes since (2026-11-22 evening) need a GPU for: the guard unit
#            tests on the real driver (new kernel ops); S2's unordered free and its
#            correct versions; guard vs fast replays in the steady state; guard mode beside compute-sanitizer on the same
#            small training loops; GPT-2 in guard mode under a memory limit; the
#            record_stream script
#   peak     peak reserved and step time side by side with PyTorch's allocator and
#            expandable segments, two rounds, on GPT-2 and ResNet-50 (the acceptance line;
#            about 8 minutes on an H100)
#   peak-why why vramguard's peak reserved on GPT-2 (18.97-19.01 GB on the H100) was above
#            the vgsim replay of its own 20-step trace (18.76 GB): a traced 300-step run
#            with reserved bytes per step, its trace replayed (with and without device
#            lag, in other orders) beside the models of PyTorch's allocator
#   access   issue 31: the driver past an allocation (conformance probe); access_user plain
#            and under vramguard; compute-sanitizer --nvtx yes over python -m vramguard run
#            on oob_custom_kernel.py (write and --read) and 12 steps of the two loops,
#            beside memcheck alone (access-tool: the compute-sanitizer steps alone)
#   rooms    issue 36: guard unit cases on the driver, the examples plain and in guard mode,
#            two access_user programs, nvtx_oob under memcheck --nvtx over vramguard
#   generate issue 37: a generation loop (caches grown by torch.cat) with each allocator,
#            and vramguard plan=on settling its page moves (point 20)
#   plan-eval issue 37: the training loops with an evaluation after every 10th step, each
#            allocator, plan=on taking its plan up again after each evaluation (point 21)
#   plan-accum issue 37: the training loops with gradient accumulation over 8 micro-batches,
#            each allocator; both loops' steps are then longer than plan=on looks for
#            (GPT-2: about 8,900 requests, ResNet-50 about 9,400; point 22)
#   memcheck issue 32: memcheck mode on the real Compute Sanitizer API (memcheck-c: the
#            driver-API programs; memcheck-torch: the PyTorch scripts and the loops' cost;
#            memcheck-lines: source lines and CUDA graphs, points 13 and 14;
#            memcheck-floor: the cost's split; memcheck-pending: 12-14 and the split;
#            memcheck-followup: what memcheck-pending led to; memcheck-confirm: its fixes;
#            memcheck-tma: initcheck and the tensor memory accelerator, point 16;
#            memcheck-empty: the API's call alone, with an empty device function, point 17;
#            memcheck-next: 15, 16 and 17 in one call)
#   h2d      bench/h2d_copy_timing.py plain, under vramguard run fast and guard mode (and
#            guard_defer=off), with and without a first allocation before the long kernel
#   pinned   issue 34: bench/pinned_free_wait (does a free wait for a queued copy); the
#            staging-buffer example (S11) under vramguard run: its leak, the cap, the
#            verbose note of a free that waited; examples/pytorch/pinned_loader_leak.py (a
#            DataLoader with pin_memory=True and pinned buffers kept), bug and --fixed,
#            under python -m vramguard run --mode=guard --verbose
#   pages    issue 37: bench/page_move_cost (what mapping, moving and unmapping a page
#            costs, and whether an unmap waits for the device), twice
#   convert  PyTorch memory snapshots of the two loops under PyTorch's allocator, turned
#            into traces by python -m vramguard convert and replayed: the snapshot's
#            figures beside what PyTorch measured in the same run, and vramguard's beside them
# Results go to OUTDIR (default /tmp/vg-gpu): PART.log, and for train train.jsonl and
# the traces.
set -u
cd "$(dirname "$0")/.."
PART=${1:?usage: gpu-validate.sh c|pytorch|train|recheck|next[-guard|-twins|-memcheck|-stream]|peak[-why]|convert|pages|plan|generate|pinned [OUTDIR]}
O=${2:-/tmp/vg-gpu}
mkdir -p "$O"
B=${B:-build-gpu}
exec > >(tee -a "$O/$PART.log") 2>&1

step() { # step NAME SECONDS COMMAND...: run it, print its status and time
    local name=$1 limit=$2
    shift 2
    echo "=== $name: $*"
    local t0=$(date +%s%N)
    timeout -k 5 "$limit" "$@"
    local rc=$?
    echo "=== $name: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    return $rc
}

build() {
    if [ ! -x "$B/vramguard" ]; then
        # (warnings are not errors here: the machine's compiler may be newer than CI's)
        step build 300 bash -c "cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DVG_WERROR=OFF \
            >$O/cmake.txt 2>&1 && cmake --build $B -j\$(nproc) >$O/build.txt 2>&1 ||
            { tail -40 $O/build.txt; exit 1; }; grep -A3 'warning:' $O/build.txt | head -40"
    fi
}

cases() { cat "$@" | grep -oE '^VG_TEST\(([a-z0-9_]+)\)' | sed 's/VG_TEST(\(.*\))/\1/'; }

guard_tests() { # guard mode's unit cases on the real driver, eager and deferred
    for defer in off on; do
        for c in $(cases tests/unit/test_guard.c); do
            VGT_DRIVER=libcuda.so.1 VRAMGUARD_OPTIONS=guard_defer=$defer \
                step "unit_guard($defer) $c" 60 "$B/tests/unit/unit_guard" "$c"
        done
    done
}

replays() { # the shared traces, fast and guard mode alternately, with the real driver
    local rep=${REPEAT:-3}
    for t in bench/traces/transformer_*.csv; do
        for round in 1 2 3; do
            step "replay fast $t" 120 "$B/vramguard" replay --json --repeat=$rep \
                --driver=libcuda.so.1 "$t"
            step "replay guard $t" 120 "$B/vramguard" replay --json --repeat=$rep --mode=guard \
                --driver=libcuda.so.1 "$t"
        done
    done
}

train_run() { # train_run JSONL NAME SECONDS ARGS...: bench/pytorch_train.py, its JSON kept
    local j=$1 name=$2 limit=$3
    shift 3
    step "$name" "$limit" python3 bench/pytorch_train.py --json /tmp/vg-run.json "$@" &&
        cat /tmp/vg-run.json >>"$j"
}

export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python VRAMGUARD_LIB=$PWD/$B/libvramguard.so
export TORCH_EXTENSIONS_DIR=/tmp/vg-torch-ext

peak_summary() { # peak_summary JSONL: one line per training run
    python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    rs = r.get("reserved_per_step") or []
    grew = [i for i in range(1, len(rs)) if rs[i] > rs[i - 1]]
    alloc = " ".join([r['alloc']] + [o for o in r.get('vg_options', []) if o != "verbose=1"])
    print(f"{r['model']:9} {alloc:10} step {r['step_ms_median']:.2f} ms  peak reserved "
          f"{r['peak_reserved'] / 1e9:.3f} GB  allocated {r['peak_allocated'] / 1e9:.3f} GB  "
          f"{r.get('counts')}  reserved grew after steps {grew[:20]}")
PY
}

floor_split() { # floor_split MODEL BATCH: 12 steps plain, in memcheck mode, and with parts of it
    # left out (issue 32's open question, docs/decisions.md G13: of the 7x that memcheck mode
    # costs with nothing checked, how much is the launch callbacks and how much the patches?)
    local m=$1 b=$2
    local args="bench/pytorch_train.py --model $m --batch $b --steps 12 --warmup 2"
    step "$m plain" 120 python3 $args --alloc default
    step "$m memcheck" 240 python3 -m vramguard run --mode=memcheck $args --alloc memcheck
    step "$m nothing checked" 240 python3 -m vramguard run --mode=memcheck \
        --memcheck_every=1000000000 $args --alloc memcheck
    step "$m nothing patched (memcheck_kernels naming no kernel)" 240 python3 -m vramguard \
        run --mode=memcheck --memcheck_kernels=vg-none $args --alloc memcheck
    for split in patch-only patch-empty callbacks-only; do
        VRAMGUARD_MEMCHECK_SPLIT=$split step "$m $split" 240 python3 -m vramguard run \
            --mode=memcheck $args --alloc memcheck
    done
}

lines_c() { # points 13 and 14 on the driver-API programs: lines, graphs; point 12's filter
    local u="$B/tests/preload/memcheck_user"
    for c in read_past read_before write_far read_freed library_past graph_past; do
        step "memcheck_user $c memcheck" 60 "$B/vramguard" run --mode=memcheck --leaks=off \
            --verbose=1 --report_json="$O/lines_$c.json" -- "$u" $c
        python3 -c 'import json,sys; [print("source:", r["access"].get("source"), "| pc:", r["access"].get("pc"), "| launch:", r["access"].get("launch"), "| accesses:", r["access"].get("accesses"), "| call_at:", r.get("call_at")) for r in json.load(open(sys.argv[1])) if "access" in r]' "$O/lines_$c.json"
    done
    step "s1_overrun --graph memcheck" 60 "$B/vramguard" run --mode=memcheck --verbose=1 -- \
        "$B/examples/s1_overrun" --graph
    for k in ex_sum '*gather*'; do # point 12: "1 modules patched" / "0 ..., 1 left unpatched"
        step "memcheck_user read_past, memcheck_kernels=$k" 60 "$B/vramguard" run \
            --mode=memcheck --leaks=off --verbose=1 --memcheck_kernels="$k" -- "$u" read_past
    done
}

lines_torch() { # points 13 and 14 in PyTorch: the extension's line, a graph training step
    step "kernel_reads --gather memcheck" 240 python3 -m vramguard run --mode=memcheck \
        examples/pytorch/kernel_reads.py --gather
    step "cuda_graph_step plain" 240 python3 examples/pytorch/cuda_graph_step.py
    step "cuda_graph_step memcheck" 240 python3 -m vramguard run --mode=memcheck --verbose=1 \
        examples/pytorch/cuda_graph_step.py
}

case $PART in
memcheck-floor)
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    for model in ${MODELS:-gpt2:1 resnet50:16}; do
        floor_split "${model%%:*}" "${model#*:}"
    done
    ;;
memcheck-lines)
    # Issue 32, docs/gpu-validation.md points 13 and 14: source lines (examples/kernels.ptx
    # and the PyTorch extensions carry -lineinfo: each report's "at KERNEL+0x... in
    # FILE:LINE" and JSON access.source) and kernels launched from CUDA graphs.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    lines_c
    lines_torch
    ;;
memcheck-pending)
    # Everything issue 32 still needs a GPU for, most telling first (points 12-14 and the
    # cost's split), for one short lease: the C programs' lines and graphs, GPT-2's split,
    # the PyTorch lines and graph step, then ResNet-50's split.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    lines_c
    floor_split gpt2 1
    lines_torch
    floor_split resnet50 16
    ;;
memcheck-confirm)
    # docs/gpu-validation.md point 15, short: the fixes memcheck-followup led to.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    step "s1_overrun --graph memcheck" 60 "$B/vramguard" run --mode=memcheck -- \
        "$B/examples/s1_overrun" --graph
    for c in graph_pool_released graph_output_past; do
        step "memcheck_user $c memcheck" 60 "$B/vramguard" run --mode=memcheck --leaks=off -- \
            "$B/tests/preload/memcheck_user" $c
    done
    step "cuda_graph_step memcheck" 240 python3 -m vramguard run --mode=memcheck \
        examples/pytorch/cuda_graph_step.py
    for model in ${MODELS:-resnet50:16 gpt2:1}; do
        m=${model%%:*} b=${model#*:}
        args="bench/pytorch_train.py --model $m --batch $b --steps 12 --warmup 2"
        step "$m memcheck" 240 python3 -m vramguard run --mode=memcheck $args --alloc memcheck
        step "$m guard mode" 240 python3 -m vramguard run --mode=guard $args --alloc guard
    done
    ;;
memcheck-next)
    # What issue 32 waits for, in one call (about 9 minutes with the machine's start):
    # points 15, 16 and 17 of docs/gpu-validation.md, in that order.
    for part in memcheck-confirm memcheck-tma memcheck-empty; do
        "$0" "$part" "$O"
    done
    ;;
memcheck-empty)
    # docs/gpu-validation.md point 17: is the 3.7-4.0x of patch-only the API's own call, or
    # the callback's spilled registers (ptxas: a 40-byte stack frame on sm_90, taken even
    # when it returns at once)? The same loops with every module patched with a device
    # function that does nothing (VRAMGUARD_MEMCHECK_SPLIT=patch-empty), beside patch-only.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    for model in ${MODELS:-gpt2:1 resnet50:16}; do
        m=${model%%:*} b=${model#*:}
        args="bench/pytorch_train.py --model $m --batch $b --steps 12 --warmup 2"
        step "$m plain" 120 python3 $args --alloc default
        for split in patch-only patch-empty; do
            VRAMGUARD_MEMCHECK_SPLIT=$split step "$m $split" 240 python3 -m vramguard run \
                --mode=memcheck $args --alloc memcheck
        done
    done
    ;;
memcheck-tma)
    # docs/gpu-validation.md point 16: initcheck and the tensor memory accelerator. The
    # bulk tensor store kernel of examples/kernels_tma.cu (sm_90) plain, then under
    # initcheck: tma_written no report and the same sums, tma_unwritten one
    # uninitialized_read at byte 4096; then GPT-2 with initcheck, where cuBLAS stores its
    # matmuls' outputs through tensor maps (the H100 run's false reports): the verbose
    # summary counts the maps the libraries built and the launches that carried one.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    u="$B/tests/preload/memcheck_user"
    # (the driver's answers to the tensor map probes vgsim imitates: each printed)
    step "conformance tensor_maps_check_their_shape" 60 "$B/tests/conformance/conformance" \
        tensor_maps_check_their_shape
    step "memcheck_user tma_written plain" 60 "$u" tma_written
    step "memcheck_user tma_written initcheck" 60 "$B/vramguard" run --mode=memcheck \
        --initcheck=1 --verbose=1 -- "$u" tma_written
    step "memcheck_user tma_unwritten initcheck" 60 "$B/vramguard" run --mode=memcheck \
        --initcheck=1 --leaks=off -- "$u" tma_unwritten
    for model in ${MODELS:-gpt2:1 resnet50:16}; do
        m=${model%%:*} b=${model#*:}
        step "$m memcheck mode, initcheck" 240 python3 -m vramguard run --mode=memcheck \
            --initcheck=1 --verbose=1 bench/pytorch_train.py --alloc memcheck --model $m \
            --batch $b --steps 6 --warmup 1
    done
    ;;
memcheck-followup)
    # After memcheck-pending (2026-11-26 evening, docs/gpu-validation.md): a graph pool's
    # shadow merged (cuda_graph_step's false reports), whether cuDNN's wgrad kernels touch
    # the freed memory their launches point to (the device checks those kernels alone,
    # beside guard mode's launch check), and the cost beside compute-sanitizer in one call.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    u="$B/tests/preload/memcheck_user"
    step "memcheck_user clean memcheck" 60 "$B/vramguard" run --mode=memcheck --verbose=1 -- "$u" clean
    step "memcheck_user graph_pool_past memcheck" 60 "$B/vramguard" run --mode=memcheck \
        --leaks=off -- "$u" graph_pool_past
    step "cuda_graph_step memcheck" 240 python3 -m vramguard run --mode=memcheck --verbose=1 \
        examples/pytorch/cuda_graph_step.py
    args="bench/pytorch_train.py --model resnet50 --batch 16 --steps 12 --warmup 2"
    step "resnet50 memcheck, wgrad kernels alone" 240 python3 -m vramguard run --mode=memcheck \
        --verbose=1 --memcheck_kernels='*Wgrad*' $args --alloc memcheck
    step "resnet50 guard mode" 240 python3 -m vramguard run --mode=guard $args --alloc guard
    for model in ${MODELS:-gpt2:1 resnet50:16}; do
        m=${model%%:*} b=${model#*:}
        args="bench/pytorch_train.py --model $m --batch $b --steps 12 --warmup 2"
        step "$m plain" 120 python3 $args --alloc default
        step "$m memcheck" 240 python3 -m vramguard run --mode=memcheck $args --alloc memcheck
        step "$m compute-sanitizer memcheck alone" 240 compute-sanitizer --tool memcheck \
            --print-limit 4 python3 $args --alloc default
    done
    step "kernel_reads --gather memcheck" 240 python3 -m vramguard run --mode=memcheck \
        examples/pytorch/kernel_reads.py --gather
    head -12 "$TORCH_EXTENSIONS_DIR"/vg_kernel_reads/cuda.cu | cat -n
    ;;
memcheck-recheck)
    # After the first H100 run (docs/gpu-validation.md): a flood of bad writes (s2), the
    # record_stream'd free, demangled names, initcheck=1 on the planted read and the clean
    # programs, and on 12 steps of each loop (a false report there would show what
    # initcheck cannot see: stores the API does not patch).
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    u="$B/tests/preload/memcheck_user"
    for c in write_freed_many torch_past; do
        step "memcheck_user $c memcheck" 60 "$B/vramguard" run --mode=memcheck --leaks=off -- "$u" $c
    done
    step "memcheck_user uninit_read initcheck" 60 "$B/vramguard" run --mode=memcheck --initcheck=1 \
        --leaks=off -- "$u" uninit_read
    step "memcheck_user clean initcheck" 60 "$B/vramguard" run --mode=memcheck --initcheck=1 -- "$u" clean
    step "s2_use_after_free memcheck" 60 "$B/vramguard" run --mode=memcheck -- "$B/examples/s2_use_after_free"
    for how in "--stream --fixed" --stream --gather; do
        step "kernel_reads $how memcheck" 240 python3 -m vramguard run --mode=memcheck \
            examples/pytorch/kernel_reads.py $how
    done
    for model in ${MODELS:-gpt2:1 resnet50:16}; do
        m=${model%%:*} b=${model#*:}
        step "$m memcheck mode, initcheck" 240 python3 -m vramguard run --mode=memcheck --initcheck=1 \
            bench/pytorch_train.py --alloc memcheck --model $m --batch $b --steps 12 --warmup 2
    done
    ;;
memcheck|memcheck-c|memcheck-torch)
    # Issue 32 (docs/memcheck.md, docs/decisions.md G13): memcheck mode on the real driver
    # and the real Compute Sanitizer API. memcheck-c: memcheck_user's planted and clean
    # cases plain and under memcheck, the examples under memcheck. memcheck-torch: the
    # PyTorch scripts (a write and a read past a tensor, a gather past its table, a freed
    # tensor read on a side stream) and 12 steps of the two loops plain, under memcheck
    # mode and under compute-sanitizer memcheck alone.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    compute-sanitizer --version | head -2
    build
    if [ "$PART" != memcheck-torch ]; then
        for c in read_past read_far read_before write_far read_freed write_freed async_past \
                 pool_past library_past other_stream clean; do
            step "memcheck_user $c plain" 30 "$B/tests/preload/memcheck_user" $c
            step "memcheck_user $c memcheck" 60 "$B/vramguard" run --mode=memcheck --leaks=off \
                --verbose=$([ $c = clean ] && echo 1 || echo 0) -- "$B/tests/preload/memcheck_user" $c
        done
        for ex in s1_overrun s2_use_after_free s9_illegal_address clean_program; do
            step "$ex memcheck" 60 "$B/vramguard" run --mode=memcheck -- "$B/examples/$ex"
        done
    fi
    if [ "$PART" != memcheck-c ]; then
        for how in "" --read --fixed; do
            step "oob_custom_kernel $how memcheck" 240 python3 -m vramguard run --mode=memcheck \
                examples/pytorch/oob_custom_kernel.py $how
        done
        for how in --gather "--gather --fixed" --stream "--stream --fixed"; do
            step "kernel_reads $how memcheck" 240 python3 -m vramguard run --mode=memcheck \
                examples/pytorch/kernel_reads.py $how
        done
        for model in ${MODELS:-gpt2:1 resnet50:16}; do
            m=${model%%:*} b=${model#*:}
            step "$m plain" 120 python3 bench/pytorch_train.py --alloc default --model $m \
                --batch $b --steps 12 --warmup 2
            step "$m memcheck mode" 240 python3 -m vramguard run --mode=memcheck \
                bench/pytorch_train.py --alloc memcheck --model $m --batch $b --steps 12 --warmup 2
            step "$m memcheck mode, no kernel checked (the API's own cost)" 240 python3 -m \
                vramguard run --mode=memcheck --memcheck_every=1000000000 bench/pytorch_train.py \
                --alloc memcheck --model $m --batch $b --steps 12 --warmup 2
            [ -n "${NO_CS:-}" ] || step "$m compute-sanitizer memcheck alone" 240 compute-sanitizer \
                --tool memcheck --print-limit 4 python3 bench/pytorch_train.py --alloc default \
                --model $m --batch $b --steps 12 --warmup 2
        done
    fi
    ;;
c)
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    nvcc --version | tail -2; compute-sanitizer --version | head -2; gcc --version | head -1
    build
    for c in $(cases tests/conformance/conformance*.c); do
        step "conformance $c" 60 "$B/tests/conformance/conformance" "$c"
    done
    step demo 180 "$B/vramguard" demo
    guard_tests
    for ex in s1_overrun s2_use_after_free s3_h2d_race s4_d2h_race s6_oom_leak s7_too_large \
              s8_bad_frees s9_illegal_address clean_program; do
        step "$ex plain" 60 "$B/examples/$ex"
        step "$ex vramguard" 60 "$B/vramguard" run --mode=guard --limit=1G -- "$B/examples/$ex"
        step "$ex compute-sanitizer" 120 compute-sanitizer --tool memcheck "$B/examples/$ex"
    done
    step "s1_overrun --launch-ex vramguard" 60 "$B/vramguard" run --mode=guard -- \
        "$B/examples/s1_overrun" --launch-ex
    replays
    for round in 1 2 3; do
        step "launch_heavy plain" 60 "$B/bench/launch_heavy" 200000 launch
        step "launch_heavy vramguard" 60 "$B/vramguard" run -- "$B/bench/launch_heavy" 200000 launch
        step "launch_heavy plain all" 60 "$B/bench/launch_heavy" 200000 all
        step "launch_heavy vramguard all" 60 "$B/vramguard" run -- "$B/bench/launch_heavy" 200000 all
    done
    ;;
pytorch)
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())'
    build
    # `pip install ./python` as a user runs it (no network there: no build isolation)
    step "pip install ./python" 120 python3 -m pip install --no-build-isolation --no-deps \
        --target "$O/pip" ./python
    step "installed package" 60 env PYTHONPATH="$O/pip" python3 -c \
        'import vramguard, torch; print(vramguard.__file__); vramguard.enable(); print(torch.ones(4, device="cuda").sum().item())'
    step "load_inline build" 300 python3 -c 'import runpy, sys; sys.argv=["x","--fixed"]; runpy.run_path("examples/pytorch/oob_custom_kernel.py")'
    # python -m vramguard run --mode=guard runs the script under vramguard run too (P2,
    # 2026-11-23): each report should name the kernels; missing_record_stream should be
    # reported at the free (G7) however the timing falls, and the two copy races caught.
    for s in examples/pytorch/*.py; do
        [ "$(basename "$s")" = cuda_graph_step.py ] && continue # (the `graphs` part)
        for fixed in "" --fixed; do
            step "$(basename "$s") $fixed plain" 120 python3 "$s" $fixed
            step "$(basename "$s") $fixed python -m vramguard run" 120 python3 -m vramguard run \
                --mode=guard --limit=15G --growth_steps=5 "$s" $fixed
        done
    done
    for s in oob_custom_kernel missing_record_stream; do # the package alone
        step "$s python -m vramguard run --interpose=off" 120 python3 -m vramguard run \
            --mode=guard --interpose=off "examples/pytorch/$s.py"
    done
    for s in nonblocking_d2h_read nonblocking_h2d_modify; do # vramguard run alone
        for fixed in "" --fixed; do
            step "$s $fixed vramguard run" 120 "$B/vramguard" run --mode=guard -- python3 \
                "examples/pytorch/$s.py" $fixed
        done
    done
    for fixed in "" --fixed; do
        step "oob_custom_kernel $fixed compute-sanitizer" 300 compute-sanitizer --tool memcheck \
            python3 examples/pytorch/oob_custom_kernel.py $fixed
    done
    step "pluggable smoke" 120 python3 -c '
import vramguard, torch
vramguard.enable()
x = torch.randn(1000, 1000, device="cuda"); y = x @ x
print("sum", y.sum().item())
s = vramguard.memory_stats(); print({k: s[k] for k in ("allocated_bytes.all.current", "reserved_bytes.all.peak")})
print("torch.cuda.max_memory_allocated", torch.cuda.max_memory_allocated(), "memory_reserved", torch.cuda.memory_reserved())
torch.cuda.reset_peak_memory_stats()
torch.cuda.memory._record_memory_history(max_entries=1000)
z = torch.zeros(1 << 20, device="cuda"); del z
torch.cuda.memory._dump_snapshot("/tmp/vg-history.pickle")
print("history entries", len(torch.cuda.memory._snapshot()["device_traces"][0]))
g = torch.cuda.CUDAGraph()  # (a graph pool since 2026-11-23: no warning)
with torch.cuda.graph(g):
    w = x * 2
g.replay(); print("graph replay", w.sum().item(), "expected", (x * 2).sum().item())
print(vramguard.memory_summary()[:600])
snap = vramguard.snapshot(); print("snapshot segments", len(snap["segments"]))
vramguard.dump_snapshot("/tmp/vg-snap.pickle")
from torch.cuda import _memory_viz
print(_memory_viz.segment_plot(snap)[:100] if hasattr(_memory_viz, "segment_plot") else "no segment_plot")
'
    ;;
graphs)
    # CUDA graphs (2026-11-23, A7): a captured training step in fast mode, with
    # torch.compile(mode="reduce-overhead"), and under vramguard run (the preload must
    # leave the capture alone); the script checks itself (exit 1 on a wrong replay).
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    step "cuda_graph_step plain" 180 python3 examples/pytorch/cuda_graph_step.py
    step "cuda_graph_step fast" 180 python3 -m vramguard run --mode=fast examples/pytorch/cuda_graph_step.py
    step "cuda_graph_step guard" 180 python3 -m vramguard run --mode=guard examples/pytorch/cuda_graph_step.py
    step "cuda_graph_step vramguard run" 180 "$B/vramguard" run --mode=guard -- python3 \
        examples/pytorch/cuda_graph_step.py
    step "cuda_graph_step --compile plain" 300 python3 examples/pytorch/cuda_graph_step.py --compile
    step "cuda_graph_step --compile fast" 300 python3 -m vramguard run --mode=fast \
        examples/pytorch/cuda_graph_step.py --compile
    ;;
train)
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/train.jsonl
    run() { train_run "$J" "$@"; }
    for round in 1 2; do
        for a in default expandable vramguard; do
            run "gpt2 $a round $round" 300 --alloc $a --model gpt2 --steps 300
        done
    done
    run "gpt2 guard" 300 --alloc guard --model gpt2 --steps 100
    run "gpt2 trace" 120 --alloc vramguard --model gpt2 --steps 20 --warmup 5 --trace "$O/gpt2_small_train.csv"
    run "gpt2 default 20 steps" 120 --alloc default --model gpt2 --steps 20 --warmup 5
    step "gpt2 compute-sanitizer" 200 compute-sanitizer --tool memcheck python3 bench/pytorch_train.py \
        --alloc default --model gpt2 --steps 12 --warmup 2
    [ "${ONLY:-}" = gpt2 ] && exit 0
    for a in default expandable vramguard; do
        run "resnet50 $a" 300 --alloc $a --model resnet50 --steps 200
    done
    run "resnet50 guard" 300 --alloc guard --model resnet50 --steps 60
    run "resnet50 trace" 120 --alloc vramguard --model resnet50 --steps 20 --warmup 5 --trace "$O/resnet50_train.csv"
    run "resnet50 default 20 steps" 120 --alloc default --model resnet50 --steps 20 --warmup 5
    ;;
next | next-guard | next-twins | next-memcheck | next-stream)
    # `next` runs the three parts below in turn; on a machine that allows only 10 minutes
    # a command, run them one by one (compute-sanitizer's steps are cut at 4 minutes each
    # so that next-memcheck fits).
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/next.jsonl
    if [ "$PART" = next ] || [ "$PART" = next-guard ]; then
        step "conformance launch_kernel_ex" 60 "$B/tests/conformance/conformance" \
            launch_kernel_ex_runs_like_launch_kernel
        step "s1_overrun --launch-ex vramguard" 60 "$B/vramguard" run --mode=guard -- \
            "$B/examples/s1_overrun" --launch-ex
        step "conformance copy_2d" 60 "$B/tests/conformance/conformance" \
            copy_2d_sub_rectangle_round_trip
        # CUDA graphs and non-blocking streams (2026-11-23, A7): capture rules on the real
        # driver, then S1 through a stream and through a graph (both should be reported).
        for c in $(cases tests/conformance/conformance*.c | grep -E 'capture|graph'); do
            step "conformance $c" 60 "$B/tests/conformance/conformance" "$c"
        done
        for c in $(cases tests/unit/test_graphs.c); do
            VGT_DRIVER=libcuda.so.1 step "unit_graphs $c" 60 "$B/tests/unit/unit_graphs" "$c"
        done
        for how in --stream --graph; do
            step "s1_overrun $how vramguard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/examples/s1_overrun" $how
            step "s1_overrun $how compute-sanitizer" 120 compute-sanitizer --tool memcheck \
                "$B/examples/s1_overrun" $how
        done
        for how in --generic --2d; do
            step "s3_h2d_race $how vramguard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/examples/s3_h2d_race" $how
        done
        # Frees not ordered after another stream's kernel (2026-11-23, G7): the racy S2
        # gives an unordered_free report, each correct version none (the CUDA 13 runtime
        # may record events with cuEventRecordWithFlags: it is hooked too).
        for how in "" --struct --copy --event --query --sync --legacy --memcpy; do
            step "s2_use_after_free $how vramguard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/examples/s2_use_after_free" $how
        done
        for c in $(cases tests/unit/test_order.c); do
            VGT_DRIVER=libcuda.so.1 step "unit_order $c" 60 "$B/tests/unit/unit_order" "$c"
        done
        # cuMemFree waits for the device, cuMemAlloc's memory serves any stream at once
        # (docs/decisions.md A9): exit 0 and no report in each run.
        for how in --free --alloc; do
            step "sync_calls $how plain" 60 "$B/tests/preload/sync_calls" $how
            for m in fast guard; do
                step "sync_calls $how $m vramguard" 60 "$B/vramguard" run --mode=$m -- \
                    "$B/tests/preload/sync_calls" $how
            done
        done
        # A pointer's range is the allocation whichever call asks; CUDA IPC of vramguard's
        # memory is refused with the reason (plain: the driver's answer, CUDA_SUCCESS).
        # 20 contexts created and destroyed (a real context takes ~0.1-0.3 s; vgsim runs 70):
        # every round works, device memory free after as before (vramguard gives back the
        # cuMemCreate pages cuCtxDestroy leaves).
        step "contexts plain" 60 "$B/tests/preload/contexts" 20
        for m in fast guard; do
            step "contexts $m vramguard" 60 "$B/vramguard" run --mode=$m -- "$B/tests/preload/contexts" 20
        done
        for args in 1 2 3 "1 1500 4"; do # (the same checksums in the three runs, no report)
            step "random_clean $args plain" 60 "$B/tests/preload/random_clean" $args
            for m in fast guard; do
                step "random_clean $args $m vramguard" 60 "$B/vramguard" run --mode=$m \
                    --error_exitcode=3 -- "$B/tests/preload/random_clean" $args
            done
        done
        # One bug planted in such a program: guard mode must give the report the program
        # prints after "planted:" (check_report.py's arguments), and only it.
        for plant in overrun underrun copy_overrun freed double_free unordered host_race; do
            step "random_clean plant $plant" 60 "$B/vramguard" run --mode=guard \
                --report_json="$O/plant_$plant.json" -- "$B/tests/preload/random_clean" 1 2000 1 $plant
        done
        step "device_reset plain" 60 "$B/tests/preload/device_reset"
        for m in fast guard; do
            step "device_reset $m vramguard" 60 "$B/vramguard" run --mode=$m -- "$B/tests/preload/device_reset"
        done
        step "pointer_user plain" 60 "$B/tests/preload/pointer_user"
        step "pointer_user vramguard" 60 "$B/vramguard" run -- "$B/tests/preload/pointer_user"
        guard_tests # (the checker kernels gained block ops DEAD and EXIT, repair, poison_end)
        REPEAT=15 replays
    fi
    if [ "$PART" = next ] || [ "$PART" = next-twins ]; then
        # The per-thread default stream's twins, 16-bit and 2D memsets and cooperative
        # launches (2026-11-23): the conformance cases on the real driver, plain and under
        # guard mode (which must not wait for the held stream: G8), then the random programs
        # built for the per-thread default stream, clean and with the synchronous copy
        # planted past a new buffer's end.
        # 3D and peer copies, stream memory operations (2026-11-24): their conformance
        # cases too (the peer copies between two contexts of the one GPU), S3 through
        # cuMemcpy3DAsync, and S2 ordered by a flag (no report).
        # Batched copies, and the legacy stream's guard work before a blocking stream's
        # (2026-11-24, later): their conformance cases (what the real driver refuses, and
        # failIdx, are unverified), S3 through both batch calls, a source read during the
        # call (no report), a batched copy past a new buffer's end, and S1 on a blocking
        # stream after cuMemAllocAsync on the legacy one.
        # Memory pools (2026-11-24, third session; docs/decisions.md A12): their
        # conformance cases on the real driver (vgsim's reading of the manual: the figures'
        # rounding, maxSize, the default pool's refusal), under both modes, and
        # pool_overrun: reported for a pool of the program's, the default pool and a
        # current pool; a pool made for sharing keeps the driver's memory, which exports.
        # Managed memory (2026-11-24, fourth session; docs/decisions.md G9): its
        # conformance cases (which ranges the real driver accepts for an association, a
        # prefetch and advice), under guard mode too, and managed_overrun: the kernel's and
        # the host's overrun and the use after free reported, the correct versions clean.
        for c in memsets_of_16_bits_and_2d_memsets_set_exactly_their_bytes \
                 a_cooperative_launch_runs_in_stream_order \
                 per_thread_twins_run_on_the_threads_default_stream \
                 copy_3d_box_round_trip copy_3d_refuses_bad_layouts \
                 peer_copies_order_with_both_contexts copy_3d_peer_sub_box \
                 a_written_word_releases_another_streams_wait \
                 wait_conditions_hold_as_documented stream_memops_refuse_bad_words \
                 batch_copies_round_trip batch_copy_reads_a_during_call_source_before_returning \
                 batch_copies_refuse_bad_batches batch_3d_boxes_round_trip \
                 batch_3d_refuses_bad_ops pool_default_and_current pool_counts_its_allocations \
                 pool_max_size_bounds_it pool_attributes_round_trip \
                 managed_memory_is_shared_by_host_and_kernels managed_pointer_attributes \
                 managed_attach_prefetch_and_advise managed_pool_allocations_are_managed; do
            step "conformance $c" 60 "$B/tests/conformance/conformance" "$c"
            step "conformance $c guard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/tests/conformance/conformance" "$c"
        done
        for how in "" --default-pool --current --ipc --ipc-current; do
            step "pool_overrun $how plain" 60 "$B/tests/preload/pool_overrun" $how
            step "pool_overrun $how vramguard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/tests/preload/pool_overrun" $how
        done
        for how in "" --host --uaf --attach --host-attached; do
            [ "$how" = --uaf ] || step "managed_overrun $how plain" 60 \
                "$B/tests/preload/managed_overrun" $how
            step "managed_overrun $how vramguard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/tests/preload/managed_overrun" $how
        done
        # PyTorch's own cudaMallocAsync backend allocates from the default pool (named
        # to set its release threshold): under vramguard run the overrun PyTorch's caching
        # allocator hides should be reported, the --fixed run clean, and memory_stats()
        # (read from the pool's figures) non-zero.
        for fixed in "" --fixed; do
            step "oob_custom_kernel $fixed cudaMallocAsync backend vramguard run" 300 env \
                PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$B/vramguard" run --mode=guard -- \
                python3 examples/pytorch/oob_custom_kernel.py $fixed
        done
        step "cudaMallocAsync backend stats vramguard run" 120 env \
            PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$B/vramguard" run -- python3 -c '
import torch
x = torch.randn(4096, 4096, device="cuda"); y = x @ x; torch.cuda.synchronize()
print("allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved())
del x, y; torch.cuda.empty_cache(); print("after empty_cache: reserved", torch.cuda.memory_reserved())
'
        for args in 1 "1 1500 4"; do
            step "random_clean_ptds $args plain" 60 "$B/tests/preload/random_clean_ptds" $args
            for m in fast guard; do
                step "random_clean_ptds $args $m vramguard" 60 "$B/vramguard" run --mode=$m \
                    --error_exitcode=3 -- "$B/tests/preload/random_clean_ptds" $args
            done
        done
        step "random_clean_ptds plant copy_overrun" 60 "$B/vramguard" run --mode=guard \
            --report_json="$O/plant_ptds_copy_overrun.json" -- \
            "$B/tests/preload/random_clean_ptds" 1 2000 1 copy_overrun
        step "s3_h2d_race --3d vramguard" 60 "$B/vramguard" run --mode=guard -- \
            "$B/examples/s3_h2d_race" --3d
        step "s2_use_after_free --flag vramguard" 60 "$B/vramguard" run --mode=guard -- \
            "$B/examples/s2_use_after_free" --flag
        for how in --batch --batch-3d --batch-during-call; do
            step "s3_h2d_race $how vramguard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/examples/s3_h2d_race" $how
        done
        for how in "" --3d; do
            step "batch_overrun $how vramguard" 60 "$B/vramguard" run --mode=guard -- \
                "$B/tests/preload/batch_overrun" $how
        done
        step "s1_overrun --blocking vramguard" 60 "$B/vramguard" run --mode=guard -- \
            "$B/examples/s1_overrun" --blocking
    fi
    if [ "$PART" = next ] || [ "$PART" = next-memcheck ]; then
        # Guard mode and compute-sanitizer on the same loops, small enough for memcheck.
        for m in "resnet50 16" "gpt2 1"; do
            set -- $m
            train_run "$J" "$1 batch $2 plain" 120 --alloc default --model $1 --batch $2 --steps 12 --warmup 2
            train_run "$J" "$1 batch $2 guard" 120 --alloc guard --model $1 --batch $2 --steps 12 --warmup 2
            step "$1 batch $2 guard under vramguard run" 120 "$B/vramguard" run --mode=guard -- \
                python3 bench/pytorch_train.py --json /tmp/vg-run.json --alloc guard --model $1 \
                --batch $2 --steps 12 --warmup 2 && cat /tmp/vg-run.json >>"$J"
            step "$1 batch $2 compute-sanitizer" 240 compute-sanitizer --tool memcheck python3 \
                bench/pytorch_train.py --json /tmp/vg-run.json --alloc default --model $1 --batch $2 \
                --steps 12 --warmup 2 && cat /tmp/vg-run.json >>"$J"
        done
    fi
    if [ "$PART" = next ] || [ "$PART" = next-stream ]; then
        # Several streams (A8, 2026-11-23): reserved / allocated near vgsim's 1.5-1.7.
        for p in single own next random; do
            step "multistream $p" 60 "$B/vramguard" run --verbose -- "$B/bench/multistream" $p
        done
        # Guard mode under a limit: the quarantine shrinks instead of moving pages (G5).
        VRAMGUARD_OPTIONS=limit=18G train_run "$J" "gpt2 guard limit=18G" 300 --alloc guard \
            --model gpt2 --steps 60
        for fixed in "" --fixed; do
            step "missing_record_stream $fixed plain" 60 python3 examples/pytorch/missing_record_stream.py $fixed
            step "missing_record_stream $fixed vramguard" 60 python3 -m vramguard run --mode=guard \
                examples/pytorch/missing_record_stream.py $fixed
        done
        step "python -m vramguard run -m" 60 python3 -m vramguard run -m json.tool --help
        step "torchrun worker under --follow-children" 120 python3 -m vramguard run --mode=guard \
            --follow-children -m torch.distributed.run --nproc_per_node=1 \
            examples/pytorch/leak_in_loop.py
    fi
    ;;
peak)
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/peak.jsonl
    for round in ${ROUNDS:-1 2}; do # (ROUNDS=1, then ROUNDS=2: one round a call)
        for a in default expandable vramguard; do
            train_run "$J" "gpt2 $a round $round" 300 --alloc $a --model gpt2 --steps 300 \
                --reserved-per-step
            train_run "$J" "resnet50 $a round $round" 300 --alloc $a --model resnet50 --steps 200
        done
    done
    peak_summary "$J"
    ;;
peak-why)
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/peak.jsonl
    train_run "$J" "gpt2 vramguard traced" 300 --alloc vramguard --model gpt2 --steps 300 \
        --reserved-per-step --trace "$O/gpt2_300.csv"
    for lag in 0 800; do
        step "replay gpt2_300 lag $lag" 300 "$B/vramguard" replay --json --repeat=1 --lag=$lag \
            "$O/gpt2_300.csv"
    done
    for seed in 1 2 3; do
        step "replay gpt2_300 perturb $seed" 300 "$B/vramguard" replay --json --repeat=1 \
            --perturb=$seed "$O/gpt2_300.csv"
    done
    step "PyTorch model on gpt2_300" 300 python3 bench/pytorch_alloc_model.py --perturb=0,1,2,3 \
        "$O/gpt2_300.csv"
    step "PyTorch expandable model on gpt2_300" 300 python3 bench/pytorch_alloc_model.py \
        --expandable --perturb=0,1,2,3 "$O/gpt2_300.csv"
    step "replay gpt2 20-step trace" 120 "$B/vramguard" replay --json --repeat=1 \
        bench/traces/gpt2_small_train.csv
    peak_summary "$J"
    ;;
convert)
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/convert.jsonl
    for m in resnet50 gpt2; do
        train_run "$J" "$m default, memory history" 300 --alloc default --model $m --steps 20 \
            --warmup 2 --memory-history "$O/$m.pickle"
        step "convert $m" 120 python3 -m vramguard convert "$O/$m.pickle" "$O/${m}_pt.csv"
        step "replay $m" 300 "$B/vramguard" replay --json --repeat=1 "$O/${m}_pt.csv"
        step "PyTorch model on $m" 300 python3 bench/pytorch_alloc_model.py "$O/${m}_pt.csv"
    done
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r["model"], "measured by PyTorch: peak allocated", r["peak_allocated"],
          "peak reserved", r["peak_reserved"])' "$J"
    ;;
recheck)
    # After the fixes the first runs led to (docs/gpu-validation.md): guard tests and
    # replays with deferral, the record_stream and OOM scripts, ResNet-50 timing.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    guard_tests
    for ex in s2_use_after_free s6_oom_leak clean_program; do
        step "$ex vramguard" 60 "$B/vramguard" run --mode=guard --limit=1G -- "$B/examples/$ex"
    done
    replays
    for fixed in "" --fixed; do
        step "missing_record_stream $fixed plain" 60 python3 examples/pytorch/missing_record_stream.py $fixed
        step "missing_record_stream $fixed vramguard" 60 python3 -m vramguard run --mode=guard \
            examples/pytorch/missing_record_stream.py $fixed
        step "oom_fragmentation $fixed vramguard" 120 python3 -m vramguard run --limit=15G \
            examples/pytorch/oom_fragmentation.py $fixed
    done
    step "OOM raises" 60 python3 -c '
import vramguard, torch
vramguard.enable(limit="1G")
try:
    torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    print("no exception")
except Exception as e:
    print("raised", type(e).__name__, str(e)[:300])
'
    J=$O/train.jsonl
    for round in 1 2; do
        for a in default vramguard; do
            step "resnet50 $a" 120 python3 bench/pytorch_train.py --json /tmp/vg-run.json --alloc $a \
                --model resnet50 --steps 200 && cat /tmp/vg-run.json >>"$J"
        done
    done
    VRAMGUARD_OPTIONS=stack_depth=0 step "resnet50 vramguard stack_depth=0" 120 python3 \
        bench/pytorch_train.py --json /tmp/vg-run.json --alloc vramguard --model resnet50 \
        --steps 200 && cat /tmp/vg-run.json >>"$J"
    ;;
rooms)
    # Issue 36 (docs/decisions.md H1): the core in rooms, the allocator calling guard mode
    # and compute-sanitizer through its doors: guard mode's unit cases on the real driver
    # (eager and deferred), each example plain and in guard mode, two access_user programs,
    # and memcheck told vramguard's allocations through the doors (nvtx_oob read).
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi -L
    build
    guard_tests
    for ex in s1_overrun s2_use_after_free s3_h2d_race s4_d2h_race s6_oom_leak s7_too_large \
              s8_bad_frees s9_illegal_address clean_program; do
        step "$ex plain" 60 "$B/examples/$ex"
        step "$ex vramguard" 60 "$B/vramguard" run --mode=guard --limit=1G -- "$B/examples/$ex"
    done
    for c in copy_read_past begin_end; do
        step "access_user $c guard" 30 "$B/vramguard" run --mode=guard --leaks=off -- \
            "$B/tests/preload/access_user" $c
    done
    step "nvtx_oob read, memcheck --nvtx over vramguard" 60 compute-sanitizer --tool memcheck \
        --nvtx yes --print-limit 2 "$B/vramguard" run -- "$B/examples/nvtx_oob" read
    ;;
h2d)
    # nonblocking_h2d_modify.py's race under guard mode, timed (bench/h2d_copy_timing.py),
    # with the first allocation before the long kernel (--warm) and without.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    for w in "" --warm; do
        step "h2d timing plain $w" 60 python3 bench/h2d_copy_timing.py $w
        for m in fast guard; do
            step "h2d timing $m $w" 60 "$B/vramguard" run --mode=$m -- python3 bench/h2d_copy_timing.py $w
        done
        VRAMGUARD_OPTIONS=guard_defer=off step "h2d timing guard, guard_defer=off $w" 60 \
            "$B/vramguard" run --mode=guard -- python3 bench/h2d_copy_timing.py $w
    done
    ;;
pages)
    # Issue 37 (docs/decisions.md A13): a plan that settles moves pages while it learns
    # the step and at its handover; what one move costs here, and whether cuMemUnmap
    # waits for the device (then each move is a synchronisation).
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    build
    step "page_move_cost 256 300" 60 "$B/bench/page_move_cost" 256 300
    step "page_move_cost 1024 300 (again, more pages)" 60 "$B/bench/page_move_cost" 1024 300
    ;;
plan)
    # Issue 37 (docs/decisions.md A13, point 19): plan=on beside plan=off on the training
    # loops, same GPU, one run: step time (the learning moves and the handover land in the
    # first steps; the median is the steady state), peak reserved, losses identical.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/plan.jsonl
    for p in off on; do
        train_run "$J" "gpt2 plan=$p" 300 --alloc vramguard --model gpt2 --steps 60 \
            --reserved-per-step --vg-option plan=$p --vg-option verbose=1
        train_run "$J" "resnet50 plan=$p" 300 --alloc vramguard --model resnet50 --steps 60 \
            --reserved-per-step --vg-option plan=$p --vg-option verbose=1
    done
    peak_summary "$J"
    ;;
plan-eval)
    # Issue 37 (docs/decisions.md A13, point 21): the training loops with an evaluation
    # after every 10th step (8 batches of twice the batch size, model.eval(), no_grad):
    # PyTorch's allocators, then vramguard plan=off and plan=on. plan=on's stderr says how
    # often the plan was taken up again after an evaluation ("took its plan up again").
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/plan-eval.jsonl
    for m in resnet50 gpt2; do
        for a in "default" "expandable" "vramguard --vg-option plan=off" \
                 "vramguard --vg-option plan=on --vg-option verbose=1"; do
            train_run "$J" "$m $a" 300 --alloc $a --model $m --steps 60 --eval-every 10 \
                --eval-batches 8 --reserved-per-step
        done
    done
    peak_summary "$J"
    ;;
plan-accum)
    # Issue 37 (docs/decisions.md A13, point 22): gradient accumulation, 8 micro-batches a
    # step (GPT-2: batch 2, ResNet-50: batch 32), with PyTorch's allocators, then vramguard
    # plan=off and plan=on (its stderr: the steps found, the plan's placements and moves).
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/plan-accum.jsonl
    for m in "resnet50 --batch 32" "gpt2 --batch 2"; do
        for a in "default" "expandable" "vramguard --vg-option plan=off" \
                 "vramguard --vg-option plan=on --vg-option verbose=1"; do
            train_run "$J" "$m $a" 300 --alloc $a --model $m --steps 40 --warmup 10 \
                --accum 8 --reserved-per-step
        done
    done
    peak_summary "$J"
    ;;
generate)
    # Issue 37 (docs/decisions.md A13, point 20): a generation loop whose K/V caches grow
    # by torch.cat (bench/pytorch_generate.py, gen_large's workload live) with PyTorch's
    # allocator, expandable segments, and vramguard plan=off and plan=on: time per token,
    # peak reserved, the same tokens; plan=on finds no step and settles (its stderr says
    # after how many moves, and the moves and waits in all).
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    build
    J=$O/generate.jsonl
    for a in default expandable "vramguard --vg-option plan=off" \
             "vramguard --vg-option plan=on --vg-option verbose=1" \
             "vramguard --vg-option plan=off --vg-option slot_min=100M"; do
        step "generate $a" 300 python3 bench/pytorch_generate.py --alloc $a \
            --json /tmp/vg-gen.json && cat /tmp/vg-gen.json >>"$J"
    done
    python3 - "$J" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for r in runs:
    print(f"{r['alloc']:10} {' '.join(r['options']):30} token {r['token_ms_median']:.3f} ms  "
          f"prefill {r['prefill_s']:.2f} s  wall {r['wall_s']:.2f} s  peak reserved "
          f"{r['peak_reserved'] / 1e9:.3f} GB / allocated {r['peak_allocated'] / 1e9:.3f} GB  "
          f"same tokens as the first: {r['checksum'] == runs[0]['checksum']}")
PY
    ;;
pinned)
    # Issue 34 (docs/decisions.md G14): the driver's wait at a free with a copy queued,
    # measured; the S11 example as on vgsim (exit 99, 20.00 MiB leaked from its line, the
    # peak at exit; the 64 MiB refusal under pinned_limit=16M; the verbose note); the
    # PyTorch loader with pinned buffers kept (growth at its Python line) and its fix.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
    build
    step "pinned_free_wait 300" 60 "$B/bench/pinned_free_wait" 300
    step "s11 plain" 60 "$B/examples/s11_pinned_staging"
    step "s11 guard" 60 "$B/vramguard" run --mode=guard --error_exitcode=99 --verbose -- \
        "$B/examples/s11_pinned_staging"
    step "s11 --big under pinned_limit=16M" 60 "$B/vramguard" run --pinned_limit=16M -- \
        "$B/examples/s11_pinned_staging" --big
    step "s11 --steps guard" 60 "$B/vramguard" run --mode=guard -- "$B/examples/s11_pinned_staging" --steps
    step "s11 --register guard" 60 "$B/vramguard" run --mode=guard -- "$B/examples/s11_pinned_staging" --register
    for m in fast guard; do
        step "s11 --free-queued $m verbose" 60 "$B/vramguard" run --mode=$m --verbose -- \
            "$B/examples/s11_pinned_staging" --free-queued
    done
    for fixed in "" --fixed; do
        step "pinned_loader_leak.py $fixed plain" 300 python3 examples/pytorch/pinned_loader_leak.py $fixed
        step "pinned_loader_leak.py $fixed guard" 300 python3 -m vramguard run --mode=guard --verbose \
            examples/pytorch/pinned_loader_leak.py $fixed
    done
    # Leaks listed (leaks=auto): PyTorch's host cache should be counted in one line as its
    # cache (its CachingHostAllocator frames, exported symbols, at the pinning call), the
    # kept buffers listed as leaks.
    step "pinned_loader_leak.py leaks=auto" 300 python3 -m vramguard run --mode=guard --leaks=auto \
        examples/pytorch/pinned_loader_leak.py
    ;;
access|access-tool)
    # Issue 31 (docs/decisions.md G11, G12): what the driver does past an allocation; the
    # access_user programs plain and under vramguard (the same answers); compute-sanitizer
    # told vramguard's allocations (--nvtx yes) on the PyTorch out-of-bounds scripts, write
    # and read; 12 steps of the two loops under that command beside memcheck alone.
    echo "### $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    compute-sanitizer --version | head -2
    build
    [ "$PART" = access-tool ] || {
    step "bounds probe" 60 "$B/tests/conformance/conformance" copies_and_memsets_past_an_allocation
    for c in copy_read_past memset_past copy2d_past copy_far copy_freed freed_arg \
             redzone_arg_overrun redzone_arg begin_end last_byte pitched_2d threads; do
        step "access_user $c plain" 30 "$B/tests/preload/access_user" $c
        for m in fast guard; do
            step "access_user $c $m" 30 "$B/vramguard" run --mode=$m --leaks=off -- \
                "$B/tests/preload/access_user" $c
        done
    done
    }
    step "load_inline build" 300 python3 examples/pytorch/oob_custom_kernel.py --fixed
    for how in "" --read --fixed "--read --fixed"; do
        step "oob_custom_kernel $how memcheck --nvtx, vramguard" 120 compute-sanitizer \
            --tool memcheck --nvtx yes --print-limit 4 python3 -m vramguard run \
            examples/pytorch/oob_custom_kernel.py $how
    done
    step "oob_custom_kernel --read memcheck alone" 120 compute-sanitizer --tool memcheck \
        --print-limit 4 python3 examples/pytorch/oob_custom_kernel.py --read
    for model in resnet50:16 gpt2:1; do
        step "${model%%:*} memcheck --nvtx, vramguard" 240 compute-sanitizer --tool memcheck \
            --nvtx yes --print-limit 4 python3 -m vramguard run bench/pytorch_train.py \
            --alloc default --model ${model%%:*} --batch ${model#*:} --steps 12 --warmup 2
        step "${model%%:*} memcheck alone" 240 compute-sanitizer --tool memcheck --print-limit 4 \
            python3 bench/pytorch_train.py --alloc default --model ${model%%:*} \
            --batch ${model#*:} --steps 12 --warmup 2
    done
    ;;
*)
    echo "gpu-validate.sh: unknown part '$PART' (c, pytorch, graphs, train, recheck, next, next-guard, next-twins, next-memcheck, next-stream, peak, peak-why, convert, rooms, h2d, access, access-tool, pinned, pages, plan, plan-eval, plan-accum, generate, memcheck, memcheck-c, memcheck-torch, memcheck-lines, memcheck-floor, memcheck-pending, memcheck-followup, memcheck-recheck, memcheck-confirm, memcheck-tma, memcheck-empty, memcheck-next)" >&2
    exit 2
    ;;
esac
