"""ctypes bindings to libvramguard.so (no dependency beyond the standard library)."""
import ctypes
import ctypes.util
import os
import shutil

_lib = None


class VramguardError(RuntimeError):
    """A vramguard call failed; the message is vramguard's explanation."""


def _candidates():
    env = os.environ.get("VRAMGUARD_LIB")
    if env:
        yield env
    exe = shutil.which("vramguard")
    if exe:
        d = os.path.dirname(os.path.realpath(exe))
        for rel in ("libvramguard.so", "../lib/libvramguard.so", "../lib64/libvramguard.so"):
            yield os.path.normpath(os.path.join(d, rel))
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.normpath(os.path.join(here, "..", "..", "build", "libvramguard.so"))
    found = ctypes.util.find_library("vramguard")
    if found:
        yield found


def _preloaded(maps="/proc/self/maps"):
    """libvramguard_preload.so when `vramguard run` injected it into this process, else
    None. The package then uses that library (it has the whole API): a second copy of
    vramguard in the process would keep its own heap, reports and summary."""
    try:
        with open(maps) as f:
            for line in f:
                p = line.rstrip("\n").split(None, 5)[-1]
                if p.endswith("/libvramguard_preload.so"):
                    return p
    except OSError:
        pass
    return None


def path():
    """The libvramguard.so that will be loaded (PyTorch's allocator loads it by path), or
    the libvramguard_preload.so already in the process (_preloaded)."""
    pre = _preloaded()
    if pre:
        return pre
    for p in _candidates():
        if os.path.exists(p) or not os.path.isabs(p):
            return p
    raise VramguardError(
        "cannot find libvramguard.so: build vramguard (cmake -S . -B build && cmake --build "
        "build) and set VRAMGUARD_LIB=/path/to/libvramguard.so, or put `vramguard` on PATH")


def cli():
    """The `vramguard` command, or None: VRAMGUARD_CLI, then PATH, then next to the library
    (a build directory holds both; an install has bin/ beside lib/)."""
    env = os.environ.get("VRAMGUARD_CLI")
    found = [env] if env else []
    exe = shutil.which("vramguard")
    if exe:
        found.append(exe)
    try:
        d = os.path.dirname(os.path.abspath(path()))
        found += [os.path.join(d, "vramguard"), os.path.join(d, "..", "bin", "vramguard")]
    except VramguardError:
        pass
    for c in found:
        if os.path.isfile(c) and os.access(c, os.X_OK) and _has_preload(c):
            return os.path.normpath(c)
    return None


def _has_preload(cli_path):
    """Is libvramguard_preload.so where `vramguard run` looks for it (cmd_run.c)?"""
    d = os.path.dirname(os.path.realpath(cli_path))
    return any(os.access(os.path.join(d, rel, "libvramguard_preload.so"), os.R_OK)
               for rel in (".", "../lib/vramguard", "../lib64/vramguard"))


def torch_entry():
    """(library, alloc, free) for PyTorch's pluggable allocator: libvramguard_torch.so's
    entry points, which raise on a failed allocation (PyTorch does not check for NULL),
    or libvramguard.so's C ones where vramguard was built without a C++ compiler."""
    p = path()
    shim = os.path.join(os.path.dirname(p), "libvramguard_torch.so")
    if os.path.exists(shim):
        return shim, "vg_torch_alloc_or_raise", "vg_torch_free"  # (free: from its dependency)
    return p, "vg_torch_alloc", "vg_torch_free"


def lib():
    global _lib
    if _lib is None:
        l = ctypes.CDLL(path(), mode=ctypes.RTLD_GLOBAL)
        l.vg_init.argtypes = [ctypes.c_char_p]
        l.vg_options_check.argtypes = [ctypes.c_char_p]
        l.vg_strerror.restype = ctypes.c_char_p
        l.vg_strerror.argtypes = [ctypes.c_int]
        l.vg_last_error.restype = ctypes.c_char_p
        for name in ("vg_memory_summary", "vg_memory_stats_json", "vg_snapshot_json",
                     "vg_errors_json", "vg_host_memory_stats_json"):
            getattr(l, name).restype = ctypes.c_void_p
        l.vg_memory_summary.argtypes = [ctypes.c_int]
        l.vg_memory_stats_json.argtypes = [ctypes.c_int]
        l.vg_free_string.argtypes = [ctypes.c_void_p]
        l.vg_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
        l.vg_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        l.vg_record_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        l.vg_set_memory_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        l.vg_torch_last_oom.restype = ctypes.c_size_t
        l.vg_torch_last_oom.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        l.vg_error_count.restype = ctypes.c_uint64
        l.vg_reset_peak_stats.argtypes = [ctypes.c_int]
        l.vg_set_event_history.argtypes = [ctypes.c_size_t]
        l.vg_reset_accumulated_stats.argtypes = [ctypes.c_int]
        _lib = l
    return _lib


def check(status, what):
    if status != 0:
        raise VramguardError("%s: %s" % (what, lib().vg_last_error().decode(errors="replace")))


def options_problem(option_string):
    """Why this options string would stop vramguard (a bad key or value, a bad
    suppressions file, an output file that cannot be created), or None."""
    if lib().vg_options_check(option_string.encode()) == 0:
        return None
    return lib().vg_last_error().decode(errors="replace")


def take_string(ptr):
    """A string vramguard allocated, decoded and freed."""
    if not ptr:
        raise VramguardError(lib().vg_last_error().decode(errors="replace") or "no answer")
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        lib().vg_free_string(ptr)
