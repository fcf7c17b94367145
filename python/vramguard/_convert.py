"""A PyTorch memory snapshot's allocation history as an RMM CSV trace for `vramguard replay`.

A user records a run with PyTorch's own allocator
(torch.cuda.memory._record_memory_history(), then _dump_snapshot("snap.pickle")) and asks
what vramguard would reserve on the same allocations:

    python -m vramguard convert snap.pickle trace.csv
    vramguard replay trace.csv

The trace gets a "trace.json" beside it with PyTorch's own figures on those events (peak
allocated, peak reserved), which `vramguard replay` prints next to its own. Standard
library only: the pickle holds builtin types, and is read without running any code from it.
"""
import json
import os
import pickle


class SnapshotError(ValueError):
    """The file is not a PyTorch memory snapshot with an allocation history."""


class _NoCode(pickle.Unpickler):
    def find_class(self, module, name):
        raise SnapshotError("the pickle refers to %s.%s: a PyTorch memory snapshot holds only "
                            "dictionaries, lists, strings and numbers" % (module, name))


def load_snapshot(path):
    """The dictionary torch.cuda.memory._dump_snapshot(path) wrote."""
    try:
        with open(path, "rb") as f:
            snap = _NoCode(f).load()
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e)) from e
    except SnapshotError:
        raise
    except Exception as e:  # truncated or not a pickle at all
        raise SnapshotError("%s is not a pickled PyTorch memory snapshot (%s)" % (path, e)) from e
    if not isinstance(snap, dict) or "device_traces" not in snap:
        raise SnapshotError("%s is not a PyTorch memory snapshot: it has no 'device_traces' "
                            "(was it written by torch.cuda.memory._dump_snapshot?)" % path)
    return snap


_ALLOC = {"alloc"}
_FREE = {"free_requested", "free"}            # the program's free ("free": PyTorch 2.0)
_FREE_LATE = {"free_completed"}               # reuse allowed (after record_stream uses)
_GROW = {"segment_alloc", "segment_map"}
_SHRINK = {"segment_free", "segment_unmap"}
_USED = _ALLOC | _FREE | _FREE_LATE | _GROW | _SHRINK


def _entry(e, i):
    try:
        return e["action"], int(e["addr"]), int(e["size"]), int(e.get("stream", 0) or 0)
    except (KeyError, TypeError, ValueError) as err:
        raise SnapshotError("trace entry %d is malformed (%r)" % (i, err)) from err


def pick_device(snap, device=None):
    """The device whose history to convert: the one asked for, else the only one with
    allocations (the first of several, which the caller may say it chose)."""
    traces = snap.get("device_traces") or []
    with_events = [d for d, t in enumerate(traces)
                   if any(isinstance(e, dict) and e.get("action") in _ALLOC for e in t)]
    if device is not None:
        if device < 0 or device >= len(traces):
            raise SnapshotError("the snapshot has no device %d (it has %d)" % (device, len(traces)))
        return device
    if not with_events:
        raise SnapshotError("the snapshot has no allocation history: record it with "
                            "torch.cuda.memory._record_memory_history() before the code to "
                            "observe, then call _dump_snapshot()")
    return with_events[0]


def convert(snap, device):
    """(rows, figures): the trace's rows (time_us, action, addr, size, stream) in order, and
    PyTorch's figures on them, the keys of bench/traces/*.json."""
    entries = snap["device_traces"][device]
    live = {}         # addr -> (size, stream), allocated in the window and not freed yet
    freed = set()     # addresses freed by the program, waiting for free_completed
    before = []       # (addr, size, stream): live before the history starts
    body = []
    alloc_delta = []  # allocated bytes' change after each row of body
    seg_delta = []    # (body index, change of reserved bytes)
    t0 = None
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise SnapshotError("trace entry %d is not a dictionary" % i)
        if e.get("action") not in _USED:  # ("snapshot", "oom", and what later PyTorch adds)
            continue
        action, addr, size, stream = _entry(e, i)
        t = e.get("time_us")
        t = int(t) if isinstance(t, (int, float)) else i
        t0 = t if t0 is None else t0
        t = max(t - t0, 0)
        if action in _ALLOC:
            if addr in live:
                raise SnapshotError("trace entry %d allocates %#x, which is already live"
                                    % (i, addr))
            freed.discard(addr)
            live[addr] = (size, stream)
            body.append((t, "allocate", addr, size, stream))
            alloc_delta.append(size)
        elif action in _FREE or (action in _FREE_LATE and addr not in freed):
            if addr in live:
                size, stream = live.pop(addr)
            else:  # allocated before the history's first entry
                before.append((addr, size, stream))
            freed.add(addr)
            body.append((t, "free", addr, size, stream))
            alloc_delta.append(-size)
        elif action in _FREE_LATE:
            freed.discard(addr)
        elif action in _GROW:
            seg_delta.append((len(body), size))
        elif action in _SHRINK:
            seg_delta.append((len(body), -size))
    rows = [(0, "allocate", a, s, st) for a, s, st in before] + body

    allocated = peak_alloc = sum(s for _, s, _ in before)
    for d in alloc_delta:
        allocated += d
        peak_alloc = max(peak_alloc, allocated)

    # Reserved: the segments at the end, less what the history added, is what it was at the
    # start; its peak is followed through the segment events.
    final = sum(int(s.get("total_size", 0)) for s in snap.get("segments", [])
                if isinstance(s, dict) and s.get("device", device) == device)
    reserved = final - sum(d for _, d in seg_delta)
    peak_res = reserved
    for _, d in seg_delta:
        reserved += d
        peak_res = max(peak_res, reserved)
    figures = {"events": len(rows), "initial_live": len(before),
               "pytorch_peak_allocated": peak_alloc}
    if final or seg_delta:
        figures["pytorch_peak_reserved"] = peak_res
        if peak_alloc:
            figures["pytorch_reserved_over_allocated"] = round(peak_res / peak_alloc, 4)
    return rows, figures


def write_trace(rows, path):
    with open(path, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n")
        for t, action, addr, size, stream in rows:
            f.write("0,%d,%s,%#x,%d,%d\n" % (t, action, addr, size, stream))


def sidecar_path(trace_path):
    root, ext = os.path.splitext(trace_path)
    return (root if ext.lower() == ".csv" else trace_path) + ".json"


def save(snap, device, path, source):
    """Write the history of `device` (None: the one pick_device() picks) as the trace
    `path` and PyTorch's figures beside it; returns (device, figures). SnapshotError if
    there is nothing to write; OSError if the files cannot be written."""
    d = pick_device(snap, device)
    rows, figures = convert(snap, d)
    if not rows:
        raise SnapshotError("device %d has no allocations in the snapshot's history" % d)
    figures = dict({"source": "%s, device %d" % (source, d)}, **figures)
    figures["pytorch_figures_from"] = "the snapshot's own history and segments"
    write_trace(rows, path)
    with open(sidecar_path(path), "w") as f:
        json.dump(figures, f, indent=1)
        f.write("\n")
    return d, figures


def _bytes(n):
    """As vramguard's own messages write sizes: 18.00 MiB, 5.75 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%.2f %s" % (n / scale, unit)
    return "%d bytes" % n


def main(argv, out, err):
    """python -m vramguard convert SNAPSHOT.pickle [TRACE.csv] [--device=N]"""
    device, paths = None, []
    for a in argv:
        if a.startswith("--device="):
            try:
                device = int(a.split("=", 1)[1])
            except ValueError:
                err.write("vramguard: bad value %r for --device (expected a number)\n" % a[9:])
                return 2
        elif a.startswith("--"):
            err.write("vramguard: unknown flag %r for convert\n" % a)
            return 2
        else:
            paths.append(a)
    if len(paths) not in (1, 2):
        err.write("usage: python -m vramguard convert SNAPSHOT.pickle [TRACE.csv] [--device=N]\n")
        return 2
    src = paths[0]
    dst = paths[1] if len(paths) == 2 else os.path.splitext(src)[0] + ".csv"
    if os.path.abspath(dst) == os.path.abspath(src):
        err.write("vramguard: the trace would overwrite the snapshot %s: name the trace\n" % src)
        return 2
    try:
        d, figures = save(load_snapshot(src), device, dst,
                          "%s (python -m vramguard convert)" % src)
    except SnapshotError as e:
        err.write("vramguard: %s\n" % e)
        return 2
    except OSError as e:
        err.write("vramguard: cannot write %s: %s\n" % (e.filename or dst, e.strerror or e))
        return 2
    n = figures["initial_live"]
    out.write("%s: %d events of device %d (%d allocation%s live before the history began)\n"
              % (dst, figures["events"], d, n, "" if n == 1 else "s"))
    # (the sizes asked for: PyTorch's max_memory_allocated counts whole blocks, a little more)
    line = "PyTorch's allocator: peak requested %s" % _bytes(figures["pytorch_peak_allocated"])
    if "pytorch_peak_reserved" in figures:
        line += ", peak reserved %s" % _bytes(figures["pytorch_peak_reserved"])
    out.write(line + " (in %s)\n" % sidecar_path(dst))
    out.write("next: vramguard replay %s\n" % dst)
    return 0
