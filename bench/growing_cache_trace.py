"""A synthetic generation loop as an RMM CSV trace, for `vramguard replay`: each token,
every layer's K and V caches are copied one token longer (the new copy made, then the old
one freed, as torch.cat does) beside a temporary. With the defaults the caches grow from
32 MiB by 64 KiB a token and pass slot_min on a 16 GiB device (0.006 of it, 98 MiB) at
token 1,061 (docs/decisions.md A5, fourteenth session).

    python3 bench/growing_cache_trace.py OUT.csv [--tokens=1200] [--layers=4]
        [--start=32M bytes] [--grow=64K bytes a token]
    vramguard replay OUT.csv --device-memory=16G
"""
import sys


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    opts = {"tokens": 1200, "layers": 4, "start": 32 << 20, "grow": 64 << 10}
    for a in argv[1:]:
        key, _, val = a.lstrip("-").partition("=")
        if key not in opts or not val.isdigit():
            sys.exit("unknown or bad option %s\n%s" % (a, __doc__))
        opts[key] = int(val)
    out, ptr, t = ["Thread,Time,Action,Pointer,Size,Stream"], 0x1000, 0

    def event(action, p, size):
        nonlocal t
        t += 1
        out.append("1,%d,%s,%#x,%d,0" % (t, action, p, size))

    def alloc(size):
        nonlocal ptr
        ptr += 0x1000
        event("allocate", ptr, size)
        return ptr

    caches = [None] * opts["layers"]  # (k, v, size) per layer
    for tok in range(opts["tokens"]):
        size = opts["start"] + tok * opts["grow"]
        for i in range(opts["layers"]):
            k, v = alloc(size), alloc(size)
            if caches[i]:
                event("free", caches[i][0], caches[i][2])
                event("free", caches[i][1], caches[i][2])
            caches[i] = (k, v, size)
            event("free", alloc(2 << 20), 2 << 20)
    with open(argv[0], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
