"""The compiled reply delivery (pyorb/client/_cinvocation.pyx) agrees with its Python originals.

For the same pending calls on a client connection and the same messages
read from it, ``ClientConnection.message_received`` and
``Invocation.complete`` compiled and in Python must leave every call with
the same outcome (the same value, or the same exception and text) and its
deadline and the connection's pending table in the same state: whatever the
reply status, the result's type (none, one number, text, wide text,
several results, a sequence), the body (well formed, or bytes that do not
decode), its alignment and fragmentation, the connection's char code set,
the call's deadline, calls settled before their reply came, and calls of
a subclass.  They run
where the compiled accelerator is in use (the originals are kept in
``pyorb._accelerator.TWINS``) and are skipped in a pure-Python process.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyorb
from pyorb import _accelerator
from pyorb.client.connection import ClientConnection
from pyorb.client.deadlines import Deadlines
from pyorb.client.invocation import Invocation
from pyorb.config import Config
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8
from pyorb.giop.ior import parse_reference
from pyorb.giop.messages import GIOP_1_2, LocateReply, LocateStatus, Reply, ReplyStatus
from pyorb.marshal import Operation
from pyorb.marshal.orb import ensure_orb
from tests import test_reply_twin as reply_twin

MANY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])

# The result types of the server's reply twin test, less the ones that add nothing here.
RESULTS = {name: types for name, types in reply_twin.RESULTS.items() if name not in ("long", "boolean", "octet")}
OPERATIONS = {name: Operation(name.replace(" ", "_"), ((), types, {})) for name, types in RESULTS.items()}
VALUES: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "ulonglong": st.tuples(st.integers(0, 2**64 - 1)),
    "double": st.tuples(st.floats(allow_nan=False)),
    "string": st.tuples(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=20)),
    "wstring": st.tuples(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0xD7FF), max_size=12)),
    "void": st.just(()),
    "long and string": st.tuples(st.integers(-2**31, 2**31 - 1),
                                 st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=8)),
    "sequence": st.tuples(st.lists(st.integers(-2**31, 2**31 - 1), max_size=20)),
}
TARGET = parse_reference("corbaloc:iiop:127.0.0.1:1/Echo")  # never contacted: every reply is read here
ORIGINALS: dict[str, Any] = {
    "complete": _accelerator.original("pyorb.client.invocation.Invocation.complete"),
    "message_received": _accelerator.original("pyorb.client.connection.ClientConnection.message_received"),
}
ensure_orb()  # text marshals only once omniORB's ORB knows its code sets


class Traced(Invocation):
    """A call of another class that keeps ``complete``: the twin reads its slots through getattr."""

    __slots__ = ()


def twins() -> dict[str, Any]:
    """The compiled functions; the tests that need them are skipped in a pure-Python process."""
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    from pyorb.client import _cinvocation

    return {"complete": _cinvocation.complete, "message_received": _cinvocation.message_received}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_the_compiled_delivery_is_in_place_with_the_accelerator() -> None:
    compiled = twins()
    assert Invocation.complete is compiled["complete"]
    assert ClientConnection.message_received is compiled["message_received"]
    assert ORIGINALS["complete"] is not compiled["complete"]


@st.composite
def one_call(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(sorted(OPERATIONS)))
    le = draw(st.booleans())
    op = OPERATIONS[name]
    body = op.results.pack(draw(VALUES[name]), 0, le)
    return {
        "op": op,
        "body": draw(st.one_of(st.just(body), st.just(body), st.binary(max_size=12))),
        "status": draw(st.sampled_from([ReplyStatus.NO_EXCEPTION] * 4 + [ReplyStatus.USER_EXCEPTION,
                                                                         ReplyStatus.SYSTEM_EXCEPTION])),
        "little_endian": le,
        "body_offset": draw(st.sampled_from([24, 24, 0, 28])),
        "fragment_starts": draw(st.sampled_from([(), (), (16,)])),
        "timeout": draw(st.sampled_from([None, 30.0])),
        "settled_first": draw(st.sampled_from([False, False, False, True])),
        "answered": draw(st.sampled_from([True, True, True, False])),
        "call_class": draw(st.sampled_from([Invocation, Invocation, Traced])),
    }


def outcome(inv: Invocation) -> tuple[Any, ...]:
    if not inv.done():
        return ("pending",)
    if inv.cancelled():
        return ("cancelled",)
    exc = inv.exception()
    if exc is not None:
        return ("raised", type(exc), str(exc))
    return ("value", inv.result())


def deliver(loop: asyncio.AbstractEventLoop, methods: dict[str, Any], calls: list[dict[str, Any]],
            char_set: int) -> tuple[Any, ...]:
    """Send ``calls`` on a fresh connection, settle some first, read each reply (and one stray
    message) with ``methods``; every call's outcome, the pending table and the deadlines left."""
    return loop.run_until_complete(_deliver(loop, methods, calls, char_set))


async def _deliver(loop: asyncio.AbstractEventLoop, methods: dict[str, Any], calls: list[dict[str, Any]],
                   char_set: int) -> tuple[Any, ...]:
    client = pyorb.Client()
    route = client.route(TARGET)
    assert route is not None
    conn = ClientConnection(Config(), lambda _conn: None)
    conn.core.char_set = char_set
    deadlines = Deadlines()
    invs = []
    for rid, call in enumerate(calls, 1):
        inv = call["call_class"](call["op"], (), loop, client, TARGET)
        if call["timeout"] is not None:
            inv.expire_in(call["timeout"], loop, deadlines)
        inv.conn, inv.request_id, inv.route = conn, rid, route
        conn.pending[rid] = inv
        invs.append(inv)
        if call["settled_first"]:
            inv.cancel()
    for rid, call in enumerate(calls, 1):
        if call["answered"]:
            message = Reply(rid, call["status"], call["body"], (), GIOP_1_2, call["little_endian"],
                            call["body_offset"], call["fragment_starts"])
            methods["message_received"](conn, message)
    methods["message_received"](conn, LocateReply(99, LocateStatus.OBJECT_HERE))  # not a reply: logged, dropped
    methods["message_received"](conn, Reply(98, ReplyStatus.NO_EXCEPTION))  # no such call: logged, dropped
    return [outcome(inv) for inv in invs], sorted(conn.pending), len(deadlines)


@MANY
@given(calls=st.lists(one_call(), min_size=1, max_size=6), char_set=st.sampled_from([CS_UTF8, CS_ISO8859_1]))
def test_the_compiled_delivery_settles_calls_as_the_python_one_does(
    loop: asyncio.AbstractEventLoop, calls: list[dict[str, Any]], char_set: int,
) -> None:
    compiled = twins()
    original = {"message_received": ORIGINALS["message_received"]}
    saved = Invocation.complete
    Invocation.complete = ORIGINALS["complete"]  # type: ignore[method-assign]
    try:
        expected = deliver(loop, original, calls, char_set)
    finally:
        Invocation.complete = saved  # type: ignore[method-assign]
    assert deliver(loop, compiled, calls, char_set) == expected


def test_the_compiled_delivery_gives_a_plain_value_and_leaves_the_rest_to_the_original(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Seen from outside: a common reply settles its call with the value and drops its deadline;
    a body that does not decode fails the call with the original's MARSHAL."""
    compiled = twins()
    ping = OPERATIONS["ulonglong"]
    good = {"op": ping, "body": (2**40 + 3).to_bytes(8, "little"), "status": ReplyStatus.NO_EXCEPTION,
            "little_endian": True, "body_offset": 24, "fragment_starts": (), "timeout": 30.0,
            "settled_first": False, "answered": True, "call_class": Invocation}
    bad = {**good, "body": b"\x01"}
    outcomes, pending, deadlines = deliver(loop, compiled, [good, bad], CS_UTF8)
    assert outcomes[0] == ("value", 2**40 + 3)
    assert outcomes[1][0] == "raised" and outcomes[1][1].__name__ == "MARSHAL"
    assert pending == [] and deadlines == 0
