"""requirements-dev.txt pins exactly what poetry.lock resolves (issue #11 item 12).

CI installs with pip from requirements-dev.txt; Poetry users get poetry.lock.
The lock is the source of truth: for every Python the project supports, each
pin must be the version the lock selects for that Python, and every tool the
Poetry dev group and the extras name must be pinned.
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
    wanted |= {"rich", "typer"}  # the CLI's libraries, whose output the tests read
    pinned = {canonicalize_name(r.name) for r in _pins()}
    assert {canonicalize_name(n) for n in wanted} <= pinned
