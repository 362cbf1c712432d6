"""The C twin of the value walk (pyorb/marshal/layout/_cvalues.pyx) agrees with the Python walk.

A run of values (a sequence or array of a value type) is walked by the
twin when the accelerator is built; it must leave exactly what the Python
walk leaves (the same bytes, the same table of value and repository id
starts) or hand the run back to it, so that every error is the Python
walk's own (type, message, minor code).  Compared on omniORB's encodings of
random sequences (derived, shared, null, boxed, truncatable values, both
byte orders, any start offset), on hand-made encodings with what omniORB
never writes (codebase URLs, repository id lists, indirections to ids and
lists, states split across chunks, skipped chunks of truncated values), on
their mutations and cuts, and under tight nesting bounds.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyorb
from pyorb import _accelerator
from pyorb.marshal import layout
from pyorb.marshal.layout import Bounds, valuetypes
from pyorb.marshal.layout.cursors import _Frame
from pyorb.marshal.layout.descriptors import _top
from pyorb.marshal.layout.nodes import _Seq

from tests.test_layout import omni_marshal

if pyorb.accelerated():  # built: the twin must be there
    from pyorb.marshal.layout import _cvalues as cvalues
else:
    pytest.skip("the compiled accelerator is not built", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
Values = pyorb.load_idl(ROOT / "idl" / "values.idl").Values
MANY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])
TV_SEQUENCE = 19


def seq(desc: Any) -> tuple[Any, ...]:
    return ((TV_SEQUENCE, desc, 0),)


POINTS = seq(Values._d_Point)
BOUNDS = [Bounds(), Bounds(max_nesting_depth=1), Bounds(max_nesting_depth=0)]


def walk(descs: tuple[Any, ...], data: bytes, le: bool, base: int, bounds: Bounds, twin: bool) -> tuple[Any, ...]:
    """What ``zero_padding`` gives with or without the twin: (None, bytes after) or (the error, its minor code)."""
    buf = bytearray(data)
    compiled = valuetypes._zero_values
    valuetypes._zero_values = compiled if twin else _accelerator.original("pyorb.marshal.layout.valuetypes._zero_values")
    try:
        layout.zero_padding(descs, buf, le, base, bounds=bounds)
    except Exception as exc:  # the kind, message and minor code are compared
        return (type(exc), str(exc), getattr(exc, "minor", None)), None
    finally:
        valuetypes._zero_values = compiled
    return None, bytes(buf)


def agree(descs: tuple[Any, ...], data: bytes, le: bool, base: int, bounds: Bounds = Bounds()) -> tuple[Any, ...]:
    python = walk(descs, data, le, base, bounds, twin=False)
    assert walk(descs, data, le, base, bounds, twin=True) == python, data.hex()
    return python


def run(
    descs: tuple[Any, ...], data: bytes, le: bool, base: int, twin: bool, tail: bool = False,
) -> tuple[int, bytes, dict[int, str]]:
    """A body that is one sequence of values through the twin alone (its -1 kept), or through the
    Python walk's loop: the index after the run, the bytes and the frame's table after.  With
    ``tail`` a null value follows the sequence, so the run does not end the data."""
    node = _top(descs, 2)
    assert isinstance(node, _Seq)
    buf = bytearray(data)
    if tail:
        buf += bytes((-(len(buf) + base) & 3) + 4)
    f = _Frame(buf, len(buf), base, le, 2, {}, 0, len(buf))
    n, i = f.ulong(0)
    if twin:
        return cvalues._zero_values(node.elem, f, i, n), bytes(buf), f.values
    for _ in range(n):
        i = node.elem.zero(f, i)
    return i, bytes(buf), f.values


# -- omniORB's encodings ---------------------------------------------------------


def point(k: int, kind: int) -> Any:
    name = "p" * (k % 7)
    if kind == 1:
        return Values.Point3(k, -k, name, k / 3)
    if kind == 2:
        return Values.Tagged(k, -k, name, "t" * (k % 5))
    return Values.Point(k, -k, name)


@st.composite
def point_lists(draw: st.DrawFn) -> list[Any]:
    """Points, Point3s and Tagged values (truncatable: chunked), some shared, some null."""
    made: list[Any] = []
    for k in range(draw(st.integers(0, 40))):
        choice = draw(st.integers(0, 9))
        if choice == 0:
            made.append(None)
        elif choice == 1 and made:
            made.append(made[draw(st.integers(0, len(made) - 1))])
        else:
            made.append(point(k, draw(st.integers(0, 2))))
    return made


BOXES = {
    "labels": (seq(Values._d_Label), st.lists(st.one_of(st.none(), st.text(st.characters(min_codepoint=1), max_size=6)),
                                                  max_size=20)),
    "longs boxes": (seq(Values._d_LongsBox), st.lists(st.one_of(st.none(), st.lists(st.integers(-5, 5), max_size=4)),
                                                       max_size=20)),
    "pair boxes": (seq(Values._d_PairBox), st.lists(st.one_of(st.none(), st.builds(Values.Pair, st.integers(-9, 9),
                                                                                      st.floats(-2, 2))), max_size=20)),
    "secrets": (seq(Values._d_Secret), st.lists(st.one_of(st.none(), st.builds(Values.Secret, st.floats(-2, 2),
                                                                                 st.integers(0, 255))), max_size=20)),
}


def mutations(data: bytes, where: int, value: int, cut: int) -> list[bytes]:
    altered = bytearray(data)
    if altered:
        altered[where % len(altered)] = value
    return [bytes(altered), data[: max(len(data) - cut, 0)]]


@MANY
@given(points=point_lists(), le=st.booleans(), base=st.integers(0, 7), where=st.integers(0, 10**6),
       value=st.integers(0, 255), cut=st.integers(1, 12), bounds=st.sampled_from(BOUNDS))
def test_omniorbs_sequences_of_values_walk_the_same(points: list[Any], le: bool, base: int, where: int, value: int,
                                                     cut: int, bounds: Bounds) -> None:
    data = bytes(omni_marshal(POINTS, [points], base, le))
    error, scrubbed = agree(POINTS, data, le, base, bounds)
    assert error is None or bounds.max_nesting_depth == 0, error
    for sample in mutations(data, where, value, cut):
        agree(POINTS, sample, le, base, bounds)


def leaves(python: tuple[int, bytes, dict[int, str]], tail: bool) -> tuple[int, bytes, dict[int, str]]:
    """What the twin leaves where the Python walk left ``python``: the same, but a run that ends the
    data adds nothing to the frame's table (nothing after it can point back into it)."""
    return python if tail else (python[0], python[1], {})


@MANY
@given(points=point_lists(), le=st.booleans(), base=st.integers(0, 7), tail=st.booleans())
def test_the_twin_takes_omniorbs_sequences_itself(points: list[Any], le: bool, base: int, tail: bool) -> None:
    """No hand-back for what omniORB writes: the twin's own result and bytes are the Python walk's, and
    so is its table when more data follows the run."""
    data = bytes(omni_marshal(POINTS, [points], base, le))
    end, scrubbed, table = run(POINTS, data, le, base, twin=True, tail=tail)
    assert end == len(data)
    assert (end, scrubbed, table) == leaves(run(POINTS, data, le, base, twin=False, tail=tail), tail)


@pytest.mark.parametrize("name", sorted(BOXES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), le=st.booleans(), base=st.integers(0, 7), where=st.integers(0, 10**6),
       value=st.integers(0, 255), cut=st.integers(1, 12), tail=st.booleans())
def test_boxes_and_private_state_walk_the_same(name: str, data: st.DataObject, le: bool, base: int, where: int,
                                               value: int, cut: int, tail: bool) -> None:
    descs, values = BOXES[name]
    encoded = bytes(omni_marshal(descs, [data.draw(values)], base, le))
    assert agree(descs, encoded, le, base)[0] is None
    assert run(descs, encoded, le, base, twin=True, tail=tail) == leaves(run(descs, encoded, le, base, twin=False,
                                                                              tail=tail), tail)
    for sample in mutations(encoded, where, value, cut):
        agree(descs, sample, le, base)


# -- hand-made encodings: what another ORB may send --------------------------------

IDS = ["IDL:Values/Point:1.0", "IDL:Values/Point3:1.0", "IDL:Values/Tagged:1.0", "IDL:Values/Unknown:1.0"]
# Members after the base's: a Point3's double, a Tagged's string; an unknown type's are skipped octets.
EXTRA = {0: [], 1: [("double", 1.5)], 2: [("string", "tag")], 3: []}


class Writer:
    """CDR at stream offset ``base`` with padding octets of 0xA5 (so that scrubbing shows), recording
    where values, repository ids, id lists and codebase URLs start for indirections to name."""

    def __init__(self, le: bool, base: int) -> None:
        self.le, self.base, self.out = le, base, bytearray()
        self.starts: dict[str, list[int]] = {"value": [], "id": [], "ids": [], "url": []}

    def align(self, n: int) -> None:
        self.out += b"\xa5" * ((-(self.base + len(self.out))) % n)

    def ulong(self, v: int) -> int:
        self.align(4)
        self.out += struct.pack("<I" if self.le else ">I", v & 0xFFFFFFFF)
        return len(self.out) - 4

    def string(self, text: str, kind: str | None = None) -> None:
        at = self.ulong(len(text) + 1)
        if kind:
            self.starts[kind].append(at)
        self.out += text.encode() + b"\0"

    def double(self, v: float) -> None:
        self.align(8)
        self.out += struct.pack("<d" if self.le else ">d", v)

    def indirection(self, target: int, lie: int) -> None:
        at = self.ulong(0xFFFFFFFF)
        self.ulong(target + lie - (at + 4))

    def patch(self, at: int, v: int) -> None:
        self.out[at : at + 4] = struct.pack("<I" if self.le else ">I", v & 0xFFFFFFFF)


def member(w: Writer, kind: str, v: Any) -> None:
    if kind == "long":
        w.ulong(v)
    elif kind == "double":
        w.double(v)
    else:
        w.string(v)


@st.composite
def hand_made(draw: st.DrawFn) -> tuple[bytes, bool, int]:
    le, base = draw(st.booleans()), draw(st.integers(0, 7))
    w = Writer(le, base)
    n = draw(st.integers(0, 12))
    w.ulong(n)
    small = st.integers(-2, 2) if draw(st.booleans()) else st.just(0)  # now and then, lying offsets
    for k in range(n):
        form = draw(st.sampled_from(["null", "indirection", "value", "value", "value"]))
        if form == "null":
            w.ulong(0)
            continue
        if form == "indirection" and w.starts["value"]:
            w.indirection(draw(st.sampled_from(w.starts["value"])), draw(small))
            continue
        value_at = w.ulong(0)
        w.starts["value"].append(value_at)
        tag = 0x7FFFFF00
        if draw(st.booleans()):  # a codebase URL, new or named again
            tag |= 1
            if w.starts["url"] and draw(st.booleans()):
                w.indirection(draw(st.sampled_from(w.starts["url"])), draw(small))
            else:
                w.string("http://codebase/" + "x" * k, "url")
        actual = draw(st.integers(0, 3))
        chunked = actual >= 2 or draw(st.booleans())  # truncatable and unknown types must be chunked
        ids = {0: [0], 1: [1], 2: [2, 0], 3: [3, 0]}[actual]
        form_of_ids = draw(st.sampled_from(["none", "one", "list"])) if actual == 0 else (
            "list" if chunked and len(ids) > 1 else "one")
        if form_of_ids == "one":
            tag |= 2
            w.patch(value_at, tag | 8 * chunked)
            if w.starts["id"] and draw(st.booleans()):
                w.indirection(draw(st.sampled_from(w.starts["id"])), draw(small))
            else:
                w.string(IDS[ids[0]], "id")
        elif form_of_ids == "list":
            tag |= 6
            w.patch(value_at, tag | 8 * chunked)
            if w.starts["ids"] and draw(st.booleans()):
                w.indirection(draw(st.sampled_from(w.starts["ids"])), draw(small))
            else:
                w.starts["ids"].append(w.ulong(len(ids)))
                for rid in ids:
                    if w.starts["id"] and draw(st.integers(0, 3)) == 0:
                        w.indirection(draw(st.sampled_from(w.starts["id"])), draw(small))
                    else:
                        w.string(IDS[rid], "id")
        w.patch(value_at, tag | 8 * chunked)
        members = [("long", k), ("long", -k), ("string", "n" * (k % 4))] + EXTRA[min(actual, 2) if actual < 3 else 0]
        if not chunked:
            for kind, v in members:
                member(w, kind, v)
            continue
        # The state in chunks, each cut where a draw says (omniORB cuts at its buffer's end).
        length_at = w.ulong(0)
        start = len(w.out)
        for kind, v in members:
            if draw(st.integers(0, 4)) == 0 and len(w.out) > start:
                w.patch(length_at, len(w.out) - start + draw(small))
                length_at = w.ulong(0)
                start = len(w.out)
            member(w, kind, v)
        w.patch(length_at, len(w.out) - start + draw(small))
        if actual == 3:  # the unknown type's own members: a chunk the receiver skips
            w.ulong(8)
            w.out += b"\x01" * 8
        w.ulong(-1 + draw(st.sampled_from([0, 0, 0, -1, 1])))
    return bytes(w.out), le, base


@MANY
@given(sample=hand_made(), where=st.integers(0, 10**6), value=st.integers(0, 255), cut=st.integers(1, 12),
       bounds=st.sampled_from(BOUNDS))
def test_hand_made_sequences_of_values_walk_the_same(sample: tuple[bytes, bool, int], where: int, value: int, cut: int,
                                                     bounds: Bounds) -> None:
    data, le, base = sample
    agree(POINTS, data, le, base, bounds)
    for mutated in mutations(data, where, value, cut):
        agree(POINTS, mutated, le, base, bounds)


@MANY
@given(sample=hand_made(), tail=st.booleans())
def test_what_the_twin_takes_it_leaves_as_python_does(sample: tuple[bytes, bool, int], tail: bool) -> None:
    data, le, base = sample
    end, scrubbed, table = run(POINTS, data, le, base, twin=True, tail=tail)
    if end < 0:  # handed back: the frame's table untouched
        assert table == {}
        return
    assert (end, scrubbed, table) == leaves(run(POINTS, data, le, base, twin=False, tail=tail), tail)


def test_the_hand_made_forms_are_the_twins_own() -> None:
    """Codebase URLs, id lists, indirections to ids and lists, split states, a truncated value's
    skipped chunk: each taken by the twin itself, not handed back."""
    w = Writer(True, 0)
    w.ulong(4)
    first = w.ulong(0x7FFFFF0F)  # codebase, id list, chunked
    w.string("http://codebase/", "url")
    w.starts["ids"].append(w.ulong(2))
    w.string(IDS[3], "id")
    w.string(IDS[0], "id")
    w.ulong(8)
    w.ulong(1)
    w.ulong(2)
    w.ulong(9)  # a state split before its string
    w.string("abcd")
    w.ulong(8)
    w.out += bytes(8)  # the unknown type's own state, skipped
    w.ulong(-1)
    w.ulong(0x7FFFFF0F)
    w.indirection(w.starts["url"][0], 0)
    w.indirection(w.starts["ids"][0], 0)
    w.ulong(13)
    member(w, "long", 3)
    member(w, "long", 4)
    member(w, "string", "")
    w.ulong(4)
    w.out += bytes(4)  # the skipped chunk of its unknown type
    w.ulong(-1)
    w.indirection(first, 0)
    w.ulong(0x7FFFFF02)
    w.indirection(w.starts["id"][1], 0)
    for kind, v in (("long", 5), ("long", 6), ("string", "x")):
        member(w, kind, v)
    data = bytes(w.out)
    for tail in (False, True):
        end, scrubbed, table = run(POINTS, data, True, 0, twin=True, tail=tail)
        assert end == len(data), data.hex()
        assert (end, scrubbed, table) == leaves(run(POINTS, data, True, 0, twin=False, tail=tail), tail)


# -- without the accelerator -------------------------------------------------------


def test_no_extensions_walks_values_in_python() -> None:
    code = (
        "import sys, pyorb\n"
        "from pyorb import _accelerator\n"
        "from pyorb.marshal.layout import valuetypes\n"
        "from pyorb.marshal.body import BodyCodec\n"
        "assert valuetypes._zero_values is _accelerator.original('pyorb.marshal.layout.valuetypes._zero_values')\n"
        "assert 'pyorb.marshal.layout._cvalues' not in sys.modules\n"
        "V = pyorb.load_idl(sys.argv[1]).Values\n"
        "codec = BodyCodec(((19, V._d_Point, 0),))\n"
        "sent = [V.Point(k, -k, 'p') for k in range(50)]\n"
        "(got,) = codec.unpack(codec.pack((sent,), 0, True), 0, True)\n"
        "assert [(p.x, p.y, p.name) for p in got] == [(p.x, p.y, p.name) for p in sent]\n"
    )
    env = {**os.environ, "PYORB_NO_EXTENSIONS": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(ROOT / "idl" / "values.idl")], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_the_compiled_process_walks_runs_of_values_in_c() -> None:
    assert valuetypes._zero_values is cvalues._zero_values

