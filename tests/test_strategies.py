"""Each dispatch strategy keeps its promises, shown with real concurrent clients.

The server runs on its own loop thread (so that a blocked ``reactive`` server
does not block the test's clients); each pyorb ``Client`` opens one
connection, so N clients are N client connections.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any, Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.server import strategies
from pyorb.testing import LoopThread
from pyorb.testing.waiting import wait_until

pytestmark = pytest.mark.integration  # opens sockets or starts processes

IDL = bench_idl()
Bench, Bench__POA = IDL.Bench, IDL.Bench__POA

GATE = 999_999  # token that blocks its worker until the test opens the gate
BLOCK = 888_888  # token that blocks until released (under any strategy)


class Tracker:
    """What the servants saw: concurrency, start order, threads."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.starts: list[tuple[int, int]] = []  # (token, thread ident)
        self.thread_names: set[str] = set()
        self.gate = threading.Event()
        self.release = threading.Event()

    def enter(self, token: int) -> None:
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.starts.append((token, threading.get_ident()))
            self.thread_names.add(threading.current_thread().name)

    def leave(self) -> None:
        with self.lock:
            self.active -= 1

    async def async_hold(self, token: int) -> None:
        if token == BLOCK:
            while not self.release.is_set():  # polls: holds no thread
                await asyncio.sleep(0.005)
        else:
            await asyncio.sleep(self.delay)

    def hold(self, token: int) -> None:
        if token == GATE:
            assert self.gate.wait(10)
        elif token == BLOCK:
            assert self.release.wait(10)
        elif self.delay:
            time.sleep(self.delay)


class SyncSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    def __init__(self, tracker: Tracker) -> None:
        self.t = tracker

    def work(self, token: int) -> int:
        self.t.enter(token)
        try:
            self.t.hold(token)
        finally:
            self.t.leave()
        return token


class AsyncSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    def __init__(self, tracker: Tracker) -> None:
        self.t = tracker

    async def work(self, token: int) -> int:
        self.t.enter(token)
        await self.t.async_hold(token)
        self.t.leave()
        return token


class AMHSink(pyorb.amh_skeleton(Bench__POA.Sink)):  # type: ignore[misc]
    def __init__(self, tracker: Tracker) -> None:
        self.t = tracker

    async def work(self, rh: Any, token: int) -> None:
        self.t.enter(token)
        await self.t.async_hold(token)
        self.t.leave()
        rh.work(token)


class Echo(Bench__POA.Echo):  # type: ignore[misc,valid-type]
    def __init__(self) -> None:
        self.notified: list[int] = []

    def ping(self, stamp: int) -> int:
        return threading.get_ident()

    def notify(self, stamp: int) -> None:
        self.notified.append(threading.get_ident())


@pytest.fixture(scope="module")
def server_loop() -> Iterator[LoopThread]:
    with LoopThread() as lt:
        yield lt


class Served:
    def __init__(self, lt: LoopThread, server: pyorb.Server) -> None:
        self.lt, self.server = lt, server

    def ref(self, key: str) -> str:
        return self.server.corbaloc(key)

    def activate(self, servant: Any, key: str, **kw: Any) -> str:
        async def act() -> None:
            self.server.activate(servant, key, **kw)
        self.lt.run(act())
        return self.ref(key)


@pytest.fixture
def serve(server_loop: LoopThread) -> Iterator[Any]:
    servers: list[pyorb.Server] = []

    def start(strategy: str = "reactive", **config: Any) -> Served:
        async def go() -> pyorb.Server:
            server = pyorb.Server(strategy=strategy, config=pyorb.Config(**config))
            await server.start()
            return server
        server = server_loop.run(go())
        servers.append(server)
        return Served(server_loop, server)

    yield start
    for server in servers:
        server_loop.run(server.close())


def sink(client: pyorb.Client, ref: str) -> Any:
    return client.resolve(ref, Bench.Sink)


ALL_SPECS = ["reactive", "amh", "thread_pool(3)", "thread_per_request", "thread_per_request(2)",
             "thread_per_connection", "threaded", "locality(2)", "locality(2, threshold=3, wait=0.002)",
             "adaptive(window=0.05)"]


def test_every_registered_strategy_is_covered() -> None:
    registered = {n.partition("(")[0] for n in strategies.names()}
    assert registered == {s.partition("(")[0] for s in ALL_SPECS}


# -- every strategy serves every servant style ------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize("style", [SyncSink, AsyncSink, AMHSink])
async def test_each_strategy_serves_each_style(serve: Any, clients: Any, spec: str, style: type) -> None:
    served = serve(spec)
    ref = served.activate(style(Tracker()), "sink")
    results = await asyncio.gather(*(sink(c, ref).work(i) for i, c in enumerate(clients(4)) for _ in range(3)))
    assert sorted(results) == sorted(i for i in range(4) for _ in range(3))
    stats = served.server.stats()
    (op,) = stats.operations
    assert (op.name, op.served, op.in_flight, op.failed) == ("Bench::Sink.work", 12, 0, 0)
    assert [s.name for s in stats.strategies] == [strategies.create(spec).name]


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", ALL_SPECS)
async def test_a_raising_servant_leaves_the_server_serving(serve: Any, clients: Any, spec: str) -> None:
    class Faulty(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            if token == 0:
                raise RuntimeError("secret internals")
            return token

    served = serve(spec)
    ref = served.activate(Faulty(), "faulty")
    (client,) = clients(1)
    with pytest.raises(CORBA.UNKNOWN):
        await sink(client, ref).work(0)
    assert await sink(client, ref).work(5) == 5
    (op,) = served.server.stats().operations
    assert (op.served, op.failed) == (2, 1)


# -- the guarantees, strategy by strategy ---------------------------------


@pytest.mark.asyncio
async def test_reactive_runs_sync_code_on_the_loop_thread(serve: Any, clients: Any, server_loop: LoopThread) -> None:
    served = serve("reactive")
    ref = served.activate(Echo(), "echo")
    (client,) = clients(1)
    loop_thread = server_loop.run(_ident())
    assert await client.resolve(ref, Bench.Echo).ping(0) == loop_thread


async def _ident() -> int:
    return threading.get_ident()


@pytest.mark.asyncio
async def test_threaded_never_runs_two_calls_at_once(serve: Any, clients: Any) -> None:
    tracker = Tracker(delay=0.005)
    ref = serve("threaded").activate(SyncSink(tracker), "sink")
    await asyncio.gather(*(sink(c, ref).work(i) for i, c in enumerate(clients(5)) for _ in range(4)))
    assert tracker.max_active == 1
    assert len({thread for _, thread in tracker.starts}) == 5  # still a thread per connection


@pytest.mark.asyncio
async def test_thread_per_connection_serializes_a_connection_in_order(serve: Any, clients: Any) -> None:
    tracker = Tracker(delay=0.003)
    ref = serve("thread_per_connection").activate(SyncSink(tracker), "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    await asyncio.gather(*(proxy.work(i) for i in range(10)))  # pipelined on one connection
    assert tracker.max_active == 1
    assert [token for token, _ in tracker.starts] == list(range(10))
    assert len({thread for _, thread in tracker.starts}) == 1


@pytest.mark.asyncio
async def test_thread_per_connection_overlaps_connections(serve: Any, clients: Any) -> None:
    tracker = Tracker()
    served = serve("thread_per_connection")
    ref = served.activate(SyncSink(tracker), "sink")
    calls = [asyncio.ensure_future(sink(c, ref).work(BLOCK)) for c in clients(3)]
    await wait_until(lambda: tracker.active == 3)  # all three in servant code together
    tracker.release.set()
    assert await asyncio.gather(*calls) == [BLOCK] * 3
    assert served.server.stats().strategies[0].threads == 3


@pytest.mark.asyncio
async def test_thread_per_connection_threads_end_with_their_connections(serve: Any, clients: Any) -> None:
    served = serve("thread_per_connection")
    ref = served.activate(SyncSink(Tracker()), "sink")
    before = threading.active_count()
    conns = clients(4)
    await asyncio.gather(*(sink(c, ref).work(1) for c in conns))
    assert threading.active_count() == before + 4
    await asyncio.gather(*(c.close() for c in conns))
    await wait_until(lambda: threading.active_count() == before)
    assert served.server.stats().strategies[0].threads == 0


@pytest.mark.asyncio
async def test_thread_pool_caps_concurrency_and_starts_fifo(serve: Any, clients: Any) -> None:
    tracker = Tracker(delay=0.01)
    served = serve("thread_pool(2)")
    ref = served.activate(SyncSink(tracker), "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    await asyncio.gather(*(proxy.work(i) for i in range(12)))
    assert tracker.max_active == 2
    order = [token for token, _ in tracker.starts]
    # FIFO: with 2 threads taking turns, a call starts at most one place early or late.
    assert all(abs(pos - token) <= 1 for pos, token in enumerate(order))
    assert len({thread for _, thread in tracker.starts}) == 2
    strategy_stats = served.server.stats().strategies[0]
    assert strategy_stats.threads == 2 and strategy_stats.wait.max > 0.005  # calls did queue


@pytest.mark.asyncio
async def test_thread_pool_queues_beyond_its_size(serve: Any, clients: Any) -> None:
    tracker = Tracker()
    served = serve("thread_pool(2)")
    ref = served.activate(SyncSink(tracker), "sink")
    calls = [asyncio.ensure_future(sink(c, ref).work(BLOCK)) for c in clients(5)]
    await wait_until(lambda: served.server.stats().strategies[0].queued == 3)
    assert tracker.active == 2
    tracker.release.set()
    assert await asyncio.gather(*calls) == [BLOCK] * 5


@pytest.mark.asyncio
async def test_thread_per_request_overlaps_calls_of_one_connection(serve: Any, clients: Any) -> None:
    tracker = Tracker()
    ref = serve("thread_per_request").activate(SyncSink(tracker), "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    calls = [asyncio.ensure_future(proxy.work(BLOCK)) for _ in range(4)]
    await wait_until(lambda: tracker.active == 4)
    tracker.release.set()
    await asyncio.gather(*calls)
    assert len({thread for _, thread in tracker.starts}) == 4


@pytest.mark.asyncio
async def test_bounded_thread_per_request_waits_in_fifo(serve: Any, clients: Any) -> None:
    tracker = Tracker(delay=0.005)
    ref = serve("thread_per_request(2)").activate(SyncSink(tracker), "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    await asyncio.gather(*(proxy.work(i) for i in range(10)))
    assert tracker.max_active == 2
    assert len(tracker.thread_names) == 10  # a new thread per call, not a pool


@pytest.mark.asyncio
async def test_thread_per_request_gives_servants_that_wait_its_whole_thread_count(serve: Any, clients: Any) -> None:
    # Servants that sleep (or wait on I/O) leave the interpreter lock to the
    # others: nothing that keeps CPU-bound threads from starving the loop may
    # cost them their concurrency.
    tracker = Tracker(delay=0.1)
    ref = serve("thread_per_request(8)").activate(SyncSink(tracker), "sink")
    proxies = [sink(client, ref) for client in clients(4)]
    assert await asyncio.gather(*(proxies[i % 4].work(i) for i in range(48))) == list(range(48))
    assert tracker.max_active == 8
    assert len(tracker.thread_names) == 48  # a new thread per call


@pytest.mark.asyncio
@pytest.mark.parametrize("spec, runs", [("locality(2)", 3), ("thread_pool(2)", None)])
async def test_locality_serves_a_stream_back_to_back(serve: Any, clients: Any, spec: str, runs: int | None) -> None:
    tracker = Tracker(delay=0.001)
    served = serve(spec)
    ref = served.activate(SyncSink(tracker), "sink")
    gate_clients = clients(2)
    gates = [asyncio.ensure_future(sink(c, ref).work(GATE)) for c in gate_clients]
    await wait_until(lambda: tracker.active == 2)  # both workers held
    streams = clients(3)
    # Interleaved arrival: stream 0, 1, 2, 0, 1, 2, ...
    calls = []
    for seq in range(6):
        for s, c in enumerate(streams):
            calls.append(asyncio.ensure_future(sink(c, ref).work(s * 1000 + seq)))
            await wait_until(lambda n=len(calls): served.server.stats().strategies[0].queued == n)
    tracker.gate.set()
    await asyncio.gather(*gates, *calls)
    per_worker: dict[int, list[int]] = {}
    for token, thread in tracker.starts:
        if token != GATE:
            per_worker.setdefault(thread, []).append(token // 1000)
    stream_runs = sum(sum(1 for i, s in enumerate(seq) if i == 0 or seq[i - 1] != s) for seq in per_worker.values())
    if runs is not None:
        assert stream_runs == runs  # each stream's six calls ran back to back on one worker
        for s in range(3):
            mine = [t % 1000 for t, _ in tracker.starts if t != GATE and t // 1000 == s]
            assert mine == list(range(6))  # in arrival order
    else:
        assert stream_runs > 6  # the FIFO pool interleaves the streams


@pytest.mark.asyncio
async def test_locality_waits_for_its_stream_below_the_threshold(serve: Any, clients: Any) -> None:
    tracker = Tracker(delay=0.002)
    ref = serve("locality(1, threshold=5, wait=0.05)").activate(SyncSink(tracker), "sink")
    a, b = clients(2)
    # Stream a sends its calls one after another (closed loop); b has one call
    # waiting: below the threshold, so the worker stays with a while a's next
    # call arrives within the wait, and b still gets served (no starvation).
    async def stream_a() -> None:
        for i in range(5):
            await sink(a, ref).work(i)

    first = asyncio.ensure_future(stream_a())
    await wait_until(lambda: len(tracker.starts) >= 1)
    b_call = asyncio.ensure_future(sink(b, ref).work(1000))
    await asyncio.gather(first, b_call)
    assert [t for t, _ in tracker.starts][-1] == 1000


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", ["thread_pool(2)", "thread_per_connection", "threaded", "locality(1)"])
@pytest.mark.parametrize("style", [AsyncSink, AMHSink])
async def test_async_handlers_never_hold_a_thread(serve: Any, clients: Any, spec: str, style: type) -> None:
    tracker = Tracker()
    served = serve(spec)
    ref = served.activate(style(tracker), "sink")
    before = threading.active_count()
    calls = [asyncio.ensure_future(sink(c, ref).work(BLOCK)) for c in clients(4) for _ in range(50)]
    await wait_until(lambda: tracker.active == 200)  # all 200 waiting at once
    assert threading.active_count() == before
    tracker.release.set()
    await asyncio.gather(*calls)
    assert served.server.stats().strategies[0].threads == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("spec, stalls", [("reactive", True), ("threaded", True), ("thread_pool(2)", False),
                                          ("thread_per_connection", False), ("thread_per_request", False),
                                          ("locality(2)", False)])
async def test_a_blocking_servant(serve: Any, clients: Any, spec: str, stalls: bool) -> None:
    tracker = Tracker()
    served = serve(spec)
    ref = served.activate(SyncSink(tracker), "sink")
    blocker, other = clients(2)
    blocked = asyncio.ensure_future(sink(blocker, ref).work(BLOCK))
    await wait_until(lambda: tracker.active == 1)
    try:
        if stalls:
            with pytest.raises(CORBA.TIMEOUT):
                await sink(other, ref).work(1, timeout=0.3)
        else:
            assert await sink(other, ref).work(1, timeout=5) == 1
    finally:
        tracker.release.set()
    assert await blocked == BLOCK


# -- choosing strategies --------------------------------------------------


@pytest.mark.asyncio
async def test_strategy_per_servant_and_per_operation(serve: Any, clients: Any, server_loop: LoopThread) -> None:
    served = serve("reactive")
    echo = Echo()
    ref = served.activate(echo, "echo", operations={"ping": "thread_per_connection"})
    other = served.activate(Echo(), "other", strategy="thread_pool(1)")
    (client,) = clients(1)
    loop_thread = server_loop.run(_ident())
    proxy = client.resolve(ref, Bench.Echo)
    ping_thread = await proxy.ping(0)
    await proxy.notify(0)
    await wait_until(lambda: bool(echo.notified))
    assert ping_thread != loop_thread and echo.notified == [loop_thread]
    assert await client.resolve(other, Bench.Echo).ping(0) not in (loop_thread, ping_thread)
    names = {s.name for s in served.server.stats().strategies}
    assert names == {"reactive", "thread_per_connection", "thread_pool(1)"}


@pytest.mark.asyncio
async def test_one_spec_is_one_strategy_instance(serve: Any) -> None:
    served = serve("thread_pool(2)")
    served.activate(Echo(), "a", strategy="thread_pool(n=2)")
    served.activate(Echo(), "b", operations={"ping": "thread_pool(2)"})
    assert [s.name for s in served.server.stats().strategies] == ["thread_pool(2)"]


@pytest.mark.parametrize("kwargs, message", [
    ({"strategy": "bogus"}, "unknown strategy 'bogus'"),
    ({"strategy": "thread_pool(-1)"}, "positive integer"),
    ({"operations": {"nope": "reactive"}}, "has no operation nope"),
])
def test_bad_strategy_choices_fail_at_activation(kwargs: dict[str, Any], message: str) -> None:
    server = pyorb.Server()
    with pytest.raises(ValueError, match=message):
        server.activate(Echo(), "x", **kwargs)


def test_bad_default_strategy_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        pyorb.Server(strategy="thread_pool_of_doom")


def test_stats_table_renders() -> None:
    from rich.console import Console

    server = pyorb.Server(strategy="thread_pool(2)")
    server.activate(Echo(), "x")
    console = Console(record=True, width=200)
    console.print(server.stats().table())
    text = console.export_text()
    assert "strategy thread_pool(2)" in text and "operation Bench::Echo.ping" in text


# -- admission control --------------------------------------------------------

QUEUEING = ["thread_pool(1)", "thread_per_request(1)", "thread_per_connection", "threaded", "locality(1)"]


async def _outcomes(calls: list[asyncio.Future[Any]]) -> tuple[list[Any], list[CORBA.TRANSIENT]]:
    done = await asyncio.gather(*calls, return_exceptions=True)
    shed = [r for r in done if isinstance(r, CORBA.TRANSIENT)]
    return [r for r in done if not isinstance(r, BaseException)], shed


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", QUEUEING)
async def test_a_queued_call_is_refused_at_the_queue_limit(serve: Any, clients: Any, spec: str) -> None:
    from prometheus_client.core import CollectorRegistry

    from pyorb.server.admission import SHED_MINOR
    from pyorb.server.metrics import StatsCollector

    tracker = Tracker()
    served = serve(spec, queue_limit=0.3)
    ref = served.activate(SyncSink(tracker), "sink")
    (client,) = clients(1)  # one connection: every strategy here queues its calls behind the blocked one
    proxy = sink(client, ref)
    blocked = asyncio.ensure_future(proxy.work(BLOCK))
    await wait_until(lambda: tracker.active == 1)
    queued = [asyncio.ensure_future(proxy.work(i, timeout=20)) for i in range(3)]
    try:
        # Answered while the thread is still busy: the limit's timer, not a free thread, refuses them.
        ok, shed = await _outcomes(queued)
        assert tracker.active == 1 and not blocked.done()
    finally:
        tracker.release.set()
    assert await blocked == BLOCK
    assert ok == [] and len(shed) == 3
    assert {(e.minor, e.completed) for e in shed} == {(SHED_MINOR, CORBA.COMPLETED_NO)}
    assert all("the server says: overloaded: a call waited" in str(e)
               and "the limit is 0.3 s" in str(e) for e in shed), str(shed[0])
    assert [t for t, _ in tracker.starts] == [BLOCK]  # a refused call never ran
    stats = served.server.stats()
    (op,) = stats.operations
    assert (op.shed, op.failed, op.served) == (3, 3, 4)
    assert stats.strategies[0].shed == 3
    registry = CollectorRegistry()
    registry.register(StatsCollector(served.server))
    assert registry.get_sample_value("pyorb_requests_shed_total", {"operation": "Bench::Sink.work"}) == 3
    assert registry.get_sample_value("pyorb_strategy_shed_total", {"strategy": stats.strategies[0].name}) == 3
    assert registry.get_sample_value("pyorb_queue_age_seconds", {"operation": "Bench::Sink.work"}) == 0
    # The limit's timer answered them after they were queued.
    assert (op.shed_queued, stats.strategies[0].shed_queued) == (3, 3)
    assert registry.get_sample_value("pyorb_requests_shed_queued_total", {"operation": "Bench::Sink.work"}) == 3
    assert registry.get_sample_value("pyorb_strategy_shed_queued_total",
                                     {"strategy": stats.strategies[0].name}) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", QUEUEING)
async def test_stats_tell_calls_refused_on_arrival_from_calls_shed_after_they_were_queued(
        serve: Any, clients: Any, spec: str) -> None:
    from prometheus_client.core import CollectorRegistry

    from pyorb.server.metrics import StatsCollector

    tracker = Tracker()
    served = serve(spec, queue_target=0.01, queue_interval=0.05)
    ref = served.activate(SyncSink(tracker), "sink")
    (client,) = clients(1)  # one connection: every strategy here queues its calls behind the blocked one
    proxy = sink(client, ref)
    blocked = asyncio.ensure_future(proxy.work(BLOCK))
    try:
        await wait_until(lambda: tracker.active == 1)
        # Queued while the queue had not yet stood for an interval...
        queued = [asyncio.ensure_future(proxy.work(1, timeout=20))]
        await asyncio.sleep(0.1)
        queued.append(asyncio.ensure_future(proxy.work(2, timeout=20)))
        await asyncio.sleep(0.1)
        # ...then refused as they arrive: the oldest call has waited past the target for an interval.
        ok, refused = await _outcomes([asyncio.ensure_future(proxy.work(i, timeout=20)) for i in (3, 4)])
        assert ok == [] and len(refused) == 2 and not blocked.done()
        (op,) = served.server.stats().operations
        assert (op.shed, op.shed_queued) == (2, 0)
    finally:
        tracker.release.set()
    assert await blocked == BLOCK
    ok, shed = await _outcomes(queued)  # the thread takes them past the target while the queue stands
    assert ok == [] and len(shed) == 2
    assert [t for t, _ in tracker.starts] == [BLOCK]
    stats = served.server.stats()
    (op,) = stats.operations
    assert (op.shed, op.shed_queued, op.failed, op.served) == (4, 2, 4, 5)
    assert (stats.strategies[0].shed, stats.strategies[0].shed_queued) == (4, 2)
    registry = CollectorRegistry()
    registry.register(StatsCollector(served.server))
    assert registry.get_sample_value("pyorb_requests_shed_total", {"operation": "Bench::Sink.work"}) == 4
    assert registry.get_sample_value("pyorb_requests_shed_queued_total", {"operation": "Bench::Sink.work"}) == 2
    table = stats.table()
    assert [c.header for c in table.columns][8:10] == ["shed", "shed queued"]


class GatedSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """Calls with a gated token hold their thread until the test opens the gate."""

    def __init__(self, *gated: int) -> None:
        self.gates = {token: threading.Event() for token in gated}
        self.started: list[int] = []

    def work(self, token: int) -> int:
        self.started.append(token)
        gate = self.gates.get(token)
        if gate is not None:
            gate.wait(10)
        return token


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", QUEUEING)
async def test_idle_time_after_a_backlog_went_away_is_not_taken_for_the_queues_pace(serve: Any, clients: Any,
                                                                                    spec: str) -> None:
    # Calls started every 0.1 s while another waited; that one went away with its client; a second later
    # a new client's calls are queued, not refused as if each would take the second the threads idled.
    servant = GatedSink(1, 2, 3, 4)
    served = serve(spec, queue_limit=0.5)
    ref = served.activate(servant, "sink")
    leaving, arriving = clients(2)
    proxy = sink(leaving, ref)
    backlog = [asyncio.ensure_future(proxy.work(token, timeout=20)) for token in (1, 2, 3, 5)]
    await wait_until(lambda: servant.started == [1] and served.server.stats().strategies[0].queued == 3)
    servant.gates[1].set()
    await wait_until(lambda: servant.started == [1, 2])
    await asyncio.sleep(0.1)
    servant.gates[2].set()
    await wait_until(lambda: servant.started == [1, 2, 3])  # a pace of 0.1 s, call 5 still queued
    await leaving.close()  # call 5 is cancelled: it leaves the queue without starting
    servant.gates[3].set()
    await asyncio.gather(*backlog, return_exceptions=True)
    await wait_until(lambda: served.server.stats().strategies[0].queued == 0)
    await asyncio.sleep(1.0)  # the threads idle
    proxy = sink(arriving, ref)
    held = asyncio.ensure_future(proxy.work(4, timeout=20))
    await wait_until(lambda: servant.started[-1:] == [4])
    burst = [asyncio.ensure_future(proxy.work(token, timeout=20)) for token in (6, 7)]
    await asyncio.sleep(0.1)  # both judged as they arrived
    servant.gates[4].set()
    ok, shed = await _outcomes(burst)
    assert await held == 4
    assert sorted(ok) == [6, 7] and shed == [], [str(e) for e in shed]


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", QUEUEING)
async def test_the_queue_limit_counts_the_wait_in_the_socket_while_the_loop_was_behind(serve: Any, clients: Any,
                                                                                       spec: str) -> None:
    # Requests that waited in the socket while the server's event loop was stalled have waited that
    # long when it reads them: a free thread does not make that wait start again.
    tracker = Tracker()
    served = serve(spec, queue_limit=0.3)
    ref = served.activate(SyncSink(tracker), "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    assert await proxy.work(1) == 1  # the loop's lag is measured from here on
    served.lt.loop.call_soon_threadsafe(time.sleep, 0.6)
    await asyncio.sleep(0.05)
    ok, shed = await _outcomes([asyncio.ensure_future(proxy.work(i, timeout=20)) for i in range(3)])
    assert ok == [] and len(shed) == 3, ok
    assert all("the limit is 0.3 s" in str(e) for e in shed), str(shed[0])
    assert [t for t, _ in tracker.starts] == [1]  # a refused call never ran
    assert await proxy.work(2) == 2  # and the server serves on


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", [*QUEUEING, "reactive", "amh"])
async def test_a_standing_queue_is_shed(serve: Any, clients: Any, spec: str) -> None:
    class LoopBlockingAMH(pyorb.amh_skeleton(Bench__POA.Sink)):  # type: ignore[misc]
        def work(self, rh: Any, token: int) -> None:  # CPU demand on the loop thread, then the reply
            time.sleep(0.02)
            rh.work(token)

    served = serve(spec, queue_target=0.01, queue_interval=0.05)
    servant = LoopBlockingAMH() if spec == "amh" else SyncSink(Tracker(delay=0.02))
    ref = served.activate(servant, "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    # 40 calls at once, 20 ms each: a queue that stands for 0.8 s without admission control.
    ok, shed = await _outcomes([asyncio.ensure_future(proxy.work(i, timeout=20)) for i in range(40)])
    assert len(ok) + len(shed) == 40
    assert ok and len(shed) >= 20, (len(ok), len(shed))
    (op,) = served.server.stats().operations
    assert op.shed == len(shed)
    assert op.shed_queued <= op.shed
    if spec in ("reactive", "amh"):
        assert op.shed_queued == 0  # nothing is queued: calls run on the loop or are refused as they arrive


@pytest.mark.asyncio
async def test_thread_per_request_makes_no_thread_for_a_call_it_sheds_as_a_thread_would_take_it(
        serve: Any, clients: Any) -> None:
    started: list[str] = []

    def first_event(frame: Any, event: str, arg: Any) -> None:  # runs once in each new thread
        started.append(threading.current_thread().name)
        sys.setprofile(None)

    served = serve("thread_per_request(1)", queue_target=0.01, queue_interval=0.05)
    ref = served.activate(SyncSink(Tracker(delay=0.02)), "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    threading.setprofile(first_event)
    try:
        # 40 calls at once, 20 ms each, one thread: the queue stands, and the
        # calls that waited past the target are shed as they reach the front.
        ok, shed = await _outcomes([asyncio.ensure_future(proxy.work(i, timeout=20)) for i in range(40)])
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    assert len(ok) + len(shed) == 40 and len(shed) >= 20, (len(ok), len(shed))
    request_threads = [name for name in started if name.startswith("pyorb-request-")]
    assert len(request_threads) <= len(ok) + 1, (len(request_threads), len(ok), len(shed))


class CountingLock:
    """A lock that counts how often it was taken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0

    def __enter__(self) -> CountingLock:
        self._lock.acquire()
        self.taken += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


@pytest.mark.asyncio
async def test_threaded_sheds_a_call_without_waiting_for_the_lock_the_servants_hold(serve: Any, clients: Any) -> None:
    # Each refusal used to wait for the ORB-wide lock (so for the servant call holding it) only
    # to be refused once it had it: a backlog drained at one servant call per refusal.
    strategy = strategies.ThreadedStrategy()
    lock = strategy._lock = CountingLock()  # type: ignore[assignment]
    served = serve(strategy, queue_target=0.01, queue_interval=0.05)
    ref = served.activate(SyncSink(Tracker(delay=0.02)), "sink")
    (client,) = clients(1)
    proxy = sink(client, ref)
    ok, shed = await _outcomes([asyncio.ensure_future(proxy.work(i, timeout=20)) for i in range(40)])
    assert len(ok) + len(shed) == 40 and len(shed) >= 20, (len(ok), len(shed))
    assert lock.taken <= len(ok) + 2, (lock.taken, len(ok), len(shed))


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", ["thread_pool(1)", "reactive"])
async def test_admission_is_chosen_per_operation(serve: Any, clients: Any, spec: str) -> None:
    from pyorb.server.admission import AdmissionPolicy

    served = serve(spec, queue_target=0.01, queue_interval=0.05)
    shedding = served.activate(SyncSink(Tracker(delay=0.02)), "a")
    patient = served.activate(SyncSink(Tracker(delay=0.02)), "b", admission=AdmissionPolicy())
    (client,) = clients(1)
    for ref, sheds in ((shedding, True), (patient, False)):
        proxy = sink(client, ref)
        ok, shed = await _outcomes([asyncio.ensure_future(proxy.work(i, timeout=20)) for i in range(30)])
        assert bool(shed) is sheds and len(ok) + len(shed) == 30


def test_bad_admission_settings_fail_early() -> None:
    from pyorb.server.admission import AdmissionPolicy

    with pytest.raises(ValueError, match="queue_target must be a positive"):
        pyorb.Config(queue_target=0)
    with pytest.raises(ValueError, match="queue_interval must be a positive"):
        pyorb.Config(queue_interval=-1.0)
    with pytest.raises(ValueError, match="admission limit must be a positive"):
        AdmissionPolicy(limit=0)
    with pytest.raises(ValueError, match="has no operation nope"):
        pyorb.Server().activate(Echo(), "x", admissions={"nope": AdmissionPolicy(target=0.1)})
