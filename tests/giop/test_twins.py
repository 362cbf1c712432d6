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


# A slot read or written at its offset: ``_get(conn, fast, _POS, "_pos")``, ``_put(conn, fast, _POS, "_pos", value)``.
BY_OFFSET = re.compile(r'\b_(?:get|put)\(conn, fast, (_[A-Z_]+), "(\w+)"')


def used_names(source: str) -> dict[str, set[str]]:
    """What a .pyx source reads: ``conn.<slot>`` (or a slot at its offset) under "conn",
    ``_<module>.<name>`` under the module."""
    used: dict[str, set[str]] = {"conn": set(re.findall(r"\bconn\.(\w+)", source))
                                 | {name for _, name in BY_OFFSET.findall(source)}}
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
    source = PYX.read_text().replace('_POS, "_pos"', '_POS, "_position"', 1).replace("_fast12._build_reply",
                                                                                  "_fast12._make_reply")
    assert undeclared(source) == ["conn._position", "fast12._make_reply"]


def offset_names(source: str) -> dict[str, str]:
    """The slot each offset constant of the .pyx holds: ``_bind`` fills them in CONNECTION_STATE's order."""
    bound = re.search(r"^    \(([^)]*)\) = offsets$", source, re.M)
    assert bound is not None, "_bind no longer unpacks the offsets"
    constants = [c.strip() for c in bound.group(1).split(",") if c.strip()]
    assert len(constants) == len(twins.CONNECTION_STATE)
    return dict(zip(constants, twins.CONNECTION_STATE))


def test_each_slot_is_read_at_its_own_offset() -> None:
    """A slot read or written by offset names the constant ``_bind`` filled with that slot's
    offset: a mismatch would read one slot where another is meant."""
    source = PYX.read_text()
    names = offset_names(source)
    uses = BY_OFFSET.findall(source)
    assert uses and [(c, n) for c, n in uses if names.get(c) != n] == []
    swapped = source.replace('_POS, "_pos"', '_BUF, "_pos"', 1)
    assert [(c, n) for c, n in BY_OFFSET.findall(swapped) if offset_names(swapped).get(c) != n] == [("_BUF", "_pos")]


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
