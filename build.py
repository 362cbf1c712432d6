"""Build pyorb's compiled accelerator: Poetry's build script (``[tool.poetry.build]``).

poetry-core runs this in the project directory for ``pip install -e .``,
``pip wheel .`` and ``poetry build``, before it collects the package's files.
It compiles each module named in ``pyorb/_accelerator.py`` from its
Cython source into an extension beside it, then writes the manifest that
tells pyorb at import time that the extensions match their sources.  Without a working C compiler (or Cython) it says why on stderr and
leaves no extension and no manifest: pyorb then runs its pure-Python modules.
``PYORB_NO_EXTENSIONS=1`` at build time skips the build the same way.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import runpy
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "pyorb"
# Read by path, not imported: importing pyorb would run its import-time choice.
_ACCEL = runpy.run_path(str(PACKAGE / "_accelerator.py"), run_name="pyorb_accelerator_build")
NATIVE: tuple[str, ...] = _ACCEL["NATIVE"]
MANIFEST: Path = PACKAGE / _ACCEL["MANIFEST"]

# Each .pyx states its own directives in its first line; these only add signatures to docstrings.
DIRECTIVES = {"language_level": 3, "embedsignature": True}


def clean() -> None:
    """Remove the manifest, every native extension, and any extension that would shadow a ``.py``
    (the import system prefers it: one left by another build would run instead of the source)."""
    MANIFEST.unlink(missing_ok=True)
    for module in NATIVE:
        source = _ACCEL["source_path"](module, PACKAGE)
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            source.with_name(source.stem + suffix).unlink(missing_ok=True)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for extension in PACKAGE.rglob("*" + suffix):
            if extension.with_name(extension.name[: -len(suffix)] + ".py").exists():
                extension.unlink()


def build() -> None:
    from Cython import __version__ as cython_version
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    sources = {module: _ACCEL["source_path"](module, PACKAGE) for module in NATIVE}
    extensions = [Extension(module, [str(path.relative_to(ROOT))]) for module, path in sources.items()]
    with tempfile.TemporaryDirectory(prefix="pyorb-build-") as tmp:
        compiled = cythonize(extensions, compiler_directives=DIRECTIVES, build_dir=os.path.join(tmp, "c"),
                             nthreads=os.cpu_count() or 1, quiet=True)
        dist = Distribution({"name": "pyorb-accelerator", "ext_modules": compiled})
        cmd = dist.get_command_obj("build_ext")
        cmd.inplace = True
        cmd.build_temp = os.path.join(tmp, "obj")
        cmd.parallel = os.cpu_count() or 1
        cmd.ensure_finalized()
        cmd.run()
    MANIFEST.write_text(json.dumps({
        "compiler": f"Cython {cython_version}",
        "modules": {module: _ACCEL["source_hash"](path) for module, path in sources.items()},
    }, indent=1, sort_keys=True) + "\n")


def main() -> None:
    os.chdir(ROOT)
    clean()
    if os.environ.get(_ACCEL["DISABLE"], "").strip().lower() in ("1", "true", "yes"):
        print(f"pyorb: {_ACCEL['DISABLE']} is set: not building the compiled accelerator", file=sys.stderr)
        return
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        print("pyorb: no C compiler found: installing the pure-Python modules only", file=sys.stderr)
        return
    try:
        build()
    except Exception:  # any failure: pyorb still works, only slower
        traceback.print_exc()
        clean()
        print("pyorb: building the compiled accelerator failed (above): installing the pure-Python modules only",
              file=sys.stderr)


if __name__ == "__main__":
    main()
