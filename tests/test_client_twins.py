"""The compiled request writer (pyorb/client/_cwriter.pyx) agrees with its Python original.

For the same sequence of requests on a connection, both writers must give
the same request ids and bytes, or raise the same exception with the same
message, and leave the writer and the connection's core in the same state:
whatever the operation and its arguments (text a code set cannot carry,
numbers out of range, bodies over the size limit), GIOP version, target
code sets and ORB type, service contexts, byte order, fragment size and
request id counter (near its wrap-around, on a bidirectional connection's
parity).  The tests run whenever the extension is built, whichever
implementation the process uses (the original is kept in
``pyorb._accelerator.TWINS``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omniORB import tcInternal

import pyorb
from pyorb import _accelerator
from pyorb.client import calls
from pyorb.config import Config
from pyorb.giop import GIOP_1_2, GIOPConnection, Role, ServiceContext
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8, CS_UTF16
from pyorb.giop.ior import ORB_TYPE_OMNIORB, CodeSetComponent, CodeSetsInfo
from pyorb.giop.messages import GIOP_1_0, GIOP_1_1
from pyorb.marshal import Operation
from pyorb.marshal.orb import ensure_orb

MANY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

STRING = (tcInternal.tv_string, 0)
WSTRING = (tcInternal.tv_wstring, 0)
OPERATIONS = [
    Operation("ping", ((tcInternal.tv_ulonglong,), (tcInternal.tv_ulonglong,), {})),
    Operation("notify", ((tcInternal.tv_ulonglong,), None, {})),  # oneway
    Operation("say", ((STRING, tcInternal.tv_long), (STRING,), {})),
    Operation("wide", ((WSTRING, tcInternal.tv_octet), (), {})),
    Operation("nothing", ((), (), {})),
    Operation("text", ((STRING,), (STRING,), {})),  # one value, padding-free, in the connection's code set
]
ARGUMENTS = {
    "ping": st.tuples(st.integers(-1, 2**64)),
    "notify": st.tuples(st.integers(0, 2**64 - 1)),
    "say": st.tuples(st.text(max_size=40), st.integers(-2**31 - 1, 2**31)),
    "wide": st.tuples(st.text(max_size=12), st.integers(0, 255)),
    "nothing": st.just(()),
    "text": st.tuples(st.text(max_size=20)),
}
code_sets = st.sampled_from([
    None,
    CodeSetsInfo(CodeSetComponent(CS_UTF8), CodeSetComponent(CS_UTF16)),
    CodeSetsInfo(CodeSetComponent(CS_ISO8859_1), CodeSetComponent(CS_UTF16)),
    CodeSetsInfo(CodeSetComponent(0x12345678), CodeSetComponent(0x9ABCDEF0)),  # nothing in common
])
contexts = st.lists(st.builds(ServiceContext, st.integers(0, 2**32 - 1), st.binary(max_size=8)), max_size=2).map(tuple)


@st.composite
def one_request(draw: st.DrawFn) -> tuple[Any, ...]:
    op = draw(st.sampled_from(OPERATIONS))
    return (op, draw(ARGUMENTS[op.name]), draw(st.binary(max_size=12)),
            draw(st.sampled_from([GIOP_1_2, GIOP_1_2, GIOP_1_1, GIOP_1_0])), draw(code_sets),
            draw(st.sampled_from([None, ORB_TYPE_OMNIORB, 0x4A414300])), draw(st.one_of(st.just(()), contexts)))


def state(writer: Any) -> tuple[Any, ...]:
    core = writer.core
    return writer._next_id, writer._chosen, core.char_set, core.wide_giop11, core.code_sets_chosen


def outcome(writer: Any, request: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        value: Any = writer.request(*request)
    except Exception as exc:  # the kind and message are what is compared
        value = (type(exc), str(exc))
    return value, state(writer)


ORIGINAL: Any = _accelerator.original("pyorb.client.calls.RequestWriter")
ensure_orb()  # text marshals only once omniORB's ORB knows its code sets


def twin() -> type:
    """The compiled writer; the tests that need it are skipped in a pure-Python process."""
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    from pyorb.client import _cwriter

    return _cwriter.RequestWriter


def test_the_compiled_writer_is_in_place_with_the_accelerator() -> None:
    assert calls.RequestWriter is twin()
    assert ORIGINAL is not calls.RequestWriter


@MANY
@given(
    requests=st.lists(one_request(), min_size=1, max_size=8),
    little_endian=st.booleans(),
    fragment=st.sampled_from([None, 64, 128]),
    ids=st.sampled_from([(1, 1), (2, 2), (0xFFFFFFFE, 1), (0xFFFFFFFD, 2)]),
    max_size=st.sampled_from([1024, 64 * 1024 * 1024]),
)
def test_the_compiled_writer_gives_what_the_python_one_gives(
    requests: list[tuple[Any, ...]], little_endian: bool, fragment: int | None, ids: tuple[int, int], max_size: int,
) -> None:
    compiled, python = twin(), ORIGINAL
    config = Config(little_endian=little_endian, max_fragment_size=fragment, max_message_size=max_size)
    writers = [cls(config, GIOPConnection(Role.CLIENT, max_fragment_size=fragment), *ids) for cls in (python, compiled)]
    assert state(writers[0]) == state(writers[1])
    for request in requests:
        # A long enough text goes over a 1024-byte limit: the size check is exercised too.
        if request[0].name == "say" and max_size == 1024 and len(request[1][0]) > 30:
            request = (request[0], (request[1][0] * 40, request[1][1]), *request[2:])
        expected, got = outcome(writers[0], request), outcome(writers[1], request)
        assert got == expected, request
    assert [w.cancel(7) for w in writers][0] == writers[1].cancel(7)


def test_the_compiled_writer_keeps_a_connection_s_first_request_on_the_python_path() -> None:
    """The first request chooses the code sets: after it, the compiled writer's own path runs, and
    both give the same bytes for the same second request."""
    compiled, python = twin(), ORIGINAL
    ping = OPERATIONS[0]
    out = []
    for cls in (python, compiled):
        writer = cls(Config(), GIOPConnection(Role.CLIENT))
        out.append([writer.request(ping, (n,), b"key", GIOP_1_2) for n in (1, 2)])
        assert writer._chosen is True
    assert out[0] == out[1]
    assert [rid for rid, _ in out[1]] == [1, 2]
