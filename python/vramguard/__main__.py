"""python -m vramguard run [--mode=guard] [--follow-children] [--interpose=on|off]
                         [--OPTION=VALUE ...] script.py [args...]
python -m vramguard run [--OPTION=VALUE ...] -m module [args...]
python -m vramguard convert SNAPSHOT.pickle [TRACE.csv] [--device=N]

run: runs a script with vramguard enabled before it starts, so the script needs no
change. An allocation failure raises torch.cuda.OutOfMemoryError carrying vramguard's
explanation. --follow-children enables it in the Python processes the script starts too
(torchrun's workers: run -m torch.distributed.run ...). In guard mode the script runs
under `vramguard run` as well, so that reports also name the kernels and copies, a tensor
freed while another stream may still use it, and host/async-copy races
(--interpose=off: allocations only; --interpose=on: in fast mode too), and with
--follow-children so do the processes it starts.

convert: turns the allocation history of a PyTorch memory snapshot
(torch.cuda.memory._record_memory_history(), then _dump_snapshot()) into a trace for
`vramguard replay TRACE.csv`, which then shows what vramguard would reserve beside what
PyTorch's allocator did."""
import os
import runpy
import sys

import vramguard
from vramguard import _lib

_INTERPOSED = "VRAMGUARD_PY_INTERPOSED"  # (set for the script run under `vramguard run`)


def _parse(argv):
    opts = {}
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        if argv[i] == "--":
            i += 1
            break
        key, eq, value = argv[i][2:].partition("=")
        opts[key.replace("-", "_")] = value if eq else "1"
        i += 1
    return opts, argv[i:]


def _interposer_command(argv, opts, mode, interpose=None, environ=os.environ,
                        follow=False):
    """(command, note): the command that runs `python -m vramguard ARGV` again under
    `vramguard run`, or None where it is not wanted or cannot be, with a note for stderr
    when the user loses something by it. The package alone sees only allocations; the
    interposer sees the launches, streams, events and copies the checks need (G7, S3/S4).
    opts: the run options less --mode, --interpose and --follow-children; mode: the
    effective mode; interpose: --interpose's value (None: in guard mode); follow:
    --follow-children (then the script's processes get `vramguard run` too)."""
    want = mode in ("guard", "memcheck") if interpose is None else vramguard._truthy(interpose)
    if not want or _lib._preloaded():
        return None, None
    if environ.get(_INTERPOSED):
        return None, ("vramguard: libvramguard_preload.so did not load under `vramguard run`; "
                      "guard mode sees this script's allocations only")
    cli = _lib.cli()
    if cli is None:
        return None, ("vramguard: guard mode sees this script's allocations only: to see its "
                      "kernels, streams and copies too it runs under `vramguard run`, and no "
                      "`vramguard` command with its libvramguard_preload.so was found (put it "
                      "on PATH or set VRAMGUARD_CLI; --interpose=off says not to look)")
    library = {k: v for k, v in opts.items() if k != "auto_step"}  # (enable()'s own)
    options = vramguard.options_string(mode, **vramguard.pytorch_defaults(library, environ, mode))
    flags = ["--" + item for item in options.split(",") if item]
    if follow:
        flags.append("--follow-children")
    return [cli, "run"] + flags + ["--", sys.executable] + _interpreter_flags() + [
        "-m", "vramguard"] + argv, None


def _interpreter_flags():
    """This interpreter's own flags (-X dev, -W error, -O, ...), for the same interpreter
    again."""
    import subprocess
    try:
        return subprocess._args_from_interpreter_flags()
    except Exception:  # (a private helper of CPython's: without it, none)
        return []


def _options_problem(opts, mode, environ=os.environ):
    """Why the options from the environment or the command line would stop vramguard, or
    None: every source is checked before the script starts, so that a misspelt option
    never lets it run unguarded."""
    env = environ.get("VRAMGUARD_OPTIONS", "")
    try:
        if env.strip():
            problem = _lib.options_problem(env)
            if problem:
                return problem + " (in VRAMGUARD_OPTIONS)"
        library = {k: v for k, v in opts.items() if k != "auto_step"}  # (enable()'s own)
        try:
            given = vramguard.options_string(mode, **library)
        except ValueError as e:
            return "%s (on the command line)" % e
        problem = _lib.options_problem(given) if given else None
        return problem + " (on the command line)" if problem else None
    except vramguard.VramguardError as e:  # (no library: enable() would fail the same way)
        return str(e)


def main(argv):
    if argv[:1] in (["help"], ["--help"], ["-h"]):
        sys.stdout.write(__doc__.strip() + "\n")
        return 0
    if argv[:1] == ["convert"]:
        if "--help" in argv or "-h" in argv:
            sys.stdout.write(__doc__.strip() + "\n")
            return 0
        from vramguard import _convert
        return _convert.main(argv[1:], sys.stdout, sys.stderr)
    if argv and argv[0] != "run":
        sys.stderr.write("vramguard: unknown command '%s' (python -m vramguard help lists "
                         "them)\n" % argv[0])
        return 2
    if len(argv) < 2:
        sys.stderr.write(__doc__.strip() + "\n")
        return 2
    opts, rest = _parse(argv[1:])
    if "help" in opts or "h" in opts or rest[:1] == ["-h"]:
        sys.stdout.write(__doc__.strip() + "\n")
        return 0
    if not rest:
        sys.stderr.write("vramguard: run needs a script\n")
        return 2
    module = rest[0] == "-m"
    if module and len(rest) < 2:
        sys.stderr.write("vramguard: -m needs a module name\n")
        return 2
    follow = vramguard._truthy(opts.pop("follow_children", "0"))
    mode = opts.pop("mode", None)  # (None: VRAMGUARD_OPTIONS's, else fast)
    interpose = opts.pop("interpose", None)
    problem = _options_problem(opts, mode)
    if problem:
        sys.stderr.write("vramguard: %s; the script was not started\n" % problem)
        return 2
    try:
        cmd, note = _interposer_command(
            argv, opts, mode or vramguard._env_options().get("mode") or "fast",
            interpose=interpose, follow=follow)
    except ValueError as e:
        sys.stderr.write("vramguard: %s\n" % e)
        return 2
    os.environ.pop(_INTERPOSED, None)  # (the script's own `python -m vramguard run`s start afresh)
    if note:
        sys.stderr.write(note + "\n")
    if cmd:
        sys.stdout.flush()
        sys.stderr.flush()
        env = dict(os.environ, **{_INTERPOSED: "1"})
        try:
            os.execve(cmd[0], cmd, env)
        except OSError as e:
            sys.stderr.write("vramguard: cannot run %s (%s); guard mode sees this script's "
                             "allocations only\n" % (cmd[0], e))
    if follow:  # (before enable(): its options are checked there, for the children too)
        import json
        here = os.path.join(os.path.dirname(os.path.abspath(vramguard.__file__)), "_children")
        os.environ["VRAMGUARD_PYTHON"] = json.dumps(dict(opts, mode=mode))
        paths = [here]
        package_dir = os.path.dirname(os.path.dirname(here))  # (a checkout's python/)
        if not any(d in package_dir for d in ("site-packages", "dist-packages")):
            paths.append(package_dir)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        vramguard.enable(mode=mode, **opts)
    except (vramguard.VramguardError, ValueError) as e:
        sys.stderr.write("vramguard: %s\n" % e)
        return 2
    sys.argv = rest[1:] if module else rest  # (run_module puts the module's path first)
    try:
        import torch
        oom_type = torch.cuda.OutOfMemoryError
    except (ImportError, AttributeError):
        oom_type = None
    try:
        if module:
            runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(rest[0], run_name="__main__")
    except Exception as e:  # an allocation failure: say why, in PyTorch's own error type
        if oom_type is not None and isinstance(e, (oom_type, RuntimeError)) and vramguard.last_oom() \
                and "out of memory" in str(e).lower():
            if "(vramguard)" in str(e):  # libvramguard_torch.so's error: it explains already
                raise oom_type(str(e)) from e
            raise oom_type(str(e) + "\n\nvramguard: " + vramguard.last_oom()) from e
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
