"""vramguard's snapshot JSON (docs/snapshot-format.md) in PyTorch's snapshot structure.

PyTorch's memory viewer (https://pytorch.org/memory_viz) and torch.cuda._memory_viz read
the dictionary torch.cuda.memory._snapshot() returns: "segments" (each with its blocks)
and "device_traces" (per device, the allocator's events). This module builds the same
from a vramguard snapshot, using the standard library only."""
import re

_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")

_STATE = {"allocated": "active_allocated", "quarantined": "active_pending_free",
          "deferred": "active_pending_free", "free": "inactive",
          "pooled": "inactive"}  # (kept by a CUDA graph's pool, as in PyTorch's private pools)
_ACTION = {"alloc": "alloc", "free": "free_completed", "map": "segment_map",
           "unmap": "segment_unmap", "oom": "oom"}


def _frame(text):
    m = _FRAME.match(text)
    if not m:
        return {"name": text, "filename": "??", "line": 0}
    return {"name": m.group("name"), "filename": m.group("file"),
            "line": int(m.group("line") or 0)}


def _frames(sites, site_id):
    """A site's frames, innermost first; a frame the symbolizer found inlined ("f (a.c:3)
    inlined into g (b.c:9)") is each function's own frame, as PyTorch lists them."""
    out = []
    for text in sites.get(site_id, []):
        out.extend(_frame(part) for part in text.split(" inlined into "))
    return out


def _addr(v):
    return int(v, 16) if isinstance(v, str) else int(v)


def _mapped_parts(offset, size, unmapped):
    """[offset, offset+size) minus the unmapped runs, as (offset, size) pieces."""
    pieces = [(offset, offset + size)]
    for u_off, u_len in unmapped:
        out = []
        for lo, hi in pieces:
            a, b = u_off, u_off + u_len
            if b <= lo or a >= hi:
                out.append((lo, hi))
                continue
            if lo < a:
                out.append((lo, a))
            if b < hi:
                out.append((b, hi))
        pieces = out
    return [(lo, hi - lo) for lo, hi in pieces if hi > lo]


def to_pytorch(snap):
    """The PyTorch snapshot dictionary for a parsed vramguard snapshot."""
    if snap.get("format") != "vramguard-snapshot":
        raise ValueError("not a vramguard snapshot (format %r)" % snap.get("format"))
    sites = {s["id"]: s["frames"] for s in snap.get("sites", [])}
    segments, traces = [], []
    for dev in snap.get("devices", []):
        d = dev["device"]
        while len(traces) <= d:
            traces.append([])
        for seg in dev.get("segments", []):
            base = _addr(seg["address"])
            unmapped = [tuple(u) for u in seg.get("unmapped", [])]
            blocks, allocated, active, requested = [], 0, 0, 0
            for b in seg.get("blocks", []):
                state = _STATE.get(b["state"], "inactive")
                frames = _frames(sites, b.get("site", 0))
                parts = _mapped_parts(b["offset"], b["size"], unmapped) if state == "inactive" \
                    else [(b["offset"], b["size"])]
                for off, size in parts:
                    blocks.append({"address": base + off, "size": size,
                                   "requested_size": b.get("requested", 0) if state != "inactive" else 0,
                                   "state": state, "frames": frames})
                if state == "active_allocated":
                    allocated += b["size"]
                    requested += b.get("requested", 0)
                if state != "inactive":
                    active += b["size"]
            mapped = seg["size"] - sum(u[1] for u in unmapped)
            segments.append({"device": d, "address": base, "total_size": mapped,
                             "allocated_size": allocated, "active_size": active,
                             "requested_size": requested, "stream": _addr(seg.get("stream", "0x0")),
                             "segment_type": "small" if seg.get("small") else "large",
                             "segment_pool_id": (0, 0),
                             "is_expandable": bool(seg.get("vmm")), "frames": [],
                             "blocks": blocks})
        t0 = None
        for ev in dev.get("events", []):
            t0 = ev["t_ns"] if t0 is None else t0
            entry = {"action": _ACTION.get(ev["action"], ev["action"]), "addr": _addr(ev["address"]),
                     "size": ev["size"], "stream": _addr(ev.get("stream", "0x0")),
                     "time_us": (ev["t_ns"] - t0) // 1000,
                     "frames": _frames(sites, ev.get("site", 0))}
            if entry["action"] == "oom":
                entry["device_free"] = 0
            traces[d].append(entry)
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"backend": "vramguard", "mode": snap.get("mode", "fast")}}
