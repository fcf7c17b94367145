"""Cost of python_frames: allocation and free pairs through libvramguard.so from Python
(ctypes, the GIL released around each call as PyTorch's bindings do), fast mode on vgsim,
from a call 11 Python frames deep; python_frames=0 and =1 in alternating child processes.

    VRAMGUARD_LIB=build/libvramguard.so VGSIM_LIB=build/vgsim/libcuda.so.1 \\
        python3 bench/python_frames.py [PAIRS] [ROUNDS]"""
import ctypes
import os
import statistics
import subprocess
import sys
import time


def child(value, pairs):
    lib = ctypes.CDLL(os.environ["VRAMGUARD_LIB"])
    lib.vg_init.argtypes = [ctypes.c_char_p]
    lib.vg_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
    lib.vg_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    assert lib.vg_init(("driver=%s,python_frames=%s,leaks=off" % (
        os.environ["VGSIM_LIB"], value)).encode()) == 0
    p = ctypes.c_void_p()
    malloc, free, ref = lib.vg_malloc, lib.vg_free, ctypes.byref(p)

    def loop(depth):
        if depth:
            return loop(depth - 1)
        t0 = time.perf_counter_ns()
        for _ in range(pairs):
            malloc(ref, 4096, None)
            free(p, None)
        return (time.perf_counter_ns() - t0) / pairs
    loop(8)  # warm: the table of lines, the heap's first page
    print(loop(8))


def main():
    if sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2], int(sys.argv[3]))
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    got = {"0": [], "1": []}
    for _ in range(rounds):
        for value in ("0", "1"):
            out = subprocess.run([sys.executable, __file__, "--child", value, str(pairs)],
                                 capture_output=True, text=True, check=True).stdout
            got[value].append(float(out))
    off, on = statistics.median(got["0"]), statistics.median(got["1"])
    print("ns per allocation+free from Python (median of %d rounds, %d pairs):" % (rounds, pairs))
    print("  python_frames=0: %.0f   python_frames=1: %.0f   difference: %.0f ns"
          % (off, on, on - off))


if __name__ == "__main__":
    main()
