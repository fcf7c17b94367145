"""Idle pages moved only when a request would map new ones, with placement that prefers
free space already mapped (A13): does moving converge?

    [SLACK=0.02] [K=16] python3 bench/mapped_first_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

prints, for each trace, peak mapped 2 MiB pages over peak live bytes, the pages moved
over the whole trace and in its last quarter, for two placements in one address space
(requests rounded to 512 bytes, those up to 1 MiB in a range of their own, A6):
- "best fit": the smallest free range that holds the request (vramguard's placement);
- "mapped first": among the smallest K free ranges that hold it (K=16 unless set), the
  one (and the end of it) whose pages are mapped already, the most of them; then the
  smaller range.
In both, a request that needs pages not mapped takes idle ones first (mapped, with no
live byte: unmapped there and mapped here, one move each, A1 as bench/experiments'
a13-compacting patch does it) and maps new ones only when none is idle — or, with
SLACK=s, while the pages mapped stay within (1 + s) x the peak live bytes so far (issue
37's bound is s = 0.02): pages are moved only past that. The model does
not wait for streams: it counts the moves a design would have to make, not their cost.
Standard library only.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nomove_model import TOP, Range  # noqa: E402
from page_model import PAGE, each_order  # noqa: E402
from pytorch_alloc_model import round_size  # noqa: E402

SMALL = 1 << 20


def run(ops, mapped_first, k=16, slack=0.0):
    """slack: new pages are mapped, not moved, while the pages mapped stay within
    (1 + slack) x the peak live bytes so far (issue 37's bound: 0.02)."""
    ranges = (Range(0), Range(1 << 55))
    live_on = {}  # page (range, number) -> live bytes, for every mapped page
    idle = set()  # mapped pages with no live byte
    live, peak, moves, late_moves = {}, 0, 0, 0
    cur_live, peak_live = 0, 0
    late = len(ops) * 3 // 4

    def pages(r, addr, size):
        return [(r, p) for p in range(addr // PAGE, (addr + size - 1) // PAGE + 1)]

    def unmapped(r, addr, size):
        return sum(1 for pg in pages(r, addr, size) if pg not in live_on)

    for n, (alloc, life, size, _) in enumerate(ops):
        if not alloc:
            r, addr, size = live.pop(life)
            cur_live -= size
            ranges[r].put(addr, size)
            for pg in pages(r, addr, size):
                lo, hi = max(addr, pg[1] * PAGE), min(addr + size, (pg[1] + 1) * PAGE)
                live_on[pg] -= hi - lo
                if not live_on[pg]:
                    idle.add(pg)
            continue
        size = round_size(size)
        r = 1 if size <= SMALL else 0
        rng = ranges[r]
        i = bisect.bisect_left(rng.holes, (size, -1))
        hs, hole = rng.holes[i]
        addr = hole
        if mapped_first:
            best = None
            for hs2, h2 in rng.holes[i:i + k]:
                for a in (h2, h2 + hs2 - size) if hs2 != TOP else (h2,):
                    key = (unmapped(r, a, size), hs2, a)
                    if best is None or key < best[0]:
                        best = (key, hs2, h2, a)
            _, hs, hole, addr = best
        rng.carve_at(hole, hs, addr, size)
        live[life] = (r, addr, size)
        cur_live += size
        peak_live = max(peak_live, cur_live)
        room = int((1 + slack) * peak_live) // PAGE  # pages that may be mapped
        mine = pages(r, addr, size)
        for pg in mine:
            idle.discard(pg)
        for pg in mine:
            if pg not in live_on:
                if idle and len(live_on) >= room:  # an idle page moves here
                    del live_on[idle.pop()]
                    moves += 1
                    late_moves += n >= late
                live_on[pg] = 0
            lo, hi = max(addr, pg[1] * PAGE), min(addr + size, (pg[1] + 1) * PAGE)
            live_on[pg] += hi - lo
        peak = max(peak, len(live_on))
    return peak * PAGE, moves, late_moves


def main(argv):
    slack = float(os.environ.get("SLACK", "0"))
    k = int(os.environ.get("K", "16"))
    for path, seed, o, lv in each_order(argv, "mapped_first_model.py"):
        cells = []
        for name, mf in (("best fit", False), ("mapped first", True)):
            pk, mv, late = run(o, mf, k=k, slack=slack)
            cells.append("%s %.4f (%d moves, %d in the last quarter)" % (name, pk / lv, mv, late))
        print("%s seed %d: %s" % (os.path.basename(path), seed, "; ".join(cells)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
