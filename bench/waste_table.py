"""Peak reserved over peak live memory on every trace, for vramguard builds side by side and
for the models of PyTorch's allocator and of a page-granular best fit, in one run.

    python3 bench/waste_table.py [--perturb=SEEDS] [--runs=N] NAME=VRAMGUARD ... [TRACE.csv ...]

NAME=VRAMGUARD: a label and a vramguard executable (two builds: before and after), with
options for its replay after spaces if any ("plan=build/vramguard --plan=on"). TRACE
defaults to every bench/traces/*.csv. With --perturb=1,2,3 each trace is also replayed in
those perturbed orders (`vramguard replay --perturb`), and each cell is the worst order's.
Prints a Markdown table: peak live (the largest sum of live requested sizes), then each
build's peak reserved / peak live, then PyTorch's default allocator and
expandable_segments:True by bench/pytorch_alloc_model.py, the page model by
bench/page_model.py, and the acceptance bound of issue 37, max(1.02 x live, live + 4 MiB),
over live; a build's cell is marked * where it is above that bound. Page moves (pages
unmapped to be mapped elsewhere) are given per build as "moves", and, for builds that say
(plan=on), how many of them came in the last quarter of the trace; with --perturb, in how
many orders the build reserved no more than both models of PyTorch on the same order.
With --runs=N each replay runs the trace N times in one process (`vramguard replay
--repeat=N`, what is left live freed between runs), as a program does that runs its loop
again: a notebook's cell run twice, a second model trained after the first. A build's
cells are then its peak over the N runs; PyTorch's caching allocator would serve a run
again from the blocks of the first, so its models' single-run figures stand.
"""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import page_model  # noqa: E402
import pytorch_alloc_model as pm  # noqa: E402


def replay(vg, trace, seed, runs):
    cmd = vg.split()
    out = subprocess.run(cmd[:1] + ["replay", "--json", "--repeat=%d" % runs,
                                    "--perturb=%d" % seed] +
                         cmd[1:] + [trace], capture_output=True, text=True)
    if out.returncode not in (0, 1) or not out.stdout.strip():
        sys.exit("%s replay %s: %s" % (vg, trace, out.stderr.strip()))
    j = json.loads(out.stdout)
    return j["peak_reserved"], j["num_device_free"], j.get("pages_moved_last_quarter", -1)


def main(argv):
    builds, traces, seeds, runs = [], [], [0], 1
    for a in argv:
        if a.startswith("--perturb="):
            seeds = [0] + [int(s) for s in a.split("=", 1)[1].split(",") if int(s)]
        elif a.startswith("--runs=") and a[7:].isdigit() and int(a[7:]) >= 1:
            runs = int(a[7:])
        elif "=" in a and not a.endswith(".csv"):
            builds.append(a.split("=", 1))
        elif a.startswith("-"):
            sys.exit(__doc__)
        else:
            traces.append(a)
    if not builds:
        sys.exit(__doc__)
    traces = traces or sorted(glob.glob(os.path.join(HERE, "traces", "*.csv")) +
                             glob.glob(os.path.join(HERE, "traces", "*.csv.gz")))
    head = ["trace", "peak live"] + ["%s" % n for n, _ in builds] + \
        ["moves (%s)" % n for n, _ in builds] + \
        ["late moves (%s)" % n for n, _ in builds] + \
        (["orders at or below both models (%s)" % n for n, _ in builds] if len(seeds) > 1 else []) + \
        ["PyTorch default", "expandable", "page model", "bound"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for t in traces:
        ops = pm.load(t)
        worst, below = {}, {}
        for seed in seeds:
            o = pm.perturb(ops, seed) if seed else ops
            live = page_model.peak_live(o)
            row = {"pt": pm.peak_reserved(o), "ex": pm.peak_reserved_expandable(o),
                   "pg": page_model.page_model(o)}
            for n, vg in builds:
                row[n], row["mv" + n], row["mvlate" + n] = replay(vg, t, seed, runs)
                below[n] = below.get(n, 0) + (row[n] <= min(row["pt"], row["ex"]))
            for k, v in row.items():
                r = v if k.startswith("mv") else v / live
                worst[k] = max(worst.get(k, r), r)
            worst["live"] = max(worst.get("live", 0), live)
        live = worst["live"]
        bound = max(1.02 * live, live + (4 << 20)) / live
        cells = [os.path.basename(t).split(".csv")[0], "%.1f MB" % (live / 1e6)]
        cells += ["%.3f%s" % (worst[n], "*" if worst[n] > bound + 1e-9 else "") for n, _ in builds]
        cells += ["%d" % worst["mv" + n] for n, _ in builds]
        cells += ["%d" % worst["mvlate" + n] if worst["mvlate" + n] >= 0 else "-"
                  for n, _ in builds]
        if len(seeds) > 1:
            cells += ["%d of %d" % (below[n], len(seeds)) for n, _ in builds]
        cells += ["%.3f" % worst[k] for k in ("pt", "ex", "pg")] + ["%.3f" % bound]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
