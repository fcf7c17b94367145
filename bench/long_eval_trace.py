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
    """Runs of batch starts (allocation numbers) an equal number of allocations apart, of
    four batches or more (the batch copied then follows one of its run: its frees of the
    batch before map onto its copies). A run's last start opens a batch of unknown length
    (it ends where the next run, or the trace, goes on), which may also open the next."""
    runs, run = [], []
    for s in starts:
        if len(run) >= 2 and s - run[-1] != run[1] - run[0]:
            runs.append(run)
            run = [run[-1]]
        run.append(s)
    runs.append(run)
    return [r for r in runs if len(r) >= 4]


class Run:
    """A run of batches, its next to last whole batch (the template, allocations [lo, hi))
    played `reps` times more after itself. Batches are numbered from the run's first;
    an allocation of the run is (batch, its index in the batch)."""

    def __init__(self, run, reps, key):
        self.first, self.per, self.reps, self.key = run[0], run[1] - run[0], reps, key
        self.lo, self.hi = run[-3], run[-2]
        self.t = (self.lo - self.first) // self.per  # the template's batch
        self.events = []  # the template's events: (allocate?, allocation, fields)

    def of(self, g):
        """(batch, index) of allocation g of the run up to the template, or None."""
        if self.first <= g < self.hi:
            return (g - self.first) // self.per, (g - self.first) % self.per
        return None

    def instance(self, b, i, ptr):
        """The pointer of allocation i of batch b in the lengthened run: batches up to the
        template are the trace's own, the next `reps` its copies."""
        if b <= self.t:
            return ptr[self.first + b * self.per + i]
        return ptr[(self.key, b - self.t, i)]


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    src, dst, first_size, batches = argv[0], argv[1], argv[2], int(argv[3])
    with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
        lines = f.read().splitlines()
    head, events = lines[0], [line.split(",") for line in lines[1:]]
    starts, n, top = [], 0, 0
    for e in events:
        if e[2] == "allocate":
            top = max(top, int(e[3], 16) + int(e[4]))
            if e[4] == first_size:
                starts.append(n)
            n += 1
    runs = {}  # by the allocation that ends its template (its copies go just before it)
    for k, run in enumerate(batch_runs(starts)):
        if batches > len(run):
            r = Run(run, batches - len(run), k)
            runs[r.hi] = r
    if not runs:
        sys.exit("%s: no run of four batches or more opened by %s-byte allocations"
                 % (src, first_size))
    fresh = (top + (1 << 20)) // 512 * 512  # (new pointers, above every one of the trace)
    out, index_of, ptr, remap, n, skipped, clock = [head], {}, {}, {}, 0, 0, "0"

    def emit(fields):
        nonlocal clock
        clock = fields[1]
        out.append(",".join(fields))

    for e in events:
        alloc = e[2] == "allocate"
        if alloc and n in runs:  # a template is over: its copies go here
            r = runs[n]
            for c in range(1, r.reps + 1):  # (copy c is batch t + c)
                for a, g, ev in r.events:
                    b, i = r.of(g) or (None, None)
                    if a:
                        ptr[(r.key, c, i)] = "0x%x" % fresh
                        fresh += (int(ev[4]) + 1023) // 512 * 512
                        emit([ev[0], clock, "allocate", ptr[(r.key, c, i)], ev[4], ev[5]])
                    elif b is not None:  # (the template frees batch b: copy c, b + c)
                        emit([ev[0], clock, "free", r.instance(b + c, i, ptr), ev[4], ev[5]])
                    else:
                        skipped += 1  # (made before the run: freed once, by the template)
            # The trace's later events free batch b's allocations where they freed those of
            # batch b - reps: up to the template, each is now reps batches further on.
            for g in range(r.first, r.hi):
                b, i = r.of(g)
                if g in ptr:
                    remap[g] = r.instance(b + r.reps, i, ptr)
        if alloc:
            index_of[e[3]], ptr[n] = n, e[3]
            g = n
            n += 1
        else:
            g = index_of.pop(e[3])
        for r in runs.values():
            if r.lo <= n - 1 < r.hi:  # (the event belongs to the template batch)
                r.events.append((alloc, g, e))
        if alloc:
            emit(e)
        else:
            emit(e[:3] + [remap.pop(g, ptr[g])] + e[4:])
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d events; %d runs of batches made %d batches long%s"
          % (dst, len(out) - 1, len(runs), batches,
             "; %d frees of allocations made before their run left out of its copies"
             % skipped if skipped else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
