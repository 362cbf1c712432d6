"""The asyncio client against pyorb servers: AMI futures, timeouts,
cancellation, connection failures, reconnection and LOCATION_FORWARD.

The tests of the ``served`` pair run twice: over loopback TCP (marked
``integration``) and joined in memory (``pyorb.testing.memory_pair``: the
same client and server code, no socket), which the fast unit run keeps."""

from __future__ import annotations

import asyncio
import socket
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.client.deadlines import Deadlines
from pyorb.giop import codec, fast12
from pyorb.giop.ior import IOR, build_ior
from pyorb.giop.messages import CancelRequest
from pyorb.testing.memory import memory_pair, transport_pair
from pyorb.testing.waiting import wait_until

IDL = pyorb.load_idl("idl/stock.idl")
Stock, Stock__POA = IDL.Stock, IDL.Stock__POA


class SlowQuoter(Stock__POA.Quoter):
    """Replies after the number of milliseconds given as the stock name."""

    def __init__(self) -> None:
        self.cancelled = 0
        self.started = 0

    async def get_quote(self, name: str) -> int:
        self.started += 1
        try:
            await asyncio.sleep(int(name) / 1000)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return int(name)


async def _servant_cancelled(servant: SlowQuoter) -> None:
    """Wait (at most 10 s: a loaded machine is slow) for the server to cancel one running servant coroutine."""
    await wait_until(lambda: servant.cancelled, 10, what="the servant cancelled")
    assert servant.cancelled == 1


@pytest_asyncio.fixture(params=[pytest.param("tcp", marks=pytest.mark.integration), "memory"])
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[pyorb.Server, pyorb.Client, SlowQuoter, Any]]:
    """A server and a client over loopback TCP, and the same joined in memory (no socket)."""
    servant = SlowQuoter()
    if request.param == "memory":
        server = pyorb.Server()
        async with memory_pair(server) as client:
            key = server.activate(servant, "Slow")
            yield server, client, servant, client.resolve(server.ior(key), Stock.Quoter)
        return
    async with pyorb.Server() as server, pyorb.Client() as client:
        key = server.activate(servant, "Slow")
        yield server, client, servant, client.resolve(server.ior(key), Stock.Quoter)


@pytest.mark.asyncio
async def test_many_calls_share_one_connection(served: Any) -> None:
    server, client, _, quoter = served
    results = await asyncio.gather(*(quoter.get_quote(str(i % 20)) for i in range(2000)))
    assert results == [i % 20 for i in range(2000)]
    assert len(server.connections) == 1


@pytest.mark.asyncio
async def test_timeout_raises_timeout_and_sends_cancel_request(served: Any) -> None:
    _, _, servant, quoter = served
    with pytest.raises(CORBA.TIMEOUT):
        await quoter.get_quote("2000", timeout=0.05)
    await _servant_cancelled(servant)  # the CancelRequest reaches the server, which cancels the coroutine
    assert await quoter.get_quote("1") == 1  # the connection is still good


@pytest.mark.asyncio
async def test_cancelling_the_caller_frees_the_slot(served: Any) -> None:
    server, client, servant, quoter = served
    call = asyncio.ensure_future(quoter.get_quote("2000"))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    conn = next(iter(client._conns.values()))
    assert conn.pending == {}
    await _servant_cancelled(servant)


@pytest.mark.asyncio
async def test_cancelling_the_ami_future_frees_the_slot_at_once(served: Any) -> None:
    _, client, servant, quoter = served
    assert await quoter.get_quote("0") == 0  # connected
    fut = quoter.get_quote("2000", timeout=5)
    conn = next(iter(client._conns.values()))
    assert len(conn.pending) == 1 and len(Deadlines.of(asyncio.get_running_loop())) == 1
    while servant.started < 2:  # the servant is in its sleep, so the CancelRequest interrupts it
        await asyncio.sleep(0.005)
    fut.cancel()
    assert conn.pending == {} and len(Deadlines.of(asyncio.get_running_loop())) == 0
    await _servant_cancelled(servant)


@pytest.mark.asyncio
async def test_finished_calls_leave_no_deadline_or_slot(served: Any) -> None:
    _, client, _, quoter = served
    results = await asyncio.gather(*(quoter.get_quote(str(i % 5), timeout=10) for i in range(500)),
                                   quoter.get_quote("x", timeout=10), return_exceptions=True)
    assert results[:500] == [i % 5 for i in range(500)]
    assert isinstance(results[500], CORBA.SystemException)  # int("x") fails in the servant
    deadlines = Deadlines.of(asyncio.get_running_loop())
    assert len(deadlines) == 0 and deadlines._slots == {}
    assert next(iter(client._conns.values())).pending == {}


@pytest.mark.integration
@pytest.mark.asyncio
async def test_calls_under_the_configured_timeout_leave_no_deadline_and_still_time_out() -> None:
    # The proxy's common path with Config.call_timeout: each reply drops its deadline in the reply's one frame.
    async with pyorb.Server() as server, pyorb.Client(pyorb.Config(call_timeout=0.5)) as client:
        quoter = client.resolve(server.ior(server.activate(SlowQuoter())), Stock.Quoter)
        assert await asyncio.gather(*(quoter.get_quote(str(i % 3)) for i in range(300))) == [i % 3 for i in range(300)]
        deadlines = Deadlines.of(asyncio.get_running_loop())
        assert len(deadlines) == 0 and deadlines._slots == {}
        with pytest.raises(CORBA.TIMEOUT):
            await quoter.get_quote("2000")
        assert len(deadlines) == 0 and next(iter(client._conns.values())).pending == {}


@pytest.mark.asyncio
async def test_a_timeout_never_fires_early(served: Any) -> None:
    _, _, _, quoter = served
    loop = asyncio.get_running_loop()
    for timeout in (0.01, 0.033, 0.1):
        start = loop.time()
        with pytest.raises(CORBA.TIMEOUT):
            await quoter.get_quote("2000", timeout=timeout)
        assert loop.time() - start >= timeout - 0.001  # uvloop's clock counts whole milliseconds


@pytest.mark.integration
@pytest.mark.asyncio
async def test_calls_made_while_connecting_wait_in_one_queue() -> None:
    async with pyorb.Server() as server, pyorb.Client() as client:
        quoter = client.resolve(server.ior(server.activate(SlowQuoter())), Stock.Quoter)
        tasks_before = len(asyncio.all_tasks())
        calls = [quoter.get_quote(str(i % 3)) for i in range(1000)]
        (queued,) = client._queued.values()  # one queue, not a task per call
        assert len(queued) == 1000 and len(asyncio.all_tasks()) - tasks_before <= 2
        assert await asyncio.gather(*calls) == [i % 3 for i in range(1000)]
        assert client._queued == {}


@pytest.mark.integration
@pytest.mark.asyncio
async def test_calls_queued_for_an_unreachable_server_all_fail_transient() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with pyorb.Client() as client:
        quoter = client.resolve(f"corbaloc::127.0.0.1:{port}/Nobody", Stock.Quoter)
        results = await asyncio.gather(*(quoter.get_quote("1") for _ in range(50)), return_exceptions=True)
    assert all(isinstance(r, CORBA.TRANSIENT) for r in results), results[:3]
    assert client._queued == {}


@pytest.mark.asyncio
async def test_a_cancel_arriving_with_its_request_ends_the_call(served: Any, request: pytest.FixtureRequest) -> None:
    """Request and CancelRequest in one read: the coroutine servant never
    starts, and the request is still counted as finished."""
    server, _, servant, quoter = served
    ior = IOR.from_string(server.ior(server.activate(servant, "Raw")))
    host, port = ior.profiles[0].host, ior.profiles[0].port
    body = b"\x03\x00\x00\x00" + b"10\x00"  # the string "10" (length counts the NUL), little-endian
    data = fast12.encode_request_12(7, 3, b"Raw", "get_quote", body, True) + codec.encode(CancelRequest(7))
    writer: asyncio.WriteTransport | asyncio.StreamWriter
    if request.node.callspec.params["served"] == "memory":
        conn = server.new_connection()
        writer, theirs = transport_pair(asyncio.get_running_loop(), asyncio.Protocol(), conn)
        conn.connection_made(theirs)
    else:
        _, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(data)
        def taken_and_dropped() -> bool:
            (stats,) = server.stats().strategies
            return stats.served + stats.in_flight > 0 and stats.in_flight == 0
        await wait_until(taken_and_dropped, 10, what="the request taken and ended")
        (loop_stats,) = server.stats().strategies
        assert (loop_stats.served, loop_stats.in_flight, loop_stats.dropped) == (1, 0, 1)
        (conn,) = server.connections
        assert conn.in_flight == 0
        assert servant.started == 0
    finally:
        writer.close()


@pytest.mark.integration
@pytest.mark.asyncio
async def test_default_timeout_from_config() -> None:
    servant = SlowQuoter()
    async with pyorb.Server() as server, pyorb.Client(pyorb.Config(call_timeout=0.05)) as client:
        quoter = client.resolve(server.ior(server.activate(servant)), Stock.Quoter)
        with pytest.raises(CORBA.TIMEOUT):
            await quoter.get_quote("1000")
        assert await quoter.get_quote("1", timeout=None) == 1


@pytest.mark.asyncio
async def test_connection_loss_fails_pending_calls_then_reconnects(served: Any) -> None:
    server, client, _, quoter = served
    calls = [asyncio.ensure_future(quoter.get_quote("5000")) for _ in range(10)]
    await asyncio.sleep(0.05)
    for conn in list(server.connections):
        conn.abort()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, CORBA.COMM_FAILURE) and r.completed == CORBA.COMPLETED_MAYBE for r in results)
    assert await quoter.get_quote("1") == 1  # a new connection


@pytest.mark.integration
@pytest.mark.asyncio
async def test_refused_connection_raises_transient() -> None:
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with pyorb.Client() as client:
        quoter = client.resolve(f"corbaloc::1.2@127.0.0.1:{port}/Nobody", Stock.Quoter)
        with pytest.raises(CORBA.TRANSIENT):
            await quoter.get_quote("1")


@pytest.mark.asyncio
async def test_unknown_object_and_operation(served: Any) -> None:
    server, client, _, quoter = served
    missing = client.resolve(server.corbaloc("NoSuchKey"), Stock.Quoter)
    with pytest.raises(CORBA.OBJECT_NOT_EXIST):
        await missing.get_quote("1")
    from pyorb.marshal import Operation

    with pytest.raises(CORBA.BAD_OPERATION):
        await quoter._invoke(Operation("no_such_op", ((), (3,), None)), ())
    assert await quoter._non_existent() is False
    assert await quoter._is_a("IDL:Stock/Quoter:1.0") is True
    assert await quoter._is_a("IDL:Other:1.0") is False


@pytest.mark.integration
@pytest.mark.asyncio
async def test_location_forward_is_followed() -> None:
    servant = SlowQuoter()
    async with pyorb.Server() as real, pyorb.Server() as forwarder, pyorb.Client() as client:
        key = real.activate(servant, "Real")
        forwarder.adapter.forward("Moved", IOR.from_string(real.ior(key)))
        quoter = client.resolve(forwarder.corbaloc("Moved"), Stock.Quoter)
        assert await quoter.get_quote("3") == 3
        assert servant.started == 1


@pytest.mark.integration
@pytest.mark.asyncio
async def test_forwarding_loop_ends_with_transient() -> None:
    async with pyorb.Server() as server, pyorb.Client(pyorb.Config(max_forwards=3)) as client:
        server.adapter.forward("Loop", build_ior("IDL:Stock/Quoter:1.0", server.host, server.port, b"Loop"))
        quoter = client.resolve(server.corbaloc("Loop"), Stock.Quoter)
        with pytest.raises(CORBA.TRANSIENT):
            await quoter.get_quote("1")


@pytest.mark.asyncio
async def test_ami_callback_and_poller_forms(served: Any) -> None:
    _, _, _, quoter = served
    got: list[Any] = []

    class Handler:
        def get_quote(self, value: int) -> None:
            got.append(value)

        def get_quote_excep(self, holder: Any) -> None:
            got.append(holder.exception)

    quoter.sendc_get_quote(Handler(), "7")
    poller = quoter.sendp_get_quote("9")
    assert not poller.is_ready()
    with pytest.raises(CORBA.TIMEOUT):
        poller.result()
    assert await poller == 9
    assert poller.result() == 9
    for _ in range(100):
        if got:
            break
        await asyncio.sleep(0.01)
    assert got == [7]


@pytest.mark.asyncio
async def test_cancel_request_for_unknown_id_is_harmless(served: Any) -> None:
    server, client, _, quoter = served
    assert await quoter.get_quote("1") == 1
    conn = next(iter(client._conns.values()))
    conn.send(codec.encode(CancelRequest(12345)))
    assert await quoter.get_quote("2") == 2
