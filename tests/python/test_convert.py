"""python -m vramguard convert: a PyTorch memory snapshot's history as a replayable trace.
Environment (set by CTest): VG (the CLI)."""
import collections
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

from vramguard import _convert

MiB = 1 << 20


def snapshot():
    """What torch.cuda.memory._snapshot() gives after _record_memory_history(): the
    history starts while A (1 MiB, in a 2 MiB segment) is live; C is used by a side stream
    (record_stream), so its free completes later."""
    A, B, C, D, S = 0x7f0000000000, 0x7f0000200000, 0x7f0000a00000, 0x7f0000e00000, 0x7f0000200000
    ev = lambda action, addr, size, stream=0, t=0: {  # noqa: E731
        "action": action, "addr": addr, "size": size, "stream": stream, "time_us": 1000 + t,
        "frames": [{"filename": "train.py", "line": 7, "name": "step"}]}
    trace = [ev("free_requested", A, MiB, t=1), ev("free_completed", A, MiB, t=1),
             ev("segment_alloc", S, 20 * MiB, t=2), ev("alloc", B, 8 * MiB, t=3),
             ev("alloc", C, 4 * MiB, 0, t=4), ev("free_requested", B, 8 * MiB, t=5),
             ev("alloc", D, 2 * MiB, 7, t=6), ev("snapshot", 0, 0, t=7),
             {"action": "oom", "device_free": 0},  # (entries of other kinds are skipped)
             ev("free_requested", C, 4 * MiB, t=8), ev("free_completed", C, 4 * MiB, t=9),
             ev("free_completed", B, 8 * MiB, t=9)]
    segs = [{"device": 0, "address": 0x7f0000000000, "total_size": 2 * MiB, "blocks": []},
            {"device": 0, "address": S, "total_size": 20 * MiB, "blocks": []}]
    return {"segments": segs, "device_traces": [trace, []], "allocator_settings": {}}


def convert(tmp, obj, *extra):
    src = os.path.join(tmp, "snap.pickle")
    with open(src, "wb") as f:
        f.write(obj if isinstance(obj, bytes) else pickle.dumps(obj))
    return subprocess.run([sys.executable, "-m", "vramguard", "convert", src,
                           os.path.join(tmp, "trace.csv")] + list(extra),
                          capture_output=True, text=True)


class Convert(unittest.TestCase):
    def test_rows_and_pytorch_figures(self):
        rows, fig = _convert.convert(snapshot(), 0)
        self.assertEqual([(a, s, st) for _, a, _, s, st in rows],
                         [("allocate", MiB, 0), ("free", MiB, 0), ("allocate", 8 * MiB, 0),
                          ("allocate", 4 * MiB, 0), ("free", 8 * MiB, 0),
                          ("allocate", 2 * MiB, 7), ("free", 4 * MiB, 0)])
        self.assertEqual(rows[0][0], 0)                  # live before: at time 0
        self.assertEqual([r[0] for r in rows[1:]], [0, 2, 3, 4, 5, 7])  # from the first entry
        self.assertEqual(fig["initial_live"], 1)
        self.assertEqual(fig["pytorch_peak_allocated"], 12 * MiB)
        self.assertEqual(fig["pytorch_peak_reserved"], 22 * MiB)  # 2 before, 20 added

    def test_command_writes_a_trace_that_replay_compares(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = convert(tmp, snapshot())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("next: vramguard replay", r.stdout)
            with open(os.path.join(tmp, "trace.json")) as f:
                fig = json.load(f)
            self.assertEqual(fig["events"], 7)
            self.assertEqual(fig["pytorch_peak_reserved"], 22 * MiB)
            replay = subprocess.run([os.environ["VG"], "replay", "--json", "--repeat=1",
                                     os.path.join(tmp, "trace.csv")],
                                    capture_output=True, text=True)
            self.assertEqual(replay.returncode, 0, replay.stderr)
            out = json.loads(replay.stdout)
            self.assertEqual(out["events"], 7)
            self.assertEqual(out["pytorch_peak_reserved"], 22 * MiB)
            self.assertEqual(out["pytorch_peak_allocated"], 12 * MiB)
            self.assertEqual(out["peak_allocated"], 12 * MiB)  # the same live bytes

    def test_from_a_snapshot_in_memory(self):
        import vramguard
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.csv")
            fig = vramguard.trace_from_snapshot(snapshot(), path)
            self.assertEqual(fig["pytorch_peak_reserved"], 22 * MiB)
            with open(path) as f:
                self.assertEqual(len(f.read().splitlines()), 1 + 7)
            with open(os.path.join(tmp, "t.json")) as f:
                self.assertEqual(json.load(f)["pytorch_peak_allocated"], 12 * MiB)
            with self.assertRaises(ValueError):
                vramguard.trace_from_snapshot({"segments": []}, path)

    def test_bad_input_is_refused_clearly(self):
        with tempfile.TemporaryDirectory() as tmp:
            cases = [(b"Thread,Time\n", "not a pickled PyTorch memory snapshot"),
                     (pickle.dumps(collections.OrderedDict()), "refers to collections.OrderedDict"),
                     ({"segments": []}, "has no 'device_traces'"),
                     ({"segments": [], "device_traces": [[]]}, "no allocation history"),
                     ({"device_traces": [[{"action": "alloc"}]]}, "entry 0 is malformed"),
                     (pickle.dumps(snapshot())[:200], "not a pickled")]
            for data, message in cases:
                r = convert(tmp, data)
                self.assertEqual(r.returncode, 2, (message, r.stderr))
                self.assertIn(message, r.stderr)
                self.assertEqual(r.stderr.count("\n"), 1, r.stderr)  # one line, no traceback
            same = os.path.join(tmp, "s.csv")
            with open(same, "wb") as f:
                pickle.dump(snapshot(), f)
            r = subprocess.run([sys.executable, "-m", "vramguard", "convert", same],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("would overwrite", r.stderr)
            with open(same, "rb") as f:
                self.assertEqual(pickle.load(f), snapshot())  # untouched
            r = convert(tmp, snapshot(), "--device=5")
            self.assertEqual(r.returncode, 2)
            self.assertIn("no device 5", r.stderr)


if __name__ == "__main__":
    unittest.main()
