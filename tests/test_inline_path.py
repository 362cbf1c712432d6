"""The servers' short paths against the general one.

A synchronous servant under ``reactive`` is run and answered by the
connection itself (``RequestHandler._answer_inline``, or the compiled twin
of ``message_received``), with the client's
deadline if the request has one, unless the route has a deadline of its
own, which sends it through a :class:`~pyorb.server.call.dispatch.Call`; on a
dispatcher thread, ``run_blocking`` makes the common reply itself and hands
every other outcome to the call.  The same servant is activated all these
ways here, and every outcome a client can see (a result, each kind of
exception, a value that does not marshal, a reply over the size limit) and
the server's statistics must be the same on all of them.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, AsyncIterator

import pytest
import omniORB
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb import _accelerator
from pyorb.client.deadlines import RESOLUTION
from pyorb.request_context import SERVING
from pyorb.server.adapter import ObjectAdapter
from pyorb.server.requests import RequestHandler

pytestmark = pytest.mark.integration  # opens sockets or starts processes

interop = pyorb.load_idl("idl/interop.idl")
Interop, Interop__POA = interop.Interop, interop.Interop__POA


class Types(Interop__POA.Types):  # type: ignore[misc,valid-type]
    def echo_long(self, v: int) -> Any:
        return {-1: "not a long", -2: 2**40}.get(v, v)  # two returned values that do not marshal

    def echo_blob(self, v: bytes) -> bytes:
        return v * 1000  # 10 bytes in: a reply over the server's 8 kB limit

    def directions(self, a: int, b: int) -> Any:
        return (a + b, b + 1, 2 * a) if a >= 0 else (a, b)  # a < 0: the wrong number of results

    def raise_failure(self, code: int) -> None:
        raise Interop.Failure(code, "failed", [1, 2, 3])

    def raise_empty(self) -> None:
        raise Interop.Empty()

    def raise_undeclared(self) -> None:
        raise RuntimeError("not in the IDL")

    def raise_system(self) -> None:
        raise CORBA.BAD_PARAM(42, CORBA.COMPLETED_NO)


CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("echo_long", (7,)), ("echo_long", (-1,)), ("echo_long", (-2,)),
    ("echo_blob", (b"ab",)), ("echo_blob", (b"abcdefghij",)),
    ("directions", (3, 4)), ("directions", (-3, 4)),
    ("raise_failure", (9,)), ("raise_empty", ()), ("raise_undeclared", ()), ("raise_system", ()),
]
SYSTEM_EXCEPTIONS = 6  # of CALLS: the two echo_long, the big blob, directions(-3), undeclared, raise_system


def outcome(result: Any) -> Any:
    """What the client saw, comparable across calls."""
    if isinstance(result, CORBA.SystemException):
        return type(result).__name__, result.minor, result.completed
    if isinstance(result, CORBA.UserException):
        return type(result).__name__, sorted((k, v) for k, v in vars(result).items() if not k.startswith("_"))
    return "ok", result


@pytest_asyncio.fixture
async def ways() -> AsyncIterator[tuple[Any, ...]]:
    async with pyorb.Server(config=pyorb.Config(max_message_size=8192)) as server, pyorb.Client() as client, \
            pyorb.Client(pyorb.Config(call_timeout=30.0)) as timed:
        inline = server.activate(Types(), "inline")
        general = server.activate(Types(), "general", deadline=30.0)  # the server's own deadline needs a Call
        pool = server.activate(Types(), "pool", strategy="thread_pool(2)")
        pool_deadline = server.activate(Types(), "pool-deadline", strategy="thread_pool(2)", deadline=30.0)
        yield (server, *(client.resolve(server.ior(key), Interop.Types) for key in (inline, general, pool, pool_deadline)),
               timed.resolve(server.ior(inline), Interop.Types))  # inline, with the client's deadline


def test_only_a_synchronous_servant_without_a_deadline_under_reactive_is_inline() -> None:
    adapter = ObjectAdapter()

    class Later(Interop__POA.Types):  # type: ignore[misc,valid-type]
        async def echo_long(self, v: int) -> int:
            return v

    def inline(key: str, op: str = "echo_long") -> bool:
        binding = adapter.lookup(key.encode())
        assert binding is not None
        return binding.routes[op].inline

    adapter.activate(Types(), "plain")
    adapter.activate(Types(), "deadline", deadline=1.0)
    adapter.activate(Types(), "pool", strategy="thread_pool(2)")
    adapter.activate(Types(), "amh", strategy="amh")
    adapter.activate(Later(), "coroutine")
    assert [inline(k) for k in ("plain", "deadline", "pool", "amh", "coroutine")] == [True, False, False, True, False]
    adapter.registry.close()


@pytest.mark.asyncio
async def test_every_outcome_is_the_same_inline_on_a_thread_and_through_a_call(ways: Any) -> None:
    server, *proxies = ways
    seen = []
    for name, args in CALLS:
        results = []
        for proxy in proxies:
            try:
                results.append(outcome(await getattr(proxy, name)(*args)))
            except CORBA.Exception as exc:
                results.append(outcome(exc))
        assert results == [results[0]] * len(proxies), (name, args)
        seen.append(results[0])
    assert seen == [
        ("ok", 7), ("BAD_PARAM", omniORB.BAD_PARAM_WrongPythonType, CORBA.COMPLETED_YES),
        ("BAD_PARAM", omniORB.BAD_PARAM_PythonValueOutOfRange, CORBA.COMPLETED_YES),
        ("ok", b"ab" * 1000), ("MARSHAL", omniORB.MARSHAL_MessageSizeExceedLimitOnServer, CORBA.COMPLETED_YES),
        ("ok", (7, 5, 6)), ("BAD_PARAM", 0, CORBA.COMPLETED_YES),
        ("Failure", [("code", 9), ("details", [1, 2, 3]), ("why", "failed")]), ("Empty", []),
        ("UNKNOWN", omniORB.UNKNOWN_PythonException, CORBA.COMPLETED_MAYBE), ("BAD_PARAM", 42, CORBA.COMPLETED_NO),
    ]
    stats = server.stats()
    assert sum(op.served for op in stats.operations) == len(proxies) * len(CALLS)
    assert sum(op.failed for op in stats.operations) == len(proxies) * SYSTEM_EXCEPTIONS
    assert sum(op.in_flight for op in stats.operations) == 0
    # A reply its dispatcher thread wrote itself can reach the client a moment
    # before the loop settles its request (Config.direct_replies).
    for _ in range(500):
        if all(conn.in_flight == 0 for conn in server.connections) and server.load.total == 0:
            break
        await asyncio.sleep(0.01)
    assert all(conn.in_flight == 0 for conn in server.connections) and server.load.total == 0


def answered_inline(codes: set[Any]) -> bool:
    """Whether servant code whose stack holds ``codes`` runs from the connection's own answer:
    in the Python original's frame, or (with the compiled twin, which has no Python frame)
    with no frame of the general path's call objects, strategies or reply sinks."""
    if RequestHandler._answer_inline.__code__ in codes:
        return True
    general = ("/pyorb/server/call/", "/pyorb/server/strategies/", "/pyorb/server/requests.py")
    return _accelerator.TWINS["pyorb.server.requests.RequestHandler.message_received"].in_place and not any(
        general[0] in code.co_filename or general[1] in code.co_filename or code.co_filename.endswith(general[2])
        for code in codes)


@pytest.mark.asyncio
async def test_a_timed_call_to_a_reactive_synchronous_servant_is_answered_inline_and_sees_its_deadline() -> None:
    seen: list[tuple[bool, float | None, bool]] = []

    class Probe(Interop__POA.Types):  # type: ignore[misc,valid-type]
        def echo_long(self, v: int) -> int:
            codes, frame = set(), sys._getframe()
            while frame is not None:
                codes.add(frame.f_code)
                frame = frame.f_back
            context = pyorb.current()
            assert context is not None
            seen.append((answered_inline(codes), context.deadline, SERVING.get(None) is not None))
            return v

    async with pyorb.Server() as server, pyorb.Client() as client:
        proxy = client.resolve(server.ior(server.activate(Probe(), "probe")), Interop.Types)
        start = time.monotonic()
        assert await proxy.echo_long(5, timeout=30.0) == 5
        assert await proxy.echo_long(6) == 6
    (timed_inline, deadline, serving), (untimed_inline, no_deadline, untimed_serving) = seen
    assert timed_inline and untimed_inline
    assert deadline is not None and start < deadline <= time.monotonic() + 30.0 + RESOLUTION
    assert serving  # what the servant schedules, and calls it makes, inherit the deadline
    assert no_deadline is None and not untimed_serving
