"""The compiled ``Client.invoke``, ``ClientConnection.start`` and ``Invocation.expire_in``
(pyorb/client/_cinvocation.pyx) agree with their Python originals.

For the same calls timed and started on a fresh client connection, the
twins and the originals must write the same bytes (a timed call's
INVOCATION_POLICIES context included, on the same clocks) and leave every
call (its outcome, its connection, route, request id and deadline slot),
the loop's deadlines and the connection (its pending calls, its
bidirectional offer) in the same state: whatever the operation (with a
result, oneway, arguments that do not marshal), the route's GIOP version,
the call's timeout (none, sharing a slot with another call's, a slot of
its own), interceptors' contexts and class, the connection's class,
whether it is open, its pending-call limit and an offer waiting to be
sent; and ``invoke`` makes the same call (every slot of it) for the same
arguments, whether the client has interceptors, the call is idempotent or
made while a request is being served.  Skipped in a pure-Python process.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyorb
from pyorb import _accelerator
from pyorb.client.calls import Intercepted, Route
from pyorb.client.client import Client
from pyorb.client import connection
from pyorb.client.connection import ClientConnection
from pyorb.client.deadlines import Deadlines
from pyorb.client.invocation import Invocation
from pyorb.config import Config
from pyorb.giop.ior import parse_reference
from pyorb.giop.messages import GIOP_1_1, GIOP_1_2, ServiceContext
from pyorb.marshal import Operation
from pyorb.marshal.orb import ensure_orb
from tests.test_request_twin import Transport, messages

MANY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])
ORIGINAL: Any = _accelerator.original("pyorb.client.connection.ClientConnection.start")
ORIGINAL_EXPIRE_IN: Any = _accelerator.original("pyorb.client.invocation.Invocation.expire_in")
ORIGINAL_INVOKE: Any = _accelerator.original("pyorb.client.client.Client.invoke")
TARGET = parse_reference("corbaloc:iiop:127.0.0.1:1/Echo")  # never contacted: what is sent is kept here
ULL, STRING = 24, 18  # omniORB's TypeCode kinds
OPERATIONS = {
    "ping": (Operation("ping", ((ULL,), (ULL,), {})), (7,)),
    "text": (Operation("text", (((STRING, 0),), ((STRING, 0),), {})), ("été",)),
    "notify": (Operation("notify", ((ULL,), None, {})), (9,)),  # oneway
    "bad": (Operation("ping", ((ULL,), (ULL,), {})), ("not a number",)),  # does not marshal: BAD_PARAM
}
ensure_orb()


class Traced(Invocation):
    """A call of another class: the twin hands it to the original."""

    __slots__ = ()


class OwnConnection(ClientConnection):
    """A connection of another class: the twin hands its calls to the original."""


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@st.composite
def one_call(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "op": draw(st.sampled_from(["ping", "ping", "ping", "text", "notify", "bad"])),
        "version": draw(st.sampled_from(["1.2", "1.2", "1.1"])),
        "timeout": draw(st.sampled_from([None, None, 30.0, 30.0, 30.002, 0.5, 7, 1e9, -0.5])),
        "contexts": draw(st.sampled_from([None, None, None, (), (ServiceContext(0x50590001, b"abcd"),)])),
        "call_class": draw(st.sampled_from([Invocation, Invocation, Traced])),
    }


def run(loop: asyncio.AbstractEventLoop, start: Any, calls: list[dict[str, Any]], setup: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch, expire_in: Any = None) -> Any:
    """Time and start ``calls`` with ``expire_in`` (the one in place if None) and ``start`` on a fresh
    connection; what was written and the state left."""
    with monkeypatch.context() as patched:
        patched.setattr(ClientConnection, "start", start)
        if expire_in is not None:
            patched.setattr(Invocation, "expire_in", expire_in)
        # A deadline's context says when it was sent and how long is left: the same clocks for both.
        wall, loop_time = setup.get("clocks", (1e9, 1000.0))
        patched.setattr(connection, "time", SimpleNamespace(time=lambda: wall, monotonic=time.monotonic))
        patched.setattr(loop, "time", lambda: loop_time)
        return loop.run_until_complete(_run(calls, setup))


async def _run(calls: list[dict[str, Any]], setup: dict[str, Any]) -> Any:
    loop = asyncio.get_running_loop()
    client = pyorb.Client()
    route = client.route(TARGET)
    assert route is not None
    routes = {"1.2": Route(route.endpoint, route.key, GIOP_1_2), "1.1": Route(route.endpoint, route.key, GIOP_1_1)}
    conn = setup["conn_class"](Config(max_pending_calls=setup["limit"], little_endian=setup.get("little_endian", True)),
                               lambda _conn: None)
    transport = Transport()
    if setup["open"]:
        conn.connection_made(transport)  # type: ignore[arg-type]
    if setup["offer"]:
        conn.offer = ServiceContext(5, b"\x00\x00\x00\x00")  # BI_DIR_IIOP, sent with the next GIOP 1.2 request
    deadlines = Deadlines()
    invs = []
    for call in calls:
        op, args = OPERATIONS[call["op"]]
        inv = call["call_class"](op, args, None, client, TARGET)
        if call["contexts"] is not None:
            inv.intercepted = Intercepted((), op, TARGET)
            inv.intercepted.contexts = call["contexts"]
        if call["timeout"] is not None:
            inv.expire_in(call["timeout"], loop, deadlines)
        conn.start(inv, routes[call["version"]])
        invs.append(inv)
    for _ in range(3):  # the flushes a batch of sends schedules
        await asyncio.sleep(0)
    written = messages(bytes(transport.written))
    state = [(outcome(inv), inv.conn is conn, inv.request_id, getattr(inv, "route", None), inv.deadline,
              getattr(inv, "timeout", None), inv.deadlines is deadlines) for inv in invs]
    timed = {number: [invs.index(inv) for inv in slot] for number, slot in deadlines._slots.items()}
    result = written, state, sorted(conn.pending), conn.offer, timed, deadlines._armed, deadlines._timer is None
    for inv in invs:
        inv.cancel()
    conn.pending.clear()
    return result


def outcome(inv: Invocation) -> tuple[Any, ...]:
    if not inv.done():
        return ("pending",)
    exc = inv.exception()
    if exc is not None:
        return ("raised", type(exc), str(exc))
    return ("value", inv.result())


def twin() -> Any:
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    from pyorb.client import _cinvocation

    assert ClientConnection.start is _cinvocation.start, "the twin is not in place"
    assert Invocation.expire_in is _cinvocation.expire_in, "the twin is not in place"
    assert Client.invoke is _cinvocation.invoke, "the twin is not in place"
    return _cinvocation.start


@MANY
@given(calls=st.lists(one_call(), min_size=1, max_size=6),
       conn_class=st.sampled_from([ClientConnection, ClientConnection, OwnConnection]),
       open_=st.sampled_from([True, True, True, False]), limit=st.sampled_from([100, 100, 2]),
       offer=st.sampled_from([False, False, True]), little_endian=st.sampled_from([True, True, False]),
       clocks=st.tuples(st.one_of(st.floats(0, 4e9), st.sampled_from([0.0, 1.7e9 + 0.123456789])),
                        st.one_of(st.floats(0, 1e7), st.sampled_from([0.0, 1000.0, 86400.0001]))))
def test_the_compiled_start_sends_as_the_python_one_does(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]], conn_class: type,
    open_: bool, limit: int, offer: bool, little_endian: bool, clocks: tuple[float, float],
) -> None:
    compiled = twin()
    setup = {"conn_class": conn_class, "open": open_, "limit": limit, "offer": offer, "little_endian": little_endian,
             "clocks": clocks}
    assert run(loop, compiled, calls, setup, monkeypatch) == run(loop, ORIGINAL, calls, setup, monkeypatch,
                                                                ORIGINAL_EXPIRE_IN)


def test_the_compiled_start_sends_a_plain_call_and_registers_it(loop: asyncio.AbstractEventLoop,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen from outside: one request written, the call pending under its id on its connection."""
    compiled = twin()
    plain = {"op": "ping", "version": "1.2", "timeout": None, "contexts": None, "call_class": Invocation}
    setup = {"conn_class": ClientConnection, "open": True, "limit": 100, "offer": False}
    written, state, pending, offer, _, _, _ = run(loop, compiled, [plain, plain], setup, monkeypatch)
    assert len(written) == 2 and all(m[:6] == b"GIOP\x01\x02" and m[7] == 0 for m in written)  # two 1.2 Requests
    assert [s[:3] for s in state] == [(("pending",), True, 1), (("pending",), True, 2)] and pending == [1, 2]


PLAIN = {"op": "ping", "version": "1.2", "timeout": None, "contexts": None, "call_class": Invocation}
OPEN = {"conn_class": ClientConnection, "open": True, "limit": 100, "offer": False}
CASES = {
    "past the pending-call limit": ([PLAIN] * 4, {**OPEN, "limit": 2}),
    "an offer waiting": ([PLAIN, {**PLAIN, "version": "1.1"}, PLAIN, PLAIN], {**OPEN, "offer": True}),
    "a closed connection": ([PLAIN] * 2, {**OPEN, "open": False}),
    "oneway": ([{**PLAIN, "op": "notify"}, PLAIN], OPEN),
    "arguments that do not marshal": ([{**PLAIN, "op": "bad"}, PLAIN], OPEN),
    "GIOP 1.1": ([{**PLAIN, "version": "1.1"}, PLAIN], OPEN),
    "a deadline": ([{**PLAIN, "timeout": 30.0}, PLAIN], OPEN),
    "deadlines sharing a slot": ([{**PLAIN, "timeout": 30.0}, {**PLAIN, "timeout": 30.0}, PLAIN], OPEN),
    "a deadline in a new slot the timer reaches later": ([{**PLAIN, "timeout": 30.0}, {**PLAIN, "timeout": 30.01}],
                                                          OPEN),
    "a deadline in a new slot before the timer's": ([{**PLAIN, "timeout": 30.0}, {**PLAIN, "timeout": 0.5}], OPEN),
    "a deadline in big-endian": ([{**PLAIN, "timeout": 30.0}], {**OPEN, "little_endian": False}),
    "a deadline already passed": ([{**PLAIN, "timeout": -0.5}, {**PLAIN, "timeout": -0.5}], OPEN),
    "a deadline years away": ([{**PLAIN, "timeout": 1e9}, {**PLAIN, "timeout": 1e9}], OPEN),
    "a wall clock past what fits in C": ([{**PLAIN, "timeout": 30.0}], {**OPEN, "clocks": (1e12, 1000.0)}),
    "interceptors' contexts": ([{**PLAIN, "contexts": (ServiceContext(0x50590001, b"abcd"),)}, PLAIN], OPEN),
    "a call of another class": ([{**PLAIN, "call_class": Traced}, PLAIN], OPEN),
    "a connection of another class": ([PLAIN] * 2, {**OPEN, "conn_class": OwnConnection}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_case_the_compiled_start_hands_on_is_sent_as_the_python_one_does(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, case: str,
) -> None:
    compiled = twin()
    calls, setup = CASES[case]
    assert run(loop, compiled, calls, setup, monkeypatch) == run(loop, ORIGINAL, calls, setup, monkeypatch,
                                                                ORIGINAL_EXPIRE_IN)


class Tagging:
    """A client interceptor: a client with one hands its calls to the original invoke."""

    def send_request(self, info: Any) -> None:
        info.request_contexts[0x50590002] = b"tag"

    def receive_reply(self, info: Any, exception: BaseException | None) -> None:
        pass


UNSET = object()


def invoke_run(loop: asyncio.AbstractEventLoop, invoke: Any, calls: list[dict[str, Any]], interceptors: bool,
               monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make ``calls`` with ``invoke`` through a client whose connection is open: what was
    written, and every slot of every call."""
    with monkeypatch.context() as patched:
        patched.setattr(Client, "invoke", invoke)
        patched.setattr(connection, "time", SimpleNamespace(time=lambda: 1e9, monotonic=time.monotonic))
        patched.setattr(loop, "time", lambda: 1000.0)
        return loop.run_until_complete(_invoke_run(calls, interceptors))


async def _invoke_run(calls: list[dict[str, Any]], interceptors: bool) -> Any:
    from pyorb.request_context import SERVING

    client = pyorb.Client(interceptors=[Tagging()] if interceptors else ())
    found = client.route(TARGET)
    assert found is not None
    route = Route(found.endpoint, found.key, GIOP_1_2)
    conn = ClientConnection(Config(), lambda _conn: None)
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    client._conns[route.endpoint] = conn
    invs = []
    for call in calls:
        op, args = OPERATIONS[call["op"]]
        token = SERVING.set(SimpleNamespace(deadline=None)) if call["serving"] else None
        try:
            invs.append(client.invoke(TARGET, op, args, call["timeout"], route, call["idempotent"]))
        finally:
            if token is not None:
                SERVING.reset(token)
    for _ in range(3):
        await asyncio.sleep(0)
    written = messages(bytes(transport.written))
    seen = {id(client): "client", id(TARGET): "target", id(conn): "conn", id(route): "route"}
    slots = [(type(inv).__name__, outcome(inv),
              {name: described(value, seen) for name in Invocation.__slots__
               if (value := getattr(inv, name, UNSET)) is not UNSET})
             for inv in invs]
    result = written, slots, sorted(conn.pending)
    for inv in invs:
        inv.cancel()
    conn.pending.clear()
    conn.connection_lost(None)  # its transport is a stand-in: the client forgets the connection
    return result


def described(value: Any, seen: dict[int, str]) -> Any:
    """A call's slot, comparable between two runs: the run's own objects by role."""
    if isinstance(value, Deadlines):
        return "deadlines"
    if isinstance(value, Intercepted):
        return ("intercepted", value.contexts)
    return seen.get(id(value), value)


@MANY
@given(calls=st.lists(st.fixed_dictionaries({
           "op": st.sampled_from(["ping", "ping", "text", "notify", "bad"]),
           "timeout": st.sampled_from([None, None, 30.0, 30.0, 0.5]),
           "idempotent": st.sampled_from([False, False, True]),
           "serving": st.sampled_from([False, False, False, True])}), min_size=1, max_size=5),
       interceptors=st.sampled_from([False, False, True]))
def test_the_compiled_invoke_makes_and_sends_the_call_the_python_one_does(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]],
    interceptors: bool,
) -> None:
    twin()
    assert invoke_run(loop, Client.invoke, calls, interceptors, monkeypatch) == \
        invoke_run(loop, ORIGINAL_INVOKE, calls, interceptors, monkeypatch)


def test_the_compiled_invoke_sends_a_plain_and_a_timed_call() -> None:
    """Seen from outside: both requests written, the timed one with its context, both calls pending."""
    twin()
    loop = asyncio.new_event_loop()
    try:
        plain = {"op": "ping", "timeout": None, "idempotent": False, "serving": False}
        with pytest.MonkeyPatch.context() as monkeypatch:
            written, slots, pending = invoke_run(loop, Client.invoke, [plain, {**plain, "timeout": 30.0}], False,
                                                 monkeypatch)
    finally:
        loop.close()
    assert pending == [1, 2] and [s[1] for s in slots] == [("pending",), ("pending",)]
    assert slots[0][2]["deadlines"] is None and slots[1][2]["deadlines"] == "deadlines"
    policies = b"\x07\x00\x00\x00\x40\x00\x00\x00"  # INVOCATION_POLICIES, 64 bytes (little-endian)
    assert policies not in written[0] and policies in written[1]
