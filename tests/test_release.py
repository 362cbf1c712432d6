"""What a release publishes: one version everywhere, metadata an index accepts, the files people look for."""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import pyorb

pytestmark = pytest.mark.integration  # starts pyorb and pip as processes

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["poetry"]


def test_pyorb_version_and_the_command_report_pyprojects_version() -> None:
    assert pyorb.__version__ == PROJECT["version"]
    shown = subprocess.run([sys.executable, "-m", "pyorb", "--version"], capture_output=True, text=True,
                           cwd=ROOT, check=True)
    assert shown.stdout.split() == ["pyorb", PROJECT["version"]]


@pytest.mark.parametrize("name", ["LICENSE", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md", "docs/versioning.md"])
def test_the_files_people_look_for_are_there(name: str) -> None:
    assert len((ROOT / name).read_text(encoding="utf-8")) > 500, name


def test_changelog_keeps_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text and "keepachangelog.com" in text


def test_the_wheel_carries_the_version_metadata_and_licence(tmp_path: Path) -> None:
    """A wheel built from the tracked files (a copy, so the checkout's compiled modules stay)."""
    tree = tmp_path / "tree"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            target.write_bytes((ROOT / name).read_bytes())
    env = {**os.environ, "PYORB_NO_EXTENSIONS": "1"}  # the metadata, not the compiler, is under test
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(tree), "-w", str(tmp_path)],
                   check=True, env=env, timeout=600)
    (wheel,) = tmp_path.glob("pyorb_asyncio-*.whl")
    assert wheel.name.startswith(f"pyorb_asyncio-{pyorb.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = f"pyorb_asyncio-{pyorb.__version__}.dist-info"
        metadata = email.parser.Parser().parsestr(archive.read(f"{info}/METADATA").decode())
    assert metadata["Version"] == pyorb.__version__
    assert any(name.startswith(info) and name.endswith("LICENSE") for name in names), names
    classifiers = set(metadata.get_all("Classifier") or ())
    assert {"Framework :: AsyncIO", "Typing :: Typed", "License :: OSI Approved :: MIT License",
            "Programming Language :: Python :: 3.10", "Programming Language :: Python :: 3.13"} <= classifiers
    assert {url.split(",")[0] for url in metadata.get_all("Project-URL") or ()} >= {"Documentation", "Repository"}
    assert metadata["Keywords"] and "corba" in metadata["Keywords"]
