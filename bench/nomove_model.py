"""What a placement that never moves a page reaches: best fit and its variants (A13).

    python3 bench/nomove_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

prints, for each trace, the peak of mapped 2 MiB pages over peak live bytes for a model of
vramguard's placement — requests rounded to 512 bytes, those up to SMALL in an address
range of their own (A6), best fit (the smallest free range, the lowest address among
equals), free neighbours merged, a page mapped when a block first touches it and kept —
with SMALL = 1 MiB (vramguard's default), 2 MiB, 4 MiB and 0 (one range), and three other
placements with SMALL = 1 MiB: "high" (best fit, the block carved from the top of the
free range), "first" (the lowest-addressed free range that holds it) and "params" (best
fit, with the requests of a size that an allocation made before the first free had — a
parameter's, so its gradient's and optimizer state's — in a range of their own: the
long-lived blocks kept together from their allocation on). docs/decisions.md A13 quotes
these figures: the first column gives vramguard's own within a percent. Standard library
only; seconds for every trace.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_model import PAGE, each_order  # noqa: E402
from pytorch_alloc_model import round_size  # noqa: E402

TOP = 1 << 50  # the unbounded free range above everything placed so far


class Range:
    """Free ranges of one address range, by (size, address), with their neighbours."""

    def __init__(self, base):
        self.holes, self.by_addr, self.by_end = [(TOP, base)], {base: TOP}, {base + TOP: base}

    def take(self, size, addr):
        del self.holes[bisect.bisect_left(self.holes, (size, addr))]
        del self.by_addr[addr]
        del self.by_end[addr + size]

    def alloc(self, size):
        """Best fit: the smallest hole that holds size, the lowest among equals."""
        hs, addr = self.holes[bisect.bisect_left(self.holes, (size, -1))]
        return self.carve_at(addr, hs, addr, size)

    def carve_at(self, hole, hs, addr, size):
        """Take [addr, addr + size) from the free range (hs bytes at hole) that holds it;
        what lies on either side stays free. Returns addr."""
        self.take(hs, hole)
        if addr > hole:
            self.put(hole, addr - hole)
        if hole + hs > addr + size:
            self.put(addr + size, hole + hs - addr - size)
        return addr

    def put(self, addr, size):
        if addr in self.by_end:
            lo = self.by_end[addr]
            s = self.by_addr[lo]
            self.take(s, lo)
            addr, size = lo, size + s
        if addr + size in self.by_addr:
            s = self.by_addr[addr + size]
            self.take(s, addr + size)
            size += s
        bisect.insort(self.holes, (size, addr))
        self.by_addr[addr] = size
        self.by_end[addr + size] = addr


def peak_mapped(ops, small_max, placement="best"):
    """Peak bytes of pages ever touched, for one placement ("params": best fit, and the
    requests of a size some allocation made before the first free had, as a parameter's
    gradient and optimizer state have, in a range of their own)."""
    first_free = next((i for i, op in enumerate(ops) if not op[0]), len(ops))
    params = {round_size(op[2]) for op in ops[:first_free] if op[0]}
    ranges = (Range(0), Range(1 << 55), Range(1 << 54))
    pages, live = set(), {}
    for alloc, life, size, _ in ops:
        if not alloc:
            rng, addr, size = live.pop(life)
            rng.put(addr, size)
            continue
        size = round_size(size)
        rng = ranges[2 if placement == "params" and size in params
                     else 1 if small_max and size <= small_max else 0]
        i = bisect.bisect_left(rng.holes, (size, -1))
        hs, hole = rng.holes[i]
        if placement == "first":
            hole, hs = min((a, s) for s, a in rng.holes[i:])
        addr = hole + hs - size if placement == "high" and hs != TOP else hole
        rng.take(hs, hole)
        if addr > hole:
            rng.put(hole, addr - hole)
        if hole + hs > addr + size:
            rng.put(addr + size, hole + hs - addr - size)
        pages.update((id(rng), p) for p in range(addr // PAGE, (addr + size - 1) // PAGE + 1))
        live[life] = (rng, addr, size)
    return len(pages) * PAGE


VARIANTS = [("best, 1 MiB", 1 << 20, "best"), ("best, 2 MiB", 2 << 20, "best"),
            ("best, 4 MiB", 4 << 20, "best"), ("best, one range", 0, "best"),
            ("high, 1 MiB", 1 << 20, "high"), ("first, 1 MiB", 1 << 20, "first"),
            ("params, 1 MiB", 1 << 20, "params")]


def main(argv):
    for path, seed, o, lv in each_order(argv, "nomove_model.py"):
        cells = ["%s %.4f" % (name, peak_mapped(o, sm, pl) / lv) for name, sm, pl in VARIANTS]
        print("%s seed %d: %s" % (path, seed, "; ".join(cells)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
