"""Long-lived blocks kept apart by the lifetime seen one step earlier (A13's next step).

    python3 bench/lifetime_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

prints, for each trace, the peak of mapped 2 MiB pages over peak live bytes for best fit
with no page ever moved (bench/nomove_model.py's "best, 1 MiB": vramguard's placement
within a percent), and for the same with requests predicted to live long in an address
range of their own. The prediction is made when the request comes, from what the program
did before it:
- "first": the requests made before the program's first free (its parameters, and
  whatever it sets up before it starts working) are long-lived;
- "slot": once the requests' sizes repeat with a period P (a training step; found as
  bench/plan_model.py finds it, checked every 64 requests), request n is long-lived if
  request n - P, the same request one step earlier, lived at least P / 2 requests (or is
  still live);
- "first+slot": both.
Requests up to 1 MiB keep their own range (A6) in every variant. Standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nomove_model import Range  # noqa: E402
from page_model import PAGE, each_order  # noqa: E402
from plan_model import period_of  # noqa: E402
from pytorch_alloc_model import round_size  # noqa: E402

SMALL = 1 << 20
CHECK_EVERY, MIN_PERIOD = 64, 64


def peak_mapped(ops, first=False, slot=False, long_frac=0.5):
    """Peak bytes of pages ever touched (no page is ever unmapped: the model of a
    placement that never moves one)."""
    ranges = {"general": Range(0), "small": Range(1 << 55), "long": Range(1 << 54)}
    pages, live = set(), {}
    sizes, born, lifetime = [], [], []  # per request: rounded size, number, requests lived
    period, seen_free, n_long = 0, False, 0
    for alloc, life, size, _ in ops:
        if not alloc:
            rng, addr, size, n = live.pop(life)
            ranges[rng].put(addr, size)
            lifetime[n] = len(sizes) - n
            seen_free = True
            continue
        n = len(sizes)
        size = round_size(size)
        sizes.append(size)
        lifetime.append(None)
        if slot and n % CHECK_EVERY == 0 and n >= 3 * MIN_PERIOD:
            period = period_of(sizes, MIN_PERIOD) or period
        is_long = first and not seen_free
        if slot and period and n >= period and sizes[n - period] == size:
            was = lifetime[n - period]
            is_long = is_long or (was if was is not None else period) >= long_frac * period
        name = "small" if size <= SMALL else "long" if is_long else "general"
        n_long += name == "long"
        addr = ranges[name].alloc(size)
        pages.update((name, p) for p in range(addr // PAGE, (addr + size - 1) // PAGE + 1))
        live[life] = (name, addr, size, n)
    return len(pages) * PAGE, n_long, period


VARIANTS = [("best fit", False, False), ("first", True, False), ("slot", False, True),
            ("first+slot", True, True)]


def main(argv):
    for path, seed, o, lv in each_order(argv, "lifetime_model.py"):
        cells = []
        for name, first, slot in VARIANTS:
            pk, n_long, period = peak_mapped(o, first, slot)
            cells.append("%s %.4f (%d long)" % (name, pk / lv, n_long))
        print("%s seed %d: %s" % (os.path.basename(path), seed, "; ".join(cells)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
