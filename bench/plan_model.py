"""A model of a first cut of the design docs/decisions.md A13 weighs for issue 37: compact
while the training loop's step is learnt, then follow a plan packed offline, in an arena
of its own. It is the record of why that cut fails (bench/RESULTS.md): the arena holds the
planned tensors' peak while the long-lived ones sit in pages beside it, so memory is split
in two pools neither of which can use the other's idle pages without moving them, and the
loop pays for both (ResNet-50 1.028 against 1.010 today; lstm_lm 1.28).

    python3 bench/plan_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

Online, event by event, as an allocator would see them:
1. Learning: requests go to a best-fit allocator in two address ranges (requests up to
   1 MiB in one: vramguard's placement today, within a percent on the traces), and a page
   a block needs is, while one exists, an idle page of these ranges moved there (mapped,
   no live byte on it: vramguard's pressure path made eager) rather than a new one.
2. The step: the smallest period P of the sizes asked for such that the last 2P requests
   repeat with period P, from 64 requests up, once the trace has at least 3P; it must then
   hold for P more requests (a layer's pattern repeats inside a step but breaks at the
   step's end: such a P is dropped, and only longer ones are tried). The period before the
   last one is the model step; its requests freed within the following period are planned
   (a cyclic lifetime: a gradient made in one step and freed in the next wraps around);
   those still live are long-lived and keep going to the best-fit ranges.
3. The plan packs the planned lifetimes largest first, each at the lowest offset of an
   arena where no planned lifetime overlapping it on the cycle lies (greedy by size).
4. Following the plan, from the point of the step where the fewest planned bytes are live:
   the i-th request of each period goes to its planned offset when it
   has the planned size and that range of the arena is free, else to the best-fit ranges
   (a miss). Arena pages are mapped as planned blocks first touch them, idle pages of the
   best-fit ranges moved there first (a handover, once); the best-fit ranges no longer
   move pages.
Prints per trace: peak live, the peak of mapped pages over peak live, the period and the
request at which the plan began, planned requests, misses, and page moves while learning
and after. Standard library only.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_model import each_order  # noqa: E402
from nomove_model import Range  # noqa: E402
from pytorch_alloc_model import round_size  # noqa: E402

PAGE = 2 << 20
MIB = 1 << 20


class BestFit(Range):
    """One address range (nomove_model.Range: best fit, neighbours merged), with the live
    bytes of each mapped page."""

    def __init__(self, base):
        super().__init__(base)
        self.live_on = {}  # page -> live bytes, a key per mapped page
        self.idle = set()  # mapped pages with no live byte

    def free(self, addr, size):
        self.put(addr, size)


def pages_of(addr, size):
    return range(addr // PAGE, (addr + size - 1) // PAGE + 1)


def page_bytes(addr, size):
    """(page, bytes of [addr, addr + size) on it) for each page the range touches."""
    for pg in pages_of(addr, size):
        yield pg, min(addr + size, (pg + 1) * PAGE) - max(addr, pg * PAGE)


def add_live(live_on, idle, pg, delta):
    """Page pg's live bytes change by delta; a page with none left is idle."""
    live_on[pg] += delta
    if live_on[pg]:
        idle.discard(pg)
    else:
        idle.add(pg)


def period_of(sizes, lo):
    """The smallest P >= lo such that the last 2P sizes repeat with period P, and the
    trace has at least 3P of them; 0 if none."""
    n = len(sizes)
    for p in range(lo, n // 3 + 1):
        if all(sizes[n - 1 - k] == sizes[n - 1 - k - p] for k in range(p)):
            return p
    return 0


def pack(items, p):
    """items: (size, start, end) on a cycle of length p (end > p wraps). Offsets, greedy
    by size."""
    def spans(s, e):
        return [(s, e)] if e <= p else [(s, p), (0, e - p)]

    order = sorted(range(len(items)), key=lambda i: (-items[i][0], items[i][1]))
    placed, off = [], [0] * len(items)
    for i in order:
        sz, s, e = items[i]
        mine = spans(s, e)
        busy = sorted((o, o + z) for o, z, sp in placed
                      if any(a < d and c < b for a, b in mine for c, d in sp))
        x = 0
        for lo, hi in busy:
            if lo - x >= sz:
                break
            x = max(x, hi)
        off[i] = x
        placed.append((x, sz, mine))
    return off


def spans(s, e, p):
    """A lifetime [s, e) on a cycle of length p as one or two spans (e > p wraps)."""
    return [(s, e)] if e <= p else [(s, p), (0, e - p)]


def live_bytes(items, p):
    """The planned bytes live at each position of the cycle."""
    ev = [0] * (p + 1)
    for sz, s, e in items:
        for a, b in spans(s, e, p):
            ev[a] += sz
            ev[b] -= sz
    for i in range(1, p):
        ev[i] += ev[i - 1]
    return ev[:p]


def low_point(items, p):
    """The position of the cycle where the fewest planned bytes are live."""
    live = live_bytes(items, p)
    return min(range(p), key=lambda i: (live[i], i)) if p else 0


def run(ops, check_every=64):
    ranges = [BestFit(0), BestFit(1 << 55)]  # general, small
    arena_base = 1 << 56
    arena = BestFit(arena_base)  # (its pages only: live bytes per page, idle pages)
    st = {"mapped": 0, "moves_learning": 0, "moves_after": 0}
    live, peak = {}, 0
    arena_busy = []  # sorted (start, end) of live planned blocks
    window_misses = 0  # misses in the plan's current period
    sizes, hist = [], []  # rounded size per request; [size, free_at] per request
    plan, period, pos, began, nplanned, misses = None, 0, 0, 0, 0, 0
    cand, cand_at, min_p = 0, 0, 64  # a period waiting to be confirmed
    waiting = None  # the plan's first position, until the loop reaches it

    def steal(moves_key, into=None):
        for rng in ranges + [arena]:
            if rng is into:
                continue
            if rng.idle:
                pg = rng.idle.pop()
                del rng.live_on[pg]
                st["mapped"] -= 1
                st[moves_key] += 1
                return

    def touch(rng, addr, size, sign):
        for pg, nbytes in page_bytes(addr, size):
            if pg not in rng.live_on:
                if plan is None or waiting is not None:
                    steal("moves_learning")
                elif rng is arena:
                    steal("moves_after", arena)
                rng.live_on[pg] = 0
                st["mapped"] += 1
            add_live(rng.live_on, rng.idle, pg, sign * nbytes)

    for alloc, life, size, _ in ops:
        if not alloc:
            kind, addr, sz, idx = live.pop(life)
            hist[idx][1] = len(sizes)
            if kind == "arena":
                del arena_busy[bisect.bisect_left(arena_busy, (addr, addr + sz))]
                touch(arena, addr, sz, -1)
            else:
                touch(ranges[kind], addr, sz, -1)
                ranges[kind].free(addr, sz)
            continue
        size = round_size(size)
        idx = len(sizes)
        sizes.append(size)
        hist.append([size, None])
        placed = False
        if plan is not None and waiting is not None:
            if pos == waiting:
                waiting = None
            else:
                pos = (pos + 1) % period
        if plan is not None and waiting is None:
            want = plan[pos]
            pos = (pos + 1) % period
            if want and want[0] == size:
                a = arena_base + want[1]
                k = bisect.bisect_left(arena_busy, (a, a + size))
                if (k == len(arena_busy) or arena_busy[k][0] >= a + size) and \
                        (k == 0 or arena_busy[k - 1][1] <= a):
                    touch(arena, a, size, 1)
                    arena_busy.insert(k, (a, a + size))
                    live[life] = ("arena", a, size, idx)
                    nplanned += 1
                    placed = True
                else:
                    misses += 1
                    window_misses += 1
            elif want:
                misses += 1
                window_misses += 1
            if pos == 0:  # a period followed: more than 5% missed, and it was no step
                if window_misses * 20 > period:
                    plan, min_p = None, period + 1
                window_misses = 0
        if not placed:
            kind = 1 if size <= MIB else 0
            addr = ranges[kind].alloc(size)
            touch(ranges[kind], addr, size, 1)
            live[life] = (kind, addr, size, idx)
        peak = max(peak, st["mapped"])
        if plan is not None or (period and min_p <= period):
            continue
        if cand:  # confirming: the period must hold for cand more requests
            if sizes[idx] != sizes[idx - cand]:
                min_p, cand = cand + 1, 0
            elif idx + 1 - cand_at >= cand:
                n, p = len(sizes), cand
                base = n - 3 * p  # the model step: [base, base + p), its frees known
                items, where = [], []
                for j in range(base, base + p):
                    sz, freed = hist[j]
                    if freed is not None and freed - base <= 2 * p:
                        items.append((sz, j - base, max(freed - base, j - base + 1)))
                        where.append(j - base)
                plan = [None] * p
                for (sz, _, _), w, off in zip(items, where, pack(items, p)):
                    plan[w] = (sz, off)
                period, pos, began, window_misses, cand = p, (n - base) % p, n, 0, 0
                waiting = low_point(items, p)  # begin where the fewest planned bytes live
        elif idx % check_every == 0:
            p = period_of(sizes, min_p)
            if p:
                cand, cand_at = p, idx + 1
    return peak * PAGE, period, began, nplanned, misses, st["moves_learning"], st["moves_after"]


def main(argv):
    for path, seed, o, lv in each_order(argv, "plan_model.py"):
        pk, p, began, npl, miss, ml, ma = run(o)
        print("%s seed %d: peak live %d, plan model %.4f (period %d from request %d of %d, "
              "planned %d, misses %d, page moves %d learning + %d after)"
              % (path, seed, lv, pk / lv, p, began, sum(1 for x in o if x[0]), npl, miss,
                 ml, ma), flush=True)

if __name__ == "__main__":
    main(sys.argv[1:])
