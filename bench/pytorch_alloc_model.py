"""A model of PyTorch's CUDA caching allocator, for allocation traces.

    python3 bench/pytorch_alloc_model.py [--expandable] [--perturb=SEED ...] TRACE.csv ...

prints the peak reserved bytes PyTorch's allocator would reach on each trace (RMM CSV, as
in bench/traces). It models what decides PyTorch's fragmentation: requests rounded to 512
bytes; a small pool (up to 1 MiB) and a large pool per stream; the best fit by (size,
address); a block split when what is left is at least 512 bytes (small pool) or more than
1 MiB (large pool); new segments of 2 MiB (requests up to 1 MiB), 20 MiB (up to 10 MiB) or
the request rounded up to 2 MiB; free neighbours in a segment merged; nothing released.
On the traces whose .json holds PyTorch's own figure from the same events it gives
24.245 GB (PyTorch: 24.25), 61.111 (61.11), 18.795 (18.795) and 6.835 (6.835); on
transformer_ctx512_fullstep 63.06 (62.83).

--expandable models PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True instead: one address
range per stream and pool, mapped in pages of 20 MiB (large pool) or 2 MiB (small pool)
as requests need them; the best fit by (size, address) among mapped free blocks, except
that a block whose upper neighbour is unmapped is passed over for the next candidate whose
size plus unmapped neighbour is smaller; else the smallest unmapped range (with the free
block just below it) that fits, mapped up to the request; a block split when at least
512 bytes are left; free neighbours merged. (Written from PyTorch's
CUDACachingAllocator.cpp: get_free_block, find_expandable_block, map_block,
try_allocate_expandable_block, should_split.) On the H100 the ResNet-50 loop's
measured figure is 6.172 GB; on its trace this model gives the figure printed by
`bench/perturbed.sh` (bench/RESULTS.md).

--perturb=SEED delays frees exactly as `vramguard replay --perturb=SEED` does, so both
allocators can be compared on the same perturbed orders (bench/RESULTS.md). Standard
library only.
"""
import bisect
import csv
import gzip
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
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
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


class Range:
    """A block of an expandable address range: mapped and free, allocated, or unmapped."""
    __slots__ = ("addr", "size", "prev", "next", "allocated", "mapped", "stream_key", "small")


def peak_reserved_expandable(ops, capacity=80 << 30):
    spaces = {}  # (stream, small) -> (free mapped [(size, addr, block)], unmapped [...])
    reserved, peak, live = 0, 0, {}

    def space(stream, small):
        if (stream, small) not in spaces:
            page = 2 * MiB if small else 20 * MiB
            b = Range()
            b.addr = (len(spaces) + 1) << 44
            b.size = (capacity + page - 1) // page * page
            b.prev = b.next = None
            b.allocated, b.mapped = False, False
            spaces[(stream, small)] = ([], [(b.size, b.addr, b)], page)
        return spaces[(stream, small)]

    def index(sp, b):
        return sp[0] if b.mapped else sp[1]

    def insert(sp, b):
        bisect.insort(index(sp, b), (b.size, b.addr, b))

    def remove(sp, b):
        lst = index(sp, b)
        del lst[bisect.bisect_left(lst, (b.size, b.addr))]

    def free_like(x, b):  # x may merge with b: free, and mapped alike
        return x is not None and not x.allocated and x.mapped == b.mapped

    def merge(sp, b):
        """b (not indexed) absorbs its free neighbours of the same mapped-ness."""
        for x in (b.prev, b.next):
            if free_like(x, b):
                remove(sp, x)
                lo, hi = (x, b) if x is b.prev else (b, x)
                b.addr = lo.addr
                b.size = lo.size + hi.size
                b.prev, b.next = lo.prev, hi.next
                if b.prev:
                    b.prev.next = b
                if b.next:
                    b.next.prev = b
        return b

    def split(b, size, mapped):
        """b keeps its first `size` bytes; the rest becomes a new block after it."""
        r = Range()
        r.addr, r.size, r.allocated, r.mapped = b.addr + size, b.size - size, False, mapped
        r.prev, r.next = b, b.next
        if b.next:
            b.next.prev = r
        b.next, b.size = r, size
        return r

    def esize(b):
        return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)

    def map_block(sp, b, size):
        nonlocal reserved, peak
        remove(sp, b)
        want = min((size + sp[2] - 1) // sp[2] * sp[2], b.size)
        if want < b.size:
            insert(sp, split(b, want, False))
        b.mapped = True
        reserved += want
        peak = max(peak, reserved)
        b = merge(sp, b)
        insert(sp, b)
        return b

    for alloc, life, size, stream in ops:
        if not alloc:
            b = live.pop(life)
            sp = space(b.stream_key, b.small)
            b.allocated = False
            insert(sp, merge(sp, b))
            continue
        size = round_size(size)
        small = size <= MiB
        sp = space(stream, small)
        free, unmapped = sp[0], sp[1]
        i = bisect.bisect_left(free, (size, -1))
        b = None
        if i < len(free):
            while i + 1 < len(free) and esize(free[i + 1][2]) < esize(free[i][2]):
                i += 1
            b = free[i][2]
        else:
            for _, _, c in list(unmapped):
                if c.prev is not None and not c.prev.allocated and c.prev.mapped:
                    c = c.prev
                got, x = 0, c
                while got < size and x is not None and not x.allocated:
                    got += x.size
                    x = x.next
                if got >= size:
                    break
            else:
                raise SystemExit("expandable model: out of address space")
            if not c.mapped:
                c = map_block(sp, c, min(c.size, size))
            while c.size < size:
                c = map_block(sp, c.next, min(size - c.size, c.next.size))
            b = c
        remove(sp, b)
        if b.size - size >= 512:
            insert(sp, split(b, size, True))
        b.allocated = True
        b.stream_key, b.small = stream, small
        live[life] = b
    return peak


def parse_args(argv, usage, flags=()):
    """The models' command lines: [FLAG ...] [--perturb=SEED[,SEED...]] TRACE ... Returns
    (seeds, paths, the flags given); exits with `usage` on anything else."""
    seeds, paths, given = [0], [], set()
    for a in argv:
        if a in flags:
            given.add(a)
        elif a.startswith("--perturb="):
            seeds = [int(s) for s in a.split("=", 1)[1].split(",")]
        elif a.startswith("-"):
            sys.exit(usage)
        else:
            paths.append(a)
    if not paths:
        sys.exit(usage)
    return seeds, paths, given


def main(argv):
    seeds, paths, given = parse_args(argv, "usage: pytorch_alloc_model.py [--expandable] "
                                     "[--perturb=SEED[,SEED...]] TRACE.csv ...", ("--expandable",))
    model = peak_reserved_expandable if "--expandable" in given else peak_reserved
    for path in paths:
        ops = load(path)
        for seed in seeds:
            peak = model(perturb(ops, seed) if seed else ops)
            print("%s seed %d: peak reserved %d bytes (%.3f GB)" % (path, seed, peak, peak / 1e9))


if __name__ == "__main__":
    main(sys.argv[1:])
