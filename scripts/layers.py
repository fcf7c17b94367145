#!/usr/bin/env python3
"""layers.py BUILD [--root=DIR] [--rooms=FILE] [--dot] [--edges]

What the code under src/ depends on, file by file, as a linker and the preprocessor see it:
a source file uses another when its object file refers to a symbol the other's object
defines (a call, or a global's address: nm), or when it #includes it. Calls through a
function pointer are not dependencies (that is what a door is). Prints

  - every circle of files (a strongly connected set of more than one file), and
  - every dependency from one room (folder) to another that the table of rooms does not
    allow: the block "```rooms" in docs/architecture.md, one line per room,
    "ROOM: ROOM ROOM ..." naming the rooms it may use (its own always).

Exit status 0 when there is neither, 1 when there is either, 2 on bad input. --edges
lists every dependency between files of different rooms; --dot writes the rooms' graph.
--root: the source tree (default: this script's repository); --rooms: the file with the
rooms block (default: ROOT/docs/architecture.md). A source file with no object in BUILD
(a target this configuration does not build) is named, and only its includes count.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Names a file defines to stand in for another library's (the interposer's dlsym and CUDA
# driver entry points): a call to them is a call to that library, not to the file.
INTERPOSED = re.compile(r"^(dlsym|dlvsym|dlopen|cu[A-Z]\w*)$")


def sources():
    out = []
    for top in ("src", "include"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h", ".cpp")):
                    out.append(os.path.relpath(os.path.join(d, f), ROOT))
    return sorted(out)


def objects(build):
    """Source path (relative) -> one object file built from it."""
    found = {}
    for d, _, files in os.walk(build):
        if "CMakeFiles" not in d or "/fuzz" in d:
            continue
        for f in files:
            if not f.endswith(".o"):
                continue
            p = os.path.join(d, f)
            m = re.search(r"\.dir/(.*)\.o$", p)
            if not m:
                continue
            rel = os.path.normpath(m.group(1)).replace("__/", "")
            if rel.startswith(("src/", "include/")) and rel not in found:
                found[rel] = p
    return found


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind in "TDBRCVWGSui":
            defined.add(name)
    return defined, used


def includes(path):
    here = os.path.dirname(path)
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    out = []
    for name in INCLUDE.findall(text):
        for base in (here, "src", "include"):
            cand = os.path.normpath(os.path.join(base, name))
            if os.path.exists(os.path.join(ROOT, cand)):
                out.append(cand)
                break
    return out


def graph(build):
    files = sources()
    objs = objects(build)
    missing = [f for f in files if f.endswith((".c", ".cpp")) and f not in objs]
    definer, uses = {}, {}
    for f in files:
        if f in objs:
            d, u = symbols(objs[f])
            uses[f] = u
            for s in d:
                if not INTERPOSED.match(s):
                    definer.setdefault(s, f)
    edges = defaultdict(set)  # file -> files it depends on, each with why
    why = {}
    for f in files:
        for s in uses.get(f, ()):
            g = definer.get(s)
            if g and g != f:
                edges[f].add(g)
                why.setdefault((f, g), "calls " + s)
        for h in includes(f):
            if h != f:
                edges[f].add(h)
                why.setdefault((f, h), "includes " + h)
    return files, edges, why, missing


def circles(files, edges):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in files:
        if v not in index:
            visit(v)
    return out


def room_of(path):
    parts = path.split("/")
    if parts[0] == "include":
        return "include"
    return "/".join(parts[1:-1]) or parts[0]


def read_rooms(doc):
    with open(doc, encoding="utf-8") as f:
        m = re.search(r"```rooms\n(.*?)```", f.read(), re.S)
    if not m:
        raise ValueError("%s has no ```rooms block" % doc)
    table = {}
    for line in m.group(1).splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        room, _, rest = line.partition(":")
        table[room.strip()] = set(rest.split())
    return table


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    opts = [a for a in argv if a.startswith("--")]
    if len(args) < 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    global ROOT
    build = os.path.abspath(args[0])
    for o in opts:
        if o.startswith("--root="):
            ROOT = os.path.abspath(o.split("=", 1)[1])
    doc = os.path.join(ROOT, "docs/architecture.md")
    for o in opts:
        if o.startswith("--rooms="):
            doc = o.split("=", 1)[1]
    files, edges, why, missing = graph(build)
    if len(missing) == len([f for f in files if f.endswith((".c", ".cpp"))]):
        print("layers.py: no object files in %s: build it first" % build, file=sys.stderr)
        return 2
    if missing:
        print("not built here (only their includes count): %s" % " ".join(missing))
    bad = 0
    for comp in circles(files, edges):
        bad += 1
        print("circle of %d files:" % len(comp))
        members = set(comp)
        for f in comp:
            for g in sorted(edges[f] & members):
                print("  %s -> %s (%s)" % (f, g, why[(f, g)]))
    rooms = None
    if os.path.exists(doc):
        try:
            rooms = read_rooms(doc)
        except ValueError as e:
            print("layers.py: %s" % e, file=sys.stderr)
            return 2
    between = defaultdict(list)
    for f in files:
        for g in sorted(edges.get(f, ())):
            a, b = room_of(f), room_of(g)
            if a != b:
                between[(a, b)].append((f, g))
    if rooms is not None:
        unknown = sorted({room_of(f) for f in files} - set(rooms))
        if unknown:
            print("layers.py: rooms not in %s: %s" % (doc, " ".join(unknown)), file=sys.stderr)
            return 2
        for (a, b), pairs in sorted(between.items()):
            if b not in rooms[a]:
                bad += 1
                print("%s may not use %s:" % (a, b))
                for f, g in pairs:
                    print("  %s -> %s (%s)" % (f, g, why[(f, g)]))
    if "--edges" in opts:
        for (a, b), pairs in sorted(between.items()):
            print("%s -> %s: %d" % (a, b, len(pairs)))
            for f, g in pairs:
                print("  %s -> %s (%s)" % (f, g, why[(f, g)]))
    if "--dot" in opts:
        print("digraph rooms {")
        for (a, b), pairs in sorted(between.items()):
            print('  "%s" -> "%s" [label=%d];' % (a, b, len(pairs)))
        print("}")
    n = sum(len(v) for v in edges.values())
    print("%d files, %d dependencies, %s" % (len(files), n,
          "no circle, every room's doors respected" if not bad else "%d problem%s" %
          (bad, "" if bad == 1 else "s")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
