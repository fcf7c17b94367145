#!/usr/bin/env python3
"""viewer_check.py SNAPSHOT [SNAPSHOT ...] — would PyTorch's memory viewer draw this snapshot
right? (issue 33; docs/snapshot-format.md)

Replays a snapshot in PyTorch's structure (torch.cuda.memory._snapshot(): a pickle, or JSON;
a vramguard snapshot JSON is turned into it with python/vramguard's to_pytorch) the way
PyTorch's viewer (torch/utils/viz/MemoryViz.js, torch/cuda/_memory_viz.py) does, written from
that code's semantics, with no PyTorch needed, and says where it would go wrong:

  layout      the viewer lays each segment's blocks end to end from the segment's address
              (it ignores a block's own address): the blocks must fill the segment exactly,
              and where a block names its address it must be the one the viewer computes;
  history     the Allocator State History replays the trace backwards from the snapshot's
              final state: each event must find what it undoes (free_requested a block,
              segment_map/segment_alloc a segment holding its range), and after every event
              every live block must lie in a segment ("Cannot read properties of null
              (reading 'occupied')" otherwise) without overlapping another;
  pairs       free_completed must follow a free_requested of the same address (trace_plot
              -f: "free_completed without free_requested"), and a block alive at the end
              may not be marked active_pending_free unless a free_requested of it is
              outstanding (the viewer draws it red, "freed but waiting due to
              record_stream");
  timeline    the Active Memory Timeline pairs each alloc with the next free_completed of
              its address: its peak must be the true peak of requested bytes live, and what
              it leaves live at the end the blocks the snapshot holds;
  time        time_us is epoch microseconds and never goes back.

Exit status: 0 if every snapshot passes, 1 otherwise (each problem on a line, the first
few of each kind, with counts).
"""
import bisect
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

MAX_SHOWN = 3
EPOCH_2020_US = 1577836800 * 10**6


class Problems:
    def __init__(self):
        self.kinds = {}

    def add(self, kind, text):
        self.kinds.setdefault(kind, []).append(text)

    def lines(self):
        for kind, texts in self.kinds.items():
            more = len(texts) - MAX_SHOWN
            for t in texts[:MAX_SHOWN]:
                yield "%s: %s" % (kind, t)
            if more > 0:
                yield "%s: ... and %d more" % (kind, more)


def load(path):
    with open(path, "rb") as f:
        head = f.read(1)
    if head == b"\x80":
        with open(path, "rb") as f:
            return pickle.load(f)
    with open(path) as f:
        snap = json.load(f)
    if snap.get("format") == "vramguard-snapshot":
        from vramguard._snapshot import to_pytorch
        snap = to_pytorch(snap)
    return snap


def check_layout(snap, p):
    for seg in snap.get("segments", []):
        addr = seg["address"]
        for b in seg.get("blocks", []):
            if "address" in b and b["address"] != addr:
                p.add("layout", "segment 0x%x: a block at 0x%x is drawn at 0x%x (blocks are laid "
                      "end to end)" % (seg["address"], b["address"], addr))
            addr += b["size"]
        if addr != seg["address"] + seg["total_size"]:
            p.add("layout", "segment 0x%x: its blocks add up to %d bytes, its total_size is %d"
                  % (seg["address"], addr - seg["address"], seg["total_size"]))


def final_state(snap, device):
    """The viewer's segments [addr, size, stream] and live blocks {addr: [size, pending]}."""
    segs, blocks = [], {}
    for seg in snap.get("segments", []):
        if seg.get("device", 0) != device:
            continue
        segs.append([seg["address"], seg["total_size"], seg.get("stream", 0)])
        addr = seg["address"]
        for b in seg.get("blocks", []):
            if b["state"] in ("active_allocated", "active_pending_free"):
                blocks[addr] = [b["size"], b["state"] == "active_pending_free",
                                b.get("requested_size", b["size"])]
            addr += b["size"]
    segs.sort()
    return segs, blocks


def containing(segs, addr, end):
    for i, (a, size, _) in enumerate(segs):
        if a <= addr and end <= a + size:
            return i
    return -1


def check_history(snap, device, trace, p):
    """MemoryView.simulate_memory, for every index at once (backwards, one pass); after each
    event, what it changed is checked (the block it puts back, or the blocks in the range
    of a segment it takes away)."""
    segs, blocks = final_state(snap, device)
    addrs = sorted(blocks)

    def block_ok(addr, where):
        size = blocks[addr][0]
        if containing(segs, addr, addr + size) < 0:
            p.add("history", "%s: block 0x%x (%d bytes) lies in no segment (the viewer stops: "
                  "\"Cannot read properties of null\")" % (where, addr, size))
            return False
        i = bisect.bisect_left(addrs, addr)
        if i > 0 and addrs[i - 1] + blocks[addrs[i - 1]][0] > addr:
            p.add("history", "%s: block 0x%x overlaps the block before it" % (where, addr))
            return False
        if i + 1 < len(addrs) and addr + size > addrs[i + 1]:
            p.add("history", "%s: block 0x%x overlaps the block after it" % (where, addr))
            return False
        return True

    for a in addrs:
        if not block_ok(a, "the final state"):
            return
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        a, act, size = e.get("addr", 0), e["action"], e.get("size", 0)
        where = "event %d (%s 0x%x)" % (i, act, a)
        check = []
        if act == "free" or act == "free_completed":
            if a not in blocks:
                bisect.insort(addrs, a)
            blocks[a] = [size, act == "free_completed", size]
            check = [a]
        elif act == "free_requested":
            if a not in blocks:
                p.add("history", "%s: no live block there to un-request" % where)
                return
            blocks[a][1] = False
        elif act == "alloc":
            if blocks.pop(a, None) is not None:
                addrs.remove(a)
        elif act in ("segment_free", "segment_unmap"):
            segs.append([a, size, e.get("stream", 0)])
            segs.sort()
            if act == "segment_unmap":  # (merged with neighbours of the same stream)
                merged = []
                for s in segs:
                    if merged and merged[-1][0] + merged[-1][1] == s[0] and merged[-1][2] == s[2]:
                        merged[-1][1] += s[1]
                    else:
                        merged.append(s)
                segs = merged
        elif act in ("segment_alloc", "segment_map"):
            j = containing(segs, a, a + size)
            if j < 0 or (act == "segment_alloc" and (segs[j][0] != a or segs[j][1] != size)):
                p.add("history", "%s: no segment holds [0x%x, 0x%x) to take back"
                      % (where, a, a + size))
                return
            s0, s1, st = segs.pop(j)
            if act == "segment_map":
                if s0 < a:
                    segs.append([s0, a - s0, st])
                if a + size < s0 + s1:
                    segs.append([a + size, s0 + s1 - a - size, st])
                segs.sort()
            lo = bisect.bisect_left(addrs, a)
            check = [x for x in addrs[max(0, lo - 1):bisect.bisect_left(addrs, a + size)]]
        for x in check:
            if not block_ok(x, "after undoing " + where):
                return


def check_pairs(snap, device, trace, p):
    requested = set()
    for i, e in enumerate(trace):
        if e["action"] == "oom" and ("addr" in e or "device_free" not in e):
            p.add("oom", "event %d: an oom entry has device_free (the driver's free bytes) "
                  "and no addr, as PyTorch writes it" % i)
        if e["action"] == "free_requested":
            requested.add(e["addr"])
        elif e["action"] == "free_completed":
            if e["addr"] not in requested:
                p.add("pairs", "event %d: free_completed of 0x%x without free_requested"
                      % (i, e["addr"]))
            requested.discard(e["addr"])
    _, blocks = final_state(snap, device)
    for addr, (size, pending, _) in sorted(blocks.items()):
        if pending and addr not in requested:
            p.add("pairs", "block 0x%x (%d bytes) is active_pending_free with no free_requested "
                  "outstanding: drawn red, \"freed but waiting due to record_stream\"" % (addr, size))


def check_timeline(snap, device, trace, p):
    """process_alloc_data: its peak and final total against the events' own."""
    live, viewer_total, viewer_peak = {}, 0, 0
    true_live, true_peak = {}, 0
    initially = 0
    for e in trace:
        a, act, size = e.get("addr", 0), e["action"], e.get("size", 0)
        if act == "alloc":
            live[a] = size
            viewer_total += size
            true_live[a] = size
        elif act in ("free", "free_completed"):
            if a in live:
                viewer_total -= live.pop(a)
            else:
                initially += size  # (an element the viewer draws from the start)
            true_live.pop(a, None)
        viewer_peak = max(viewer_peak, viewer_total)
        true_peak = max(true_peak, sum(true_live.values()))
    _, blocks = final_state(snap, device)
    held = set(blocks)  # (a block waiting for its free to complete is drawn live too)
    ghosts = sorted(set(live) - held)
    if ghosts:
        p.add("timeline", "%d allocation(s) the trace never frees are not in the snapshot at its "
              "end (ghost blocks, drawn live to the end), the first at 0x%x"
              % (len(ghosts), ghosts[0]))
    if viewer_peak + initially != true_peak and ghosts:
        p.add("timeline", "peak %.3f GB as drawn, %.3f GB in truth"
              % ((viewer_peak + initially) / 1e9, true_peak / 1e9))


def check_time(trace, p):
    last = None
    for i, e in enumerate(trace):
        t = e.get("time_us")
        if t is None:
            continue
        if t < EPOCH_2020_US:
            p.add("time", "event %d: time_us %d is not epoch microseconds" % (i, t))
            return
        if last is not None and t < last:
            p.add("time", "event %d: time_us goes back" % i)
            return
        last = t


def check(snap):
    p = Problems()
    check_layout(snap, p)
    for device, trace in enumerate(snap.get("device_traces", [])):
        check_history(snap, device, trace, p)
        check_pairs(snap, device, trace, p)
        check_timeline(snap, device, trace, p)
        check_time(trace, p)
    return p


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__.split("\n\n")[0] + "\n")
        return 2
    bad = 0
    for path in argv[1:]:
        lines = list(check(load(path)).lines())
        if lines:
            bad += 1
            print("%s: the viewer would draw it wrongly:" % path)
            for line in lines:
                print("  " + line)
        else:
            print("%s: as the viewer expects" % path)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
