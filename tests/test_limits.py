"""Server limits, deadlines and graceful shutdown, with real connections.

The server runs on its own loop thread; each pyorb ``Client`` is one connection.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.messages import GIOP_1_2, NEED_DATA, Request
from pyorb.idl import bench_idl
from pyorb.testing import LoopThread
from pyorb.testing.waiting import wait_until

pytestmark = pytest.mark.integration  # opens sockets or starts processes

bench = bench_idl()
interop = pyorb.load_idl("idl/interop.idl")
Bench, Bench__POA = bench.Bench, bench.Bench__POA


class HeldSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """work(0) returns at once; any other token waits for ``release``."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0

    def work(self, token: int) -> int:
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if token:
                assert self.release.wait(10)
        finally:
            with self.lock:
                self.active -= 1
        return token


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    with LoopThread() as lt:
        yield lt


class Running:
    def __init__(self, lt: LoopThread, server: pyorb.Server) -> None:
        self.lt, self.server = lt, server

    def activate(self, servant: Any, key: str, **kw: Any) -> str:
        async def act() -> str:
            return self.server.corbaloc(self.server.activate(servant, key, **kw))
        return self.lt.run(act())

    async def close(self, grace: float = 0.0) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.server.close(grace), self.lt.loop))


@pytest.fixture
def serve(loop_thread: LoopThread) -> Iterator[Any]:
    servers: list[pyorb.Server] = []

    def start(strategy: str = "thread_pool(8)", **config: Any) -> Running:
        async def go() -> pyorb.Server:
            server = pyorb.Server(strategy=strategy, config=pyorb.Config(**config))
            await server.start()
            return server
        server = loop_thread.run(go())
        servers.append(server)
        return Running(loop_thread, server)

    yield start
    for server in servers:
        loop_thread.run(server.close())


@pytest.mark.asyncio
async def test_requests_per_connection_limit_stops_reading_and_loses_nothing(serve: Any, clients: Any) -> None:
    sink = HeldSink()
    running = serve(max_requests_per_connection=3)
    ref = running.activate(sink, "sink")
    (client,) = clients(1)
    proxy = client.resolve(ref, Bench.Sink)
    calls = [asyncio.ensure_future(proxy.work(i + 1)) for i in range(10)]
    await wait_until(lambda: sink.active == 3)
    await asyncio.sleep(0.2)  # would the server take more? it must not
    assert sink.active == 3 and running.server.load.total == 3
    sink.release.set()
    assert await asyncio.gather(*calls) == list(range(1, 11))
    assert sink.max_active == 3


@pytest.mark.asyncio
async def test_server_wide_request_limit(serve: Any, clients: Any) -> None:
    sink = HeldSink()
    ref = serve(max_requests=4).activate(sink, "sink")
    calls = [asyncio.ensure_future(c.resolve(ref, Bench.Sink).work(1)) for c in clients(3) for _ in range(3)]
    await wait_until(lambda: sink.active == 4)
    await asyncio.sleep(0.2)
    assert sink.active == 4
    sink.release.set()
    assert await asyncio.gather(*calls) == [1] * 9
    assert sink.max_active == 4


@pytest.mark.asyncio
async def test_connections_beyond_the_limit_get_close_connection(serve: Any, clients: Any) -> None:
    running = serve(max_connections=2)
    ref = running.activate(HeldSink(), "sink")
    first, second, third = clients(3)
    assert await first.resolve(ref, Bench.Sink).work(0) == 0
    assert await second.resolve(ref, Bench.Sink).work(0) == 0
    with pytest.raises((CORBA.TRANSIENT, CORBA.COMM_FAILURE)) as info:
        await third.resolve(ref, Bench.Sink).work(0)
    assert info.value.completed == CORBA.COMPLETED_NO
    await first.close()
    await wait_until(lambda: len(running.server.connections) == 1)
    assert await third.resolve(ref, Bench.Sink).work(0) == 0  # room again: it reconnects


@pytest.mark.asyncio
async def test_idle_connections_are_closed_and_clients_reconnect(serve: Any, clients: Any) -> None:
    running = serve(idle_timeout=0.3)
    ref = running.activate(HeldSink(), "sink")
    (client,) = clients(1)
    proxy = client.resolve(ref, Bench.Sink)
    assert await proxy.work(0) == 0
    assert len(running.server.connections) == 1
    await wait_until(lambda: not running.server.connections, timeout=5)
    assert await proxy.work(0) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("style", ["sync", "amh"])
async def test_an_operation_deadline_gives_timeout_and_drops_the_late_reply(
    serve: Any, clients: Any, style: str
) -> None:
    release, replied = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    class HeldSync(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            release.wait(10)
            replied.set()
            return token

    class HeldAMH(pyorb.amh_skeleton(Bench__POA.Sink)):  # type: ignore[misc]
        async def work(self, rh: Any, token: int) -> None:
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
            try:
                rh.work(token)  # late: discarded without an error
            except Exception as exc:  # pragma: no cover - the failure we test for
                errors.append(exc)
            replied.set()

    running = serve()
    ref = running.activate(HeldSync() if style == "sync" else HeldAMH(), "slow", deadlines={"work": 0.1})
    (client,) = clients(1)
    try:
        with pytest.raises(CORBA.TIMEOUT):
            await client.resolve(ref, Bench.Sink).work(5, timeout=30)
        assert not replied.is_set()  # the deadline, not the servant (still held), answered
    finally:
        release.set()
    await asyncio.get_running_loop().run_in_executor(None, replied.wait, 10)
    await wait_until(lambda: running.server.stats().operations[0].in_flight == 0, 10)
    assert errors == []
    (op,) = running.server.stats().operations
    assert (op.served, op.failed, op.in_flight) == (1, 1, 0)


def test_bad_deadlines_are_refused() -> None:
    with pytest.raises(ValueError, match="deadline must be a positive"):
        pyorb.Server().activate(HeldSink(), "x", deadline=0)
    with pytest.raises(ValueError, match="has no operation nope"):
        pyorb.Server().activate(HeldSink(), "x", deadlines={"nope": 1.0})


@pytest.mark.asyncio
async def test_graceful_close_finishes_requests_in_flight(serve: Any, clients: Any) -> None:
    sink = HeldSink()
    running = serve()
    ref = running.activate(sink, "sink")
    busy, idle = clients(2)
    assert await idle.resolve(ref, Bench.Sink).work(0) == 0
    in_flight = asyncio.ensure_future(busy.resolve(ref, Bench.Sink).work(7))
    await wait_until(lambda: sink.active == 1)
    closing = asyncio.ensure_future(running.close(grace=10))
    await wait_until(lambda: len(running.server.connections) == 1)  # the idle one got CloseConnection
    assert not closing.done()
    late = asyncio.ensure_future(busy.resolve(ref, Bench.Sink).work(0))  # sent while draining: not read
    await asyncio.sleep(0.1)
    sink.release.set()
    assert await in_flight == 7
    with pytest.raises(CORBA.TRANSIENT) as info:  # never started: safe to retry elsewhere
        await late
    assert info.value.completed == CORBA.COMPLETED_NO
    await asyncio.wait_for(closing, 10)
    assert not running.server.connections


@pytest.mark.asyncio
@pytest.mark.parametrize("loop_factory", [asyncio.SelectorEventLoop, asyncio.new_event_loop], ids=["asyncio", "default"])
async def test_a_connection_the_server_had_not_accepted_when_close_began_is_told_to_retry(
    loop_factory: Any, clients: Any
) -> None:
    """A client that connected and sent its call while the server's loop was busy, right before
    close(): the server has accepted nothing yet (the kernel has), so its listener's close would
    reset the connection or leave it unread; it gets CloseConnection instead, and its call fails
    as never started (TRANSIENT, completed NO), not as one that may have run, nor by its timeout."""
    with LoopThread(loop_factory) as lt:
        async def start() -> tuple[pyorb.Server, str]:
            server = pyorb.Server()
            await server.start()
            return server, server.corbaloc(server.activate(HeldSink(), "sink"))

        server, ref = lt.run(start())
        closing: list[asyncio.Task[None]] = []
        busy = threading.Event()

        def busy_then_close() -> None:
            busy.set()
            time.sleep(0.5)  # the loop accepts nothing meanwhile
            closing.append(asyncio.ensure_future(server.close(grace=1.0)))

        lt.loop.call_soon_threadsafe(busy_then_close)
        (client,) = clients(1)
        # The server's loop is busy before the client connects (a loaded machine may start it late).
        assert await asyncio.get_running_loop().run_in_executor(None, busy.wait, 30)
        with pytest.raises(CORBA.TRANSIENT) as info:
            await client.resolve(ref, Bench.Sink).work(0, timeout=5.0)
        assert info.value.completed == CORBA.COMPLETED_NO
        await wait_until(lambda: bool(closing) and closing[0].done())
        assert not server.connections


@pytest.mark.parametrize("loop_factory", [asyncio.SelectorEventLoop, asyncio.new_event_loop], ids=["asyncio", "default"])
def test_close_with_a_connection_its_client_already_closed_is_quiet(loop_factory: Any) -> None:
    """A client closed its idle connection just before the server closes, unseen by the server:
    its CloseConnection meets a reset, there is no side left to release in order, and close()
    still completes without an error."""
    import socket

    with LoopThread(loop_factory) as lt:
        async def start() -> pyorb.Server:
            server = pyorb.Server()
            await server.start()
            return server

        server = lt.run(start())
        raw = socket.create_connection(("127.0.0.1", server._port))
        deadline = time.monotonic() + 10
        while not server.connections:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        closing: list[Any] = []

        def busy_then_close() -> None:
            raw.close()
            time.sleep(0.2)  # its FIN arrives while the loop looks elsewhere
            closing.append(asyncio.ensure_future(server.close(grace=1.0)))

        lt.loop.call_soon_threadsafe(busy_then_close)
        deadline = time.monotonic() + 10
        while not (closing and closing[0].done()):
            assert time.monotonic() < deadline, "close() did not finish"
            time.sleep(0.01)
        assert closing[0].exception() is None
        assert not server.connections


@pytest.mark.asyncio
async def test_close_gives_up_after_the_grace_period(serve: Any, clients: Any) -> None:
    sink = HeldSink()
    running = serve()
    ref = running.activate(sink, "sink")
    (client,) = clients(1)
    in_flight = asyncio.ensure_future(client.resolve(ref, Bench.Sink).work(7))
    await wait_until(lambda: sink.active == 1)
    started = time.monotonic()
    await running.close(grace=0.3)
    assert 0.25 < time.monotonic() - started < 30  # the grace period, then no hang
    with pytest.raises(CORBA.COMM_FAILURE):
        await in_flight
    sink.release.set()


@pytest.mark.asyncio
async def test_a_reply_over_the_size_limit_is_marshal_for_the_caller(serve: Any, clients: Any) -> None:
    class Types(interop.Interop__POA.Types):  # type: ignore[misc,valid-type]
        def echo_blob(self, v: bytes) -> bytes:
            return v * 1000

    running = serve(max_message_size=8192)
    ref = running.activate(Types(), "types")
    (client,) = clients(1)
    proxy = client.resolve(ref, interop.Interop.Types)
    assert await proxy.echo_blob(b"ab") == b"ab" * 1000
    with pytest.raises(CORBA.MARSHAL):
        await proxy.echo_blob(b"abcdefghij")  # 10 kB reply
    assert await proxy.echo_blob(b"c") == b"c" * 1000  # the connection survived


@pytest.mark.asyncio
async def test_the_client_bounds_its_pending_calls(serve: Any, clients: Any) -> None:
    sink = HeldSink()
    ref = serve().activate(sink, "sink")
    (client,) = clients(1, max_pending_calls=5)
    proxy = client.resolve(ref, Bench.Sink)
    calls = [asyncio.ensure_future(proxy.work(1)) for _ in range(5)]
    await wait_until(lambda: sink.active == 5)
    with pytest.raises(CORBA.IMP_LIMIT):
        await proxy.work(1)
    sink.release.set()
    assert await asyncio.gather(*calls) == [1] * 5
    assert await proxy.work(0) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", ["amh", "thread_pool(2)", "thread_per_connection"])
async def test_a_client_gone_with_requests_pending_leaks_nothing(
    serve: Any, clients: Any, strategy: str
) -> None:
    import gc

    sink = HeldSink()

    class AsyncHeld(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        async def work(self, token: int) -> int:
            while not sink.release.is_set():  # holds no thread while it waits
                await asyncio.sleep(0.01)
            return token

    running = serve(strategy)
    servant = AsyncHeld() if strategy == "amh" else sink
    ref = running.activate(servant, "sink")
    threads_before = threading.active_count()
    (client,) = clients(1)
    calls = [asyncio.ensure_future(client.resolve(ref, Bench.Sink).work(1)) for _ in range(20)]
    await wait_until(lambda: running.server.load.total == 20)
    await client.close()
    for call in calls:
        with pytest.raises(CORBA.COMM_FAILURE):
            await call
    await wait_until(lambda: not running.server.connections)
    sink.release.set()
    await wait_until(lambda: running.server.load.total == 0)
    (op,) = running.server.stats().operations
    assert (op.served, op.in_flight, op.dropped) == (20, 0, 20)
    await wait_until(lambda: threading.active_count() <= threads_before + 2)  # pool threads may stay; no per-call ones
    from pyorb.server.call.dispatch import Call

    def no_call_left() -> bool:
        gc.collect()
        return not [o for o in gc.get_objects() if isinstance(o, Call)]

    # A finished task's done callbacks (which hold its call) run an iteration later, on the server's loop.
    await wait_until(no_call_left, 10, interval=0.05, what="no Call object left")


SIGTERM_SERVER = """
import asyncio, sys, threading, time
import pyorb
from pyorb.idl import bench_idl

bench = bench_idl()


class Slow(bench.Bench__POA.Sink):
    def work(self, token):
        print("working", flush=True)
        time.sleep(1.0)
        return token


async def main():
    server = pyorb.Server(strategy="thread_pool(2)")
    await server.start()
    print(server.corbaloc(server.activate(Slow(), "slow")), flush=True)
    await server.serve_forever(grace=5.0)
    print("closed", flush=True)


asyncio.run(main())
"""


@pytest.mark.asyncio
@pytest.mark.client_loop_only
async def test_sigterm_closes_gracefully(clients: Any) -> None:
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_SERVER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        ref = proc.stdout.readline().strip()
        assert ref, f"the server printed no reference: {proc.stderr.read() if proc.poll() is not None else ''}"
        (client,) = clients(1)
        in_flight = asyncio.ensure_future(client.resolve(ref, Bench.Sink).work(3))
        working = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, proc.stdout.readline), 30)
        assert working.strip() == "working"  # the call is in servant code now
        proc.send_signal(signal.SIGTERM)
        assert await in_flight == 3  # answered within the grace period
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert out.strip() == "closed"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()  # and closes its pipes, whatever happened


@pytest.mark.asyncio
@pytest.mark.parametrize("closes", [1, 2])
async def test_close_connection_before_the_reply_is_retried_once(closes: int) -> None:
    """A server that sends CloseConnection with a request pending ran none of
    it: the client re-sends it once on a new connection; a second
    CloseConnection is TRANSIENT, completed NO, for the caller."""
    from pyorb.giop import GIOPConnection, Role, codec, fast12
    from pyorb.giop.messages import CloseConnection, Request
    from pyorb.marshal import Operation

    ping = Operation("ping", Bench.Echo._d_ping)
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        core = GIOPConnection(Role.SERVER)
        while (data := await reader.read(65536)):
            core.receive_data(data)
            while isinstance(req := core.next_event(), Request):
                if connections <= closes:
                    writer.write(codec.encode(CloseConnection(req.version)))
                    writer.close()
                    return
                (stamp,) = ping.args.unpack(req.body, req.body_offset, req.little_endian)
                body = ping.results.pack((stamp,), 0, req.little_endian)
                writer.write(fast12.encode_reply_12(req.request_id, 0, body, req.little_endian))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with pyorb.Client() as client:
            proxy = client.resolve(f"corbaloc::1.2@127.0.0.1:{port}/Echo", Bench.Echo)
            if closes == 1:
                assert await proxy.ping(42, timeout=5) == 42
            else:
                with pytest.raises(CORBA.TRANSIENT) as info:
                    await proxy.ping(42, timeout=5)
                assert info.value.completed == CORBA.COMPLETED_NO
        assert connections == 2
    finally:
        server.close()
        await server.wait_closed()


# -- deadline timers, races with the deadline, CancelRequest of queued calls --


@pytest.mark.asyncio
async def test_a_reply_in_time_releases_the_call_and_a_racing_reply_is_quiet(
    serve: Any, clients: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import gc
    import weakref

    from pyorb.server.call.dispatch import Call

    class Racer(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            time.sleep(0.02)  # as long as the deadline: replies race it
            return token

    running = serve(strategy="thread_pool(4)")
    ref = running.activate(Racer(), "racer", deadlines={"work": 0.02})
    fast = running.activate(Racer(), "fast", deadlines={"work": 30.0})
    (client,) = clients(1)
    racer = client.resolve(ref, Bench.Sink)
    outcomes = await asyncio.gather(*(racer.work(i, timeout=5) for i in range(200)), return_exceptions=True)
    assert all(o == i or isinstance(o, CORBA.TIMEOUT) for i, o in enumerate(outcomes)), outcomes
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text
    assert "BAD_INV_ORDER" not in caplog.text

    # A call answered long before its 30 s deadline is not kept alive by the deadline's timer.
    assert await client.resolve(fast, Bench.Sink).work(1) == 1

    def timed_calls_live() -> list[weakref.ref[Call]]:
        gc.collect()
        return [weakref.ref(o) for o in gc.get_objects() if isinstance(o, Call) and o.entry.op.name == "work"
                and o.timer is not None]

    # The reply's bookkeeping finishes on the server's loop, an iteration or so after the reply.
    await wait_until(lambda: not timed_calls_live(), 10, interval=0.05, what="no timed Call left")


@pytest.mark.asyncio
async def test_cancel_request_drops_calls_still_queued_for_a_pool(serve: Any, clients: Any) -> None:
    release = threading.Event()
    ran: list[int] = []

    class Blocker(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            ran.append(token)
            release.wait(10)
            return token

    running = serve(strategy="thread_pool(1)")
    ref = running.activate(Blocker(), "blocker")
    (client,) = clients(1)
    sink = client.resolve(ref, Bench.Sink)
    first = sink.work(0)
    await wait_until(lambda: ran == [0], timeout=5)
    queued = [sink.work(i, timeout=0.2) for i in range(1, 6)]  # wait behind the first; time out: CancelRequest
    for call in queued:
        with pytest.raises(CORBA.TIMEOUT):
            await call
    # The CancelRequests reach the server: the calls leave its count, dropped before they ran.
    await wait_until(lambda: running.server.stats().operations[0].dropped == 5, 30)
    release.set()
    assert await first == 0
    assert await sink.work(9, timeout=5) == 9
    assert ran == [0, 9]  # the cancelled calls never ran
    (op,) = running.server.stats().operations
    assert op.in_flight == 0 and op.dropped == 5


class _ConnectsAsItCloses:
    """A server's listener that, told to close, first has a client connect and send a request:
    the connection the kernel completes at the last instant before the listening socket goes."""

    def __init__(self, listener: Any, port: int, request: bytes) -> None:
        self.listener, self.port, self.request = listener, port, request
        self.raw: list[socket.socket] = []

    @property
    def sockets(self) -> Any:
        return self.listener.sockets

    def close(self) -> None:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.raw.append(raw)
        raw.sendall(self.request)
        self.listener.close()

    async def wait_closed(self) -> None:
        await self.listener.wait_closed()


@pytest.mark.asyncio
async def test_a_connection_made_as_the_listener_closes_is_told_to_retry_not_reset() -> None:
    """Stopping accepting and closing the listening socket are apart in time: a connection the kernel
    completes in between is accepted and told CloseConnection (its request ran not), never reset."""
    request = GIOPConnection(Role.CLIENT).send(Request(4, 3, b"sink", "_non_existent", b"", (), GIOP_1_2, True))
    server = pyorb.Server(host="127.0.0.1")
    await server.start()
    hook = _ConnectsAsItCloses(server._listeners[0], server.port, request)
    server._listeners[0] = hook
    try:
        await server.close(grace=1.0)
    finally:
        await server.close()
    [raw] = hook.raw
    with raw:
        raw.setblocking(False)
        core, events = GIOPConnection(Role.CLIENT), []
        loop = asyncio.get_running_loop()
        while not events:
            chunk = await asyncio.wait_for(loop.sock_recv(raw, 65536), 10)
            assert chunk, "the connection ended without CloseConnection"
            core.receive_data(chunk)
            while (event := core.next_event()) is not NEED_DATA:
                events.append(type(event).__name__)
    assert events == ["CloseConnection"]


class ForeverSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """An async servant whose work(1) waits for an event nobody sets."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    async def work(self, token: int) -> int:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return token


@pytest.mark.asyncio
async def test_close_ends_servant_coroutines_whose_clients_have_gone(serve: Any, clients: Any) -> None:
    """A client closed its connection while its call's coroutine was awaiting: the coroutine
    may run on (its reply goes nowhere), but not past the server's close()."""
    sink = ForeverSink()
    running = serve("reactive")
    ref = running.activate(sink, "sink")
    (client,) = clients(1)
    call = asyncio.ensure_future(client.resolve(ref, Bench.Sink).work(1))
    await wait_until(lambda: sink.started == 1)
    await client.close()
    with pytest.raises(CORBA.SystemException):
        await call
    await wait_until(lambda: not running.server.connections)
    assert sink.cancelled == 0  # the client going does not cancel it
    await running.close(grace=0.1)
    assert sink.cancelled == 1
