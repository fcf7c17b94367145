"""Tests of python/vramguard that need no GPU and no PyTorch: the option strings, the
snapshot conversion to PyTorch's structure, and the ctypes bindings on vgsim.
Environment (set by CTest): VRAMGUARD_LIB, VG (the CLI), VGSIM_LIB, TRACES."""
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

import vramguard
from vramguard import _lib
from vramguard._snapshot import to_pytorch


class Options(unittest.TestCase):
    def test_string(self):
        self.assertEqual(vramguard.options_string("guard", limit="15G", redzone=512, leaks=True),
                         "mode=guard,leaks=1,limit=15G,redzone=512")
        self.assertEqual(vramguard.options_string(), "")
        # memcheck_kernels is a list: its patterns may be given with commas, or as a list.
        self.assertEqual(vramguard.options_string("memcheck", memcheck_kernels="*a*,*b*"),
                         "mode=memcheck,memcheck_kernels=*a*,*b*")
        self.assertEqual(vramguard.options_string(memcheck_kernels=["*gather*", "ex_su?"],
                                                  verbose=1),
                         "memcheck_kernels=*gather*,ex_su?,verbose=1")

    def test_pytorch_defaults(self):
        # The at-exit leak list is off for PyTorch unless asked for, here or in the env.
        self.assertEqual(vramguard.pytorch_defaults({"limit": "15G"}, {}),
                         {"limit": "15G", "leaks": "off"})
        self.assertEqual(vramguard.pytorch_defaults({"leaks": "on"}, {}), {"leaks": "on"})
        self.assertEqual(vramguard.pytorch_defaults({}, {"VRAMGUARD_OPTIONS": "mode=guard,leaks=on"}),
                         {})
        # Guard mode names Python lines in its reports, unless told otherwise.
        self.assertEqual(vramguard.pytorch_defaults({}, {}, mode="guard"),
                         {"leaks": "off", "python_frames": "1"})
        self.assertEqual(vramguard.pytorch_defaults({"python_frames": 0}, {}, mode="guard"),
                         {"leaks": "off", "python_frames": 0})
        self.assertNotIn("python_frames", vramguard.pytorch_defaults({}, {}, mode="fast"))

    def test_bad(self):
        with self.assertRaises(ValueError):
            vramguard.options_string("turbo")
        with self.assertRaises(ValueError):
            vramguard.options_string(report="a,b")
        with self.assertRaises(ValueError):
            vramguard.options_string(memcheck_kernels="a=b")
        with self.assertRaises(ValueError):
            vramguard.options_string(**{"bad key": 1})


def replay_snapshot(tmp):
    path = os.path.join(tmp, "s.json")
    subprocess.run([os.environ["VG"], "replay", "--repeat=1", "--snapshot=" + path,
                    os.path.join(os.environ["TRACES"], "transformer_ctx128_forward_mixed.csv")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


class Snapshot(unittest.TestCase):
    def test_pytorch_structure(self):
        with tempfile.TemporaryDirectory() as tmp:
            snap = replay_snapshot(tmp)
        pt = to_pytorch(snap)
        self.assertEqual(set(pt), {"segments", "device_traces", "allocator_settings",
                                   "external_annotations"})
        for key in ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
                    "expandable_segments", "roundup_power2_divisions"):  # (PyTorch's keys)
            self.assertIn(key, pt["allocator_settings"])
        self.assertTrue(pt["segments"])
        self.assertEqual({s["segment_type"] for s in pt["segments"]}, {"small", "large"})
        seg = pt["segments"][0]
        for key in ("device", "address", "total_size", "allocated_size", "active_size",
                    "requested_size", "stream", "segment_type", "blocks", "frames"):
            self.assertIn(key, seg)
        trace = pt["device_traces"][0]
        actions = {e["action"] for e in trace}
        self.assertTrue({"alloc", "free_completed", "segment_map"} <= actions, actions)
        allocs = [e for e in trace if e["action"] == "alloc"]
        self.assertEqual(len(allocs), sum(1 for e in snap["devices"][0]["events"]
                                          if e["action"] == "alloc"))
        frames = allocs[0]["frames"]
        # (The frames are the CLI's own: a line where it was built with debug information,
        # as in Debug and RelWithDebInfo builds; 0, PyTorch's "unknown", in a Release build.
        # With the lines, the replay's operation inlined into its loop is a frame of its
        # own, as PyTorch lists inlined frames; without them only the loop is seen.)
        with open(os.environ["VG"], "rb") as f:
            cli_has_lines = b".debug_line" in f.read()
        names = [f["name"] for f in frames[:2]]
        self.assertEqual(names[:2] if cli_has_lines else names[:1],
                         ["run_op", "run_once"] if cli_has_lines else ["run_once"], frames[:3])
        frame = frames[1] if cli_has_lines else frames[0]
        self.assertTrue(frame["filename"].endswith("cmd_replay.c"))
        if cli_has_lines:
            self.assertGreater(frame["line"], 0)
        else:
            self.assertEqual(frame["line"], 0)
        times = [e["time_us"] for e in trace]
        self.assertEqual(times, sorted(times))
        pickle.loads(pickle.dumps(pt))  # what dump_snapshot writes

    def test_not_a_snapshot(self):
        with self.assertRaises(ValueError):
            to_pytorch({"format": "something else"})


class Bindings(unittest.TestCase):
    """The library through ctypes, on vgsim (what enable() uses underneath)."""

    @classmethod
    def setUpClass(cls):
        l = _lib.lib()
        opts = "driver=%s,snapshot_events=1000" % os.environ["VGSIM_LIB"]
        _lib.check(l.vg_init(opts.encode()), "vg_init")

    def test_stats_summary_snapshot(self):
        import ctypes
        l = _lib.lib()
        p = ctypes.c_void_p()
        _lib.check(l.vg_malloc(ctypes.byref(p), 1 << 20, None), "vg_malloc")
        stats = vramguard.memory_stats()
        self.assertGreaterEqual(stats["allocated_bytes.all.current"], 1 << 20)
        self.assertIn("num_ooms", stats)
        summary = vramguard.memory_summary()
        self.assertIn("Allocated memory", summary)
        snap = vramguard.snapshot()
        self.assertTrue(any(b["state"] == "active_allocated" and b["address"] == p.value
                            for s in snap["segments"] for b in s["blocks"]))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "snap.pickle")
            vramguard.dump_snapshot(path)
            with open(path, "rb") as f:
                self.assertEqual(set(pickle.load(f)), {"segments", "device_traces",
                                                       "allocator_settings",
                                                       "external_annotations"})
        _lib.check(l.vg_free(p, None), "vg_free")
        self.assertEqual(vramguard.check(), 0)
        self.assertEqual(vramguard.errors(), [])

    def test_torch_cuda_statistics_answer_from_vramguard(self):
        import ctypes
        import types
        calls = []

        def raises(*a, **k):
            raise RuntimeError("CUDAPluggableAllocator does not yet support getDeviceStats")
        memory = types.SimpleNamespace(memory_stats=raises, memory_summary=raises,
                                       reset_peak_memory_stats=raises,
                                       reset_accumulated_memory_stats=raises)
        cuda = types.SimpleNamespace(memory=memory, current_device=lambda: 0, **vars(memory))
        fake = types.SimpleNamespace(cuda=cuda, device=lambda d: types.SimpleNamespace(
            index=int(str(d).split(":")[1]) if ":" in str(d) else None))
        l = _lib.lib()
        vramguard._wire_stats(fake, l)

        # torch.cuda.max_memory_allocated() and its kin read memory_stats() from the module
        def max_memory_allocated(device=None):
            return fake.cuda.memory.memory_stats(device=device).get("allocated_bytes.all.peak", 0)
        p = ctypes.c_void_p()
        _lib.check(l.vg_malloc(ctypes.byref(p), 3 << 20, None), "vg_malloc")
        for ns in (fake.cuda, fake.cuda.memory):
            s = ns.memory_stats()
            self.assertEqual(list(s), sorted(s))
            self.assertGreaterEqual(s["allocated_bytes.all.current"], 3 << 20)
            self.assertEqual(ns.memory_stats("cuda:0"), s)
            self.assertIn("Allocated memory", ns.memory_summary(device=0, abbreviated=True))
        self.assertGreaterEqual(max_memory_allocated("cuda"), 3 << 20)
        _lib.check(l.vg_free(p, None), "vg_free")
        self.assertGreaterEqual(max_memory_allocated(), 3 << 20)
        fake.cuda.reset_peak_memory_stats()
        self.assertEqual(max_memory_allocated(),
                         fake.cuda.memory_stats()["allocated_bytes.all.current"])
        fake.cuda.memory.reset_accumulated_memory_stats(0)
        self.assertEqual(fake.cuda.memory_stats()["allocated_bytes.all.freed"], 0)

    def test_pytorch_memory_history_workflow(self):
        import ctypes
        import types
        mem = types.SimpleNamespace()
        l = _lib.lib()
        vramguard._wire_history(mem, l)
        mem._record_memory_history(max_entries=100)
        p = ctypes.c_void_p()
        _lib.check(l.vg_malloc(ctypes.byref(p), 1 << 20, None), "vg_malloc")
        _lib.check(l.vg_free(p, None), "vg_free")
        trace = mem._snapshot()["device_traces"][0]
        self.assertEqual([e["action"] for e in trace if not e["action"].startswith("segment")][-3:],
                         ["alloc", "free_requested", "free_completed"])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.pickle")
            mem._dump_snapshot(path)
            with open(path, "rb") as f:
                self.assertIn("device_traces", pickle.load(f))
        mem._record_memory_history(enabled=None)
        self.assertEqual(mem._snapshot()["device_traces"][0], [])

    def test_a_snapshot_after_empty_cache_is_drawn_right(self):
        """Issue 33: after empty_cache the viewer's history and timeline still add up
        (scripts/viewer_check.py), with the pages given back as segment_unmap."""
        import ctypes
        import types
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "scripts"))
        import viewer_check
        mem = types.SimpleNamespace()
        l = _lib.lib()
        vramguard._wire_history(mem, l)
        mem._record_memory_history(max_entries=1000)
        ptrs = []
        for size in (1 << 20, 3 << 20, 200 << 20, 5000, 64 << 20):
            p = ctypes.c_void_p()
            _lib.check(l.vg_malloc(ctypes.byref(p), size, None), "vg_malloc")
            ptrs.append(p)
        for p in ptrs[1:4]:
            _lib.check(l.vg_free(p, None), "vg_free")
        l.vg_empty_cache()
        pt = mem._snapshot()
        self.assertEqual(list(viewer_check.check(pt).lines()), [])
        actions = {e["action"] for e in pt["device_traces"][0]}
        self.assertTrue({"free_requested", "free_completed", "segment_unmap"} <= actions
                        or {"free_requested", "free_completed", "segment_free"} <= actions,
                        actions)
        for p in (ptrs[0], ptrs[4]):
            _lib.check(l.vg_free(p, None), "vg_free")
        mem._record_memory_history(enabled=None)

    def test_the_cuda_graph_hooks_are_given_to_pytorch(self):
        """enable() hands PyTorch's allocator the three graph hooks (A7): begin from
        libvramguard_torch.so (it keeps PyTorch's filter) where it exists, end and release."""
        import ctypes
        import types
        given = {}
        hooks = types.SimpleNamespace(**{
            name: (lambda n: lambda addr: given.__setitem__(n, addr))(name)
            for name in ("set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn",
                         "set_release_pool")})
        l = _lib.lib()
        addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
        entry = _lib.torch_entry()[0]
        vramguard._wire_graph_hooks(hooks, l, entry)
        begin = (ctypes.CDLL(entry).vg_torch_begin_allocate_to_pool_filtered
                 if entry != _lib.path() else l.vg_torch_begin_allocate_to_pool)
        self.assertEqual(given, {"set_begin_allocate_to_pool": addr(begin),
                                 "set_end_allocate_to_pool_fn": addr(l.vg_torch_end_allocate_to_pool),
                                 "set_release_pool": addr(l.vg_torch_release_pool)})
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):  # PyTorch < 2.3: no hooks, and a warning
            vramguard._wire_graph_hooks(types.SimpleNamespace(), l, entry)
        self.assertIn("no CUDA graph hooks", err.getvalue())

    def test_compiled_graphs_do_without_graph_trees(self):
        """enable() turns off torch.compile's CUDA graph trees (they need allocator
        checkpoints), whether inductor's config is imported before or after."""
        import importlib
        import types
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "vgfake_inductor"))
        open(os.path.join(d, "vgfake_inductor", "__init__.py"), "w").close()
        with open(os.path.join(d, "vgfake_inductor", "config.py"), "w") as f:
            f.write("class triton:\n    cudagraph_trees = True\n    cudagraphs = False\n")
        sys.path.insert(0, d)
        try:
            vramguard._after_import("vgfake_inductor.config", vramguard._no_graph_trees)
            config = importlib.import_module("vgfake_inductor.config")
            self.assertFalse(config.triton.cudagraph_trees)
            self.assertFalse(any(isinstance(f, vramguard._AfterImport) for f in sys.meta_path))
            config.triton.cudagraph_trees = True  # already imported: at once
            vramguard._after_import("vgfake_inductor.config", vramguard._no_graph_trees)
            self.assertFalse(config.triton.cudagraph_trees)
        finally:
            sys.path.remove(d)
        vramguard._no_graph_trees(types.SimpleNamespace())  # no triton section: nothing

    def test_errors_are_explained(self):
        import ctypes
        with self.assertRaises(vramguard.VramguardError) as cm:
            _lib.check(_lib.lib().vg_free(ctypes.c_void_p(0xdead0000), None), "vg_free")
        self.assertIn("never allocated", str(cm.exception))


class AutoStep(unittest.TestCase):
    def test_one_mark_per_step_of_the_first_optimizer(self):
        marks = []
        auto = vramguard._AutoStep(lambda: marks.append(1))
        gen, disc = object(), object()
        for _ in range(3):  # a GAN's loop: two optimizers step each iteration
            auto(disc, (), {})
            auto(gen, (), {})
        self.assertEqual(len(marks), 3)
        auto.on = False  # (what a call to step() does)
        auto(disc, (), {})
        self.assertEqual(len(marks), 3)

    def test_auto_step_values(self):
        self.assertFalse(vramguard._truthy("off"))
        self.assertFalse(vramguard._truthy("0"))
        self.assertTrue(vramguard._truthy(True))


class Combined(unittest.TestCase):
    """vramguard run and the package in one process (combined_child.py): the package's
    allocation, the program's kernel launch, one report naming both lines and the kernel."""

    @unittest.skipIf(sys.version_info < (3, 11), "a multi-line call's line differs before 3.11")
    def test_the_report_names_the_kernel_and_the_python_lines(self):
        import json
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        child = os.path.join(here, "combined_child.py")
        ptx = os.path.join(here, "..", "..", "examples", "kernels.ptx")
        with open(child) as f:
            at = {tag: i + 1 for i, text in enumerate(f) for tag in ("ALLOC", "LAUNCH", "BUG")
                  if "# " + tag in text}
        with tempfile.TemporaryDirectory() as tmp:
            rj = os.path.join(tmp, "r.json")
            r = subprocess.run([os.environ["VG"], "run", "--sim", "--mode=guard",
                                "--report_json=" + rj, "--", sys.executable, child, ptx],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("filled", r.stdout)
            with open(rj) as f:
                reports = json.load(f)
        self.assertEqual(r.stderr.count("ERROR SUMMARY"), 1, r.stderr)
        self.assertEqual([x["kind"] for x in reports], ["out_of_bounds_after"], r.stderr)
        oob = reports[0]
        self.assertEqual((oob["allocation"]["size"], oob["damage"]["first_offset"],
                          oob["damage"]["bytes"]), (4000, 4000, 16), oob)
        self.assertEqual(oob["allocation"]["allocated_at"][:2], [
            "tensor (%s:%d)" % (child, at["ALLOC"]), "<module> (%s:%d)" % (child, at["BUG"] - 1)])
        kernels = oob["kernels_since_last_clean_check"]
        self.assertEqual([k["name"] for k in kernels], ["ex_fill"], oob)
        self.assertEqual(kernels[0]["launched_at"][:2], [  # (a call's line is where it starts)
            "fill_rows (%s:%d)" % (child, at["LAUNCH"] - 1), "<module> (%s:%d)" % (child, at["BUG"])])


    def _run_child(self, *args):
        import json
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        child = os.path.join(here, "combined_child.py")
        ptx = os.path.join(here, "..", "..", "examples", "kernels.ptx")
        with tempfile.TemporaryDirectory() as tmp:
            rj = os.path.join(tmp, "r.json")
            r = subprocess.run([os.environ["VG"], "run", "--sim", "--mode=guard",
                                "--report_json=" + rj, "--", sys.executable, child, ptx] +
                               list(args), capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(rj) as f:
                return child, r, json.load(f)

    def test_a_missing_record_stream_is_reported_at_the_free(self):
        child, r, reports = self._run_child("record_stream")
        self.assertIn("freed", r.stdout)
        kinds = [x["kind"] for x in reports]  # (and the write itself when the race happened)
        self.assertEqual(kinds.count("unordered_free"), 1, r.stderr)
        self.assertLessEqual(set(kinds), {"unordered_free", "use_after_free"}, r.stderr)
        rep = reports[kinds.index("unordered_free")]
        self.assertEqual(rep["allocation"]["size"], 1 << 20)
        self.assertEqual((rep["kernel"]["name"], rep["kernel"]["argument"]), ("ex_fill", 0))
        with open(child) as f:
            at = {tag: i + 1 for i, text in enumerate(f) for tag in ("S2ALLOC", "S2FREE")
                  if "# " + tag in text}
        self.assertIn("<module> (%s:%d)" % (child, at["S2ALLOC"]), rep["allocation"]["allocated_at"])
        self.assertIn("<module> (%s:%d)" % (child, at["S2FREE"]), rep["allocation"]["freed_at"])

    def test_record_stream_makes_the_free_ordered(self):
        child, r, reports = self._run_child("record_stream_fixed")
        self.assertIn("freed", r.stdout)
        self.assertEqual(reports, [], r.stderr)


class Pinned(unittest.TestCase):
    """Pinned host memory through a PyTorch-style host cache (pinned_child.py) under
    python -m vramguard run: the cache's blocks are its cache, not leaks; a loop that keeps
    its pinned batches grows at every optimizer step; host_memory_stats() has PyTorch's
    keys."""

    def run_child(self, mode, *options):
        import json
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        child = os.path.join(here, "pinned_child.py")
        with tempfile.TemporaryDirectory() as tmp:
            rj = os.path.join(tmp, "r.json")
            cmd = [sys.executable, "-m", "vramguard", "run", "--mode=guard"] + list(options) + [
                "--report_json=" + rj, child, mode]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                               env=Interposed.env())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("steps 8", r.stdout)
            with open(rj) as f:
                reports = json.load(f)
        with open(child) as f:
            at = {tag: i + 1 for i, text in enumerate(f)
                  for tag in ("BATCH", "STRAY", "HOSTALLOC") if "# " + tag in text}
        return child, at, r, reports

    @unittest.skipIf(sys.version_info < (3, 11), "the cache is known by its qualified name (3.11)")
    def test_the_host_cache_is_not_a_leak(self):
        child, at, r, reports = self.run_child("cache", "--leaks=auto")
        self.assertEqual([x["kind"] for x in reports], ["leak"], r.stderr)
        leak = reports[0]
        self.assertTrue(leak["pinned_host"])
        self.assertEqual((leak["bytes"], leak["count"]), (3 << 20, 1))
        self.assertEqual(leak["allocated_at"][:2], ["pin_with_driver (%s:%d)" % (child, at["HOSTALLOC"]),
                                                    "<module> (%s:%d)" % (child, at["STRAY"])])
        self.assertIn("1.00 MiB of pinned host memory in 1 allocations at exit belongs to "
                      "PyTorch's host caching allocator: its cache, not a leak", r.stderr)
        self.assertIn("pinned 4194304 in 2 after 2 calls, peak 4194304", r.stdout)
        # leaks=on lists the cache too.
        child, at, r, reports = self.run_child("cache", "--leaks=on")
        self.assertEqual(sorted(x["bytes"] for x in reports), [1 << 20, 3 << 20], r.stderr)

    def test_the_host_cache_is_known_by_its_c_frames(self):
        # The cache's blocks pinned from C (as PyTorch's are), the sites Python lines.
        child, at, r, reports = self.run_child("cache_c", "--leaks=auto")
        self.assertEqual([(x["kind"], x["bytes"]) for x in reports], [("leak", 3 << 20)], r.stderr)
        self.assertIn("1.00 MiB of pinned host memory in 1 allocations at exit belongs to "
                      "PyTorch's host caching allocator: its cache, not a leak", r.stderr)
        child, at, r, reports = self.run_child("cache_c", "--leaks=on")
        self.assertEqual(sorted(x["bytes"] for x in reports), [1 << 20, 3 << 20], r.stderr)
        self.assertIn("<module> (%s:%d)" % (child, at["BATCH"]),
                      [x for x in reports if x["bytes"] == 1 << 20][0]["allocated_at"])

    def test_pinned_batches_kept_grow_at_every_step(self):
        child, at, r, reports = self.run_child("leak")
        growth = [x for x in reports if x["kind"] == "growth"]
        self.assertEqual(len(growth), 1, r.stderr)
        self.assertTrue(growth[0]["pinned_host"])
        self.assertEqual(growth[0]["growth_per_step"], 1 << 20)
        self.assertIn("<module> (%s:%d)" % (child, at["BATCH"]), growth[0]["allocated_at"])
        self.assertIn("pinned host memory from one allocation site grows every step", r.stderr)
        self.assertIn("pinned 8388608 in 8 after 8 calls, peak 8388608", r.stdout)


class Library(unittest.TestCase):
    def test_the_injected_library_is_preferred(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("7f00-7f10 r-xp 00000000 08:01 42   /opt/vg/lib/libvramguard_preload.so\n"
                    "7f20-7f30 r-xp 00000000 08:01 43   /usr/lib/libc.so.6\n")
        try:
            self.assertEqual(_lib._preloaded(f.name), "/opt/vg/lib/libvramguard_preload.so")
        finally:
            os.unlink(f.name)
        self.assertIsNone(_lib._preloaded("/nonexistent/maps"))

    def test_mode_from_the_environment(self):
        self.assertEqual(vramguard._env_options({"VRAMGUARD_OPTIONS": "mode=fast,limit=1G,mode=guard"}),
                         {"mode": "guard", "limit": "1G"})
        self.assertEqual(vramguard._env_options({}), {})


class FollowChildren(unittest.TestCase):
    """The sitecustomize that `run --follow-children` puts on the children's path."""

    def child(self, pythonpath, env_extra):
        here = os.path.join(os.path.dirname(vramguard.__file__), "_children")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([here] + pythonpath), **env_extra)
        return subprocess.run([sys.executable, "-c", "import sys; print('child ran')"],
                              capture_output=True, text=True, env=env)

    def test_the_users_sitecustomize_still_runs_and_no_torch_is_left_alone(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "sitecustomize.py"), "w") as f:
                f.write("print('user sitecustomize')\n")
            r = self.child([tmp], {"VRAMGUARD_PYTHON": '{"mode": "guard"}'})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["user", "sitecustomize", "child", "ran"])
        try:
            import torch  # noqa: F401
        except ImportError:  # without PyTorch the child is not touched, and says nothing
            self.assertEqual(r.stderr, "")

    def test_an_error_in_the_users_sitecustomize_is_not_hidden(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "sitecustomize.py"), "w") as f:
                f.write("import no_such_module_here\n")
            r = self.child([tmp], {})
        self.assertIn("no_such_module_here", r.stderr)


class Command(unittest.TestCase):
    def test_usage(self):
        r = subprocess.run([sys.executable, "-m", "vramguard"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("python -m vramguard run", r.stderr)

    def test_an_unknown_command_is_named(self):
        r = subprocess.run([sys.executable, "-m", "vramguard", "frob"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'frob'", r.stderr)

    def test_every_option_is_checked_before_the_script_starts(self):
        # From the environment or the command line, in either mode: a bad one stops the
        # run (exit 2) naming the source, the key and the value; the script never runs.
        env = Interposed.env()
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "s.py")
            with open(script, "w") as f:
                f.write("print('the script ran')\n")
            with open(os.path.join(tmp, "bad.supp"), "w") as f:
                f.write("bad\n")
            cases = [
                ({"VRAMGUARD_OPTIONS": "mode=gaurd"}, [], "'gaurd'.*in VRAMGUARD_OPTIONS"),
                ({"VRAMGUARD_OPTIONS": "redzone=lots"}, ["--mode=guard"],
                 "'redzone'.*in VRAMGUARD_OPTIONS"),
                ({"VRAMGUARD_OPTIONS": "suppressions=%s/bad.supp" % tmp}, ["--mode=fast"],
                 "suppressions=.*line 1.*in VRAMGUARD_OPTIONS"),
                ({}, ["--mode=gaurd"], "'gaurd'.*on the command line"),
                ({}, ["--mode=fast", "--colour=blue"], "'colour'.*on the command line"),
                ({}, ["--mode=guard", "--report_json=%s/no/r.json" % tmp],
                 "report_json=.*does not exist.*on the command line"),
            ]
            for extra_env, flags, pattern in cases:
                r = subprocess.run([sys.executable, "-m", "vramguard", "run"] + flags + [script],
                                   capture_output=True, text=True, timeout=60,
                                   env=dict(env, **extra_env))
                what = (extra_env, flags)
                self.assertEqual(r.returncode, 2, (what, r.stderr))
                self.assertRegex(r.stderr, pattern, what)
                self.assertIn("the script was not started", r.stderr, what)
                self.assertEqual(r.stdout, "", what)

    def test_module_needs_a_name(self):
        r = subprocess.run([sys.executable, "-m", "vramguard", "run", "-m"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("-m needs a module name", r.stderr)

    def test_help(self):
        for args in (["--help"], ["-h"], ["help"], ["run", "--help"]):
            r = subprocess.run([sys.executable, "-m", "vramguard"] + args,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, args)
            self.assertIn("python -m vramguard run", r.stdout)
            self.assertEqual(r.stderr, "")

    def test_enable_without_torch(self):
        try:
            import torch  # noqa: F401
            self.skipTest("PyTorch is installed here")
        except ImportError:
            pass
        with self.assertRaises(vramguard.VramguardError) as cm:
            vramguard.enable()
        self.assertIn("PyTorch", str(cm.exception))


class PythonFrames(unittest.TestCase):
    """python_frames: reports and snapshots name the Python lines (frames_child.py)."""

    def run_child(self, value, under_run=False):
        import json
        import subprocess
        child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frames_child.py")
        with open(child) as f:
            tags = ("MAKE", "DROP", "FIRST", "AGAIN", "THREAD", "FORWARD", "CALL")
            lines = {tag: i + 1 for i, text in enumerate(f) for tag in tags if "# " + tag in text}
        with tempfile.TemporaryDirectory() as tmp:
            rj, snap = os.path.join(tmp, "r.json"), os.path.join(tmp, "s.pickle")
            cmd = [sys.executable, child, value, rj, snap]
            if under_run:  # (the package then uses the injected library: one vramguard)
                cmd = [os.environ["VG"], "run", "--sim", "--mode=guard", "--"] + cmd
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(rj) as f, open(snap, "rb") as g:
                return json.load(f), pickle.load(g), r.stderr, child, lines

    @unittest.skipIf(sys.version_info < (3, 11), "names are qualified (Model.make) from 3.11")
    def test_reports_and_snapshots_name_python_lines(self):
        reports, snap, log, child, at = self.run_child("1")
        self.assertEqual([r["kind"] for r in reports], ["double_free", "double_free", "leak", "leak"])
        for r in reports[:2]:  # GIL released during the call (as under PyTorch), then held
            a = r["allocation"]
            self.assertEqual(a["allocated_at"][0], "Model.make (%s:%d)" % (child, at["MAKE"]))
            self.assertEqual(a["freed_at"][0], "drop (%s:%d)" % (child, at["DROP"]))
            self.assertEqual(r["call_at"][0], "drop (%s:%d)" % (child, at["DROP"]))
        self.assertEqual(reports[0]["allocation"]["allocated_at"][1],
                         "<module> (%s:%d)" % (child, at["FIRST"]))
        self.assertEqual(reports[0]["call_at"][1], "<module> (%s:%d)" % (child, at["AGAIN"]))
        self.assertIn("#1 <module> (%s:%d)" % (child, at["AGAIN"]), log)
        # Still live at exit (the leak report runs after the interpreter has finished).
        self.assertEqual(reports[3]["allocated_at"][:2], [
            "Model.make (%s:%d)" % (child, at["MAKE"]), "<lambda> (%s:%d)" % (child, at["THREAD"])])
        # The allocation made on a Python thread, in PyTorch's snapshot structure.
        live = [b for s in snap["segments"] for b in s["blocks"]
                if b["state"] == "active_allocated" and b["requested_size"] == 12000]
        self.assertEqual(len(live), 1)
        frames = live[0]["frames"]
        self.assertEqual(frames[0], {"name": "Model.make", "filename": child, "line": at["MAKE"]})
        self.assertEqual(frames[1], {"name": "<lambda>", "filename": child, "line": at["THREAD"]})
        self.assertTrue(any(f["name"].endswith("_bootstrap") for f in frames[2:]), frames)
        # Through an nn.Module: its __call__ machinery (module.py) is left out.
        module = [b for s in snap["segments"] for b in s["blocks"]
                  if b["state"] == "active_allocated" and b["requested_size"] == 16000]
        self.assertEqual([(f["name"], f["line"]) for f in module[0]["frames"]][:3],
                         [("Model.make", at["MAKE"]), ("Net.forward", at["FORWARD"]),
                          ("Module.__call__", 3)])
        self.assertEqual(module[0]["frames"][3], {"name": "<module>", "filename": child,
                                                  "line": at["CALL"]})

    def test_under_vramguard_run_one_vramguard_serves_the_process(self):
        reports, _, log, child, at = self.run_child("1", under_run=True)
        self.assertEqual(log.count("ERROR SUMMARY"), 1, log)
        self.assertIn("ERROR SUMMARY: 4 errors: 2 double_free, 2 leak", log)
        self.assertEqual(reports[0]["call_at"][0], "drop (%s:%d)" % (child, at["DROP"]))

    def test_an_out_of_memory_explanation_names_the_holders_lines_or_says_how(self):
        import subprocess
        script = (
            "import ctypes, os, sys\n"
            "from vramguard import _lib\n"
            "l = _lib.lib()\n"
            "opts = 'driver=%s,limit=64M,python_frames=%s' % (os.environ['VGSIM_LIB'], sys.argv[1])\n"
            "_lib.check(l.vg_init(opts.encode()), 'vg_init')\n"
            "def hold(n):\n"
            "    p = ctypes.c_void_p()\n"
            "    return l.vg_malloc(ctypes.byref(p), n, None)\n"
            "assert hold(48 << 20) == 0\n"
            "assert hold(32 << 20) != 0\n"
            "print(l.vg_last_error().decode())\n")
        out = {}
        for value in ("0", "1"):
            r = subprocess.run([sys.executable, "-c", script, value], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            out[value] = r.stdout
        self.assertIn("top holders by allocation site", out["0"])
        self.assertIn("(C frames: with python_frames=1", out["0"])
        self.assertIn("hold (<string>:", out["1"])
        self.assertNotIn("(C frames", out["1"])

    def test_off_gives_c_frames(self):
        reports, _, _, child, _ = self.run_child("0")
        self.assertEqual(len(reports), 3)  # (the two leaks share one C site)
        self.assertFalse(any(child in f for r in reports[:2] for f in r["call_at"]))
        self.assertFalse(any(child in f for r in reports[2:] for f in r["allocated_at"]))


class Interposed(unittest.TestCase):
    """python -m vramguard run --mode=guard runs the script under `vramguard run` too, so
    one line gives what the package alone cannot see: the kernel, and a free not ordered
    after another stream's kernel (G7). PyTorch is stood in for by tests/python/fake_torch
    (what enable() touches); combined_child.py allocates through the library itself."""

    @staticmethod
    def env():
        """The test's environment with vgsim, the CLI and the stand-in for PyTorch."""
        here = os.path.dirname(os.path.abspath(__file__))
        package = os.path.dirname(os.path.dirname(os.path.abspath(vramguard.__file__)))
        env = dict(os.environ, VRAMGUARD_CLI=os.environ["VG"],
                   LD_LIBRARY_PATH=os.path.dirname(os.environ["VGSIM_LIB"]),
                   PYTHONPATH=os.pathsep.join([os.path.join(here, "fake_torch"), package]))
        env.pop(_INTERPOSED, None)
        return env

    def run_child(self, *args, options=("--mode=guard",)):
        import json
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        child = os.path.join(here, "combined_child.py")
        ptx = os.path.join(here, "..", "..", "examples", "kernels.ptx")
        env = self.env()
        with tempfile.TemporaryDirectory() as tmp:
            rj = os.path.join(tmp, "r.json")
            cmd = [sys.executable, "-m", "vramguard", "run"] + list(options) + [
                "--report_json=" + rj, child, ptx] + list(args)
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(rj) as f:
                return child, r, json.load(f)

    @unittest.skipIf(sys.version_info < (3, 11), "a multi-line call's line differs before 3.11")
    def test_guard_mode_names_the_kernel_and_ends_the_stack_at_the_script(self):
        child, r, reports = self.run_child()
        self.assertIn("filled", r.stdout)
        self.assertEqual(r.stderr.count("ERROR SUMMARY"), 1, r.stderr)
        self.assertEqual([x["kind"] for x in reports], ["out_of_bounds_after"], r.stderr)
        with open(child) as f:
            at = {tag: i + 1 for i, text in enumerate(f) for tag in ("ALLOC", "LAUNCH", "BUG")
                  if "# " + tag in text}
        self.assertEqual(reports[0]["allocation"]["allocated_at"], [  # (no runpy, no launcher)
            "tensor (%s:%d)" % (child, at["ALLOC"]), "<module> (%s:%d)" % (child, at["BUG"] - 1)])
        kernels = reports[0]["kernels_since_last_clean_check"]
        self.assertEqual([k["name"] for k in kernels], ["ex_fill"], r.stderr)

    def test_a_missing_record_stream_is_reported_from_one_line(self):
        _, r, reports = self.run_child("record_stream")
        self.assertIn("unordered_free", [x["kind"] for x in reports], r.stderr)
        _, r, reports = self.run_child("record_stream_fixed")
        self.assertEqual(reports, [], r.stderr)

    def test_memory_kept_at_every_optimizer_step_is_reported(self):
        # No vramguard.step() in the script: each optimizer step marks one (auto_step),
        # found through torch.optim.optimizer, a name PyTorch's torch.optim deletes.
        child, r, reports = self.run_child("leak", options=("--mode=guard", "--growth_steps=5"))
        self.assertIn("steps 8", r.stdout)
        self.assertEqual([x["kind"] for x in reports], ["growth"], r.stderr)
        self.assertEqual(reports[0]["steps"], 5, r.stderr)
        _, r, reports = self.run_child("leak_fixed", options=("--mode=guard", "--growth_steps=5"))
        self.assertEqual(reports, [], r.stderr)

    def test_the_interpreters_flags_reach_the_script(self):
        import subprocess
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "s.py")
            with open(script, "w") as f:
                f.write("import os, sys\nfrom vramguard import _lib\n"
                        "print(sys.flags.optimize, sys.warnoptions, bool(_lib._preloaded()),\n"
                        "      'VRAMGUARD_PY_INTERPOSED' in os.environ)\n")
            r = subprocess.run([sys.executable, "-O", "-W", "error::DeprecationWarning", "-m",
                                "vramguard", "run", "--mode=guard", script],
                               capture_output=True, text=True, timeout=120, env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "1 ['error::DeprecationWarning'] True False", r.stderr)

    def test_off_runs_the_package_alone(self):
        _, r, reports = self.run_child(options=("--mode=guard", "--interpose=off"))
        self.assertEqual([x["kind"] for x in reports], ["out_of_bounds_after"], r.stderr)
        self.assertEqual(reports[0]["kernels_since_last_clean_check"], [])  # (not seen)
        self.assertIn("the package alone does not see kernel launches", r.stderr)

    def test_the_command(self):
        opts = {"limit": "1G", "auto_step": "0"}
        cmd, note = _interposer_command(["run", "--mode=guard", "--limit=1G", "t.py"], opts,
                                        "guard", environ={})
        self.assertEqual(opts, {"limit": "1G", "auto_step": "0"})  # (enable() still gets them)
        self.assertIsNone(note)
        self.assertEqual(cmd[1:cmd.index("--")], [
            "run", "--mode=guard", "--leaks=off", "--limit=1G", "--python_frames=1"])
        self.assertEqual(cmd[cmd.index("--") + 1:], [sys.executable] + _interpreter_flags() + [
            "-m", "vramguard", "run", "--mode=guard", "--limit=1G", "t.py"])
        self.assertEqual(_interposer_command(["run", "t.py"], {}, "fast", environ={}),
                         (None, None))
        # memcheck mode needs the interposer too (it patches the kernels as they load)
        cmd, _ = _interposer_command(["run", "--mode=memcheck", "t.py"], {}, "memcheck",
                                     environ={})
        self.assertEqual(cmd[1:cmd.index("--")], [
            "run", "--mode=memcheck", "--leaks=off", "--python_frames=1"])
        cmd, _ = _interposer_command(["run", "--follow-children", "t.py"], {}, "guard",
                                     environ={}, follow=True)
        self.assertIn("--follow-children", cmd[:cmd.index("--")])  # (workers: the hooks too)
        self.assertIsNotNone(_interposer_command(["run", "t.py"], {}, "fast", interpose="on",
                                                 environ={})[0])
        self.assertEqual(_interposer_command(["run", "t.py"], {}, "guard", interpose="off",
                                             environ={}), (None, None))
        cmd, note = _interposer_command(["run", "t.py"], {}, "guard",
                                        environ={_INTERPOSED: "1"})
        self.assertIsNone(cmd)
        self.assertIn("did not load", note)

    def test_without_the_command_a_note_says_what_is_missing(self):
        cli = _lib.cli
        _lib.cli = lambda: None
        try:
            cmd, note = _interposer_command(["run", "t.py"], {}, "guard", environ={})
        finally:
            _lib.cli = cli
        self.assertIsNone(cmd)
        self.assertIn("allocations only", note)
        self.assertIn("VRAMGUARD_CLI", note)

    def test_a_command_without_its_preload_library_is_not_used(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "vramguard")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\nexit 3\n")
            os.chmod(fake, 0o755)
            old = os.environ.get("VRAMGUARD_CLI")
            os.environ["VRAMGUARD_CLI"] = fake
            try:
                self.assertNotEqual(_lib.cli(), fake)
                open(os.path.join(d, "libvramguard_preload.so"), "w").close()
                self.assertEqual(_lib.cli(), fake)
            finally:
                if old is None:
                    del os.environ["VRAMGUARD_CLI"]
                else:
                    os.environ["VRAMGUARD_CLI"] = old

    def test_options_already_in_the_environment(self):
        env = {"VRAMGUARD_OPTIONS": "mode=guard,leaks=off,python_frames=1"}
        self.assertTrue(vramguard._in_environment("mode=guard,leaks=off", env))
        self.assertFalse(vramguard._in_environment("mode=guard,limit=1G", env))
        self.assertFalse(vramguard._in_environment("mode=fast", env))


from vramguard.__main__ import _INTERPOSED, _interposer_command, _interpreter_flags  # noqa: E402

if __name__ == "__main__":
    unittest.main()
