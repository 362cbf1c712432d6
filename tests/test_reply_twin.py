"""The compiled plain reply (pyorb/server/call/_creply.pyx) agrees with its Python original.

For the same operation, servant value, request id, byte order, connection
(its char code set and fragment size) and size limit, both must give the
same reply bytes, or both None (the value does not marshal, or the reply is
over the limit): whatever the result's type (none, one number, text, wide
text, several results, a sequence), and values of the wrong type or out of
range, on a connection core of its own class or of a subclass.  They run where the compiled accelerator is in use (the original
is kept in ``pyorb._accelerator.TWINS``) and are skipped in a pure-Python
process.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omniORB import tcInternal

import pyorb
from pyorb import _accelerator
from pyorb.giop import GIOPConnection, Role
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8
from pyorb.marshal import Operation
from pyorb.marshal.orb import ensure_orb
from pyorb.server.call import reply

MANY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

STRING = (tcInternal.tv_string, 0)
WSTRING = (tcInternal.tv_wstring, 0)
RESULTS: dict[str, tuple[Any, ...]] = {
    "ulonglong": (tcInternal.tv_ulonglong,),
    "long": (tcInternal.tv_long,),
    "double": (tcInternal.tv_double,),
    "boolean": (tcInternal.tv_boolean,),
    "octet": (tcInternal.tv_octet,),
    "string": (STRING,),
    "wstring": (WSTRING,),
    "void": (),
    "long and string": (tcInternal.tv_long, STRING),
    "sequence": ((tcInternal.tv_sequence, tcInternal.tv_long, 0),),
}
OPERATIONS = {name: Operation(name.replace(" ", "_"), ((), types, {})) for name, types in RESULTS.items()}
ANY_VALUE = st.one_of(st.none(), st.integers(-2**65, 2**65), st.floats(allow_nan=False), st.text(max_size=8),
                      st.booleans(), st.lists(st.integers(-2**31, 2**31 - 1), max_size=4))
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "ulonglong": st.integers(-1, 2**64),
    "long": st.integers(-2**31 - 1, 2**31),
    "double": st.floats(allow_nan=False),
    "boolean": st.booleans(),
    "octet": st.integers(-1, 256),
    "string": st.text(max_size=40),
    "wstring": st.text(max_size=12),
    "void": st.none(),
    "long and string": st.tuples(st.integers(-2**31, 2**31 - 1), st.text(max_size=8)),
    "sequence": st.lists(st.integers(-2**31, 2**31 - 1), max_size=20),
}

ORIGINAL: Any = _accelerator.original("pyorb.server.call.reply.plain_reply_12")
ensure_orb()  # text marshals only once omniORB's ORB knows its code sets


class Core(GIOPConnection):
    """A connection core of another class: the twin reads its slots through getattr, not at their offsets."""

    __slots__ = ()


def twin() -> Any:
    """The compiled function; the tests that need it are skipped in a pure-Python process."""
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    from pyorb.server.call import _creply

    return _creply.plain_reply_12


def test_the_compiled_reply_is_in_place_with_the_accelerator() -> None:
    from pyorb.server import requests
    from pyorb.server.call import dispatch

    compiled = twin()
    assert reply.plain_reply_12 is compiled and requests.plain_reply_12 is compiled
    assert dispatch.plain_reply_12 is compiled and ORIGINAL is not compiled


@st.composite
def one_reply(draw: st.DrawFn) -> tuple[Operation, Any]:
    name = draw(st.sampled_from(sorted(OPERATIONS)))
    # Mostly a value of the result's type; sometimes anything (a servant's mistake).
    value = draw(st.one_of(VALUES[name], VALUES[name], ANY_VALUE))
    return OPERATIONS[name], value


@MANY
@given(
    replies=st.lists(one_reply(), min_size=1, max_size=6),
    request_id=st.sampled_from([0, 1, 7, 0xFFFFFFFF]),
    little_endian=st.booleans(),
    char_set=st.sampled_from([CS_UTF8, CS_ISO8859_1]),
    fragment=st.sampled_from([None, None, 64, 4096]),
    over=st.sampled_from([-1, 0, 1, None]),
    core_class=st.sampled_from([GIOPConnection, GIOPConnection, Core]),
)
def test_the_compiled_reply_gives_what_the_python_one_gives(
    replies: list[tuple[Operation, Any]], request_id: int, little_endian: bool, char_set: int,
    fragment: int | None, over: int | None, core_class: type[GIOPConnection],
) -> None:
    compiled = twin()
    core = core_class(Role.SERVER, max_fragment_size=fragment)
    core.char_set = char_set
    for op, value in replies:
        # The size limit at the reply's own size, one under or over it, or far away.
        whole = ORIGINAL(op, value, request_id, little_endian, core, 1 << 30)
        max_size = 1 << 30 if whole is None or over is None else len(whole) + over
        expected = ORIGINAL(op, value, request_id, little_endian, core, max_size)
        assert compiled(op, value, request_id, little_endian, core, max_size) == expected, (op.name, value)


def test_the_compiled_reply_writes_a_plain_value_and_refuses_a_bad_one_as_the_original_does() -> None:
    """The common case, and each way out of it, seen from outside: the bytes of a reply
    carrying a number, None for a value that does not marshal or a reply over the limit."""
    compiled = twin()
    core = GIOPConnection(Role.SERVER)
    core.char_set = CS_UTF8
    ping = OPERATIONS["ulonglong"]
    data = compiled(ping, 2**40 + 5, 9, True, core, 1 << 20)
    assert data == ORIGINAL(ping, 2**40 + 5, 9, True, core, 1 << 20)
    assert data[:4] == b"GIOP" and data[-8:] == (2**40 + 5).to_bytes(8, "little")
    assert compiled(ping, "five", 9, True, core, 1 << 20) is None
    assert compiled(ping, -1, 9, True, core, 1 << 20) is None
    assert compiled(ping, 5, 9, True, core, len(data) - 1) is None
    assert compiled(OPERATIONS["void"], "ignored", 9, False, core, 1 << 20) == ORIGINAL(
        OPERATIONS["void"], "ignored", 9, False, core, 1 << 20)
