"""The compiled accelerator: C twins of pyorb's per-message functions, chosen once at import.

``build.py`` (run by ``pip install``, ``pip wheel`` and ``poetry build``)
compiles each module of :data:`NATIVE` from its Cython source (``.pyx``)
into an extension beside it and writes :data:`MANIFEST` with a hash of each
source.  A native module holds C twins of hot functions of a pure-Python
module, which that module takes in place of its own when :func:`status`
says so (``pyorb.giop.codec`` ends with the switch).  The pure-Python
functions stay the reference implementation; the tests check each twin
against its original.

Why twins and not the modules themselves: compiled unchanged with Cython,
pyorb's modules ran no faster than under CPython 3.11's specialising
interpreter (some slower: generic attribute lookups lose its inline
caches), and mypyc could not compile them into a working client; the
gain is in byte-level work written for C (docs/benchmarks.md, "The compiled accelerator").

The choice, made once when ``pyorb`` is imported:

* ``PYORB_NO_EXTENSIONS=1`` (or ``true``/``yes``): pure Python;
* no manifest (installed without a C compiler, or never built): the same;
* an extension missing, or its source changed since the build (an edited
  checkout not rebuilt): the same, with a warning on the ``pyorb`` logger,
  so that stale compiled code never runs;
* otherwise the twins.

Only the standard library and nothing from pyorb: every layer may use it.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

NATIVE: tuple[str, ...] = ("pyorb.giop._cframing", "pyorb.marshal.layout._cwalk", "pyorb.marshal.layout._cvalues",
                           "pyorb.aio._csend", "pyorb.client._cwriter")
"""The modules written for the compiler, each of C twins: the GIOP core's per-message functions
(``pyorb.giop._cframing``), the padding walk of flat bodies (``pyorb.marshal.layout._cwalk``), the
walk of runs of value types (``pyorb.marshal.layout._cvalues``), a dispatcher thread's write to
its client's socket (``pyorb.aio._csend``) and a client connection's request writer (``pyorb.client._cwriter``)."""

MANIFEST = "_accelerator.json"
"""Beside this file: the compiler's version and each native module's source hash, written by ``build.py``."""

DISABLE = "PYORB_NO_EXTENSIONS"
"""The environment variable that makes pyorb run its pure-Python functions only."""

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Status:
    """Which implementation this process uses, and why."""

    compiled: bool
    reason: str
    compiler: str = ""
    """The compiler and its version (``"Cython 3.1.2"``) when compiled."""


def source_path(module: str, root: Path = _HERE) -> Path:
    """The Cython source of ``module`` (a name from :data:`NATIVE`) under the package at ``root``."""
    return root.joinpath(*module.split(".")[1:]).with_suffix(".pyx")


def source_hash(path: Path) -> str:
    """The hash of a Cython source and of its declarations (``.pxd``, which other modules compile in) if any."""
    declarations = path.with_suffix(".pxd")
    extra = declarations.read_bytes() if declarations.exists() else b""
    return hashlib.sha256(path.read_bytes() + extra).hexdigest()


def _extension(module: str, root: Path) -> Path | None:
    base = source_path(module, root).with_suffix("")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = base.with_name(base.name + suffix)
        if candidate.exists():
            return candidate
    return None


def decide(root: Path, environ: Mapping[str, str]) -> Status:
    """The choice for the package at ``root`` under ``environ`` (what :func:`status` holds for pyorb's)."""
    if environ.get(DISABLE, "").strip().lower() in ("1", "true", "yes"):
        return Status(False, f"{DISABLE}={environ[DISABLE]}")
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        hashes: dict[str, str] = manifest["modules"]
        compiler = str(manifest["compiler"])
    except FileNotFoundError:
        return Status(False, "not built: pyorb was installed without a C compiler (or never built)")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Status(False, f"unreadable {MANIFEST}: {exc}")
    for module in NATIVE:
        if _extension(module, root) is None or module not in hashes:
            return Status(False, f"incomplete build: no extension for {module} (rebuild: pip install -e .)")
        source = source_path(module, root)
        if source.exists() and source_hash(source) != hashes[module]:
            return Status(False, f"stale build: {source.name} changed since it was compiled "
                                 "(rebuild: pip install -e .)")
    return Status(True, ", ".join(NATIVE), compiler)


_STATUS: Status | None = None


def status() -> Status:
    """The choice for this process, made on the first call (what :func:`pyorb.accelerated` is based on)."""
    global _STATUS
    if _STATUS is None:
        decided = decide(_HERE, os.environ)
        if decided.reason.startswith(("stale", "incomplete", "unreadable")):
            import logging  # only here: it starts threading, which importing pyorb.giop must not

            logging.getLogger("pyorb").warning("pyorb: running pure Python, the compiled accelerator is unusable: %s",
                                               decided.reason)
        _STATUS = decided
    return _STATUS
