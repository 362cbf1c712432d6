"""docs/configuration.md lists every Config option with its real default."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pyorb.config import Config

DOC = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()


def test_every_option_is_documented_with_its_default() -> None:
    section = DOC.split("## `pyorb.Config`", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)`", section, re.M))
    for field in dataclasses.fields(Config):
        assert field.name in rows, f"{field.name} missing from docs/configuration.md"
        assert rows[field.name] == repr(field.default), (field.name, rows[field.name], field.default)
    assert set(rows) == {f.name for f in dataclasses.fields(Config)}
