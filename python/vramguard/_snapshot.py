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


def _mapped_ranges(size, unmapped):
    """[0, size) minus the unmapped runs, as (start, end) ranges in order."""
    ranges, at = [], 0
    for u_off, u_len in sorted(unmapped):
        if u_off > at:
            ranges.append((at, u_off))
        at = max(at, u_off + u_len)
    if at < size:
        ranges.append((at, size))
    return ranges


def _viewer_blocks(seg, lo, hi, sites):
    """The blocks of mapped range [lo, hi) of vramguard segment seg, laid end to end from lo
    as PyTorch's viewer lays them: an allocation starts at the pointer handed out (guard
    mode's left redzone becomes a block of free-looking space before it, its right redzone
    the rounding the viewer draws after its requested bytes); free space fills the rest."""
    out, at = [], lo

    def gap(end):
        nonlocal at
        if end > at:
            out.append({"size": end - at, "requested_size": 0, "state": "inactive",
                        "frames": []})
            at = end

    for b in sorted(seg.get("blocks", []), key=lambda b: b["offset"]):
        start, end = b["offset"], b["offset"] + b["size"]
        if end <= lo or start >= hi:
            continue
        state = _STATE.get(b["state"], "inactive")
        if state == "inactive":
            continue  # (free space: the gaps)
        user = _addr(b["address"]) - _addr(seg["address"]) if "address" in b else start
        gap(max(user, lo))
        out.append({"size": min(end, hi) - at, "requested_size": b.get("requested", 0),
                    "state": state, "frames": _frames(sites, b.get("site", 0)),
                    "stream": _addr(b.get("stream", "0x0"))})  # (beside PyTorch's keys: a
        # segment of vramguard's serves every stream, so each block names its own)
        at = min(end, hi)
    gap(hi)
    base = _addr(seg["address"])
    addr = base + lo
    for b in out:
        b["address"] = addr
        addr += b["size"]
    return out


def _pending_frees(dev):
    """Addresses whose last free is not complete at the end: quarantined or deferred blocks
    (their memory not reusable yet), for free_requested without free_completed."""
    pending = set()
    for seg in dev.get("segments", []):
        for b in seg.get("blocks", []):
            if _STATE.get(b["state"]) == "active_pending_free" and "address" in b:
                pending.add(_addr(b["address"]))
    return pending


def _segment_action(ev, vmm_ranges, any_vmm):
    """map/unmap as PyTorch names them: pages of a virtual-memory range are mapped
    (expandable segments), a cuMemAlloc segment is allocated."""
    a = _addr(ev["address"])
    inside = any(lo <= a < hi for lo, hi in vmm_ranges)
    mapped = inside or (any_vmm and not vmm_ranges)
    if ev["action"] == "map":
        return "segment_map" if mapped else "segment_alloc"
    return "segment_unmap" if mapped else "segment_free"


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
        vmm_ranges, any_vmm = [], False
        for seg in dev.get("segments", []):
            base = _addr(seg["address"])
            any_vmm |= bool(seg.get("vmm"))
            if seg.get("vmm"):
                vmm_ranges.append((base, base + seg["size"]))
            unmapped = [tuple(u) for u in seg.get("unmapped", [])]
            for lo, hi in _mapped_ranges(seg["size"], unmapped):
                blocks = _viewer_blocks(seg, lo, hi, sites)
                live = [b for b in blocks if b["state"] != "inactive"]
                segments.append({
                    "device": d, "address": base + lo, "total_size": hi - lo,
                    "allocated_size": sum(b["size"] for b in live
                                          if b["state"] == "active_allocated"),
                    "active_size": sum(b["size"] for b in live),
                    "requested_size": sum(b["requested_size"] for b in live
                                          if b["state"] == "active_allocated"),
                    "stream": 0,
                    "segment_type": "small" if seg.get("small") else "large",
                    "segment_pool_id": (0, 0),
                    "is_expandable": bool(seg.get("vmm")), "frames": [],
                    "blocks": blocks})
        pending = _pending_frees(dev)
        events = dev.get("events", [])
        last_free = {}
        for i, ev in enumerate(events):
            if ev["action"] == "free":
                last_free[_addr(ev["address"])] = i
        # (epoch microseconds, as PyTorch writes them: from the wall clock the snapshot
        # read beside its monotonic one; a snapshot without it counts from its first event)
        shift = snap["unix_ns"] - snap["time_ns"] if "unix_ns" in snap else \
            -(events[0]["t_ns"] if events else 0)
        for i, ev in enumerate(events):
            action = ev["action"]
            entry = {"addr": _addr(ev["address"]), "size": ev["size"],
                     "stream": _addr(ev.get("stream", "0x0")),
                     "time_us": (ev["t_ns"] + shift) // 1000,
                     "frames": _frames(sites, ev.get("site", 0))}
            if action in ("map", "unmap"):
                traces[d].append(dict(entry, action=_segment_action(ev, vmm_ranges, any_vmm)))
            elif action == "free":
                traces[d].append(dict(entry, action="free_requested"))
                if not (entry["addr"] in pending and last_free[entry["addr"]] == i):
                    traces[d].append(dict(entry, action="free_completed"))
            elif action == "oom":  # (its address: the driver's free bytes, as PyTorch's)
                oom = dict(entry, action="oom", device_free=entry["addr"])
                del oom["addr"]  # (PyTorch's oom entries have device_free in its place)
                traces[d].append(oom)
            else:
                traces[d].append(dict(entry, action=_ACTION.get(action, action)))
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": _settings(snap, any(s["is_expandable"] for s in segments)),
            "external_annotations": []}


def _settings(snap, expandable):
    """PyTorch's allocator_settings keys, with what they mean here: vramguard's virtual-memory
    segments are expandable segments; nothing is split or collected by threshold; pinned
    memory is PyTorch's own business. vramguard's backend and mode beside them."""
    return {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": expandable,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
            "backend": "vramguard", "mode": snap.get("mode", "fast")}
