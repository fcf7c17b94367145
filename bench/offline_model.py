"""What an allocator that knew the future could reach without moving a page.

    python3 bench/offline_model.py TRACE.csv ...

prints, for each trace (RMM CSV, as in bench/traces, plain or gzipped), its peak live
bytes and the address space a clairvoyant, non-moving placement needs: every allocation's
lifetime is known in advance, and the allocations are placed largest first, each at the
lowest offset where no allocation of overlapping lifetime lies ("greedy by size", the
heuristic TFLite and XLA use to plan a model's buffers; it is within a few percent of the
optimum on such workloads). Requests are rounded to 512 bytes and the result to 2 MiB
pages. An online allocator cannot do better than an optimal plan; where even this plan
is above issue 37's bound, no placement without moving pages can meet it.

Lines read: "TRACE: peak live L bytes, planned P bytes (P/L)". Standard library only.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_model import peak_live  # noqa: E402
from pytorch_alloc_model import load, round_size  # noqa: E402

PAGE = 2 << 20
BUCKET = 256  # events per bucket of the time index


def plan(ops):
    """Greedy by size: the address space the plan needs."""
    start, end, size = {}, {}, {}
    for i, (alloc, life, sz, _) in enumerate(ops):
        if alloc:
            start[life], size[life] = i, round_size(sz)
        else:
            end[life] = i
    n = len(ops)
    for life in start:
        end.setdefault(life, n)
    buckets = [[] for _ in range(n // BUCKET + 1)]  # placed (offset, size, start, end)
    top = 0
    for life in sorted(start, key=lambda x: (-size[x], start[x])):
        s, e, sz = start[life], end[life], size[life]
        seen, busy = set(), []
        for b in range(s // BUCKET, e // BUCKET + 1):
            for p in buckets[b]:
                if id(p) not in seen and p[2] < e and p[3] > s:
                    seen.add(id(p))
                    busy.append((p[0], p[0] + p[1]))
        busy.sort()
        off = 0
        for lo, hi in busy:  # the lowest gap that holds sz
            if lo - off >= sz:
                break
            off = max(off, hi)
        p = (off, sz, s, e)
        for b in range(s // BUCKET, e // BUCKET + 1):
            buckets[b].append(p)
        top = max(top, off + sz)
    return (top + PAGE - 1) // PAGE * PAGE


def main(argv):
    if not argv or any(a.startswith("-") for a in argv):
        sys.exit("usage: offline_model.py TRACE.csv ...")
    for path in argv:
        ops = load(path)
        live, need = peak_live(ops), plan(ops)
        print("%s: peak live %d bytes, planned %d bytes (%.4f)" % (path, live, need, need / live),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
