"""CI (.ci/run) covers every Python version pyproject.toml allows that this machine has."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from packaging.specifiers import SpecifierSet

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = [f"3.{minor}" for minor in range(10, 20)]


def _allowed() -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        spec = SpecifierSet(tomllib.load(f)["tool"]["poetry"]["dependencies"]["python"])
    return [version for version in CANDIDATES if f"{version}.0" in spec]


def _defaults(script: str) -> list[str]:
    """The versions a .ci script covers by default (its ``versions=(...)`` line)."""
    found = re.search(r"^\[ \$\{#versions\[@\]\} -gt 0 \] \|\| versions=\(([^)]*)\)$",
                      (ROOT / ".ci" / script).read_text(), re.M)
    assert found, f".ci/{script} has no default list of versions"
    return found.group(1).split()


def test_ci_builds_and_installs_a_wheel_for_each_python() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^bash \.ci/wheels \S+$", run, re.M) and re.search(r"^bash \.ci/installed \S+$", run, re.M)
    assert _defaults("wheels") == _defaults("installed")
    assert re.search(r"^bash \.ci/docs$", run, re.M)
    assert set(_defaults("wheels")) <= set(_allowed())


def test_every_allowed_python_this_machine_has_gets_a_wheel() -> None:
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    here = {version for version in _allowed() if list(pyenv.glob(f"{version}.*/bin/python"))}
    here.add(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert here <= set(_defaults("wheels")), f"this machine has {sorted(here)}; .ci/wheels builds {_defaults('wheels')}"
