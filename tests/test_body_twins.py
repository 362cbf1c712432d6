"""The compiled one-value body (pyorb/marshal/_cbody.pyx) agrees with its Python originals.

For the same codec, values or body, alignment, byte order, char code set,
GIOP 1.1 wide form and fragment offsets, ``BodyCodec.pack`` and
``BodyCodec.unpack`` compiled and in Python must give the same bytes or
values, or raise the same exception with the same message: whatever the
types (one number, text, wide text, several values, a sequence, none),
values of the wrong type or out of range, and bodies that do not decode.
They run where the compiled accelerator is in use (the originals are kept
in ``pyorb._accelerator.TWINS``) and are skipped in a pure-Python process.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omniORB import tcInternal

import pyorb
from pyorb import _accelerator
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8
from pyorb.marshal.body import BodyCodec
from pyorb.marshal.orb import ensure_orb

MANY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

STRING = (tcInternal.tv_string, 0)
WSTRING = (tcInternal.tv_wstring, 0)
TEXT = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0xD7FF), max_size=12)
TYPES: dict[str, tuple[tuple[Any, ...], st.SearchStrategy[tuple[Any, ...]]]] = {
    "ulonglong": ((tcInternal.tv_ulonglong,), st.tuples(st.integers(-1, 2**64))),
    "double": ((tcInternal.tv_double,), st.tuples(st.floats(allow_nan=False))),
    "boolean": ((tcInternal.tv_boolean,), st.tuples(st.booleans())),
    "string": ((STRING,), st.tuples(TEXT)),
    "wstring": ((WSTRING,), st.tuples(TEXT)),
    "long and string": ((tcInternal.tv_long, STRING), st.tuples(st.integers(-2**31, 2**31 - 1), TEXT)),
    "sequence": (((tcInternal.tv_sequence, tcInternal.tv_long, 0),),
                 st.tuples(st.lists(st.integers(-2**31, 2**31 - 1), max_size=6))),
    "none": ((), st.just(())),
}
ANY_VALUES = st.one_of(st.tuples(), st.tuples(st.one_of(st.none(), st.integers(-2**65, 2**65), TEXT, st.floats())),
                       st.lists(st.integers(0, 9), max_size=3))
ensure_orb()  # text marshals only once omniORB's ORB knows its code sets


class Codec(BodyCodec):
    """A codec of another class: the twins read its slots through getattr, not at their offsets."""

    __slots__ = ()


ORIGINALS: dict[str, Any] = {name: _accelerator.original(f"pyorb.marshal.body.BodyCodec.{name}")
                             for name in ("pack", "unpack")}


def twins() -> dict[str, Any]:
    """The compiled functions; the tests that need them are skipped in a pure-Python process."""
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    return {"pack": BodyCodec.pack, "unpack": BodyCodec.unpack}


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "value", fn(*args)
    except Exception as exc:  # the kind and message are what is compared
        return "raises", (type(exc), str(exc))


def test_the_compiled_body_twins_are_in_place_with_the_accelerator() -> None:
    compiled = twins()
    assert type(compiled["pack"]).__name__ != "function" and compiled["pack"] is not ORIGINALS["pack"]
    assert type(compiled["unpack"]).__name__ != "function" and compiled["unpack"] is not ORIGINALS["unpack"]


@pytest.mark.parametrize("name", sorted(TYPES))
@MANY
@given(
    data=st.data(),
    align=st.sampled_from([0, 0, 8, 4, 5]),
    little_endian=st.booleans(),
    char_set=st.sampled_from([CS_UTF8, CS_ISO8859_1]),
    wide11=st.sampled_from([False, False, True]),
    cls=st.sampled_from([BodyCodec, BodyCodec, Codec]),
)
def test_the_compiled_pack_and_unpack_give_what_the_python_ones_give(
    name: str, data: st.DataObject, align: int, little_endian: bool, char_set: int, wide11: bool,
    cls: type[BodyCodec],
) -> None:
    compiled = twins()
    descs, values = TYPES[name]
    codec = cls(descs)
    given_values = data.draw(st.one_of(values, values, ANY_VALUES))
    packed = outcome(ORIGINALS["pack"], codec, given_values, align, little_endian, char_set, wide11)
    assert outcome(compiled["pack"], codec, given_values, align, little_endian, char_set, wide11) == packed
    body = packed[1] if packed[0] == "value" else data.draw(st.binary(max_size=16))
    if data.draw(st.booleans()):  # a body cut short or with a byte changed: what a peer may send
        body = body[: data.draw(st.integers(0, len(body)))] + data.draw(st.binary(max_size=2))
    fragments = data.draw(st.sampled_from([(), (), (8,)]))
    args = (codec, body, align, little_endian, fragments)
    kwargs = {"char_set": char_set, "wide11": wide11}
    # Compared by repr: a double read back may be a NaN, which equals nothing, not even itself.
    unpacked = outcome(lambda: ORIGINALS["unpack"](*args, **kwargs))
    assert repr(outcome(lambda: compiled["unpack"](*args, **kwargs))) == repr(unpacked)


def test_the_compiled_twins_read_and_write_one_value_as_the_originals_do() -> None:
    """Seen from outside: a ping's stamp written and read back; a wrong value's BAD_PARAM and a
    short body's MARSHAL are the originals'."""
    compiled = twins()
    codec = BodyCodec((tcInternal.tv_ulonglong,))
    data = compiled["pack"](codec, (2**40 + 1,), 0, True)
    assert data == (2**40 + 1).to_bytes(8, "little") == ORIGINALS["pack"](codec, (2**40 + 1,), 0, True)
    assert compiled["unpack"](codec, data, 0, True) == (2**40 + 1,)
    assert outcome(compiled["pack"], codec, ("x",), 0, True) == outcome(ORIGINALS["pack"], codec, ("x",), 0, True)
    short = outcome(compiled["unpack"], codec, data[:3], 0, True)
    assert short == outcome(ORIGINALS["unpack"], codec, data[:3], 0, True) and short[0] == "raises"
