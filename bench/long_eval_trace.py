"""A training trace whose evaluations are made long: each run of batches (each opened by an
allocation of BATCH_FIRST_SIZE bytes, all with the same number of allocations) gets its
last whole batch but one played again until the run has BATCHES batches. A real
evaluation runs over a whole validation set (ImageNet's 50,000 images are 782 batches of
64), far longer than a recorded one, and longer than a training loop's plan waited for it
before (docs/decisions.md A13).

    python3 bench/long_eval_trace.py TRACE.csv[.gz] OUT.csv BATCH_FIRST_SIZE BATCHES

For bench/traces/cnn_train_eval.csv.gz, BATCH_FIRST_SIZE is 7077888 for the evaluation's
batches (64 images) and 3538944 for the training steps (32 images): run twice, once with
each, it makes both the training between evaluations and the evaluations long, as in a
real run (bench/RESULTS.md, fifteenth session). Each copy gets new pointers; a free in a
copy frees the allocation made one batch later than the original freed one, so lifetimes
that cross a batch boundary are kept; frees of older allocations are not copied; and the
events after the copies free the last copy's allocations where they freed the copied
batch's.
"""
import gzip
import sys


def batch_runs(starts):
    """Runs of batch starts (allocation numbers) an equal number of allocations apart."""
    runs, run = [], []
    for s in starts:
        if len(run) >= 2 and s - run[-1] != run[1] - run[0]:
            runs.append(run)
            run = []
        if len(run) == 1 and s - run[0] <= 0:
            run = []
        run.append(s)
    if run:
        runs.append(run)
    return [r for r in runs if len(r) >= 3]


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    src, dst, first_size, batches = argv[0], argv[1], argv[2], int(argv[3])
    with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
        lines = f.read().splitlines()
    head, events = lines[0], [line.split(",") for line in lines[1:]]
    starts, n = [], 0
    for e in events:
        if e[2] == "allocate":
            if e[4] == first_size:
                starts.append(n)
            n += 1
    # The batch copied in each evaluation: [lo, hi) of allocation numbers, its copies' count.
    copied = {}
    for run in batch_runs(starts):
        per = run[1] - run[0]
        # (the last batch's end is not known: the next to last whole batch is copied)
        lo, hi = run[-3], run[-2]
        assert hi - lo == per
        if batches > len(run):
            copied[hi] = (lo, hi, batches - len(run))
    if not copied:
        sys.exit("%s: no run of batches opened by %s-byte allocations"
                 % (src, first_size))
    out, index_of, ptr_of, n, fresh = [head], {}, {}, 0, 0
    span = []  # the events of the batch being copied
    for e in events:
        alloc = e[2] == "allocate"
        if alloc and n in copied:  # the copied batch is over: its copies go here
            lo, hi, reps = copied[n]
            per = hi - lo
            for k in range(1, reps + 1):
                for a, g, ev in span:
                    gk = g + k * per
                    if a:
                        ptr_of[("c", gk)] = "0x%x" % (0x100000000000 + fresh * 512)
                        fresh += 1
                        out.append(",".join([ev[0], ev[1], "allocate", ptr_of[("c", gk)],
                                             ev[4], ev[5]]))
                    elif g >= lo - per:  # (its own batch's or the one before's)
                        key = ("c", gk) if gk >= lo + per else gk
                        out.append(",".join([ev[0], ev[1], "free", ptr_of[key], ev[4], ev[5]]))
            for g in range(lo, hi):  # the events after free the last copy's allocations
                if g in ptr_of and ("c", g + reps * per) in ptr_of:
                    ptr_of[g] = ptr_of[("c", g + reps * per)]
            span = []
        if alloc:
            index_of[e[3]], ptr_of[n] = n, e[3]
            g = n
            n += 1
        else:
            g = index_of.pop(e[3])
        cur = n - 1  # (the last allocation made: the batch an event belongs to)
        if any(lo <= cur < hi for lo, hi, _ in copied.values()):
            span.append((alloc, g, e))
        out.append(",".join(e) if alloc else ",".join(e[:3] + [ptr_of[g]] + e[4:]))
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d events; %d runs of batches made %d batches long"
          % (dst, len(out) - 1, len(copied), batches))


if __name__ == "__main__":
    main(sys.argv[1:])
