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


def _other_pythons() -> list[str]:
    """The versions .ci/pythons tests by default (its ``versions=(...)`` line)."""
    found = re.search(r"^\[ \$\{#versions\[@\]\} -gt 0 \] \|\| versions=\(([^)]*)\)$",
                      (ROOT / ".ci" / "pythons").read_text(), re.M)
    assert found, ".ci/pythons has no default list of versions"
    return found.group(1).split()


def test_ci_runs_the_other_pythons() -> None:
    assert re.search(r"^bash \.ci/pythons$", (ROOT / ".ci" / "run").read_text(), re.M)
    assert set(_other_pythons()) <= set(_allowed())


def test_every_allowed_python_this_machine_has_is_tested() -> None:
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    here = {version for version in _allowed() if list(pyenv.glob(f"{version}.*/bin/python"))}
    main = f"{sys.version_info.major}.{sys.version_info.minor}"  # CI's own run uses this interpreter
    assert here - {main} <= set(_other_pythons()), f"pyenv has {sorted(here)}; .ci/pythons tests {_other_pythons()}"
