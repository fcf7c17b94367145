"""A training trace made long: its events up to a step boundary, then its last two steps
played again REPLICAS times, so that most of it is the steady state of the loop.

    python3 bench/long_trace.py [--from=N] TRACE.csv[.gz] OUT.csv STEP_ALLOCATIONS REPLICAS

STEP_ALLOCATIONS is the number of allocations in one step (`vramguard replay --plan=learn
--json` prints it as step_requests). The two steps copied are the last whole ones but
one, or with --from=N the two starting at allocation N (a trace of few steps, such as
gpt_train_accum's four optimizer steps: the two after the first, whose optimizer made
its state, `--from=10600`); each copy gets new pointers, and a free in a copy frees the
allocation made the same number of allocations later than the original freed one (two
steps on), so lifetimes that cross a step boundary are kept. Frees of allocations older
than two steps (long-lived tensors), or made before the copied steps with a size unlike
the allocation two steps on, are not copied. `vramguard replay OUT.csv --plan=on` then
reports, as p50_ns_last_quarter, the median host time of the steady state
(bench/RESULTS.md).
"""
import gzip
import sys


def main(argv):
    start_at = None
    if argv and argv[0].startswith("--from="):
        start_at = int(argv[0][len("--from="):])
        argv = argv[1:]
    if len(argv) != 4:
        sys.exit(__doc__)
    src, dst, per, reps = argv[0], argv[1], int(argv[2]), int(argv[3])
    with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
        lines = f.read().splitlines()
    head, events = lines[0], [line.split(",") for line in lines[1:]]
    index_of, ptr_of, size_of, evs, n = {}, {}, {}, [], 0
    for e in events:  # each event with the number of the allocation it makes or frees
        if e[2] == "allocate":
            index_of[e[3]], ptr_of[n], size_of[n] = n, e[3], e[4]
            evs.append((True, n, e))
            n += 1
        else:
            evs.append((False, index_of.pop(e[3]), e))
    span = 2 * per
    first = (n // per - 3) * per if start_at is None else start_at
    if first + span >= n or (first < span if start_at is None else first < 0):
        sys.exit("%s: too short for steps of %d allocations" % (src, per))
    start = next(i for i, (a, g, _) in enumerate(evs) if a and g == first)
    end = next(i for i, (a, g, _) in enumerate(evs) if a and g == first + span)
    out = [head] + [",".join(e) for _, _, e in evs[:end]]
    live = {g for a, g, _ in evs[:end] if a} - {g for a, g, _ in evs[:end] if not a}
    for j in range(1, reps + 1):
        for alloc, g, e in evs[start:end]:
            gj = g + j * span
            if alloc:
                ptr_of[gj] = "0x%x" % (0x100000000000 + gj * 512)
                live.add(gj)
                out.append(",".join([e[0], e[1], "allocate", ptr_of[gj], e[4], e[5]]))
            elif (g >= first - span and gj in live and
                  (g >= first or size_of[g] == size_of[g + span])):
                live.discard(gj)
                out.append(",".join([e[0], e[1], "free", ptr_of[gj], e[4], e[5]]))
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")
    print("%s: %d events (%s, %d events, %d times more)"
          % (dst, len(out) - 1, "the last two steps" if start_at is None else
             "two steps from allocation %d" % first, end - start, reps))


if __name__ == "__main__":
    main(sys.argv[1:])
