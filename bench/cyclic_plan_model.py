"""A training loop's step learnt, then followed as one cyclic plan, with pages moved one
way (docs/decisions.md A13, issue 37). The second cut of bench/plan_model.py; what that
model lacked, each found where one of its peaks was reached and each with a switch:

- **A step is where live memory comes back.** A period P of the sizes asked for (seen
  twice, then holding for P/2 more requests) is taken only if the live bytes after its
  last request equal those P and 2P requests earlier,
  within BALANCE (1 %) of the bytes served meanwhile (BALANCE=inf: not checked). A
  transformer layer's pattern repeats inside the forward pass, but live memory grows
  there by what the layer keeps, a large share of what it serves: plan_model made plans
  for one layer on GPT-2 and dropped them with their pages mapped.
- **The plan covers two steps** (DOUBLE=0: one). A tensor freed after its own successor
  is made (a hidden state carried from one chunk to the next) cannot have one offset
  every step; in a cycle of 2P it has two, used by turns.
- **The pages the plan does not use go back** (RELEASE=0: kept). Once the plan is
  followed, a page of the best-fit ranges left with no live byte is unmapped; the arena
  takes the best-fit ranges' idle pages (the layout learnt, emptying) before new ones.
- **The plan packed five ways** (ORDERS): by size, by size x lifetime, by lifetime, by
  breadth then size, by breadth then lifetime (TFLite's and XLA's orders; an item's
  breadth is the most bytes live at once during its lifetime), each at lowest offsets or
  in the tightest gaps; the lowest height is kept.
- **A tensor whose planned place is still taken** (its predecessor freed late) goes to a
  place the plan leaves free for its planned lifetime (ROOM=0: none), else to the
  best-fit ranges, where it may borrow the arena's idle pages (LEND=0: none; 1: only
  pages the plan leaves unused meanwhile; 2: any). The arena takes them back as they
  free, and while pages are out it may move its own idle ones (moves, after a miss only).

    [PLACEMENT=first|best|mapped|mapped-first] [SMALL_MAX=0] [SLACK=0]
    [ORDERS=size,...] [BALANCE=0.01] [DOUBLE=1] [RELEASE=1] [ROOM=1] [LEND=2] [HOLD=0]
    python3 bench/cyclic_plan_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

Online, event by event:
1. Learning: requests go to one address range (SMALL_MAX=1048576: those up to 1 MiB in
   a second one, as vramguard does, A6), placed by PLACEMENT — address-ordered first fit
   (the default), best fit (vramguard today), "mapped" (among the 16 smallest free ranges that hold the
   request, the one whose pages are mapped already: bench/mapped_first_model.py) or
   "mapped-first" (the lowest such place). A page a block needs is an idle page moved
   there (unmapped where it was, mapped here) rather than a new one — with SLACK=s only
   once the pages mapped would pass (1 + s) x the peak live bytes so far.
2. The step, found and confirmed as above; the requests of one step freed within the
   next are planned on the cycle; the rest are long-lived and stay where they are.
3. Following, from the cycle's point with the fewest planned bytes live: the i-th request
   of the cycle goes to its planned offset in an arena of its own when the size matches
   and the range is free (else a miss, as above); more than 5 % misses in a cycle drops
   the plan, and the arena's idle pages can be moved back by step 1. With HOLD=k a plan
   is followed only once the sizes have repeated for k more steps (a pattern inside the
   step that passes the balance test, an optimizer's loop over layers of the same shapes,
   is then dropped before its arena maps a page: gpt_train's 599 misses go to none, for
   more moves while learning).

Prints per trace: the peak of mapped pages over peak live bytes, where it was reached
(learning or following), the cycle and the request it began at, misses, pages moved
while learning and after, pages unmapped for good, and the moves, new mappings and
unmappings in the trace's last quarter (a design that has settled makes none there).
The model does not wait for streams: it counts what a design would have to do, not its
cost. Standard library only.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nomove_model import TOP  # noqa: E402
from page_model import PAGE, each_order  # noqa: E402
from plan_model import BestFit, live_bytes, low_point, page_bytes, period_of, spans  # noqa: E402
from pytorch_alloc_model import round_size  # noqa: E402


def pack(items, p, key, tightest):
    """Offsets for items (size, start, end) on a cycle of length p (end > p wraps), placed
    in the order key gives: each at the lowest offset free of the items placed before
    that overlap it on the cycle or, if tightest, in the smallest such gap that holds it."""
    def spans(s, e):
        return [(s, e)] if e <= p else [(s, p), (0, e - p)]

    placed, off, br = [], [0] * len(items), breadths(items, p)
    for i in sorted(range(len(items)), key=lambda i: key(items[i], br[i])):
        sz, s, e = items[i]
        mine = spans(s, e)
        busy = sorted((o, o + z) for o, z, sp in placed
                      if any(a < d and c < b for a, b in mine for c, d in sp))
        x, best = 0, None
        for lo, hi in busy:
            if lo - x >= sz and (best is None or lo - x < best[0]):
                best = (lo - x, x)
                if not tightest:
                    break
            x = max(x, hi)
        off[i] = best[1] if best else x
        placed.append((off[i], sz, mine))
    return off


ORDERS = {  # TFLite's and XLA's heuristics for planning buffers, and their variants; b:
    # the item's breadth, the most bytes live at once during its lifetime (breadths)
    "size": lambda it, b: (-it[0], it[1]),
    "size x lifetime": lambda it, b: (-it[0] * (it[2] - it[1]), it[1]),
    "lifetime": lambda it, b: (-(it[2] - it[1]), -it[0], it[1]),
    "breadth": lambda it, b: (-b, -it[0], it[1]),
    "breadth then lifetime": lambda it, b: (-b, -(it[2] - it[1]), it[1]),
}


def breadths(items, p):
    """Each item's breadth: the most bytes live at once at a point of its lifetime."""
    live = live_bytes(items, p)
    return [max(max(live[a:b], default=0) for a, b in spans(s, e, p)) for _, s, e in items]


def plan_offsets(items, p, orders):
    """The packing of the lowest height among the orders tried (with lowest offsets and
    with tightest gaps)."""
    best = None
    for name in orders:
        for tightest in (False, True):
            off = pack(items, p, ORDERS[name], tightest)
            height = max((o + it[0] for o, it in zip(off, items)), default=0)
            if best is None or height < best[0]:
                best = (height, off)
    return best[1]


class Pool(BestFit):
    """An address range with its mapped pages, placing by one of four rules."""

    def __init__(self, base, placement):
        super().__init__(base)
        self.base, self.placement = base, placement

    def alloc(self, size):
        if self.placement == "best":
            return super().alloc(size)
        if self.placement == "first":
            for addr in sorted(self.by_addr):
                if self.by_addr[addr] >= size:
                    return self.carve_at(addr, self.by_addr[addr], addr, size)
        if self.placement == "mapped-first":  # the lowest place whose pages are mapped
            first = None
            for h in sorted(self.by_addr):
                hs = self.by_addr[h]
                if hs < size:
                    continue
                first = first or (h, hs)
                for a in (h, h + hs - size) if hs != TOP else (h,):
                    if all(pg in self.live_on for pg, _ in page_bytes(a, size)):
                        return self.carve_at(h, hs, a, size)
            return self.carve_at(first[0], first[1], first[0], size)
        i = bisect.bisect_left(self.holes, (size, -1))
        best = None
        for hs, h in self.holes[i:i + 16]:
            for a in (h, h + hs - size) if hs != TOP else (h,):
                unmapped = sum(1 for pg, _ in page_bytes(a, size) if pg not in self.live_on)
                if best is None or (unmapped, hs, a) < best[0]:
                    best = ((unmapped, hs, a), hs, h, a)
        return self.carve_at(best[2], best[1], best[3], size)


class Model:
    def __init__(self, ops, placement="first", small_max=0, slack=0.0,
                 double=True, balance=0.01, release=True, orders=tuple(ORDERS),
                 room=True, lend=2, hold=0):
        self.small_max, self.slack, self.double = small_max, slack, double
        self.balance, self.release, self.orders = balance, release, orders
        self.room = room  # a miss may go where the plan leaves room
        self.lend, self.lendable = lend, set()
        self.debt = self.spare = 0  # arena pages lent out; lent pages returned, unplaced
        self.hold = hold  # steps a plan must hold before it is followed
        self.shadow_left = self.shadow_seen = self.shadow_differ = 0
        self.height = 0
        self.pools = [Pool(0, placement), Pool(1 << 55, placement)]  # general, small
        self.arena = Pool(1 << 56, "best")  # page bookkeeping of the planned blocks
        self.late_from = sum(1 for x in ops if x[0]) * 3 // 4
        self.n = 0  # requests so far
        self.mapped = self.peak = self.live_now = self.peak_live = 0
        self.peak_when = "learning"
        self.count = dict(moves_learning=0, moves_after=0, releases=0, misses=0,
                          late_moves=0, late_maps=0, late_releases=0)
        self.plan = None  # (size, offset, start, end) or None per position of the cycle
        self.cycle = self.pos = self.began = 0
        self.waiting = None  # the position the plan starts at, until reached
        self.arena_busy = []  # sorted (start, end) of live planned blocks
        self.window_misses = 0
        self.cand = self.cand_at = 0
        self.min_p = 64
        self.sizes, self.freed_at, self.live_at, self.served = [], [], [], []
        self.live = {}

    def following(self):
        return self.plan is not None and self.waiting is None

    def late(self, key):
        if self.n >= self.late_from:
            self.count[key] += 1

    def steal(self, key, into=None):
        """Move an idle page (of any range but into) to where one is needed."""
        for pool in self.pools + [self.arena]:
            if pool is not into and pool.idle:
                del pool.live_on[pool.idle.pop()]
                self.mapped -= 1
                self.count[key] += 1
                self.late("late_moves")
                return

    def move_from(self, pool, pg=None):
        """Unmap an idle page of pool (pg, or any) to map it elsewhere: one move."""
        pg = pool.idle.pop() if pg is None else pg
        pool.idle.discard(pg)
        del pool.live_on[pg]
        self.mapped -= 1
        self.count["moves_learning" if not self.following() else "moves_after"] += 1
        self.late("late_moves")

    def new_page(self, pool):
        """Where the page a block needs comes from, before a new one is mapped."""
        if not self.following():
            room = (1 + self.slack) * max(self.peak_live, 2 * PAGE)
            if (self.mapped + 1) * PAGE > room:
                self.steal("moves_learning")
            return
        if pool is self.arena and self.spare:  # a page lent out, come back
            self.spare -= 1
            self.mapped -= 1
            self.count["moves_after"] += 1
            self.late("late_moves")
        elif any(p.idle for p in self.pools):  # the old layout's idle pages, one way
            self.steal("moves_after", into=self.arena)
        elif pool is self.arena and self.debt and self.arena.idle:
            self.move_from(self.arena)  # short of the pages lent: borrow from itself
        elif pool is not self.arena and self.lendable:  # a late tensor's successor
            self.move_from(self.arena, self.lendable.pop())
            self.debt += 1

    def touch(self, pool, addr, size, sign):
        if sign > 0:  # the block's own idle pages are not there to be moved away
            for pg, _ in page_bytes(addr, size):
                pool.idle.discard(pg)
        for pg, nbytes in page_bytes(addr, size):
            if pg not in pool.live_on:
                self.new_page(pool)
                pool.live_on[pg] = 0
                self.mapped += 1
                self.late("late_maps")
            pool.live_on[pg] += sign * nbytes
            if pool.live_on[pg]:
                pool.idle.discard(pg)
            elif self.release and pool is not self.arena and self.following():
                del pool.live_on[pg]
                pool.idle.discard(pg)
                if self.debt:  # a lent page goes back to the arena (mapped there later)
                    self.debt -= 1
                    self.spare += 1
                else:  # unmapped for good
                    self.mapped -= 1
                    self.count["releases"] += 1
                    self.late("late_releases")
            else:
                pool.idle.add(pg)

    def free(self, life):
        where, addr, size, idx = self.live.pop(life)
        self.live_now -= size
        self.freed_at[idx] = self.n
        if where == "arena":
            del self.arena_busy[bisect.bisect_left(self.arena_busy, (addr, addr + size))]
            self.touch(self.arena, addr, size, -1)
        else:
            self.touch(self.pools[where], addr, size, -1)
            self.pools[where].put(addr, size)

    def planned_place(self, size):
        """The planned address for this request, or None (a miss, or nothing planned)."""
        if self.plan is None:
            return None
        if self.shadow_left:  # not followed until it has held for HOLD steps
            step = self.cycle // 2 if self.double else self.cycle
            self.shadow_left -= 1
            self.shadow_seen += 1
            self.shadow_differ += self.sizes[-1] != self.sizes[-1 - step]
            if self.shadow_seen % step == 0:
                if self.shadow_differ * 20 > step:  # a pattern inside the step: no plan
                    self.plan, self.min_p, self.shadow_left = None, step + 1, 0
                    return None
                self.shadow_differ = 0
            self.pos = (self.pos + 1) % self.cycle
            return None
        if self.waiting is not None:
            if self.pos != self.waiting:
                self.pos = (self.pos + 1) % self.cycle
                return None
            self.waiting = None
        want = self.plan[self.pos]
        self.pos = (self.pos + 1) % self.cycle
        addr = None
        if want:
            a = self.arena.base + want[1]
            k = bisect.bisect_left(self.arena_busy, (a, a + size))
            if want[0] == size and \
                    (k == len(self.arena_busy) or self.arena_busy[k][0] >= a + size) and \
                    (k == 0 or self.arena_busy[k - 1][1] <= a):
                addr = a
            else:
                self.count["misses"] += 1
                self.window_misses += 1
                self.missed = want
        if self.pos == 0:  # a cycle followed: more than 5 % missed, and it was no step
            if self.window_misses * 20 > self.cycle:
                self.plan, self.min_p = None, self.cycle // (2 if self.double else 1) + 1
            self.window_misses = 0
        return addr

    def arena_room(self, size, want):
        """For a request whose planned place is taken (a tensor of the previous cycle
        freed late): the lowest place of the arena's height free now and, by the plan,
        for the lifetime planned for this request, or None."""
        _, _, a, b = want
        mine = [(a, b)] if b <= self.cycle else [(a, self.cycle), (0, b - self.cycle)]
        base = self.arena.base
        busy = sorted([(base + off, base + off + sz) for x, y, off, sz in self.spans
                       if any(x < d and c < y for c, d in mine)] + self.arena_busy)
        lo = base
        for x, y in busy + [(base + self.height, base + self.height)]:
            if x - lo >= size:
                return lo
            lo = max(lo, y)
        return None

    def idle_by_plan(self, want):
        """The arena's idle pages that the plan leaves unused for the lifetime planned
        for this request: lent to it, moved back when the arena needs them."""
        size, at, a, b = want
        mine = [(a, b)] if b <= self.cycle else [(a, self.cycle), (0, b - self.cycle)]
        needed = set()
        for x, y, off, sz in self.spans:
            if (off, sz) != (at, size) and any(x < d and c < y for c, d in mine):
                needed.update(pg for pg, _ in page_bytes(self.arena.base + off, sz))
        return self.arena.idle - needed

    def alloc(self, life, size):
        size = round_size(size)
        idx = self.n
        self.sizes.append(size)
        self.freed_at.append(None)
        self.live_now += size
        self.peak_live = max(self.peak_live, self.live_now)
        self.missed = False
        addr = self.planned_place(size)
        self.lendable = set()
        if addr is None and self.missed and self.room:
            addr = self.arena_room(size, self.missed)
            if addr is None and self.lend:
                self.lendable = self.idle_by_plan(self.missed) if self.lend == 1 \
                    else set(self.arena.idle)
        if addr is not None:
            bisect.insort(self.arena_busy, (addr, addr + size))
            self.touch(self.arena, addr, size, 1)
            self.live[life] = ("arena", addr, size, idx)
        else:
            kind = 1 if size <= self.small_max else 0
            addr = self.pools[kind].alloc(size)
            self.touch(self.pools[kind], addr, size, 1)
            self.live[life] = (kind, addr, size, idx)
        self.n += 1
        self.live_at.append(self.live_now)
        self.served.append((self.served[-1] if self.served else 0) + size)
        if self.mapped > self.peak:
            self.peak = self.mapped
            self.peak_when = "following" if self.following() else "learning"
        if self.plan is None:
            self.learn(idx)

    def learn(self, idx):
        if not self.cand:
            if idx % 64 == 0:
                p = period_of(self.sizes, self.min_p)
                if p:
                    self.cand, self.cand_at = p, idx + 1
            return
        p = self.cand
        if self.sizes[idx] != self.sizes[idx - p]:
            self.min_p, self.cand = p + 1, 0
            return
        if idx + 1 - self.cand_at < p // 2:  # confirmed over half a period (plan.c)
            return
        now = self.live_at[idx]  # back within 1 % of what the periods served (src/alloc/plan.c)
        if any(abs(self.live_at[idx - k * p] - now) >
               self.balance * (self.served[idx] - self.served[idx - k * p]) for k in (1, 2)):
            self.min_p, self.cand = p + 1, 0  # live memory did not come back: no step
            return
        n = idx + 1
        base = n - 2 * p - p // 2  # the model step: [base, base + p), its frees known
        items, where = [], []
        for j in range(base, base + p):
            f = self.freed_at[j]
            if f is not None and f - base <= 2 * p:
                items.append((self.sizes[j], j - base, max(f - base, j - base + 1)))
                where.append(j - base)
        if self.double:
            items += [(sz, a + p, b + p) for sz, a, b in items]
            where += [w + p for w in where]
            p *= 2
        self.plan = [None] * p
        offsets = plan_offsets(items, p, self.orders)
        self.spans = []  # (start, end, offset, size) of each planned lifetime on the cycle
        for (sz, a, b), w, off in zip(items, where, offsets):
            self.plan[w] = (sz, off, a, b)
            self.spans += [(x, y, off, sz) for x, y in ([(a, b)] if b <= p else [(a, p), (0, b - p)])]
        self.height = max((o + it[0] for o, it in zip(offsets, items)), default=0)
        self.cycle, self.pos, self.began, self.cand = p, (n - base) % p, n, 0
        self.shadow_left = self.hold * (p // 2 if self.double else p)
        self.shadow_seen = self.shadow_differ = 0
        self.window_misses = 0
        self.waiting = low_point(items, p)


def run(ops, **options):
    m = Model(ops, **options)
    for alloc, life, size, _ in ops:
        if alloc:
            m.alloc(life, size)
        else:
            m.free(life)
    return m


def main(argv):
    env = os.environ.get
    options = dict(placement=env("PLACEMENT", "first"),
                   small_max=int(env("SMALL_MAX", "0")),
                   slack=float(env("SLACK", "0")), double=env("DOUBLE", "1") == "1",
                   balance=float(env("BALANCE", "0.01")),
                   release=env("RELEASE", "1") == "1",
                   orders=tuple(env("ORDERS", ",".join(ORDERS)).split(",")),
                   room=env("ROOM", "1") == "1", lend=int(env("LEND", "2")),
                   hold=int(env("HOLD", "0")))
    for path, seed, o, lv in each_order(argv, "cyclic_plan_model.py"):
        m = run(o, **options)
        c = m.count
        print("%s seed %d: peak live %d, cyclic plan %.4f (peak while %s; cycle %d from "
              "request %d of %d, misses %d; page moves %d learning + %d after, %d "
              "unmapped; last quarter: %d moves, %d maps, %d unmaps)"
              % (os.path.basename(path), seed, lv, m.peak * PAGE / lv, m.peak_when,
                 m.cycle, m.began, m.n, c["misses"], c["moves_learning"],
                 c["moves_after"], c["releases"], c["late_moves"], c["late_maps"],
                 c["late_releases"]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
