"""Child of test_package.Combined, run under `vramguard run --sim --mode=guard`: the
package allocates (as PyTorch's pluggable allocator does) and the program launches a
kernel through the driver (as PyTorch does), and the kernel writes 16 bytes past the end
of a 4000-byte tensor (scenario S1). With one vramguard serving both, the report names
the Python lines of the allocation and of the launch, and the kernel. argv: the
repository's examples/kernels.ptx, then optionally "record_stream" (S2 as PyTorch's
missing_record_stream.py: a tensor used by a kernel on a side stream is freed on the main
stream; docs/decisions.md G7), "record_stream_fixed" (with vg_record_stream first), or
"leak" / "leak_fixed" (S5 as leak_in_loop.py: a small tensor kept at every optimizer step,
or not; the script never calls vramguard.step())."""
import ctypes
import sys

import vramguard
from vramguard import _lib

lib = _lib.lib()  # (the library vramguard run injected)
if not vramguard.enabled():  # (under python -m vramguard run, enable() did it)
    _lib.check(lib.vg_init(b"python_frames=1"), "vg_init")
cu = ctypes.CDLL("libcuda.so.1")  # (vgsim, through vramguard run --sim)


class Launch(ctypes.Structure):  # vgsim_launch_t: a kernel's host implementation gets it
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_mem", ctypes.c_uint), ("nparams", ctypes.c_int),
                ("params", ctypes.c_void_p * 32)]


@ctypes.CFUNCTYPE(None, ctypes.POINTER(Launch))
def fill(launch):  # ex_fill(float *x, float v, unsigned long long n) on the host
    p = launch.contents.params
    x = ctypes.c_void_p.from_address(p[0]).value
    v = ctypes.c_float.from_address(p[1])
    n = ctypes.c_ulonglong.from_address(p[2]).value
    ctypes.memmove(x, (ctypes.c_float * n)(*([v.value] * n)), 4 * n)


def check(r, what):
    if r != 0:
        sys.exit("%s failed: %d" % (what, r))


check(cu.cuInit(0), "cuInit")
dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
cu.vgsim_register_kernel(b"ex_fill", fill)  # (vgsim: kernels run on the host)
with open(sys.argv[1], "rb") as f:
    check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(f.read() + b"\0")), "load")
check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"ex_fill"), "cuModuleGetFunction")


def tensor(nbytes):
    p = ctypes.c_void_p()
    _lib.check(lib.vg_malloc(ctypes.byref(p), nbytes, None), "vg_malloc")  # ALLOC
    return p


def fill_rows(t, n, stream=None):
    x, v, count = ctypes.c_void_p(t.value), ctypes.c_float(1.0), ctypes.c_ulonglong(n)
    params = (ctypes.c_void_p * 3)(ctypes.addressof(x), ctypes.addressof(v),
                                   ctypes.addressof(count))
    check(cu.cuLaunchKernel(fn, (n + 255) // 256, 1, 1, 256, 1, 1, 0, stream, params, None),
          "cuLaunchKernel")  # LAUNCH


mode = sys.argv[2] if len(sys.argv) > 2 else "overrun"
if mode.startswith("leak"):
    import torch  # (tests/python/fake_torch: its optimizer calls the step post-hooks)
    opt, kept = torch.optim.Optimizer(), []
    for step in range(8):
        activation, loss = tensor(1 << 16), tensor(4)  # LEAK
        lib.vg_free(activation, None)
        opt.step()
        if mode == "leak":
            kept.append(loss)  # history.append(loss): the bug
        else:
            lib.vg_free(loss, None)
    print("steps", step + 1)
elif mode == "overrun":
    t = tensor(4 * 250 * 4)  # a 4x250 float tensor
    fill_rows(t, 4 * 251)    # the bug: as if it had 251 columns  # BUG
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    lib.vg_free(t, None)
    print("filled")
else:
    side = ctypes.c_void_p()
    check(cu.cuStreamCreate(ctypes.byref(side), 1), "cuStreamCreate")  # non-blocking
    t = tensor(1 << 20)                   # on the default stream  # S2ALLOC
    fill_rows(t, 1 << 18, side)           # with torch.cuda.stream(side): uses t
    if mode == "record_stream_fixed":
        _lib.check(lib.vg_record_stream(t, side), "vg_record_stream")  # t.record_stream(side)
    _lib.check(lib.vg_free(t, None), "vg_free")  # del t  # S2FREE
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    print("freed")
