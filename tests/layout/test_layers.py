#!/usr/bin/env python3
"""scripts/layers.py on small trees built here: it must find a circle, a door used the
wrong way (by a call and by an include alone), leave a call through a pointer alone, and
refuse a tree whose rooms are not all in the table."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

LAYERS = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "layers.py")
CC = os.environ.get("CC", "cc")

ROOMS = """# rooms
```rooms
low:
high: low
```
"""


class Tree:
    def __init__(self, files, rooms=ROOMS):
        self.root = tempfile.mkdtemp(prefix="vg-layers-")
        self.build = os.path.join(self.root, "build")
        for path, text in files.items():
            full = os.path.join(self.root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        os.makedirs(os.path.join(self.root, "docs"))
        with open(os.path.join(self.root, "docs", "architecture.md"), "w") as f:
            f.write(rooms)
        for path in files:
            if path.endswith(".c"):
                obj = os.path.join(self.build, "CMakeFiles", "t.dir", path + ".o")
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                subprocess.run([CC, "-c", "-I", os.path.join(self.root, "src"),
                                os.path.join(self.root, path), "-o", obj], check=True)

    def layers(self):
        r = subprocess.run([sys.executable, LAYERS, self.build, "--root=" + self.root],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def close(self):
        shutil.rmtree(self.root)


class LayersTest(unittest.TestCase):
    def run_tree(self, files, rooms=ROOMS):
        t = Tree(files, rooms)
        try:
            return t.layers()
        finally:
            t.close()

    def test_a_circle_and_an_upward_call_are_found(self):
        rc, out = self.run_tree({
            "src/low/a.c": "int b(void);\nint a(void) { return b() + 1; }\n",
            "src/high/b.c": "int a(void);\nint b(void) { return 2; }\nint c(void) { return a(); }\n",
        })
        self.assertEqual(rc, 1, out)
        self.assertIn("circle of 2 files", out)
        self.assertIn("src/low/a.c -> src/high/b.c (calls b)", out)
        self.assertIn("low may not use high", out)

    def test_an_include_alone_is_a_dependency(self):
        rc, out = self.run_tree({
            "src/high/h.h": "#define HIGH 1\n",
            "src/low/a.c": '#include "high/h.h"\nint a(void) { return HIGH; }\n',
            "src/high/b.c": "int a(void);\nint b(void) { return a(); }\n",
        })
        self.assertEqual(rc, 1, out)
        self.assertIn("src/low/a.c -> src/high/h.h (includes src/high/h.h)", out)

    def test_a_door_filled_from_above_is_not_a_dependency(self):
        rc, out = self.run_tree({
            "src/low/a.c": "int (*door)(void);\nint a(void) { return door ? door() : 0; }\n",
            "src/high/b.c": "extern int (*door)(void);\nint a(void);\n"
                            "static int b(void) { return 2; }\n"
                            "void open_door(void) { door = b; a(); }\n",
        })
        self.assertEqual(rc, 0, out)
        self.assertIn("no circle, every room's doors respected", out)

    def test_a_room_missing_from_the_table_is_refused(self):
        rc, out = self.run_tree({"src/side/s.c": "int s(void) { return 0; }\n"})
        self.assertEqual(rc, 2, out)
        self.assertIn("rooms not in", out)


if __name__ == "__main__":
    unittest.main()
