"""The page-granular best-fit bound for an allocation trace.

    python3 bench/page_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

prints, for each trace (RMM CSV, as in bench/traces), its peak live bytes (the largest
sum of the sizes asked for that are live at once) and the peak of 2 MiB pages a simple
model of a paged allocator keeps mapped: one address space without end; requests rounded
to 512 bytes and placed by best fit (the smallest free range that holds them, the lowest
address among equals), free neighbours merged; a page mapped while any live byte lies on
it. It costs nothing to map or unmap a page here, so the model moves pages every time a
real allocator would hesitate to: it is a bound to approach, not a design (issue 37).

Lines read: "TRACE seed S: peak live L bytes, page model P bytes (P/L)". --perturb
delays frees as `vramguard replay --perturb` does. Standard library only.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_alloc_model import load, parse_args, perturb, round_size  # noqa: E402

PAGE = 2 << 20
TOP = 1 << 62  # the unbounded free range above everything placed so far


def peak_live(ops):
    live, cur, peak = {}, 0, 0
    for alloc, life, size, _ in ops:
        if alloc:
            live[life] = size
            cur += size
            peak = max(peak, cur)
        else:
            cur -= live.pop(life)
    return peak


def each_order(argv, script):
    """For `script [--perturb=SEED[,SEED...]] TRACE.csv ...`: (path, seed, ops, peak live)
    for each trace and order (seed 0: the trace's own)."""
    seeds, paths, _ = parse_args(argv, "usage: %s [--perturb=SEED[,SEED...]] TRACE.csv ..."
                                 % script)
    for path in paths:
        ops = load(path)
        for seed in seeds:
            o = perturb(ops, seed) if seed else ops
            yield path, seed, o, peak_live(o)


def page_model(ops):
    """Peak bytes of mapped pages under best fit in one address space."""
    holes = [(TOP, 0)]             # free ranges as sorted (size, addr)
    by_addr = {0: TOP}             # free range start -> size
    by_end = {TOP: 0}              # free range end -> start
    pages, mapped, peak = {}, 0, 0  # page -> live bytes on it
    live = {}

    def add_hole(addr, size):
        bisect.insort(holes, (size, addr))
        by_addr[addr] = size
        by_end[addr + size] = addr

    def drop_hole(addr):
        size = by_addr.pop(addr)
        del by_end[addr + size]
        del holes[bisect.bisect_left(holes, (size, addr))]
        return size

    def touch(addr, size, sign):
        nonlocal mapped
        end, p = addr + size, addr // PAGE
        while p * PAGE < end:
            lo, hi = max(addr, p * PAGE), min(end, (p + 1) * PAGE)
            before = pages.get(p, 0)
            after = before + sign * (hi - lo)
            if after:
                pages[p] = after
            else:
                pages.pop(p, None)
            mapped += (after > 0) - (before > 0)
            p += 1

    for alloc, life, size, _ in ops:
        if alloc:
            size = round_size(size)
            hsize, addr = holes[bisect.bisect_left(holes, (size, -1))]
            drop_hole(addr)
            if hsize > size:
                add_hole(addr + size, hsize - size)
            live[life] = (addr, size)
            touch(addr, size, 1)
            peak = max(peak, mapped)
        else:
            addr, size = live.pop(life)
            touch(addr, size, -1)
            if addr in by_end:              # merge with the free range below
                lo = by_end[addr]
                size += drop_hole(lo)
                addr = lo
            if addr + size in by_addr:      # and with the one above
                size += drop_hole(addr + size)
            add_hole(addr, size)
    return peak * PAGE


def main(argv):
    for path, seed, o, live in each_order(argv, "page_model.py"):
        pm = page_model(o)
        print("%s seed %d: peak live %d bytes, page model %d bytes (%.4f)"
              % (path, seed, live, pm, pm / live))


if __name__ == "__main__":
    main(sys.argv[1:])
