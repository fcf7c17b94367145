"""scripts/viewer_check.py, on snapshots made by hand in PyTorch's structure: one the
viewer draws as its events say, and one of each way vramguard's snapshots have gone wrong
in it (issue 33: a lone free_completed, blocks with addresses of their own over holes,
live blocks drawn "waiting due to record_stream", a ghost allocation, time_us from 0)."""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import viewer_check  # noqa: E402

MB = 1 << 20
T0 = 1764000000 * 10**6  # (epoch microseconds)


def good():
    """One 2 MiB segment: a 1 MiB block allocated, freed, and a 512 KiB one live at the end."""
    base = 0x7F0000000000
    return {
        "segments": [{
            "device": 0, "address": base, "total_size": 2 * MB, "stream": 0,
            "blocks": [
                {"address": base, "size": MB // 2, "requested_size": MB // 2 - 100,
                 "state": "active_allocated", "frames": []},
                {"address": base + MB // 2, "size": 3 * MB // 2, "requested_size": 0,
                 "state": "inactive", "frames": []},
            ]}],
        "device_traces": [[
            {"action": "segment_alloc", "addr": base, "size": 2 * MB, "stream": 0, "time_us": T0},
            {"action": "alloc", "addr": base, "size": MB, "stream": 0, "time_us": T0 + 1},
            {"action": "free_requested", "addr": base, "size": MB, "stream": 0, "time_us": T0 + 2},
            {"action": "free_completed", "addr": base, "size": MB, "stream": 0, "time_us": T0 + 3},
            {"action": "alloc", "addr": base, "size": MB // 2, "stream": 0, "time_us": T0 + 4},
        ]],
    }


def problems(snap):
    return list(viewer_check.check(snap).lines())


class ViewerCheck(unittest.TestCase):
    def test_a_snapshot_drawn_as_its_events_say(self):
        self.assertEqual(problems(good()), [])

    def test_a_lone_free_completed(self):
        snap = good()
        del snap["device_traces"][0][2]
        self.assertTrue(any("without free_requested" in p for p in problems(snap)))

    def test_blocks_not_laid_end_to_end(self):
        snap = good()
        snap["segments"][0]["blocks"][1]["address"] += 4096  # (a hole before it)
        self.assertTrue(any(p.startswith("layout:") for p in problems(snap)))

    def test_a_block_in_no_segment_stops_the_history(self):
        snap = good()
        snap["segments"][0]["total_size"] = MB // 4  # (an unmapped hole, as vmm leaves)
        snap["segments"][0]["blocks"] = snap["segments"][0]["blocks"][:1]
        snap["segments"][0]["blocks"][0]["size"] = MB // 4
        found = problems(snap)
        self.assertTrue(any("lies in no segment" in p for p in found), found)

    def test_a_live_block_drawn_as_waiting_for_record_stream(self):
        snap = good()
        snap["segments"][0]["blocks"][0]["state"] = "active_pending_free"
        self.assertTrue(any("record_stream" in p for p in problems(snap)))

    def test_a_ghost_allocation(self):
        snap = good()
        trace = snap["device_traces"][0]
        trace.append({"action": "alloc", "addr": 0x7F0000100000, "size": MB, "stream": 0,
                      "time_us": T0 + 5})  # (never freed, yet not in the segments)
        self.assertTrue(any("ghost" in p for p in problems(snap)))

    def test_time_from_zero(self):
        snap = good()
        for i, e in enumerate(snap["device_traces"][0]):
            e["time_us"] = i
        self.assertTrue(any(p.startswith("time:") for p in problems(snap)))

    def test_an_oom_entry_as_pytorch_writes_it(self):
        snap = good()
        oom = {"action": "oom", "size": 1 << 40, "stream": 0, "time_us": T0 + 5}
        snap["device_traces"][0].append(dict(oom, device_free=3 << 30))
        self.assertEqual(problems(snap), [])
        snap["device_traces"][0][-1] = dict(oom, addr=0, device_free=0)
        self.assertTrue(any(p.startswith("oom:") for p in problems(snap)))

    def test_an_unmap_of_memory_no_segment_holds(self):
        snap = copy.deepcopy(good())
        snap["device_traces"][0].insert(1, {"action": "segment_map", "addr": 0x7E0000000000,
                                            "size": 2 * MB, "stream": 0, "time_us": T0})
        self.assertTrue(any("no segment holds" in p for p in problems(snap)))


if __name__ == "__main__":
    unittest.main()
