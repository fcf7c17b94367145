"""A model of the global step plan docs/decisions.md A13 calls for (issue 37), and the
record of why its first versions do not meet the bound (bench/RESULTS.md): compaction
while the step is learnt, then each step placed by a plan packed around the blocks live at
its start, in the one address space, and no page moved after that but those no plan uses.

    [KNOB=V ...] python3 bench/fixpoint_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

Online, event by event, as an allocator would see them:
1. Best fit in two address ranges (requests up to 1 MiB in one: vramguard's placement
   today), every page a block needs taken from an idle page while one exists (moved: the
   compaction of bench/experiments/a13-compacting.patch).
2. The step: the period of the sizes asked for, found and confirmed as bench/plan_model.py
   finds it (a layer's period that breaks at the step's end is dropped).
3. At the start of each step once it is known (request n, period P): every block live now
   is an obstacle at its address until its expected free (the free of the same request one
   period earlier, plus P; never, if that one was not freed); the P requests to come are
   expected with the sizes and lifetimes of the same requests one period back (two, if
   that one still lives); they are packed largest first (greedy by size, as
   bench/offline_model.py, but around what is there), each where it adds the fewest pages
   to those the obstacles and the blocks packed so far touch, then lowest (PAGES=1; each
   gap's bottom and top, and above everything, are tried), or at the lowest address where
   no obstacle or packed block overlapping it in time lies (PAGES=0).
4. The k-th request of the step goes to its planned address when it has the planned size
   and that range is free; else, as every request the plan has no lifetime for, to best
   fit in a third range, out of the plan's way. A step with more than 5% misses drops the
   plan; the period is relearnt.
5. Pages: while learning, any idle page is moved before a new one is mapped; once planning,
   only the idle pages no plan uses (above every plan's top in the general range, and
   those of the other ranges): a one-way move.
Other knobs: STICKY=K, a request keeps the address one of the K plans before gave it when
it is free; CYCLIC=1, one plan instead of one a step: the lifetimes on the cycle (a block
made in one step and freed in the next wraps), packed around the blocks never freed, and
kept.
Prints per trace: peak live, the peak of mapped pages over peak live, when the plan began,
requests planned and missed, and page moves: before the plan, in its first two steps, and
in the last five steps of the trace (what a long run keeps paying); then the peak in each
phase. Standard library only.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_model import each_order  # noqa: E402
from nomove_model import Range  # noqa: E402
from plan_model import add_live, page_bytes, period_of  # noqa: E402
from pytorch_alloc_model import round_size  # noqa: E402

PAGE = 2 << 20
MIB = 1 << 20
INF = float("inf")


class Space(Range):
    """nomove_model.Range (best fit, neighbours merged) that can also carve a given range,
    with the live bytes of each mapped page."""

    def __init__(self, base):
        self.starts = []
        super().__init__(base)
        self.starts = sorted(self.by_addr)
        self.live_on, self.idle = {}, set()

    def take(self, size, addr):
        super().take(size, addr)
        del self.starts[bisect.bisect_left(self.starts, addr)]

    def put(self, addr, size):
        lo = self.by_end.get(addr, addr)  # (the hole it merges with below, if any)
        super().put(addr, size)
        bisect.insort(self.starts, lo)

    def carve(self, addr, size):
        """Takes [addr, addr + size) if it lies in one free hole; False if not."""
        k = bisect.bisect_right(self.starts, addr) - 1
        if k < 0:
            return False
        h = self.starts[k]
        hs = self.by_addr[h]
        if h + hs < addr + size:
            return False
        self.carve_at(h, hs, addr, size)
        return True


# The knobs (the module's docstring): environment variables.
PAGES = int(os.environ.get("PAGES", "1"))
CYCLIC = int(os.environ.get("CYCLIC", "0"))
STICKY = int(os.environ.get("STICKY", "0"))
BUCKETS = 32  # time buckets of a step, to find the blocks a lifetime overlaps


def lowest_gap(busy, sz):
    """The lowest address of a gap between busy ranges (sorted) that holds sz."""
    x = 0
    for lo, hi in busy:
        if lo - x >= sz:
            break
        x = max(x, hi)
    return x


def best_place(busy, sz, union):
    """Where sz adds the fewest pages to `union`, then lowest: each gap's bottom and top,
    and above everything, page-aligned."""
    def cost(x):
        return sum(1 for pg in range(x // PAGE, (x + sz - 1) // PAGE + 1) if pg not in union)

    best, x = None, 0
    for lo, hi in busy:
        if lo - x >= sz:
            for c in (x, lo - sz):
                k = (cost(c), c)
                if best is None or k < best:
                    best = k
        x = max(x, hi)
    top = (x + PAGE - 1) // PAGE * PAGE
    k = (cost(top), top)
    if best is None or k < best:
        best = k
    return best[1]


def cycle_items(hist, n, p):
    """The lifetimes of the step two periods before request n, on a cycle of p (a block
    freed in the next step ends past p), with each one's position in the step; hist holds
    [size, free_at] per request."""
    base = n - 2 * p
    items, where = [], []
    for k in range(p):
        sz, freed = hist[base + k]
        if freed is not None and freed - base <= 2 * p:
            items.append((sz, k, max(freed - base, k + 1)))
            where.append(k)
    return items, where


def fits(busy, x, sz):
    """Whether [x, x + sz) overlaps none of the busy ranges (sorted by start)."""
    k = bisect.bisect_left(busy, (x + sz, -1))  # (those after k start at or above its end)
    return all(hi <= x for _, hi in busy[:k])


def pack(obstacles, items, t0, span, prefer=()):
    """Greedy by size around obstacles. obstacles: (addr, size, start, end); items: (size,
    start, end). Times in requests, from t0 over `span`. Addresses of the items."""
    width = max(1, span // BUCKETS)

    def bucket_range(s, e):
        lo = max(0, int((s - t0) // width))
        hi = BUCKETS + 1 if e == INF else min(BUCKETS + 1, int((e - t0) // width))
        return range(lo, hi + 1)

    buckets = [[] for _ in range(BUCKETS + 2)]
    union = set()  # pages the obstacles and the placed items touch
    for o in obstacles:
        union.update(range(o[0] // PAGE, (o[0] + o[1] - 1) // PAGE + 1))
        for b in bucket_range(o[2], o[3]):
            buckets[b].append(o)
    out = [0] * len(items)
    for i in sorted(range(len(items)), key=lambda i: (-items[i][0], items[i][1])):
        sz, s, e = items[i]
        seen, busy = set(), []
        for b in bucket_range(s, e):
            for o in buckets[b]:
                if id(o) not in seen and o[2] < e and o[3] > s:
                    seen.add(id(o))
                    busy.append((o[0], o[0] + o[1]))
        busy.sort()
        x = None
        for p in prefer:  # an address an earlier plan gave this request, if free now
            if p[i] is not None and fits(busy, p[i], sz):
                x = p[i]
                break
        if x is None:
            x = best_place(busy, sz, union) if PAGES else lowest_gap(busy, sz)
        union.update(range(x // PAGE, (x + sz - 1) // PAGE + 1))
        out[i] = x
        o = (x, sz, s, e)
        for b in bucket_range(s, e):
            buckets[b].append(o)
    return out


def run(ops, check_every=64):
    spaces = [Space(0), Space(1 << 55), Space(1 << 54)]  # general, small (up to 1 MiB), spill
    st = {"mapped": 0, "moves": 0}
    live = {}
    sizes, hist = [], []  # per request: rounded size; [size, free_at (requests before it)]
    plan, period, began, planned, misses, window_misses = None, 0, 0, 0, 0, 0
    cand, cand_at, min_p = 0, 0, 64
    moves_at = []  # moves at each step's start, once planning
    footprint = [0]  # the highest address any plan used
    history = []  # the plans made, latest last
    peaks = [0, 0, 0]  # peak mapped pages: before the plan, its first two steps, after

    def spare():
        """An idle page to move: any while learning; once planning, one the plans never
        use (above every plan's top in the general range, or in the small range)."""
        if plan is None:
            for other in spaces:
                if other.idle:
                    return other, next(iter(other.idle))
            return None
        for pg in spaces[0].idle:
            if pg * PAGE >= footprint[0]:
                return spaces[0], pg
        for other in spaces[1:]:
            if other.idle:
                return other, next(iter(other.idle))
        return None

    def touch(sp, addr, size, sign):
        for pg, nbytes in page_bytes(addr, size):
            if pg not in sp.live_on:
                gone = spare()
                if gone is not None:  # an idle page moved here
                    other, gone = gone
                    other.idle.discard(gone)
                    del other.live_on[gone]
                    st["mapped"] -= 1
                    st["moves"] += 1
                sp.live_on[pg] = 0
                st["mapped"] += 1
            add_live(sp.live_on, sp.idle, pg, sign * nbytes)

    def make_cyclic_plan(n, p):
        """One plan for every step from n on: the lifetimes of the step two periods back,
        on the cycle, packed around the blocks that live on (never freed in the model)."""
        obstacles = []
        for kind, addr, sz, idx in live.values():
            prev = idx - p
            if kind == 0 and not (prev >= 0 and hist[prev][0] == sz and
                                  hist[prev][1] is not None):
                obstacles.append((addr, sz))
        items, where = cycle_items(hist, n, p)
        union = set()
        for a, z in obstacles:
            union.update(range(a // PAGE, (a + z - 1) // PAGE + 1))

        def spans(s0, e0):
            return [(s0, e0)] if e0 <= p else [(s0, p), (0, e0 - p)]

        placed = []
        out = [None] * p
        for j in sorted(range(len(items)), key=lambda j: (-items[j][0], items[j][1])):
            sz, s0, e0 = items[j]
            mine = spans(s0, e0)
            busy = sorted([(a, a + z) for a, z in obstacles] +
                          [(o, o + z) for o, z, sp in placed
                           if any(x < d and c < y for x, y in mine for c, d in sp)])
            x = best_place(busy, sz, union) if PAGES else lowest_gap(busy, sz)
            union.update(range(x // PAGE, (x + sz - 1) // PAGE + 1))
            placed.append((x, sz, mine))
            out[where[j]] = (sz, x)
            footprint[0] = max(footprint[0], x + sz)
        # (phase: the plan's step starts where the model step did, n - 2p: n is 2p later)
        return out

    def make_plan(n, p):
        """The plan of requests [n, n + p): (size, address) for each, or None."""
        obstacles = []
        for kind, addr, sz, idx in live.values():
            if kind != 0:
                continue
            end = INF
            prev = idx - p
            if prev >= 0 and hist[prev][0] == sz and hist[prev][1] is not None and \
                    hist[prev][1] + p > n:
                end = hist[prev][1] + p
            obstacles.append((addr, sz, n - 1, end))
        items, where = [], []
        for k in range(p):
            for back in (1, 2):  # the same request one period back, else two
                m = n - back * p + k
                if m >= 0 and hist[m][1] is not None:
                    items.append((hist[m][0], n + k, max(hist[m][1] + back * p, n + k + 1)))
                    where.append(k)
                    break
        out = [None] * p
        olds = [o for o in history[len(history) - STICKY:][::-1] if len(o) == p]
        prefer = [[old[k][1] if old[k] and old[k][0] == items[j][0] else None
                   for j, k in enumerate(where)] for old in olds]
        for (sz, _, _), k, addr in zip(items, where, pack(obstacles, items, n, p, prefer)):
            out[k] = (sz, addr)
            footprint[0] = max(footprint[0], addr + sz)
        history.append(out)
        return out

    for alloc, life, size, _ in ops:
        if not alloc:
            kind, addr, sz, idx = live.pop(life)
            hist[idx][1] = len(sizes)
            touch(spaces[kind], addr, sz, -1)
            spaces[kind].put(addr, sz)
            continue
        size = round_size(size)
        n = len(sizes)
        if plan is not None and (n - began) % period == 0 and n > began:
            if window_misses * 20 > period and (not CYCLIC or n > began + period):
                plan, min_p = None, period + 1  # no step after all: relearn
            else:
                moves_at.append(st["moves"])
                if not CYCLIC:
                    plan = make_plan(n, period)
            window_misses = 0
        idx = n
        sizes.append(size)
        hist.append([size, None])
        placed = False
        if plan is not None:
            want = plan[(idx - began) % period]
            if want and want[0] == size and spaces[0].carve(want[1], size):
                touch(spaces[0], want[1], size, 1)
                live[life] = (0, want[1], size, idx)
                planned += 1
                placed = True
            elif want:
                misses += 1
                window_misses += 1
        if not placed:
            kind = 2 if plan is not None else 1 if size <= MIB else 0  # (2: the plan's spill)
            addr = spaces[kind].alloc(size)
            touch(spaces[kind], addr, size, 1)
            live[life] = (kind, addr, size, idx)
        phase = 0 if plan is None else 1 if n < began + 2 * period else 2
        peaks[phase] = max(peaks[phase], st["mapped"])
        if plan is not None:
            continue
        if cand:  # confirming: the period must hold for cand more requests
            if sizes[idx] != sizes[idx - cand]:
                min_p, cand = cand + 1, 0
            elif idx + 1 - cand_at >= cand:
                period, began, cand, window_misses = cand, idx + 1, 0, 0
                moves_at = [st["moves"]]
                plan = (make_cyclic_plan if CYCLIC else make_plan)(idx + 1, period)
        elif idx % check_every == 0:
            p = period_of(sizes, min_p)
            if p:
                cand, cand_at = p, idx + 1
    moves_at.append(st["moves"])
    first_two = moves_at[min(2, len(moves_at) - 1)] - moves_at[0] if began else 0
    last_five = moves_at[-1] - moves_at[max(0, len(moves_at) - 6)] if began else 0
    return ([x * PAGE for x in peaks], period, began, planned, misses,
            moves_at[0] if began else st["moves"], first_two, last_five, len(moves_at) - 1)


def main(argv):
    for path, seed, o, lv in each_order(argv, "fixpoint_model.py"):
        peaks, p, began, npl, miss, m0, m2, m5, steps = run(o)
        print("%s seed %d: peak live %d, model %.4f (period %d from request %d of %d, "
              "planned %d, misses %d; page moves %d before the plan, %d in its first two "
              "steps, %d in the last five of %d steps)"
              % (os.path.basename(path), seed, lv, max(peaks) / lv, p, began,
                 sum(1 for x in o if x[0]), npl, miss, m0, m2, m5, steps), flush=True)
        print("    peak mapped / peak live: before the plan %.4f, its first two steps %.4f, "
              "after %.4f" % tuple(x / lv for x in peaks), flush=True)

if __name__ == "__main__":
    main(sys.argv[1:])
