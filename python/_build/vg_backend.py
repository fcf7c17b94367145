"""vg_backend — the package's own build backend (PEP 517), so that `pip install ./python`
needs nothing from a package index: no setuptools, no wheel (a machine with only
Debian's packages, or none). It writes the wheel with the standard library: the
`vramguard` package's files as they are, its metadata from pyproject.toml's [project]
table (name, version, description, requires-python, optional torch), a RECORD with each
file's hash. No compiled code: the package loads libvramguard.so at run time.

Hooks: build_wheel, build_sdist, get_requires_for_build_wheel/sdist (none),
prepare_metadata_for_build_wheel, and build_editable (a .pth file naming this folder)."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PACKAGE = "vramguard"


def _project():
    """name, version, description and requires-python from pyproject.toml (no TOML parser
    is needed for these plain `key = "value"` lines of [project])."""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^\[project\]\n(.*?)(?=^\[)", text, re.S | re.M).group(1)
    info = dict(re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', section, re.M))
    return info["name"], info["version"], info.get("description", ""), info.get(
        "requires-python", "")


def _metadata():
    name, version, description, requires = _project()
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version,
             "Summary: " + description]
    if requires:
        lines.append("Requires-Python: " + requires)
    lines += ["Provides-Extra: torch", 'Requires-Dist: torch>=2.1; extra == "torch"',
              "Description-Content-Type: text/markdown", "", readme]
    return name, version, "\n".join(lines) + "\n"


def _files():
    root = os.path.join(HERE, PACKAGE)
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith((".py", ".txt")):
                full = os.path.join(d, f)
                yield full, os.path.relpath(full, HERE).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _dist_info(name, version):
    return "%s-%s.dist-info" % (name, version)


def _write_wheel(wheel_directory, entries):
    name, version, metadata = _metadata()
    filename = "%s-%s-py3-none-any.whl" % (name, version)
    info = _dist_info(name, version)
    wheel = "Wheel-Version: 1.0\nGenerator: vg_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries + [(info + "/METADATA", metadata.encode()),
                                        (info + "/WHEEL", wheel.encode())]:
            z.writestr(arcname, data)
            records.append(_record_line(arcname, data))
        records.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(records) + "\n")
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, metadata = _metadata()
    info = os.path.join(metadata_directory, _dist_info(name, version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata)
    return _dist_info(name, version)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for full, arcname in _files():
        with open(full, "rb") as f:
            entries.append((arcname, f.read()))
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("vramguard_editable.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    name, version, _, _ = _project()
    base = "%s-%s" % (name, version)
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/vg_backend.py"]:
            t.add(os.path.join(HERE, rel), base + "/" + rel)
        for full, arcname in _files():
            t.add(full, base + "/" + arcname)
        _, _, metadata = _metadata()
        data = metadata.encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return filename
