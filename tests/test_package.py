"""Package-level properties: layering, cheap import, types."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)


def test_importing_pyorb_is_cheap() -> None:
    done = _python("import sys, pyorb; print('omniORB' in sys.modules, 'asyncio' in sys.modules)")
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_server_and_client_do_not_import_each_other() -> None:
    for pkg, other in (("pyorb.server.server", "pyorb.client"), ("pyorb.client.client", "pyorb.server")):
        done = _python(f"import sys, {pkg}; print(any(m.startswith('{other}') for m in sys.modules))")
        assert done.stdout.strip() == "False", (pkg, done.stderr)


def test_mypy_strict_is_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_poetry_lock_covers_every_declared_dependency() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["poetry"]
    lock = tomllib.loads((ROOT / "poetry.lock").read_text())
    locked = {pkg["name"] for pkg in lock["package"]}
    declared = set(project["dependencies"]) - {"python"}
    declared |= set(project["group"]["dev"]["dependencies"])
    assert declared and declared <= locked, sorted(declared - locked)
