"""The contract between the compiled twins (giop/_cframing.pyx) and the Python core (giop/twins.py).

The twins read and write ``GIOPConnection``'s private slots and read names
of the core's modules.  ``twins.CONNECTION_STATE`` and ``twins.MODULE_NAMES``
declare them; these tests fail when the .pyx uses a name the declaration
lacks, or the Python side drops or renames one it declares.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pyorb.giop import fast12, header, messages, twins
from pyorb.giop.connection import GIOPConnection

PYX = Path(twins.__file__).with_name("_cframing.pyx")
MODULES = {"header": header, "fast12": fast12, "messages": messages, "twins": twins}


def used_names(source: str) -> dict[str, set[str]]:
    """What a .pyx source reads: ``conn.<slot>`` under "conn", ``_<module>.<name>`` under the module."""
    used: dict[str, set[str]] = {"conn": set(re.findall(r"\bconn\.(\w+)", source))}
    for module in MODULES:
        used[module] = set(re.findall(rf"\b_{module}\.(\w+)", source))
    used["twins"] = {name for name in ("ORIGINALS",) if f"from pyorb.giop.twins import {name}" in source}
    return used


def undeclared(source: str) -> list[str]:
    used = used_names(source)
    found = sorted(f"conn.{n}" for n in used["conn"] - set(twins.CONNECTION_STATE))
    for module in MODULES:
        found += sorted(f"{module}.{n}" for n in used[module] - set(twins.MODULE_NAMES.get(module, ())))
    return found


def test_the_twins_use_only_declared_names() -> None:
    assert undeclared(PYX.read_text()) == []


def test_every_declared_name_is_used_by_the_twins() -> None:
    used = used_names(PYX.read_text())
    assert set(twins.CONNECTION_STATE) == used["conn"]
    assert {m: set(n) for m, n in twins.MODULE_NAMES.items()} == {m: used[m] for m in twins.MODULE_NAMES}


def test_the_python_side_has_every_declared_name() -> None:
    assert twins.broken_contract() == []
    assert set(twins.CONNECTION_STATE) <= set(GIOPConnection.__slots__)


def test_a_name_the_twins_use_but_nobody_declared_is_caught() -> None:
    source = PYX.read_text().replace("conn._pos", "conn._position", 1).replace("_fast12._build_reply", "_fast12._make_reply")
    assert undeclared(source) == ["conn._position", "fast12._make_reply"]


def test_a_renamed_slot_stops_the_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slot renamed on the Python side: the contract says so and the switch keeps the originals."""
    slots = tuple("_position" if s == "_pos" else s for s in GIOPConnection.__slots__)
    monkeypatch.setattr(GIOPConnection, "__slots__", slots)
    monkeypatch.delattr(header, "_HEADER_TABLE")
    assert twins.broken_contract() == ["GIOPConnection._pos", "header._HEADER_TABLE"]
    assert twins.install() is False


def test_every_original_has_its_twin_in_the_pyx() -> None:
    defined = set(re.findall(r"^def (\w+)\(", PYX.read_text(), re.M))
    assert {name.rpartition(".")[2] for name in twins.ORIGINALS} <= defined
