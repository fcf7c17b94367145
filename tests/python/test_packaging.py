"""`pip install ./python` ships every module of the package: the package built the way pip
builds it (setuptools reading python/pyproject.toml), from a copy of python/, then
imported and run from the build alone. Skipped where setuptools cannot read
pyproject.toml (older than 61). No network is needed: nothing is downloaded.
Environment (set by CTest): VRAMGUARD_LIB."""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

SOURCE = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def setuptools_version():
    try:
        import setuptools
    except ImportError:
        return None
    return tuple(int(x) for x in setuptools.__version__.split(".")[:2] if x.isdigit())


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


@unittest.skipUnless((setuptools_version() or (0,)) >= (61,),
                     "setuptools >= 61 (pyproject.toml metadata) is not installed")
class Packaging(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.src = os.path.join(self.tmp, "python")  # (the build writes into its tree)
        shutil.copytree(SOURCE, self.src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info",
                                                                         "build", "dist"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_sdist_holds_every_module(self):
        code = "from setuptools import build_meta; print(build_meta.build_sdist(%r))" % self.tmp
        name = run([sys.executable, "-c", code], self.src).strip().splitlines()[-1]
        with tarfile.open(os.path.join(self.tmp, name)) as t:
            names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        missing = package_files(SOURCE) - names
        self.assertFalse(missing, "left out of the source distribution: %s" % sorted(missing))
        self.assertIn("pyproject.toml", names)
        self.assertIn("README.md", names)

    def test_built_package_imports_and_runs(self):
        # What a wheel installs is build_py's output: the packages and their package data.
        lib = os.path.join(self.tmp, "lib")
        run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py",
             "--build-lib", lib], self.src)
        missing = package_files(SOURCE) - package_files(lib)
        self.assertFalse(missing, "left out of the install: %s" % sorted(missing))
        env = dict(os.environ, PYTHONPATH=lib)  # (the build alone, not the source tree)
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
