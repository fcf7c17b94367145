"""vramguard in the Python processes that `python -m vramguard run --follow-children`
starts (torchrun's workers, a launcher's ranks): that command puts this directory first
on their PYTHONPATH and its options in VRAMGUARD_PYTHON, and Python imports this module
at start-up, before the program. A sitecustomize of the user's, further on the path, runs
first. Processes without PyTorch are left alone, and a failure only prints one line."""
import importlib
import importlib.util
import json
import os
import sys


def _chain():
    """Import the sitecustomize this one hides, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as e:
        if e.name != "sitecustomize":
            raise
        if mine is not None:
            sys.modules["sitecustomize"] = mine
    finally:
        sys.path[:] = saved


def _enable():
    options = os.environ.get("VRAMGUARD_PYTHON")
    if not options or importlib.util.find_spec("torch") is None:
        return
    try:
        import vramguard
        vramguard.enable(**json.loads(options))
    except Exception as e:  # (the program runs as it would without vramguard)
        sys.stderr.write("vramguard: not enabled in process %d: %s\n" % (os.getpid(), e))


try:
    _chain()
finally:
    _enable()
