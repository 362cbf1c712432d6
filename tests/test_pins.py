"""requirements-dev.txt pins exactly what poetry.lock resolves.

CI installs with pip from requirements-dev.txt; Poetry users get poetry.lock.
The lock is the source of truth: for every Python the project supports, each
pin must be the version the lock selects for that Python, and every tool the
Poetry dev group and the extras name must be pinned.  The runtime
dependencies are not: pyproject.toml's ranges give them, and installing the
tools after the package must not move one of them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]


EXTRAS = ("loadtest", "tracing", "metrics")  # CI installs every extra


def _env(python: str, extra: str = "loadtest") -> dict[str, str]:
    return {"python_version": python, "python_full_version": f"{python}.0", "platform_system": "Linux",
            "sys_platform": "linux", "platform_machine": "x86_64", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix",
            "extra": extra}


def _pins() -> list[Requirement]:
    lines = (ROOT / "requirements-dev.txt").read_text().splitlines()
    return [Requirement(line.split("#", 1)[0]) for line in lines if line.split("#", 1)[0].strip()]


def _lock() -> list[dict[str, Any]]:
    with (ROOT / "poetry.lock").open("rb") as f:
        return list(tomllib.load(f)["package"])


def _applies(package: dict[str, Any], python: str) -> bool:
    markers = package.get("markers")
    if isinstance(markers, dict):  # per dependency group
        markers = " or ".join(f"({m})" for m in markers.values())
    return not markers or any(Marker(markers).evaluate(_env(python, extra)) for extra in EXTRAS)


@pytest.mark.parametrize("python", PYTHONS)
def test_each_pin_is_the_version_the_lock_resolves(python: str) -> None:
    locked: dict[str, set[str]] = {}
    for package in _lock():
        if _applies(package, python):
            locked.setdefault(canonicalize_name(package["name"]), set()).add(package["version"])
    drift = []
    for req in _pins():
        if req.marker is not None and not req.marker.evaluate(_env(python)):
            continue
        (spec,) = req.specifier
        assert spec.operator == "==", f"{req}: pin an exact version"
        if spec.version not in locked.get(canonicalize_name(req.name), set()):
            drift.append(f"{req.name}: requirements-dev.txt {spec.version}, "
                         f"poetry.lock {sorted(locked.get(canonicalize_name(req.name), set()))}")
    assert not drift, f"Python {python}: " + "; ".join(drift)


def test_every_dev_tool_and_extra_is_pinned() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        poetry = tomllib.load(f)["tool"]["poetry"]
    wanted = set(poetry["group"]["dev"]["dependencies"])
    wanted |= {name for names in poetry["extras"].values() for name in names}
    pinned = {canonicalize_name(r.name) for r in _pins()}
    assert {canonicalize_name(n) for n in wanted} <= pinned


def _runtime_set() -> set[str]:
    """What ``pip install .`` installs: the required dependencies and, through the lock, theirs."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        declared = tomllib.load(f)["tool"]["poetry"]["dependencies"]
    todo = [name for name, spec in declared.items()
            if name != "python" and not (isinstance(spec, dict) and spec.get("optional"))]
    requires = {canonicalize_name(p["name"]): p.get("dependencies", {}) for p in _lock()}
    found: set[str] = set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found.add(name)
        for dep, spec in requires.get(name, {}).items():
            marker = spec.get("markers") if isinstance(spec, dict) else None
            optional = isinstance(spec, dict) and spec.get("optional", False)
            if not optional and (marker is None or any(Marker(marker).evaluate(_env(p)) for p in PYTHONS)):
                todo.append(dep)
    return found


def test_installing_the_dev_tools_never_changes_the_runtime_set() -> None:
    """A pin on a runtime dependency moves it: ``pip install -e .`` takes the newest
    release pyproject.toml allows, and the pin then downgrades it."""
    runtime = _runtime_set()
    assert {"jeteve-omniorb", "uvloop", "rich", "typer"} <= runtime, sorted(runtime)
    pinned = sorted(str(r) for r in _pins() if canonicalize_name(r.name) in runtime)
    assert not pinned, (f"requirements-dev.txt pins runtime dependencies {pinned}: leave them to "
                        "pyproject.toml's ranges")
