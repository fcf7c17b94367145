"""A model of PyTorch's CUDA caching allocator, default settings, for allocation traces.

    python3 bench/pytorch_alloc_model.py [--perturb=SEED ...] TRACE.csv ...

prints the peak reserved bytes PyTorch's allocator would reach on each trace (RMM CSV, as
in bench/traces). It models what decides PyTorch's fragmentation: requests rounded to 512
bytes; a small pool (up to 1 MiB) and a large pool per stream; the best fit by (size,
address); a block split when what is left is at least 512 bytes (small pool) or more than
1 MiB (large pool); new segments of 2 MiB (requests up to 1 MiB), 20 MiB (up to 10 MiB) or
the request rounded up to 2 MiB; free neighbours in a segment merged; nothing released.
On the traces whose .json holds PyTorch's own figure from the same events it gives
24.245 GB (PyTorch: 24.25), 61.111 (61.11), 18.795 (18.795) and 6.835 (6.835); on
transformer_ctx512_fullstep 63.06 (62.83).

--perturb=SEED delays frees exactly as `vramguard replay --perturb=SEED` does, so both
allocators can be compared on the same perturbed orders (bench/RESULTS.md). Standard
library only.
"""
import bisect
import csv
import sys

MiB = 1 << 20
MASK = (1 << 64) - 1


def round_size(size):
    return 512 if size < 512 else (size + 511) // 512 * 512


def segment_size(size):
    if size <= MiB:
        return 2 * MiB
    if size < 10 * MiB:
        return 20 * MiB
    return (size + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)


def load(path):
    """The trace as (alloc, lifetime, size, stream) tuples, one lifetime per allocation."""
    ops, live, n = [], {}, 0
    with open(path) as f:
        rows = csv.reader(f)
        next(rows)
        for r in rows:
            if r[2] == "allocate":
                live[r[3]] = n
                ops.append((True, n, int(r[4]), r[5]))
                n += 1
            elif r[3] in live:
                ops.append((False, live.pop(r[3]), int(r[4]), r[5]))
    return ops


def xorshift(state):
    x = state[0]
    x ^= x >> 12
    x ^= (x << 25) & MASK
    x ^= x >> 27
    state[0] = x
    return (x * 0x2545F4914F6CDD1D) & MASK


def perturb(ops, seed):
    """vramguard replay --perturb: each free delayed by 1-8 events with probability 1/50."""
    state = [((seed * 0x9E3779B97F4A7C15) & MASK) | 1]
    out, held = [], []
    for i, op in enumerate(ops):
        out += [o for at, o in held if at <= i]
        held = [(at, o) for at, o in held if at > i]
        if not op[0] and len(held) < 64 and xorshift(state) % 50 == 0:
            held.append((i + 1 + xorshift(state) % 8, op))
        else:
            out.append(op)
    return out + [o for _, o in held]


class Block:
    __slots__ = ("addr", "size", "prev", "next", "free", "small", "stream")


def join(a, b):
    """Block a absorbs its upper neighbour b; returns a."""
    a.size += b.size
    a.next = b.next
    if b.next:
        b.next.prev = a
    return a


def peak_reserved(ops):
    pools = {}  # (stream, small) -> sorted [(size, addr, block)]
    next_va, reserved, peak, live = 1 << 40, 0, 0, {}

    def pool(b):
        return pools.setdefault((b.stream, b.small), [])

    def insert(b):
        bisect.insort(pool(b), (b.size, b.addr, b))

    def remove(b):
        p = pool(b)
        del p[bisect.bisect_left(p, (b.size, b.addr))]

    for alloc, life, size, stream in ops:
        if alloc:
            size = round_size(size)
            small = size <= MiB
            p = pools.setdefault((stream, small), [])
            i = bisect.bisect_left(p, (size, -1))
            if i < len(p):
                b = p.pop(i)[2]
            else:
                b = Block()
                b.size = segment_size(size)
                b.addr, next_va = next_va, next_va + b.size
                b.prev = b.next = None
                b.small, b.stream = small, stream
                reserved += b.size
                peak = max(peak, reserved)
            rest = b.size - size
            if (small and rest >= 512) or (not small and rest > MiB):
                n = Block()
                n.addr, n.size, n.small, n.stream, n.free = b.addr + size, rest, b.small, b.stream, True
                n.prev, n.next = b, b.next
                if b.next:
                    b.next.prev = n
                b.next, b.size = n, size
                insert(n)
            b.free = False
            live[life] = b
        else:
            b = live.pop(life)
            b.free = True
            if b.prev is not None and b.prev.free:
                remove(b.prev)
                b = join(b.prev, b)
            if b.next is not None and b.next.free:
                remove(b.next)
                b = join(b, b.next)
            insert(b)
    return peak


def main(argv):
    seeds, paths = [0], []
    for a in argv:
        if a.startswith("--perturb="):
            seeds = [int(s) for s in a.split("=", 1)[1].split(",")]
        elif a.startswith("-"):
            sys.exit("usage: pytorch_alloc_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...")
        else:
            paths.append(a)
    if not paths:
        sys.exit("usage: pytorch_alloc_model.py [--perturb=SEED[,SEED...]] TRACE.csv ...")
    for path in paths:
        ops = load(path)
        for seed in seeds:
            peak = peak_reserved(perturb(ops, seed) if seed else ops)
            print("%s seed %d: peak reserved %d bytes (%.3f GB)" % (path, seed, peak, peak / 1e9))


if __name__ == "__main__":
    main(sys.argv[1:])
