"""Child of test_package.PythonFrames: allocates and frees through libvramguard.so the way
PyTorch does (the GIL released around the call: ctypes.CDLL) and with the GIL held
(ctypes.PyDLL), in guard mode on vgsim, with a double free at each; then a snapshot in
PyTorch's structure. argv: python_frames value, report JSON path, snapshot pickle path."""
import ctypes
import importlib.util
import os
import sys
import threading

import vramguard
from vramguard import _lib

released = _lib.lib()
held = ctypes.PyDLL(_lib.path())
held.vg_malloc.argtypes = released.vg_malloc.argtypes
held.vg_free.argtypes = released.vg_free.argtypes
_lib.check(released.vg_init(("driver=%s,mode=guard,snapshot_events=100,python_frames=%s,"
                             "report_json=%s" % (os.environ["VGSIM_LIB"], sys.argv[1],
                                                 sys.argv[2])).encode()), "vg_init")


class Model:
    def make(self, lib, n):
        p = ctypes.c_void_p()
        _lib.check(lib.vg_malloc(ctypes.byref(p), n, None), "vg_malloc")  # MAKE
        return p


def drop(lib, p):
    lib.vg_free(p, None)  # DROP


m = Model()
a = m.make(released, 4000)  # FIRST
drop(released, a)
drop(released, a)  # AGAIN
b = m.make(held, 8000)
drop(held, b)
drop(held, b)
kept = []
t = threading.Thread(target=lambda: kept.append(m.make(released, 12000)))  # THREAD
t.start()
t.join()

# nn.Module's call machinery, as PyTorch's torch/nn/modules/module.py has it: left out.
plumbing = os.path.join(os.path.dirname(sys.argv[3]), "torch", "nn", "modules", "module.py")
os.makedirs(os.path.dirname(plumbing))
with open(plumbing, "w") as f:
    f.write("class Module:\n"
            "    def __call__(self, *a):\n        return self._wrapped_call_impl(*a)\n"
            "    def _wrapped_call_impl(self, *a):\n        return self._call_impl(*a)\n"
            "    def _call_impl(self, *a):\n        return self.forward(*a)\n")
spec = importlib.util.spec_from_file_location("fake_torch_module", plumbing)
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)


class Net(fake.Module):
    def forward(self, n):
        return m.make(released, n)  # FORWARD


kept.append(Net()(16000))  # CALL
vramguard.dump_snapshot(sys.argv[3])
