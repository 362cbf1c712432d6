"""Dispatcher threads write their own replies (``Config.direct_replies``).

A thread of a thread strategy writes a reply straight to a plain TCP socket
when nothing waits to go out on its connection; otherwise the loop writes
it, as it always does with ``direct_replies=False`` and on TLS
(``tests/test_tls.py``).  Both ways must give a client the same replies,
whole and never interleaved, including replies too big for one write
(the rest goes out through the loop before anything else), clients that
vanish while their calls run, and a server that closes gracefully; and a
connection must leave no descriptor behind (a thread's writes use a
duplicate of the socket).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from typing import Any, AsyncIterator, Callable

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb import _accelerator
from pyorb.aio.direct import DirectWriter
from pyorb.aio.protocol import GIOPProtocol
from pyorb.idl import bench_idl
from pyorb.testing.waiting import wait_until
from tests.test_inline_path import CALLS, Interop, Types, outcome

pytestmark = pytest.mark.integration  # opens sockets or starts processes

bench = bench_idl()
Bench, Bench__POA = bench.Bench, bench.Bench__POA


class SlowSink(Bench__POA.Sink):  # type: ignore[misc,name-defined]
    """work(token) after ``delay`` seconds of servant code on its thread."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.started = threading.Event()

    def work(self, token: int) -> int:
        self.started.set()
        time.sleep(self.delay)
        return token


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """What the connections' write paths did, counted around the real methods."""
    seen: Counter[str] = Counter()
    write, rest = GIOPProtocol.write_from_thread, DirectWriter.write_rest

    def counted_write(self: GIOPProtocol, data: bytes) -> bool:
        done = write(self, data)
        seen["by thread" if done else "to the loop"] += 1
        return done

    def counted_rest(self: DirectWriter) -> None:
        seen["rest"] += 1
        rest(self)

    monkeypatch.setattr(GIOPProtocol, "write_from_thread", counted_write)
    monkeypatch.setattr(DirectWriter, "write_rest", counted_rest)
    return seen


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest_asyncio.fixture(params=[True, False], ids=["direct", "loop"])
async def servers(request: pytest.FixtureRequest) -> AsyncIterator[tuple[bool, pyorb.Server]]:
    config = pyorb.Config(max_message_size=8192, direct_replies=request.param)
    async with pyorb.Server(config=config) as server:
        yield request.param, server


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", ["thread_pool(3)", "thread_per_connection", "threaded", "locality(2)"])
async def test_every_outcome_is_the_same_written_by_the_thread_or_the_loop(
        servers: tuple[bool, pyorb.Server], strategy: str, writes: Counter[str]) -> None:
    direct, server = servers
    key = server.activate(Types(), "types", strategy=strategy)
    async with pyorb.Client() as client:
        types = client.resolve(server.ior(key), Interop.Types)
        # Each outcome 20 times at once: replies of every kind race each other on the thread path.
        for name, args in CALLS:
            results = await asyncio.gather(*(getattr(types, name)(*args) for _ in range(20)),
                                           return_exceptions=True)
            expected = outcome(results[0])
            assert [outcome(r) for r in results] == [expected] * 20, name
        (conn,) = server.connections
        assert (conn.wire.direct_writer is not None) is direct
    if direct:  # the first reply of the connection asks the loop to open the way; most go straight out after
        assert writes["by thread"] > writes["to the loop"] > 0
    else:
        assert writes["by thread"] == 0
    assert sum(op.in_flight for op in server.stats().operations) == 0
    await wait_until(lambda: server.load.total == 0)  # the loop settles a thread-written reply's request a moment later


@pytest.mark.asyncio
async def test_replies_too_big_for_one_write_arrive_whole_between_small_ones(writes: Counter[str]) -> None:
    async with pyorb.Server() as server:
        key = server.activate(Types(), "types", strategy="thread_pool(4)")
        # echo_blob returns it 1,000 times: 48 MB, more than the socket's send buffer and the
        # peer's receive buffer (at most 4 and 32 MiB on Linux by default) take at once.
        blob = bytes(range(256)) * 192
        async with pyorb.Client() as client:
            types = client.resolve(server.ior(key), Interop.Types)
            for _ in range(5):  # alone, a big reply is its thread's to write: in part, the rest by the loop
                assert await types.echo_blob(blob) == blob * 1000
                if writes["rest"]:
                    break
            assert writes["by thread"] and writes["rest"], writes
            # And between small ones, from four threads at once.
            calls = [types.echo_blob(blob) if i % 10 == 0 else types.echo_long(i) for i in range(40)]
            results = await asyncio.gather(*calls)
    assert [r == blob * 1000 if i % 10 == 0 else r == i for i, r in enumerate(results)] == [True] * 40


@pytest.mark.asyncio
async def test_clients_that_vanish_mid_call_cost_no_descriptor_and_the_server_serves_on() -> None:
    async with pyorb.Server() as server:
        sink = SlowSink(0.05)
        key = server.activate(sink, "sink", strategy="thread_pool(4)")
        before = descriptors()
        clients = [pyorb.Client() for _ in range(6)]
        proxies = [c.resolve(server.ior(key), Bench.Sink) for c in clients]
        assert await asyncio.gather(*(p.work(i) for i, p in enumerate(proxies))) == list(range(6))
        for _ in range(50):  # a connection's first thread reply asks for the duplicate; one at a time, each gets it
            if all(c.wire.direct_writer is not None for c in server.connections):
                break
            for p in proxies:
                await p.work(0)
        # Client socket, server socket and the server's duplicate for its threads' writes, per connection.
        assert len(server.connections) == 6 and descriptors() - before == 3 * 6
        # Half the clients go while their calls run: their threads' writes find the peer gone.
        pending = [asyncio.ensure_future(p.work(i)) for i, p in enumerate(proxies)]
        await asyncio.sleep(0.01)
        for c in clients[:3]:
            await c.close()
        for c, task in zip(clients, pending):
            if c in clients[:3]:
                with pytest.raises(CORBA.SystemException):
                    await task
            else:
                assert await task == pending.index(task)
        await wait_until(lambda: len(server.connections) == 3)
        for c in clients[3:]:
            await c.close()
        await wait_until(lambda: not server.connections)
        await wait_until(lambda: descriptors() == before)
        async with pyorb.Client() as client:  # and the server still serves
            assert await client.resolve(server.ior(key), Bench.Sink).work(42) == 42


@pytest.mark.asyncio
async def test_a_graceful_close_sends_every_thread_reply_before_close_connection() -> None:
    server = pyorb.Server()
    await server.start()
    sink = SlowSink(0.2)
    key = server.activate(sink, "sink", strategy="thread_pool(4)")
    async with pyorb.Client() as client:
        proxy = client.resolve(server.ior(key), Bench.Sink)
        assert await proxy.work(0) == 0  # the direct way is open
        calls = asyncio.gather(*(proxy.work(i) for i in range(1, 5)))
        await wait_until(sink.started.is_set)
        await asyncio.sleep(0.05)
        await server.close(grace=5.0)  # drains: the running calls' replies go out, then CloseConnection
        assert await calls == [1, 2, 3, 4]


class GatedSink(Bench__POA.Sink):  # type: ignore[misc,name-defined]
    """work(token) once the test opens the gate; counts the calls in servant code."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.inside = 0
        self.lock = threading.Lock()

    def work(self, token: int) -> int:
        with self.lock:
            self.inside += 1
        self.gate.wait(10)
        return token


@pytest.mark.asyncio
async def test_a_drain_that_only_settles_calls_stops_no_thread_from_writing(writes: Counter[str]) -> None:
    # A thread that wrote its reply leaves the loop only a call to settle; the
    # next thread's reply must not wait for that drain (it has nothing to
    # write).  The loop is kept busy while both threads reply, so the first
    # thread's drain is still pending when the second replies.
    async with pyorb.Server() as server:
        sink = GatedSink()
        sink.gate.set()
        key = server.activate(sink, "sink", strategy="thread_pool(2)")
        async with pyorb.Client() as client:
            proxy = client.resolve(server.ior(key), Bench.Sink)
            for _ in range(50):  # the connection's first thread reply asks the loop to open the way
                assert await proxy.work(0) == 0
                if server.connections and next(iter(server.connections)).wire.direct_writer is not None:
                    break
            sink.gate.clear()
            sink.inside = 0
            writes.clear()
            calls = asyncio.gather(proxy.work(1), proxy.work(2))
            await wait_until(lambda: sink.inside == 2)
            sink.gate.set()
            time.sleep(0.3)  # the loop (server and client) is busy: both threads reply meanwhile
            assert await calls == [1, 2]
    assert writes["by thread"] == 2, writes


def test_direct_replies_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="direct_replies"):
        pyorb.Config(direct_replies="no")  # type: ignore[arg-type]


def _send_nows() -> list[Callable[..., int]]:
    """The Python original of a thread's send and, with the accelerator, its compiled twin."""
    from pyorb.aio import direct

    twins: list[Any] = [_accelerator.original("pyorb.aio.direct._send_now")]
    if pyorb.accelerated():
        from pyorb.aio import _csend

        twins.append(_csend._send_now)
    return twins


@pytest.mark.parametrize("send_now", _send_nows(), ids=lambda f: type(f).__name__)
def test_a_threads_send_never_waits_and_says_how_much_the_socket_took(send_now: Callable[..., int]) -> None:
    import socket

    ours, peer = socket.socketpair()
    try:
        ours.setblocking(True)  # a blocking socket still must not make the send wait
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        assert send_now(ours, b"GIOP") == 4 and peer.recv(16) == b"GIOP"
        assert send_now(ours, bytearray(b"ab")) == 2 and send_now(ours, memoryview(b"cd")) == 2
        assert peer.recv(16) == b"abcd"
        taken, chunk, done = [], b"x" * 65536, threading.Event()

        def fill() -> None:  # in a thread: if a send waited for the reader, the test sees it time out
            while (n := send_now(ours, chunk)) > 0:
                taken.append(n)
            taken.append(n)
            done.set()

        threading.Thread(target=fill, daemon=True).start()
        assert done.wait(10), "a send waited for a full socket"
        assert taken[-1] == -1 and 0 < sum(taken[:-1]) < 64 * len(chunk)
        peer.close()
        for _ in range(3):  # the reader is gone: -1 (EPIPE or reset), no exception and no SIGPIPE
            result = send_now(ours, b"more")
        assert result == -1
        ours.close()
        assert send_now(ours, b"late") == -1  # a closed socket object
    finally:
        ours.close()
        peer.close()
