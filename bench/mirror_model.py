"""A model of a step plan in an arena of its own that shares the old layout's pages by
mapping them twice (issue 37; docs/decisions.md A13).

bench/plan_model.py's arena failed because the long-lived blocks' pages and the arena
could not share idle bytes; bench/fixpoint_model.py's plan in the one address space failed
because the long-lived blocks lie scattered and the largest blocks fit between none of
them. Virtual addresses are free and physical pages are what counts, and CUDA's virtual
memory API lets one physical allocation be mapped at two addresses (cuMemMap of the same
handle into two reserved ranges). So at the handover every page that holds a live byte is
mapped a second time at the bottom of a fresh arena, in address order, the idle pages
between them left out: in the arena the live blocks lie packed, and the plan is made
around them there, its blocks using the free bytes of those pages and new pages above.

    [PIN=0|1|2] python3 bench/mirror_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...

Online, event by event:
1. Learning, as bench/fixpoint_model.py: best fit in two address ranges, compaction (an
   idle page moved before a new one is mapped), the step found and confirmed.
2. The handover, at the step's start (request n, period P): the pages holding live bytes
   become the arena's first M pages (the same physical pages, mapped again); each live
   block's bytes are obstacles there, until its expected free (that of the same request a
   period earlier, plus P), for good if it is not expected to be freed.
3. One plan, on the cycle: the lifetimes of the step two periods back (a block made in one
   step and freed in the next wraps around), packed largest first where each adds the
   fewest pages to those already mapped (the M, and those packed so far), then lowest.
   A block live at the handover and expected to be freed in the next step (a gradient):
   PIN=1 (the default) pins the plan's block for the same request where it lies in the
   arena, so that the first step agrees with the plan; PIN=0 makes it an obstacle on every
   cycle until its expected free; PIN=2 ignores it (what it is in the way of in the first
   step misses).
4. The k-th request of each step goes to its planned arena address when it has the
   planned size and the range is free; otherwise, and for every request the plan has no
   lifetime for, best fit in a range of its own (a miss).
5. Physical pages: a page is mapped while a block of any of its addresses needs it and
   kept; after the handover, a new page for the arena or the spill range takes an idle page
   that is not one of the arena's (a one-way move), else is mapped.
Prints per trace: peak live, peak mapped pages over peak live (in all, and before, during
the first two steps of, and after the plan), requests planned and missed, and page moves
before the plan, in its first two steps and in the last five steps. Standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixpoint_model import INF, MIB, PAGE, Space, best_place, cycle_items  # noqa: E402
from page_model import each_order  # noqa: E402
from plan_model import add_live, page_bytes, pages_of, period_of  # noqa: E402
from pytorch_alloc_model import round_size  # noqa: E402

ARENA = 1 << 56
SPACE_IDS = {"gen": 0, "small": 1, "spill": 2}
ARENA_ID = 3
PIN = int(os.environ.get("PIN", "1"))  # (the docstring says what 0, 1 and 2 do)


def cyclic_pack(items, obstacles, p, mapped_pages, pinned=None):
    """items: (size, start, end) on a cycle of p (end > p wraps); obstacles: (addr, size,
    end), busy from the cycle's start to end (INF: always); pinned: item -> its address,
    fixed. Arena addresses of the items."""
    pinned = pinned or {}
    def spans(s, e):
        return [(s, e)] if e <= p else [(s, p), (0, min(e - p, p))]

    fixed = [(a, a + z, [(0, p)] if e == INF or e > p else [(0, e)]) for a, z, e in obstacles]
    union = set(mapped_pages)
    placed, out = [], [0] * len(items)
    for i, x in pinned.items():
        sz, s, e = items[i]
        placed.append((x, x + sz, spans(s, e)))
        out[i] = x
    for i in sorted(range(len(items)), key=lambda i: (-items[i][0], items[i][1])):
        if i in pinned:
            continue
        sz, s, e = items[i]
        mine = spans(s, e)
        busy = sorted((lo, hi) for lo, hi, sp in fixed + placed
                      if any(a < d and c < b for a, b in mine for c, d in sp))
        x = best_place(busy, sz, union)
        union.update(range(x // PAGE, (x + sz - 1) // PAGE + 1))
        placed.append((x, x + sz, mine))
        out[i] = x
    return out


def run(ops, check_every=64):
    spaces = {"gen": Space(0), "small": Space(1 << 55), "spill": Space(1 << 54),
              "arena": Space(ARENA)}
    phys_live, mapped, idle = {}, set(), set()  # page -> live bytes; mapped; those idle
    arena_phys = {}  # arena page index -> physical page (the mirrored ones)
    in_arena = set()  # physical pages the arena maps
    st = {"moves": 0, "plan_pages": 0, "plan_holds": 0}
    live, sizes, hist = {}, [], []
    plan, period, began, planned, misses = None, 0, 0, 0, 0
    cand, cand_at, min_p, step_misses, arena_base = 0, 0, 64, 0, ARENA
    peaks, moves_at = [0, 0, 0], []

    def phys(space, pg):
        """The physical page behind page pg of a space: (space's number, page), numbers so
        that sets of them iterate in the same order in every run (strings hash randomly)."""
        if isinstance(space, Space) or space == "arena":
            return arena_phys.get(pg, (ARENA_ID, pg))
        return (SPACE_IDS[space], pg)

    def new_page():
        """Before a page is mapped: an idle one moved instead, if there is one (while
        learning any; after the handover, none of the arena's)."""
        for q in idle:
            if plan is None or (q not in in_arena and q[0] != ARENA_ID):
                idle.discard(q)
                mapped.discard(q)
                del phys_live[q]
                st["moves"] += 1
                return

    def touch(space, addr, size, sign):
        for pg, nbytes in page_bytes(addr, size):
            q = phys(space, pg)
            if q not in mapped:
                new_page()
                mapped.add(q)
                phys_live[q] = 0
            add_live(phys_live, idle, q, sign * nbytes)

    def handover(n, p):
        nonlocal plan, period, began, arena_base
        arena_base += 1 << 52  # (a fresh arena each time: a dropped plan's stays as it is)
        spaces["arena"] = Space(arena_base)
        pages = sorted({phys(kind, pg) for kind, addr, sz, idx, _ in live.values()
                        for pg in pages_of(addr, sz)})
        index = {q: i for i, q in enumerate(pages)}
        for i, q in enumerate(pages):
            arena_phys[arena_base // PAGE + i] = q
            in_arena.add(q)
        obstacles, cross = [], {}  # cross: model step's index -> arena address
        for life, (kind, addr, sz, idx, _) in live.items():
            end, prev = INF, idx - p
            if prev >= 0 and hist[prev][0] == sz and hist[prev][1] is not None and \
                    hist[prev][1] + p > n:
                end = hist[prev][1] + p - n
            mirrors = []
            for pg in pages_of(addr, sz):
                lo, hi = max(addr, pg * PAGE), min(addr + sz, (pg + 1) * PAGE)
                a = arena_base + index[phys(kind, pg)] * PAGE + (lo - pg * PAGE)
                spaces["arena"].carve(a, hi - lo)
                mirrors.append((spaces["arena"], a, hi - lo))
            if PIN == 2 and end != INF:
                pass  # (the plan ignores it: in the first step, what it is in the way of misses)
            elif PIN and end != INF and n - p <= idx < n:
                cross[idx - (n - p)] = (mirrors[0][1] - arena_base, sz)
            else:
                obstacles += [(a - arena_base, z, end) for _, a, z in mirrors]
            live[life] = (kind, addr, sz, idx, mirrors)
        items, where = cycle_items(hist, n, p)
        # A block made in the last step and freed in the next is where the plan puts the
        # same request's block (its lifetime wraps round the cycle), if the sizes agree;
        # else it is an obstacle.
        pinned = {}
        for j, k in enumerate(where):
            if k in cross and cross[k][1] == items[j][0] and items[j][2] > p:
                pinned[j] = cross.pop(k)[0]
        for k, (x, sz) in cross.items():
            obstacles.append((x, sz, INF))  # (conservative: its end on the cycle unknown)
        plan = [None] * p
        used = set(range(len(pages)))  # (the plan's pages: the mirrored ones, and its own)
        for (sz, _, _), k, x in zip(items, where,
                                    cyclic_pack(items, obstacles, p, range(len(pages)),
                                                pinned)):
            plan[k] = (sz, arena_base + x)
            used.update(pages_of(x, sz))
        # What the plan must hold at its busiest: its blocks live at once on the cycle, and
        # the blocks never freed.
        ev = [0] * (p + 1)
        for sz, s0, e0 in items:
            for a, b in ((s0, e0),) if e0 <= p else ((s0, p), (0, min(e0 - p, p))):
                ev[a] += sz
                ev[b] -= sz
        cur = busiest = 0
        for t in range(p):
            cur += ev[t]
            busiest = max(busiest, cur)
        st["plan_pages"] = len(used) * PAGE
        st["plan_holds"] = busiest + sum(z for _, z, e in obstacles if e == INF)
        period, began = p, n

    for alloc, life, size, _ in ops:
        if not alloc:
            kind, addr, sz, idx, mirrors = live.pop(life)
            hist[idx][1] = len(sizes)
            touch(kind, addr, sz, -1)
            (kind if isinstance(kind, Space) else spaces[kind]).put(addr, sz)
            for sp, a, z in mirrors:  # (its bytes in the arena are free for the plan now)
                sp.put(a, z)
            continue
        size = round_size(size)
        idx = len(sizes)
        if plan is not None and idx > began and (idx - began) % period == 0:
            moves_at.append(st["moves"])
            if step_misses * 20 > period and idx > began + period:
                plan, min_p, moves_at = None, period + 1, []  # no step after all: relearn
            step_misses = 0
        sizes.append(size)
        hist.append([size, None])
        kind = None
        if plan is not None:
            want = plan[(idx - began) % period]
            if want and want[0] == size and spaces["arena"].carve(want[1], size):
                kind, addr = "arena", want[1]
                planned += 1
            else:
                misses += want is not None
                step_misses += want is not None
                kind = "spill"
        else:
            kind = "small" if size <= MIB else "gen"
        if kind != "arena":
            addr = spaces[kind].alloc(size)
        touch(kind, addr, size, 1)
        live[life] = (spaces["arena"] if kind == "arena" else kind, addr, size, idx, ())
        phase = 0 if plan is None else 1 if idx < began + 2 * period else 2
        peaks[phase] = max(peaks[phase], len(mapped))
        if plan is not None:
            continue
        if cand:
            if sizes[idx] != sizes[idx - cand]:
                min_p, cand = cand + 1, 0
            elif idx + 1 - cand_at >= cand:
                moves_at.append(st["moves"])
                handover(idx + 1, cand)
                cand = 0
        elif idx % check_every == 0:
            p = period_of(sizes, min_p)
            if p:
                cand, cand_at = p, idx + 1
    moves_at.append(st["moves"])
    if plan is None:
        moves_at = [st["moves"]]
    return {"peak": max(peaks) * PAGE, "phases": [x * PAGE for x in peaks], "period": period,
            "began": began, "planned": planned, "misses": misses, "moves_before": moves_at[0],
            "moves_first_two": moves_at[min(2, len(moves_at) - 1)] - moves_at[0],
            "moves_last_five": moves_at[-1] - moves_at[max(0, len(moves_at) - 6)],
            "steps": len(moves_at) - 1, "plan_pages": st["plan_pages"],
            "plan_holds": st["plan_holds"]}


def main(argv):
    for path, seed, o, lv in each_order(argv, "mirror_model.py"):
        r = run(o)
        print("%s seed %d: peak live %d, model %.4f (before the plan %.4f, its first two "
              "steps %.4f, after %.4f); period %d from request %d of %d, planned %d, "
              "misses %d; page moves %d before the plan, %d in its first two steps, %d "
              "in the last five of %d steps"
              % (os.path.basename(path), seed, lv, r["peak"] / lv,
                 *(x / lv for x in r["phases"]), r["period"], r["began"],
                 sum(1 for x in o if x[0]), r["planned"], r["misses"], r["moves_before"],
                 r["moves_first_two"], r["moves_last_five"], r["steps"]), flush=True)
        if r["plan_holds"]:
            print("    the last plan: %.0f MB of pages for the %.0f MB it must hold at its "
                  "busiest (%.4f)" % (r["plan_pages"] / 1e6, r["plan_holds"] / 1e6,
                                      r["plan_pages"] / r["plan_holds"]), flush=True)

if __name__ == "__main__":
    main(sys.argv[1:])
