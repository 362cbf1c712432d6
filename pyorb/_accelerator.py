"""The compiled accelerator: C twins of pyorb's per-message functions, chosen once at import.

``build.py`` (run by ``pip install``, ``pip wheel`` and ``poetry build``)
compiles each module of :data:`NATIVE` from its Cython source (``.pyx``)
into an extension beside it and writes :data:`MANIFEST` with a hash of each
source.  A native module holds C twins of hot functions (or classes) of
pure-Python modules.  Each such module declares its twins once, at its end,
through :func:`twin`, the one way a twin takes an original's place: when
:func:`status` says the twins run, the twin is bound where the original was,
at import, so a call costs what a call of the twin costs.  :data:`TWINS`
keeps every declared original, which stays the reference implementation:
the tests check each twin against it.

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
import functools
import importlib
import importlib.machinery
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

NATIVE: tuple[str, ...] = ("pyorb.giop._cframing", "pyorb.marshal.layout._cwalk", "pyorb.marshal.layout._cvalues",
                           "pyorb.aio._csend", "pyorb.aio._cprotocol", "pyorb.client._cwriter", "pyorb.client._cblocking",
                           "pyorb.client._cinvocation", "pyorb.server._crequests", "pyorb.server.call._creply",
                           "pyorb.server.call._cstats", "pyorb.marshal._cbody", "pyorb.server._cadmission")
"""The modules written for the compiler, each of C twins: the GIOP core's per-message functions
(``pyorb.giop._cframing``), the padding walk of flat bodies (``pyorb.marshal.layout._cwalk``), the
walk of runs of value types (``pyorb.marshal.layout._cvalues``), a dispatcher thread's write to
its client's socket (``pyorb.aio._csend``), a connection's reads and writes (``pyorb.aio._cprotocol``), a client connection's request writer (``pyorb.client._cwriter``),
a blocking client's call (``pyorb.client._cblocking``), a call's reply (``pyorb.client._cinvocation``), a
server connection's requests (``pyorb.server._crequests``), a servant's plain reply (``pyorb.server.call._creply``), a
call's statistics (``pyorb.server.call._cstats``), a body of one value (``pyorb.marshal._cbody``) and admission
control's judgement of an arriving call (``pyorb.server._cadmission``)."""

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


@dataclass(frozen=True)
class Twin:
    """A Python original with a C twin, as declared to :func:`twin`."""

    home: str
    """The module that defines the original."""
    name: str
    """Its name there; ``Class.method`` for a method.  The twin has the last part of it as its name in :attr:`native`."""
    native: str
    """The compiled module (one of :data:`NATIVE`) that holds the twin."""
    original: object
    """The Python original: the reference the twin is checked against."""
    in_place: bool
    """Whether the twin runs in this process (in place of the original wherever it was bound)."""

    @property
    def key(self) -> str:
        """``home.name``: the twin's key in :data:`TWINS`."""
        return f"{self.home}.{self.name}"


TWINS: dict[str, Twin] = {}
"""Every twin declared so far (a module declares its own when it is imported), by :attr:`Twin.key`."""


def twin(home: str, name: str, native: str, *, also: Iterable[str] = (), usable: bool = True) -> bool:
    """Declare that ``name`` of module ``home`` has a C twin of the same (last) name in ``native``;
    whether the twin is now in place.

    Called once, at the end of ``home`` (or by the module that gathers its
    twins, with ``also`` naming the modules that imported the original by
    name).  If the compiled twins run (:func:`status`) and the declaring
    module finds them ``usable``, the twin replaces the original: every
    global of ``home`` and of ``also`` bound to it, or the method of the
    class.  Otherwise nothing changes and the original runs.
    """
    if native not in NATIVE:
        raise ValueError(f"twin {home}.{name}: {native!r} is not a compiled module of pyorb ({', '.join(NATIVE)})")
    key = f"{home}.{name}"
    if key in TWINS:
        raise ValueError(f"twin {key} is declared twice: a module declares each of its twins once")
    module = sys.modules[home]
    owner_path, _, attribute = name.rpartition(".")
    owner = functools.reduce(getattr, owner_path.split("."), module) if owner_path else module
    original = getattr(owner, attribute)
    in_place = usable and status().compiled
    if in_place:
        compiled = getattr(importlib.import_module(native), attribute)
        if owner_path:
            setattr(owner, attribute, compiled)
        for holder in (module, *(sys.modules[m] for m in also)):
            for bound, value in list(vars(holder).items()):
                if value is original:
                    setattr(holder, bound, compiled)
    TWINS[key] = Twin(home, name, native, original, in_place)
    return in_place


def original(key: str) -> object:
    """The Python original of the twin declared as ``key`` (``home.name``, as in :data:`TWINS`)."""
    try:
        return TWINS[key].original
    except KeyError:
        raise KeyError(f"no twin is declared as {key!r} (declared: {', '.join(sorted(TWINS)) or 'none yet'}; "
                       "a module declares its twins when it is imported)") from None
