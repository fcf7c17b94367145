"""`pip install ./python` ships every module of the package and needs nothing from a
package index: python/pyproject.toml names the package's own build backend
(python/_build/vg_backend.py, standard library only). The wheel and the source
distribution are built through the backend's PEP 517 hooks from a copy of python/, and
the wheel's files imported and run alone; where pip is installed, `pip install
--no-index` of the copy must work too (with build isolation: no setuptools, no wheel).
No network is needed: nothing is downloaded. Environment (set by CTest): VRAMGUARD_LIB."""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

SOURCE = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def package_files(root):
    """The files under root/vramguard a user's install must hold (no caches)."""
    out = set()
    for d, dirs, files in os.walk(os.path.join(root, "vramguard")):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if not f.endswith((".pyc", ".pyo")):
                out.add(os.path.relpath(os.path.join(d, f), root))
    return out


def run(cmd, cwd, env=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stdout))
    return r.stdout


def hook(src, name, *args):
    """Call the backend's PEP 517 hook as pip does: the backend-path on sys.path."""
    code = ("import sys; sys.path.insert(0, '_build'); import vg_backend; "
            "print(vg_backend.%s(*%r))" % (name, args))
    return run([sys.executable, "-c", code], src).strip().splitlines()[-1]


def has_pip():
    return subprocess.run([sys.executable, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


class Packaging(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.src = os.path.join(self.tmp, "python")  # (the build writes into its tree)
        shutil.copytree(SOURCE, self.src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info",
                                                                         "build", "dist"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_the_build_needs_nothing_from_an_index(self):
        self.assertEqual(hook(self.src, "get_requires_for_build_wheel"), "[]")
        with open(os.path.join(self.src, "pyproject.toml")) as f:
            text = f.read()
        self.assertIn("requires = []", text)
        self.assertIn('build-backend = "vg_backend"', text)

    def test_sdist_holds_every_module(self):
        name = hook(self.src, "build_sdist", self.tmp)
        with tarfile.open(os.path.join(self.tmp, name)) as t:
            names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        missing = package_files(SOURCE) - names
        self.assertFalse(missing, "left out of the source distribution: %s" % sorted(missing))
        for f in ("pyproject.toml", "README.md", "_build/vg_backend.py", "PKG-INFO"):
            self.assertIn(f, names)

    def test_wheel_imports_and_runs(self):
        name = hook(self.src, "build_wheel", self.tmp)
        self.assertEqual(name, "vramguard-0.1.0-py3-none-any.whl")
        lib = os.path.join(self.tmp, "lib")
        with zipfile.ZipFile(os.path.join(self.tmp, name)) as z:
            record = z.read("vramguard-0.1.0.dist-info/RECORD").decode()
            self.assertIn("Name: vramguard", z.read("vramguard-0.1.0.dist-info/METADATA").decode())
            z.extractall(lib)
        missing = package_files(SOURCE) - package_files(lib)
        self.assertFalse(missing, "left out of the wheel: %s" % sorted(missing))
        for f in package_files(SOURCE):
            self.assertIn(f.replace(os.sep, "/") + ",sha256=", record)
        self.check_runs(lib)

    @unittest.skipUnless(has_pip(), "pip is not installed")
    def test_pip_installs_it_with_no_index(self):
        target = os.path.join(self.tmp, "target")
        run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "-q",
             "--target", target, self.src], self.tmp)
        self.check_runs(target)

    def check_runs(self, lib):
        env = dict(os.environ, PYTHONPATH=lib)  # (the install alone, not the source tree)
        out = run([sys.executable, "-c", "import vramguard, os; print(vramguard.__file__)"],
                  self.tmp, env)
        self.assertTrue(out.strip().startswith(lib), out)
        usage = run([sys.executable, "-m", "vramguard", "--help"], self.tmp, env)
        self.assertIn("python -m vramguard run", usage)
        # The child-process hook (--follow-children) is data, not a module: it must be there.
        self.assertTrue(os.path.isfile(os.path.join(lib, "vramguard", "_children",
                                                    "sitecustomize.py")))


if __name__ == "__main__":
    unittest.main()
