"""The compiled accelerator: the choice at import, the fallback, and what runs.

CI runs the suite twice: first after ``pip install -e .`` built the
extensions, with ``PYORB_EXPECT_ACCELERATED=1``; then the protocol, server
and client tests with ``PYORB_NO_EXTENSIONS=1`` and
``PYORB_EXPECT_ACCELERATED=0``.  So a build that silently fell back, or a
fallback that silently ran compiled code, fails here.
"""

from __future__ import annotations

import functools
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import pyorb
from pyorb import _accelerator
from pyorb.aio import direct, protocol  # noqa: F401  (each module imported declares its twins)
from pyorb.client import blocking, calls, invocation  # noqa: F401
from pyorb.giop import codec, connection, fast12, header, twins
from pyorb.marshal.layout import valuetypes  # noqa: F401
from pyorb.server import requests  # noqa: F401
from pyorb.server.call import reply  # noqa: F401

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]


def _check_chosen(module: Any, name: str, original: object) -> None:
    function = functools.reduce(getattr, name.split("."), module)  # a function, or a class's method
    if pyorb.accelerated():
        assert function is not original and type(function).__name__ != "function", name
    else:
        assert function is original, name


def test_every_compiled_module_has_its_twins_declared() -> None:
    """Each module of NATIVE holds twins declared through the registry, which is what puts them in place."""
    assert {t.native for t in _accelerator.TWINS.values()} == set(_accelerator.NATIVE)
    assert all(key == t.key for key, t in _accelerator.TWINS.items())


@pytest.mark.parametrize("key", sorted(_accelerator.TWINS))
def test_each_twin_runs_where_its_original_was_chosen(key: str) -> None:
    declared = _accelerator.TWINS[key]
    assert declared.in_place == pyorb.accelerated()
    _check_chosen(sys.modules[declared.home], declared.name, declared.original)


def test_a_declared_twin_replaces_every_binding_of_its_original(monkeypatch: pytest.MonkeyPatch) -> None:
    """A made-up module declaring a twin: with the accelerator, the twin replaces its name and an alias;
    the original is kept; a second declaration or an unknown compiled module is an error."""
    home = types.ModuleType("probe_home")
    importer = types.ModuleType("probe_importer")

    def _send_now(sock: object, data: bytes) -> int:
        return 0

    home._send_now = home.alias = importer._send_now = _send_now  # type: ignore[attr-defined]
    for module in (home, importer):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(_accelerator, "TWINS", {})
    placed = _accelerator.twin("probe_home", "_send_now", "pyorb.aio._csend", also=["probe_importer"])
    assert placed == pyorb.accelerated() == _accelerator.TWINS["probe_home._send_now"].in_place
    assert _accelerator.original("probe_home._send_now") is _send_now
    for module, name in ((home, "_send_now"), (home, "alias"), (importer, "_send_now")):
        _check_chosen(module, name, _send_now)
    with pytest.raises(ValueError, match="declared twice"):
        _accelerator.twin("probe_home", "_send_now", "pyorb.aio._csend")
    with pytest.raises(ValueError, match="not a compiled module"):
        _accelerator.twin("probe_home", "alias", "pyorb.aio.direct")
    with pytest.raises(KeyError, match="no twin is declared as 'probe_home.alias'"):
        _accelerator.original("probe_home.alias")


@pytest.mark.parametrize("module", [header, fast12, codec, connection], ids=lambda m: m.__name__)
def test_every_binding_in_the_core_is_the_chosen_implementation(module: Any) -> None:
    """The twin switch replaced each original wherever the core binds it: its home and its importers."""
    bound = [name for name in twins.ORIGINALS if name.partition(".")[0] in vars(module)]
    assert bound
    for name in bound:
        _check_chosen(module, name, _accelerator.original(f"{twins._HOMES[name].__name__}.{name}"))


def test_the_state_ci_expects() -> None:
    expected = os.environ.get("PYORB_EXPECT_ACCELERATED")
    if expected is None:
        pytest.skip("PYORB_EXPECT_ACCELERATED is not set (CI sets it)")
    assert pyorb.accelerated() == (expected == "1"), _accelerator.status()


@pytest.mark.parametrize("first", sorted({t.home for t in _accelerator.TWINS.values()} | {"pyorb", "pyorb.servers.sink"}))
def test_every_twin_is_in_place_whichever_module_a_process_imports_first(first: str) -> None:
    """A compiled module imports its originals' home, and cimports other compiled modules, which
    import theirs: whichever of pyorb's modules a process imports first, every twin ends up in place."""
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    homes = sorted({t.home for t in _accelerator.TWINS.values()})
    code = (
        f"import importlib, {first}, pyorb, pyorb._accelerator as a\n"
        f"for home in {homes!r}:\n"
        "    importlib.import_module(home)\n"
        "assert pyorb.accelerated(), a.status()\n"
        "missing = [k for k, t in a.TWINS.items() if not t.in_place]\n"
        "assert not missing and set(a.TWINS) == set(%r), missing\n" % sorted(_accelerator.TWINS)
    )
    done = subprocess.run([sys.executable, "-c", code], env=os.environ, cwd=ROOT, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_no_extensions_means_pure_python() -> None:
    code = (
        "import sys, pyorb, pyorb._accelerator as a\n"
        "from pyorb.giop import codec, twins\n"
        "assert not pyorb.accelerated(), a.status()\n"
        "assert a.status().reason == 'PYORB_NO_EXTENSIONS=1', a.status()\n"
        "assert codec.parse_header is twins.ORIGINALS['parse_header']\n"
        "assert 'pyorb.giop._cframing' not in sys.modules\n"
    )
    env = {**os.environ, "PYORB_NO_EXTENSIONS": "1"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT, timeout=120)


def _fake_build(root: Path) -> Path:
    """A package tree with every native source, an (empty) extension for each and a matching manifest."""
    hashes = {}
    for name in _accelerator.NATIVE:
        source = _accelerator.source_path(name, root)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"# {name}\n")
        source.with_name(source.stem + importlib.machinery.EXTENSION_SUFFIXES[0]).write_bytes(b"")
        hashes[name] = _accelerator.source_hash(source)
    (root / _accelerator.MANIFEST).write_text(json.dumps({"compiler": "Cython 9", "modules": hashes}))
    return _accelerator.source_path(_accelerator.NATIVE[0], root)


def test_a_complete_fresh_build_is_used(tmp_path: Path) -> None:
    _fake_build(tmp_path)
    status = _accelerator.decide(tmp_path, {})
    assert status.compiled and status.compiler == "Cython 9"
    assert not _accelerator.decide(tmp_path, {"PYORB_NO_EXTENSIONS": "1"}).compiled
    assert _accelerator.decide(tmp_path, {"PYORB_NO_EXTENSIONS": "0"}).compiled


def test_an_edited_source_makes_the_build_stale(tmp_path: Path) -> None:
    source = _fake_build(tmp_path)
    source.write_text(source.read_text() + "# edited\n")
    status = _accelerator.decide(tmp_path, {})
    assert not status.compiled and status.reason.startswith("stale build") and source.name in status.reason


def test_an_edited_declaration_file_makes_the_build_stale(tmp_path: Path) -> None:
    # Other modules compile in a .pxd's inline functions: a change to it is a change to the build.
    source = _fake_build(tmp_path)
    source.with_suffix(".pxd").write_text("cdef int _edited\n")
    status = _accelerator.decide(tmp_path, {})
    assert not status.compiled and status.reason.startswith("stale build"), status


def test_a_missing_extension_or_manifest_means_pure_python(tmp_path: Path) -> None:
    assert _accelerator.decide(tmp_path, {}).reason.startswith("not built")
    source = _fake_build(tmp_path)
    source.with_name(source.stem + importlib.machinery.EXTENSION_SUFFIXES[0]).unlink()
    assert _accelerator.decide(tmp_path, {}).reason.startswith("incomplete build")
    (tmp_path / _accelerator.MANIFEST).write_text("{not json")
    assert _accelerator.decide(tmp_path, {}).reason.startswith("unreadable")


def test_a_stale_build_warns_once_and_runs_pure_python(tmp_path: Path) -> None:
    """An edited .pyx in a checkout that was not rebuilt: pyorb says so and never runs the old C code."""
    package = tmp_path / "pyorb"
    shutil.copytree(ROOT / "pyorb", package, ignore=shutil.ignore_patterns("__pycache__"))
    source = _accelerator.source_path(_accelerator.NATIVE[0], package)
    source.write_text(source.read_text() + "\n# edited\n")
    code = ("import pyorb, pyorb.giop.codec as c, pyorb.giop.twins as t; "
            "print(pyorb.accelerated(), c.parse_header is t.ORIGINALS['parse_header'])")
    env = {k: v for k, v in os.environ.items() if k != "PYORB_NO_EXTENSIONS"}
    shown = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path)},
                           capture_output=True, text=True, timeout=120, check=True)
    assert shown.stdout.split() == ["False", "True"]
    if (ROOT / "pyorb" / _accelerator.MANIFEST).exists():  # built here: the copy's build is now stale
        assert shown.stderr.count("stale build") == 1, shown.stderr


def test_build_without_a_compiler_installs_pure_python(tmp_path: Path) -> None:
    """build.py in a copy of the package, with no C compiler to be found: it exits 0 and builds nothing."""
    extensions = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    shutil.copytree(ROOT / "pyorb", tmp_path / "pyorb",
                    ignore=shutil.ignore_patterns("__pycache__", _accelerator.MANIFEST, *("*" + s for s in extensions)))
    shutil.copy(ROOT / "build.py", tmp_path / "build.py")
    # An extension that shadows a .py (left by some other build) would run instead of the source: build.py removes it.
    shadow = tmp_path / "pyorb" / "giop" / ("codec" + extensions[0])
    shadow.write_bytes(b"")
    env = {**os.environ, "CC": "/nonexistent/cc", "PATH": str(Path(sys.executable).parent)}
    env.pop("PYORB_NO_EXTENSIONS", None)
    done = subprocess.run([sys.executable, "build.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no C compiler" in done.stderr
    assert not shadow.exists()
    assert not (tmp_path / "pyorb" / _accelerator.MANIFEST).exists()
    assert not [p for p in (tmp_path / "pyorb").rglob("*") if p.name.endswith(extensions)]
    code = "import pyorb, pyorb._accelerator as a; assert not pyorb.accelerated(); print(a.status().reason)"
    shown = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path)},
                           capture_output=True, text=True, timeout=120, check=True)
    assert shown.stdout.startswith("not built")
