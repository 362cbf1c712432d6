"""pyorb's value writer against omniORB's marshaler, on the values both can write.

omniORB's in-memory marshaler aborts on a value inside a value's state, so
pyorb writes those bodies itself (pyorb/marshal/valuewriter.py); on every
other value the two must agree: the same octets where omniORB writes a
state in one chunk, and always what omniORB's unmarshaler reads back as
the same values, shared where they were shared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyorb
from pyorb.marshal.body import BodyCodec, _leaf
from pyorb.marshal.valuewriter import write_values

ROOT = Path(__file__).resolve().parents[1]
Values = pyorb.load_idl(ROOT / "idl" / "values.idl").Values
TV_SEQUENCE = 19
POINTS = (Values._d_Points,)


def omni(descs: tuple[Any, ...], values: tuple[Any, ...], align: int, le: bool) -> bytes:
    """omniORB's body (padding zeroed), through the codec as every flat body goes."""
    return BodyCodec(descs).pack(values, align, le)


def pyorbs(descs: tuple[Any, ...], values: tuple[Any, ...], align: int, le: bool) -> bytes:
    return write_values(descs, values, align, le, _leaf)


SMALL = {
    "point": ((Values._d_Point,), (Values.Point(1, 2, "ab"),)),
    "derived as its base": ((Values._d_Point,), (Values.Point3(1, 2, "ab", 0.5),)),
    "truncatable as its base": ((Values._d_Point,), (Values.Tagged(1, 2, "ab", "t"),)),
    "null": ((Values._d_Point,), (None,)),
    "shared box": (((TV_SEQUENCE, Values._d_Label, 0),), (["x", "x", None],)),
    "boxed struct": ((Values._d_PairBox,), (Values.Pair(1, 2.0),)),
    "boxed sequence": ((Values._d_LongsBox,), ([1, 2, 3],)),
    "private state": ((Values._d_Secret,), (Values.Secret(1.5, 7),)),
    "node with a null": ((Values._d_Node,), (Values.Node(1, None),)),
    "holder": ((Values._d_Holder,), (Values.Holder(3, Values.Point(1, 2, "p"), "l"),)),
    "union": ((Values._d_Choice,), (Values.Choice(p=Values.Point(1, 2, "p")),)),
}


@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("case", sorted(SMALL))
def test_the_same_octets_as_omniorb(case: str, le: bool) -> None:
    descs, values = SMALL[case]
    assert pyorbs(descs, values, 0, le) == omni(descs, values, 0, le)


def point(k: int, kind: int) -> Any:
    if kind == 1:
        return Values.Point3(k, -k, "p" * (k % 7), k / 3)
    if kind == 2:
        return Values.Tagged(k, -k, "q" * (k % 5), "t" * (k % 3))
    return Values.Point(k, -k, "r" * (k % 6))


def with_sharing(fresh: list[Any], picks: list[int]) -> list[Any]:
    """``fresh`` values, each pick naming one already in the list again (or, if it is 0, a null)."""
    made: list[Any] = []
    for value, pick in zip(fresh, picks):
        made.append(None if pick == 0 else made[pick % len(made)] if pick < 3 and made else value)
    return made


point_lists = st.builds(with_sharing, st.lists(st.builds(point, st.integers(0, 99), st.integers(0, 2)), max_size=30),
                        st.lists(st.integers(0, 9), min_size=30, max_size=30))


def shape(values: list[Any]) -> list[Any]:
    """Each value's class and state, and which earlier one it is (sharing)."""
    out: list[Any] = []
    for k, v in enumerate(values):
        same = next((j for j in range(k) if values[j] is v and v is not None), None)
        out.append(None if v is None else (type(v).__name__, sorted(vars(v).items()), same))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(points=point_lists, le=st.booleans(), align=st.integers(0, 7))
def test_omniorb_reads_back_what_pyorb_writes(points: list[Any], le: bool, align: int) -> None:
    body = pyorbs(POINTS, (points,), align, le)
    (got,) = BodyCodec(POINTS).unpack(body, align, le)
    assert shape(got) == shape(points)
