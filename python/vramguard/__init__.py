"""vramguard for PyTorch: one line to put vramguard under every CUDA tensor.

    import vramguard
    vramguard.enable()               # fast mode: less memory reserved than PyTorch's allocator
    vramguard.enable(mode="guard")   # catches out-of-bounds writes, use-after-free, leaks

enable() must run before the first CUDA allocation (PyTorch cannot change its allocator
afterwards). PyTorch is imported only by the functions that need it."""
import collections
import ctypes
import json
import os
import pickle
import sys

from . import _lib
from ._lib import VramguardError
from ._snapshot import to_pytorch

__all__ = ["enable", "enabled", "memory_stats", "memory_summary", "host_memory_stats",
           "snapshot", "dump_snapshot",
           "raw_snapshot", "check", "step", "errors", "options_string", "trace_from_snapshot",
           "VramguardError"]

_enabled = False


# Options whose value is a comma-separated list (memcheck_kernels="*gather*,*index*", or a
# list of patterns): vramguard reads the items up to the next key=value.
_LIST_OPTIONS = ("memcheck_kernels",)


def options_string(mode=None, **options):
    """The VRAMGUARD_OPTIONS string for these options: enable(mode="guard", limit="15G",
    redzone=512) -> "mode=guard,limit=15G,redzone=512". Values may be str, int, float or
    bool; keys are vramguard's option names ('vramguard help options')."""
    items = []
    if mode is not None:
        if mode not in ("fast", "guard", "memcheck"):
            raise ValueError("mode must be 'fast', 'guard' or 'memcheck', not %r" % (mode,))
        items.append(("mode", mode))
    items.extend(sorted(options.items()))
    out = []
    for key, value in items:
        if not key.replace("_", "").isalnum():
            raise ValueError("bad option name %r" % (key,))
        if isinstance(value, bool):
            value = "1" if value else "0"
        if key in _LIST_OPTIONS and isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        value = str(value)
        if "=" in value or ("," in value and key not in _LIST_OPTIONS):
            raise ValueError("option %s: the value %r may not contain ',' or '='" % (key, value))
        out.append("%s=%s" % (key, value))
    return ",".join(out)


def pytorch_defaults(options, environ=os.environ, mode="fast"):
    """The options enable() passes: the user's, plus, unless asked otherwise (here or in
    VRAMGUARD_OPTIONS):
    - leaks="off". Python frees tensors when it drops them, not at a free() call the
      program makes, and at exit the model and optimizer are still alive: a list of
      everything live then is not a list of leaks. Tensors that accumulate are found by
      growth over training steps instead; leaks="on" brings the list back.
    - python_frames=1 in guard mode: reports name the Python lines that allocated and
      freed a tensor (model.py:42), not PyTorch's C++ frames (also in memcheck mode). It
      costs a GIL round trip per allocation, so fast mode leaves it off."""
    out = dict(options)
    env = _env_options(environ)
    if "leaks" not in out and "leaks" not in env:
        out["leaks"] = "off"
    if mode in ("guard", "memcheck") and "python_frames" not in out and "python_frames" not in env:
        out["python_frames"] = "1"
    return out


def _env_options(environ=os.environ):
    """VRAMGUARD_OPTIONS as a dict (a key given twice: its last value)."""
    out = {}
    for item in environ.get("VRAMGUARD_OPTIONS", "").split(","):
        key, eq, value = item.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def _in_environment(option_string, environ=os.environ):
    """Does VRAMGUARD_OPTIONS already hold every option of option_string, with its value?"""
    env = _env_options(environ)
    items = (item.partition("=") for item in option_string.split(",") if item)
    return all(env.get(key) == value for key, _, value in items)


def _torch():
    try:
        import torch
    except ImportError as e:
        raise VramguardError("vramguard.enable() needs PyTorch (import torch failed: %s)" % e)
    return torch


class _AutoStep:
    """An optimizer step post-hook: each step of the first optimizer that steps marks a
    training step for the growth report, as step() does, until step() is called by hand
    (then the program says where its steps are). One optimizer only, so that a loop with
    two (a GAN's) still marks one step per iteration."""

    def __init__(self, mark):
        self.mark, self.owner, self.on = mark, None, True

    def __call__(self, optimizer, args=None, kwargs=None):
        if not self.on:
            return
        if self.owner is None:
            self.owner = id(optimizer)
        if id(optimizer) == self.owner:
            self.mark()


_auto_step = _AutoStep(lambda: _lib.lib().vg_step())


def _optimizer_module():
    """torch.optim.optimizer, or None. Through the import system: PyTorch's torch.optim
    deletes the name `optimizer` after importing from it, so getattr(torch.optim,
    "optimizer") finds nothing (the hook was never registered on a GPU, 2026-11-24)."""
    import importlib
    try:
        return importlib.import_module("torch.optim.optimizer")
    except ImportError:
        return None


def _truthy(v):
    return str(v).strip().lower() not in ("0", "off", "false", "no", "")


def enable(mode=None, auto_step=None, **options):
    """Route every CUDA tensor allocation of this process through vramguard.

    mode: "fast" (the allocator), "guard" (redzones, poison, quarantine and checks) or
    "memcheck" (guard mode plus every kernel's loads and stores checked on the device;
    it needs `python -m vramguard run`, which patches the kernels as they load);
    by default the mode of VRAMGUARD_OPTIONS (set by `vramguard run --mode=...`), else
    "fast".
    auto_step: mark a training step (step()) after each optimizer step, so that memory
    growing every iteration is reported without changing the loop; by default in guard
    mode only (a fast-mode user asked for an allocator, not for reports); off once step()
    is called by hand.
    options: any vramguard option, e.g. limit="15G", report_json="errors.json",
    snapshot="snap_%r.json", error_exitcode=1. Raises VramguardError if CUDA has already
    allocated memory (PyTorch can no longer switch allocators) or an option is bad."""
    global _enabled
    torch = _torch()
    if _enabled:
        return
    if torch.cuda.is_initialized() and torch.cuda.memory_allocated() > 0:
        raise VramguardError("vramguard.enable() must run before the first CUDA tensor: this "
                             "process has already allocated CUDA memory with PyTorch's allocator")
    l = _lib.lib()
    effective = mode or _env_options().get("mode") or "fast"
    wanted = options_string(mode, **pytorch_defaults(options, mode=effective))
    if _lib._preloaded() and _in_environment(wanted):
        # `vramguard run` injected the library, which starts from VRAMGUARD_OPTIONS at the
        # program's first driver call, which may come first: the same options again would
        # be refused as "other options".
        wanted = None
    _lib.check(l.vg_init(wanted.encode() if wanted else None), "vramguard could not start")
    entry = _lib.torch_entry()
    alloc = torch.cuda.memory.CUDAPluggableAllocator(*entry)
    _wire_graph_hooks(getattr(alloc, "_allocator", None), l, entry[0])
    _after_import("torch._inductor.config", _no_graph_trees)
    try:
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise VramguardError("PyTorch refused the allocator (%s): call vramguard.enable() "
                             "before any CUDA work" % e)
    _wire_hooks(torch, l)
    hook = getattr(_optimizer_module(), "register_optimizer_step_post_hook", None)
    if auto_step is None:
        auto_step = effective in ("guard", "memcheck")
    if _truthy(auto_step) and hook is not None:
        hook(_auto_step)
    _enabled = True


def _wire_graph_hooks(hooks, l, entry_lib):
    """CUDA graphs (PyTorch 2.3+): memory a capture takes stays the graph's (a private pool)
    until PyTorch releases the pool; docs/decisions.md A7."""
    if not hasattr(hooks, "set_begin_allocate_to_pool"):  # (PyTorch before 2.3)
        sys.stderr.write("vramguard: this PyTorch gives pluggable allocators no CUDA graph "
                         "hooks: do not capture CUDA graphs under vramguard (their memory "
                         "would be reused while they replay)\n")
        return
    addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
    begin = l.vg_torch_begin_allocate_to_pool  # (routes requests on any capturing stream)
    if entry_lib != _lib.path():  # libvramguard_torch.so keeps PyTorch's own filter
        begin = ctypes.CDLL(entry_lib).vg_torch_begin_allocate_to_pool_filtered
    hooks.set_begin_allocate_to_pool(addr(begin))
    hooks.set_end_allocate_to_pool_fn(addr(l.vg_torch_end_allocate_to_pool))
    hooks.set_release_pool(addr(l.vg_torch_release_pool))


class _AfterImport:
    """A meta path finder that runs fn(module) once `name` has been imported (its code run),
    then leaves sys.meta_path."""

    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = getattr(finder, "find_spec", lambda *a: None)(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, fn = spec.loader, self.fn
        if loader is None or not hasattr(loader, "exec_module"):
            return spec

        class _Then:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                _quietly(fn, module)

            def __getattr__(self, attr):  # (get_source, is_package, ...: the real loader's)
                return getattr(loader, attr)
        spec.loader = _Then()
        return spec


def _quietly(fn, module):
    try:
        fn(module)
    except Exception as e:  # (never break the program's import)
        sys.stderr.write("vramguard: adjusting %s failed: %s\n" % (module.__name__, e))


def _after_import(name, fn):
    """fn(module) now if `name` is imported, else right after it is."""
    if name in sys.modules:
        _quietly(fn, sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, fn))


def _no_graph_trees(config):
    """torch.compile(mode="reduce-overhead") builds CUDA graph trees, which save and restore
    the allocator's pool state (getCheckpointState), an interface PyTorch does not offer to
    pluggable allocators: it raises there. Inductor's other CUDA graph path captures each
    graph with torch.cuda.graph, whose pools vramguard keeps (docs/decisions.md A7)."""
    triton = getattr(config, "triton", None)
    if triton is not None and getattr(triton, "cudagraph_trees", False):
        triton.cudagraph_trees = False


def _wire_hooks(torch, l):
    """What PyTorch's Python API does not route to a pluggable allocator."""
    empty = torch.cuda.empty_cache

    def empty_cache():
        empty()
        l.vg_torch_empty_cache()

    torch.cuda.empty_cache = empty_cache
    fraction = torch.cuda.set_per_process_memory_fraction

    def set_per_process_memory_fraction(f, device=None):
        l.vg_torch_set_memory_fraction(ctypes.c_double(f), ctypes.c_int(_device_index(torch, device)))
        try:
            fraction(f, device)
        except RuntimeError:
            pass  # (PyTorch's own allocator is not in use)

    torch.cuda.set_per_process_memory_fraction = set_per_process_memory_fraction
    record = torch.Tensor.record_stream

    def record_stream(tensor, stream):
        l.vg_torch_record_stream(ctypes.c_void_p(tensor.untyped_storage().data_ptr()),
                                 ctypes.c_void_p(stream.cuda_stream))
        return record(tensor, stream)

    torch.Tensor.record_stream = record_stream
    _wire_stats(torch, l)


def _device_index(torch, device):
    """PyTorch's device argument (None, an index, "cuda:1", a torch.device) as an index."""
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    index = torch.device(device).index
    return torch.cuda.current_device() if index is None else index


def _wire_stats(torch, l):
    """torch.cuda's statistics raise under a pluggable allocator, and scripts call them to
    log their memory (memory_allocated(), max_memory_reserved(), ...): they answer from
    vramguard instead. memory_allocated() and the others read memory_stats() through their
    module, so replacing it there and in torch.cuda covers them all."""
    def stats(device=None):
        d = memory_stats(_device_index(torch, device))
        return collections.OrderedDict(sorted(d.items()))

    def summary(device=None, abbreviated=False):
        return memory_summary(_device_index(torch, device))

    def reset_peak(device=None):
        l.vg_reset_peak_stats(_device_index(torch, device))

    def reset_accumulated(device=None):
        l.vg_reset_accumulated_stats(_device_index(torch, device))

    for ns in (torch.cuda, getattr(torch.cuda, "memory", None)):
        if ns is None:
            continue
        ns.memory_stats = stats
        ns.memory_summary = summary
        ns.reset_peak_memory_stats = reset_peak
        ns.reset_accumulated_memory_stats = reset_accumulated
    _wire_history(getattr(torch.cuda, "memory", None), l)


def _wire_history(mem, l):
    """PyTorch's memory-history workflow — torch.cuda.memory._record_memory_history(),
    _snapshot(), _dump_snapshot(), then pytorch.org/memory_viz — raises under a pluggable
    allocator; it works on vramguard's events instead."""
    if mem is None:
        return

    def record_memory_history(enabled="all", context="all", stacks="all",
                              max_entries=sys.maxsize, *args, **kwargs):
        on = enabled not in (None, False, "none")
        _lib.check(l.vg_set_event_history(min(int(max_entries), 1000000) if on else 0),
                   "_record_memory_history")

    mem._record_memory_history = record_memory_history
    mem._snapshot = lambda device=None: snapshot()
    mem._dump_snapshot = lambda filename="dump_snapshot.pickle": dump_snapshot(filename)


def enabled():
    return _enabled


def memory_stats(device=0):
    """PyTorch's memory_stats() dictionary (the same key names) for vramguard's allocator."""
    return json.loads(_lib.take_string(_lib.lib().vg_memory_stats_json(device)))


def memory_summary(device=0):
    """PyTorch's memory_summary() table for vramguard's allocator."""
    return _lib.take_string(_lib.lib().vg_memory_summary(device))


def host_memory_stats():
    """torch.cuda.host_memory_stats()'s dictionary (the same key names: "allocated_bytes.current",
    "num_host_alloc", "host_alloc_time.avg", ...) for the pinned host memory the process
    pinned, as vramguard run saw it (the driver's pinned blocks: a host cache's are counted
    while it keeps them). All zero without vramguard run, which alone sees pinning calls."""
    return json.loads(_lib.take_string(_lib.lib().vg_host_memory_stats_json()))


def raw_snapshot():
    """vramguard's own snapshot (docs/snapshot-format.md) as a dictionary."""
    return json.loads(_lib.take_string(_lib.lib().vg_snapshot_json()))


def snapshot():
    """PyTorch's snapshot structure (torch.cuda.memory._snapshot()) for vramguard's
    allocator. Events are recorded with snapshot= or snapshot_events=N in enable()."""
    return to_pytorch(raw_snapshot())


def dump_snapshot(path):
    """Write snapshot() as a pickle, as torch.cuda.memory._dump_snapshot does: PyTorch's
    memory viewer and torch.cuda._memory_viz open it."""
    with open(path, "wb") as f:
        pickle.dump(snapshot(), f)


def check():
    """Run guard mode's checks on every allocation now; returns the number of new errors
    (their reports are printed, and written to report_json)."""
    l = _lib.lib()
    before = l.vg_error_count()
    l.vg_check()
    return int(l.vg_error_count() - before)


def step():
    """Mark the end of a training step: a site whose live memory grows at each of the last
    growth_steps steps is reported (the "tensors kept in a list" bug). enable() marks one
    after each optimizer step already; the first call to step() turns that off."""
    _auto_step.on = False
    _lib.lib().vg_step()


def errors():
    """Every report so far, as dictionaries (the report_json objects)."""
    return json.loads(_lib.take_string(_lib.lib().vg_errors_json()))


def last_oom():
    """vramguard's explanation of the last failed allocation ('' if none)."""
    buf = ctypes.create_string_buffer(4096)
    _lib.lib().vg_torch_last_oom(buf, len(buf))
    return buf.value.decode(errors="replace")


def trace_from_snapshot(snap, path, device=None):
    """Write the allocation history of a PyTorch memory snapshot (the dictionary
    torch.cuda.memory._snapshot() returns after _record_memory_history()) as a trace for
    `vramguard replay path`, with PyTorch's own peak allocated and reserved on it in the
    .json beside it; returns those figures. What `python -m vramguard convert` does for a
    pickle. ValueError if the snapshot has no usable history."""
    from . import _convert
    if not isinstance(snap, dict) or "device_traces" not in snap:
        raise _convert.SnapshotError("not a PyTorch memory snapshot: it has no 'device_traces'")
    return _convert.save(snap, device, path, "torch.cuda.memory._snapshot()")[1]
