"""The compiled ``ClientConnection.start`` (pyorb/client/_cinvocation.pyx) agrees with its Python original.

For the same calls started on a fresh client connection, the twin and the
original must write the same bytes and leave every call (its outcome, its
connection, route and request id) and the connection (its pending calls,
its bidirectional offer) in the same state: whatever the operation (with
a result, oneway, arguments that do not marshal), the route's GIOP
version, the call's deadline, interceptors' contexts and class, the
connection's class, whether it is open, its pending-call limit and an
offer waiting to be sent.  Skipped in a pure-Python process.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyorb
from pyorb import _accelerator
from pyorb.client.calls import Intercepted, Route
from pyorb.client import connection
from pyorb.client.connection import ClientConnection
from pyorb.client.deadlines import Deadlines
from pyorb.client.invocation import Invocation
from pyorb.config import Config
from pyorb.giop.ior import parse_reference
from pyorb.giop.messages import GIOP_1_1, GIOP_1_2, ServiceContext
from pyorb.giop.policies import deadline_context
from pyorb.marshal import Operation
from pyorb.marshal.orb import ensure_orb
from tests.test_request_twin import Transport, messages

MANY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])
ORIGINAL: Any = _accelerator.original("pyorb.client.connection.ClientConnection.start")
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
        "timeout": draw(st.sampled_from([None, None, 30.0])),
        "contexts": draw(st.sampled_from([None, None, None, (), (ServiceContext(0x50590001, b"abcd"),)])),
        "call_class": draw(st.sampled_from([Invocation, Invocation, Traced])),
    }


def run(loop: asyncio.AbstractEventLoop, start: Any, calls: list[dict[str, Any]], setup: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> Any:
    """Start ``calls`` with ``start`` on a fresh connection; what was written and the state left."""
    with monkeypatch.context() as patched:
        patched.setattr(ClientConnection, "start", start)
        # A deadline's context says when it was sent: the same time for both.
        patched.setattr(connection, "deadline_context", lambda left, now, le: deadline_context(left, 1e9, le))
        patched.setattr(Deadlines, "time_left", staticmethod(lambda deadline, loop: 30.0))
        return loop.run_until_complete(_run(calls, setup))


async def _run(calls: list[dict[str, Any]], setup: dict[str, Any]) -> Any:
    loop = asyncio.get_running_loop()
    client = pyorb.Client()
    route = client.route(TARGET)
    assert route is not None
    routes = {"1.2": Route(route.endpoint, route.key, GIOP_1_2), "1.1": Route(route.endpoint, route.key, GIOP_1_1)}
    conn = setup["conn_class"](Config(max_pending_calls=setup["limit"]), lambda _conn: None)
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
    state = [(outcome(inv), inv.conn is conn, inv.request_id, getattr(inv, "route", None)) for inv in invs]
    result = written, state, sorted(conn.pending), conn.offer
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
    return _cinvocation.start


@MANY
@given(calls=st.lists(one_call(), min_size=1, max_size=6),
       conn_class=st.sampled_from([ClientConnection, ClientConnection, OwnConnection]),
       open_=st.sampled_from([True, True, True, False]), limit=st.sampled_from([100, 100, 2]),
       offer=st.sampled_from([False, False, True]))
def test_the_compiled_start_sends_as_the_python_one_does(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]], conn_class: type,
    open_: bool, limit: int, offer: bool,
) -> None:
    compiled = twin()
    setup = {"conn_class": conn_class, "open": open_, "limit": limit, "offer": offer}
    assert run(loop, compiled, calls, setup, monkeypatch) == run(loop, ORIGINAL, calls, setup, monkeypatch)


def test_the_compiled_start_sends_a_plain_call_and_registers_it(loop: asyncio.AbstractEventLoop,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen from outside: one request written, the call pending under its id on its connection."""
    compiled = twin()
    plain = {"op": "ping", "version": "1.2", "timeout": None, "contexts": None, "call_class": Invocation}
    setup = {"conn_class": ClientConnection, "open": True, "limit": 100, "offer": False}
    written, state, pending, offer = run(loop, compiled, [plain, plain], setup, monkeypatch)
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
    assert run(loop, compiled, calls, setup, monkeypatch) == run(loop, ORIGINAL, calls, setup, monkeypatch)
