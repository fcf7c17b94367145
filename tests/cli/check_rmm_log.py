#!/usr/bin/env python3
"""check_rmm_log.py LOG — is LOG an RMM memory event log exactly as RMM's
logging_resource_adaptor writes it, and would RMM's replay benchmark read it?

Written from RMM's code (no RMM needed): the header `Thread,Time,Action,Pointer,Size,Stream`
once; then rows `TID,HH:MM:SS.ffffff,ACTION,POINTER,SIZE,STREAM` with the OS thread id in
decimal (spdlog's %t), the local time of day with microseconds (%H:%M:%S.%f), ACTION one of
allocate, free, `allocate failure`, POINTER as glibc's %p prints it (0x + lowercase hex,
`(nil)` for null), SIZE in decimal bytes, STREAM as libstdc++ prints a cudaStream_t (0,
else 0x + lowercase hex). Then the parse RMM's benchmarks/utilities/log_parser.hpp makes:
columns by header name, Thread and Size with std::stoul, Pointer with std::stoull base 16
(`(nil)` is 0), Stream with std::stoul base 10, Action one of the three; and the replay's
pairing of each free with a live allocation of the same pointer. Prints the number of rows
and threads, or the first problem (exit 1)."""
import re
import sys

HEADER = "Thread,Time,Action,Pointer,Size,Stream"
ROW = re.compile(r"^(\d+),(\d\d):(\d\d):(\d\d)\.(\d{6}),(allocate|free|allocate failure),"
                 r"(0x[0-9a-f]+|\(nil\)),(\d+),(0|0x[0-9a-f]+)$")


def stoul(text):
    """std::stoul base 10: leading whitespace, then digits; the rest is ignored; no digit
    is an exception (std::invalid_argument)."""
    m = re.match(r"\s*([+-]?\d+)", text)
    if not m:
        raise ValueError("std::stoul cannot read %r" % text)
    return int(m.group(1))


def check(path):
    with open(path, encoding="ascii") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != HEADER:
        return "line 1: the header is not %r" % HEADER
    live, threads = {}, set()
    for n, line in enumerate(lines[1:], start=2):
        m = ROW.match(line)
        if not m:
            return "line %d: not in RMM's format: %r" % (n, line)
        tid, h, mi, s, _, action, ptr, size, stream = m.groups()
        if int(h) > 23 or int(mi) > 59 or int(s) > 60:
            return "line %d: no such time of day %s:%s:%s" % (n, h, mi, s)
        if (ptr == "(nil)") != (action == "allocate failure"):
            return "line %d: %s of pointer %s" % (n, action, ptr)
        threads.add(stoul(tid))
        stoul(size)
        stoul(stream)  # (RMM's parser reads 0x... as 0: it never fails on it)
        p = 0 if ptr == "(nil)" else int(ptr, 16)
        if action == "allocate":
            if p in live:
                return "line %d: %s allocated again while live" % (n, ptr)
            live[p] = int(size)
        elif action == "free":
            if p not in live:
                return "line %d: free of %s, not live" % (n, ptr)
            if live.pop(p) != int(size):
                return "line %d: free of %s with another size than its allocation" % (n, ptr)
    print("%d rows, %d threads, %d live at the end: RMM's format" %
          (len(lines) - 1, len(threads), len(live)))
    return None


if __name__ == "__main__":
    problem = check(sys.argv[1])
    if problem:
        print("%s: %s" % (sys.argv[1], problem))
        sys.exit(1)
