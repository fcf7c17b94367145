"""Check RMM-format CSV traces and print their events, peak live bytes and threads.

    python3 check_trace.py TRACE.csv...

Checks: the header; every free matches a live allocation of the same pointer and size;
no pointer is allocated again while live; times never go backwards. Peak live is the
maximum over the trace of the sum of the sizes of live allocations, counting the
allocations at time 0 (live when recording started). Exits 1 if a check fails.
"""
import gzip
import sys

HEADER = "Thread,Time,Action,Pointer,Size,Stream"


def human(n):
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def check(path):
    errors = []
    live = {}
    cur = peak = events = at0 = 0
    last_t = 0
    threads = {}
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        if f.readline().strip() != HEADER:
            errors.append("bad header")
        for n, line in enumerate(f, 2):
            tid, t, action, ptr, size, stream = line.rstrip("\n").split(",")
            t, size, p = int(t), int(size), int(ptr, 16)
            events += 1
            threads[tid] = threads.get(tid, 0) + 1
            if t < last_t:
                errors.append(f"line {n}: time goes back")
            last_t = t
            if stream != "0":
                errors.append(f"line {n}: stream {stream}")
            if action == "allocate":
                if t == 0:
                    at0 += 1
                if p in live:
                    errors.append(f"line {n}: {ptr} allocated while live")
                live[p] = size
                cur += size
                peak = max(peak, cur)
            elif action == "free":
                if live.get(p) != size:
                    errors.append(f"line {n}: free of {ptr} ({size}) does not match a live allocation")
                else:
                    cur -= live.pop(p)
            else:
                errors.append(f"line {n}: action {action}")
    return dict(events=events, at0=at0, peak=peak, end_live=cur, threads=threads,
                seconds=last_t / 1e6, errors=errors)


def main():
    bad = False
    for path in sys.argv[1:]:
        r = check(path)
        thr = " ".join(f"{k}:{v}" for k, v in sorted(r["threads"].items(), key=lambda kv: -kv[1]))
        print(f"{path}: {r['events']:,} events ({r['at0']:,} live at time 0), "
              f"peak live {r['peak']:,} B ({human(r['peak'])}), live at end {human(r['end_live'])}, "
              f"{r['seconds']:.1f} s, threads {thr}")
        for e in r["errors"][:10]:
            print(f"  ERROR {e}")
        bad |= bool(r["errors"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
