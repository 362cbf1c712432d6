"""The ``adaptive`` strategy keeps its promises, shown with real clients over loopback.

The server runs on its own loop thread (an operation that blocks the loop
must not block the test's clients); each pyorb ``Client`` is one
connection.  Loads are closed loops bounded in calls and seconds.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import threading
import time
from typing import Any, Iterator

import pytest

import pyorb
from pyorb.idl import bench_idl
from pyorb.model import Workload
from pyorb.server import strategies
from pyorb.server.strategies.adaptive import AdaptiveStrategy
from pyorb.server.strategies.policy import GLANCES, AdaptivePolicy, Advice, Observation
from pyorb.testing import LoopThread
from pyorb.testing.waiting import wait_until

pytestmark = pytest.mark.integration  # opens sockets or starts processes

IDL = bench_idl()
Bench, Bench__POA = IDL.Bench, IDL.Bench__POA
OP = "Bench::Sink.work"


class Phased(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """work(token) sleeps ``sleep`` seconds (changed by the test) and records what it saw."""

    def __init__(self, sleep: float = 0.0) -> None:
        self.sleep = sleep
        self.lock = threading.Lock()
        self.seen: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.slept: list[float] = []  # how long each sleep took: longer than asked on a loaded machine

    def work(self, token: int) -> int:
        with self.lock:
            self.seen.append(token)
        assert self.gate.wait(10)
        if self.sleep:
            t0 = time.perf_counter()
            time.sleep(self.sleep)
            self.slept.append(time.perf_counter() - t0)
        return token


class AsyncSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    async def work(self, token: int) -> int:
        await asyncio.sleep(0.001)
        return token


@pytest.fixture(scope="module")
def server_loop() -> Iterator[LoopThread]:
    with LoopThread() as lt:
        yield lt


class Served:
    def __init__(self, lt: LoopThread, server: pyorb.Server, strategy: AdaptiveStrategy) -> None:
        self.lt, self.server, self.strategy = lt, server, strategy

    def activate(self, servant: Any, key: str = "sink") -> str:
        async def act() -> None:
            self.server.activate(servant, key)
        self.lt.run(act())
        return self.server.corbaloc(key)

    def on_loop(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)
        return self.lt.run(run())


@pytest.fixture
def serve(server_loop: LoopThread) -> Iterator[Any]:
    servers: list[pyorb.Server] = []

    def start(**kw: Any) -> Served:
        kw.setdefault("window", 0.05)
        strategy = AdaptiveStrategy(create=strategies.create, **kw)

        async def go() -> pyorb.Server:
            server = pyorb.Server(strategy=strategy)
            await server.start()
            return server
        server = server_loop.run(go())
        servers.append(server)
        return Served(server_loop, server, strategy)

    yield start
    for server in servers:
        server_loop.run(server.close())


class Load:
    """Closed-loop clients, each on its own connection, sending unique tokens; counts every reply."""

    def __init__(self, proxies: list[Any]) -> None:
        self.proxies = proxies
        self.sent: list[int] = []
        self.replies: list[int] = []
        self.done_at: list[float] = []
        self.stop = False

    async def _one(self, i: int, proxy: Any, calls: int) -> None:
        for j in range(calls):
            if self.stop:
                return
            token = i * 1_000_000 + j
            self.sent.append(token)
            assert await proxy.work(token) == token
            self.replies.append(token)
            self.done_at.append(time.monotonic())

    async def run(self, seconds: float, calls: int = 100_000) -> None:
        tasks = [asyncio.ensure_future(self._one(i, p, calls)) for i, p in enumerate(self.proxies)]
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*tasks)), seconds)
        except asyncio.TimeoutError:
            self.stop = True  # each client ends after its call in flight
            await asyncio.wait_for(asyncio.gather(*tasks), 10)

    def rate(self, since: float, until: float) -> float:
        return sum(since <= t < until for t in self.done_at) / (until - since)


def proxies(clients: Any, ref: str, n: int) -> list[Any]:
    return [c.resolve(ref, Bench.Sink) for c in clients(n)]


def answered_once(load: Load, servant: Phased, served: Served) -> None:
    """Every call reached the servant once and got its own reply once."""
    assert sorted(load.replies) == sorted(load.sent)
    assert sorted(servant.seen) == sorted(load.sent)  # none lost, none run twice
    (op,) = served.server.stats().operations
    assert (op.served, op.in_flight, op.failed, op.dropped) == (len(load.sent), 0, 0, 0)


# -- spec parsing ------------------------------------------------------------------


def test_adaptive_is_in_the_registry_with_its_arguments() -> None:
    name, bound = strategies.parse("adaptive(max_threads=8, window=0.2)")
    assert (name, dict(bound.arguments)) == ("adaptive", {"max_threads": 8, "window": 0.2, "hold": 2, "gain": 0.1})
    made = strategies.create("adaptive(8, 0.2, hold=3)")
    assert isinstance(made, AdaptiveStrategy)
    assert made.name == "adaptive(max_threads=8, window=0.2, hold=3, gain=0.1)"
    assert "adaptive(max_threads, window, hold, gain)" in strategies.names()


@pytest.mark.parametrize("spec", ["adaptive(0)", "adaptive(window=0)", "adaptive(hold=True)", "adaptive(gain=-1)",
                                  "adaptive(threads=2)"])
def test_bad_adaptive_specs_are_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        strategies.create(spec)


def test_one_registry_instance_per_adaptive_spec() -> None:
    registry = strategies.StrategyRegistry()
    assert registry.get("adaptive(window=0.1)") is registry.get("adaptive")


# -- moves, with the model deciding ------------------------------------------------


@pytest.mark.asyncio
async def test_a_blocking_operation_moves_to_a_pool_and_throughput_rises(
        serve: Any, clients: Any, caplog: pytest.LogCaptureFixture) -> None:
    served = serve(max_threads=16)
    servant = Phased(sleep=0.01)
    load = Load(proxies(clients, served.activate(servant), 8))
    start = time.monotonic()
    with caplog.at_level(logging.INFO, logger="pyorb.server.strategies.adaptive"):
        await load.run(1.5)
    target = served.strategy.targets[OP]
    assert target.startswith("thread_pool(")
    assert 8 <= int(target[len("thread_pool("):-1]) <= 16  # sized by the model: one thread per client
    moves = list(served.strategy.switches)
    assert 1 <= len(moves) <= 3 and moves[0].old == "reactive" and moves[-1].new == target
    sizes = [int(m.new[len("thread_pool("):-1]) for m in moves]
    assert sizes == sorted(sizes)  # only ever up: the first windows may not have seen every client yet
    assert moves[-1].glance <= 5 * GLANCES  # within five windows of its first calls
    moved = moves[-1].at - start
    # Inline, 8 clients share one loop blocked 10 ms a call (longer on a loaded machine, which wakes
    # sleepers late): at most one call per sleep; on the pool, about 8 times that.
    inline_rate = 1 / statistics.mean(servant.slept)
    assert load.rate(start + moved + 0.2, start + 1.5) > 3 * inline_rate, inline_rate
    assert any("moves from reactive to thread_pool" in r.getMessage() and "blocks its thread" in r.getMessage()
               for r in caplog.records if r.levelno == logging.INFO)
    seen = served.strategy.last[OP]
    assert 0.005 <= seen.delay <= max(servant.slept) and seen.cpu < 0.005, (seen, max(servant.slept))
    (gauges,) = served.server.stats().strategies
    used = {int(m.new[len("thread_pool("):-1]) for m in moves}
    assert gauges.name == served.strategy.name and gauges.threads == sum(used)  # a pool it left keeps its threads
    answered_once(load, servant, served)


@pytest.mark.asyncio
async def test_a_fast_operation_stays_inline(serve: Any, clients: Any) -> None:
    served = serve()
    servant = Phased()
    load = Load(proxies(clients, served.activate(servant), 4))
    await load.run(0.8, calls=1500)
    assert served.strategy.targets == {OP: "reactive"}
    assert served.strategy.moves == 0
    assert served.server.stats().strategies[0].threads == 0
    answered_once(load, servant, served)


@pytest.mark.asyncio
async def test_an_operation_that_turns_fast_comes_back_and_does_not_flap(serve: Any, clients: Any) -> None:
    served = serve(max_threads=4)
    servant = Phased(sleep=0.01)
    load = Load(proxies(clients, served.activate(servant), 2))
    runner = asyncio.ensure_future(load.run(6.0))
    try:
        await wait_until(lambda: served.strategy.targets.get(OP, "").startswith("thread_pool"))
        await asyncio.sleep(0.3)
        servant.sleep = 0.0  # the operation turns fast: the hand-off to a thread now costs more than it saves
        await wait_until(lambda: served.strategy.targets[OP] == "reactive")
        back, window = served.strategy.moves, served.strategy.policy.windows
        await wait_until(lambda: served.strategy.policy.windows >= window + 10)  # a steady load: no more moves
        assert served.strategy.moves == back == 2
        assert served.strategy.targets[OP] == "reactive"
    finally:
        load.stop = True
        await runner
    answered_once(load, servant, served)


@pytest.mark.asyncio
async def test_every_call_is_answered_once_across_moves(serve: Any, clients: Any) -> None:
    served = serve(max_threads=4)
    servant = Phased()
    load = Load(proxies(clients, served.activate(servant), 6))
    runner = asyncio.ensure_future(load.run(5.0, calls=3000))
    try:
        for spec in ("thread_pool(2)", "reactive", "thread_pool(4)", "thread_pool(1)", "reactive", "thread_pool(3)"):
            await wait_until(lambda: OP in served.strategy.targets)
            served.on_loop(served.strategy.move, OP, spec, "test")
            await asyncio.sleep(0.1)
    finally:
        load.stop = True
        await runner
    assert served.strategy.moves >= 6
    assert len(load.sent) > 100
    answered_once(load, servant, served)


@pytest.mark.asyncio
async def test_a_connection_s_calls_start_in_order_when_its_operation_moves_back_inline(
        serve: Any, clients: Any) -> None:
    served = serve(decide=_never)
    servant = Phased()
    ref = served.activate(servant)
    (proxy,) = proxies(clients, ref, 1)
    assert await proxy.work(100) == 100
    served.on_loop(served.strategy.move, OP, "thread_pool(1)")
    servant.gate.clear()  # the pool's one thread blocks in the first call; the rest queue behind it
    early = [asyncio.ensure_future(proxy.work(i)) for i in range(5)]  # 0 blocks, 1-4 queue
    await wait_until(lambda: served.server.stats().strategies[0].queued == 4)
    served.on_loop(served.strategy.move, OP, "reactive")
    late = [asyncio.ensure_future(proxy.work(i)) for i in range(5, 8)]
    await asyncio.sleep(0.1)
    assert servant.seen == [100, 0]  # the new calls wait behind the queued ones, not inline ahead of them
    servant.gate.set()
    assert await asyncio.gather(*early, *late) == list(range(8))
    assert servant.seen == [100, *range(8)]
    await proxy.work(8)  # the queue drained: from now on inline
    assert served.server.stats().strategies[0].queued == 0
    assert [(s.old, s.new) for s in served.strategy.switches] == [("reactive", "thread_pool(1)"),
                                                                   ("thread_pool(1)", "reactive")]


@pytest.mark.asyncio
async def test_coroutine_methods_run_on_the_loop_and_are_not_moved(serve: Any, clients: Any) -> None:
    served = serve()
    ref = served.activate(AsyncSink())
    results = await asyncio.gather(*(p.work(i) for i, p in enumerate(proxies(clients, ref, 4)) for _ in range(5)))
    assert sorted(results) == sorted(i for i in range(4) for _ in range(5))
    assert served.strategy.targets == {}
    assert served.server.stats().strategies[0].threads == 0


class Scripted:
    """A model answering from a script, and a clock the test turns."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, float, float]] = []  # (spec, its throughput, the current target's)
        self.now = 100.0

    def decide(self, workload: Workload, current: str) -> tuple[Advice, float]:
        spec, rate, now = self.answers.pop(0)
        return _Rec(spec, rate, "scripted"), now

    def policy(self, hold: int = 2, gain: float = 0.1) -> AdaptivePolicy:
        policy = AdaptivePolicy(32, hold, gain, decide=self.decide, clock=lambda: self.now)
        policy.add("X.op", "reactive")
        return policy


def _window(policy: AdaptivePolicy) -> None:
    for _ in range(GLANCES):
        policy.glance()


def test_the_move_needs_the_recommendation_to_hold_and_to_gain() -> None:
    """Hysteresis alone, driven by a scripted model window by window."""
    model = Scripted()
    policy = model.policy()
    seen = Observation(10, 4, 0.001, 0.0, 0.001)
    script = [("thread_pool(4)", 105.0, 100.0),  # within the gain: no candidate
              ("thread_pool(4)", 140.0, 100.0),  # streak 1
              ("reactive", 100.0, 100.0),        # the current target again: streak reset
              ("thread_pool(4)", 140.0, 100.0),  # streak 1
              ("thread_pool(4)", 140.0, 100.0)]  # streak 2: moves
    model.answers.extend(script)
    moves = [policy.judge("X.op", seen) for _ in script]
    assert moves[:-1] == [None] * 4 and moves[-1] is not None
    assert (moves[-1].old, moves[-1].new, moves[-1].at) == ("reactive", "thread_pool(4)", 100.0)
    assert policy.state("X.op").target == "thread_pool(4)"
    model.answers.append(("thread_pool(64)", 1000.0, 100.0))  # urgent (10x): one window is enough, capped
    assert policy.judge("X.op", seen) is not None and policy.state("X.op").target == "thread_pool(32)"
    _window(policy)
    model.answers.append(("thread_pool(4)", 300.0, 100.0))  # back to where it came from, soon: flapping
    assert policy.judge("X.op", seen) is not None
    assert policy.state("X.op").target == "thread_pool(4)" and policy.state("X.op").hold == 4  # 4 windows now
    model.answers.extend([("thread_pool(32)", 1000.0, 100.0)] * 3)
    assert [policy.judge("X.op", seen) for _ in range(3)] == [None] * 3  # 3 windows < 4, urgent or not
    assert policy.state("X.op").target == "thread_pool(4)"


def test_a_move_back_long_after_does_not_count_as_flapping() -> None:
    model = Scripted()
    policy = model.policy()
    seen = Observation(10, 4, 0.001, 0.0, 0.001)
    model.answers.append(("thread_pool(8)", 1000.0, 100.0))
    assert policy.judge("X.op", seen) is not None
    for _ in range(8 * 2 + 1):  # more than BACK_AND_FORTH times hold windows
        _window(policy)
    model.answers.append(("reactive", 1000.0, 100.0))
    move = policy.judge("X.op", seen)
    assert move is not None and move.glance == 17 * GLANCES and policy.state("X.op").hold == 2


def test_delay_is_blocking_not_preemption_nor_the_gil() -> None:
    from pyorb.server.strategies.adaptive import _Op
    strategy = AdaptiveStrategy(create=strategies.create, decide=_never)
    op = _Op("X.op")
    strategy.finished(op, 0.003, 0.001, strategy.servant_cpu, False)  # preempted 2 ms: it never waited
    strategy.finished(op, 0.003, 0.001, strategy.servant_cpu, True)  # blocked 2 ms, nothing else ran
    strategy.finished(op, 0.003, 0.001, strategy.servant_cpu - 0.0015, True)  # 1.5 ms of it others held the GIL
    assert [d for _, _, d in op.fresh] == [0.0, pytest.approx(0.002), pytest.approx(0.0005)]
    strategy.finished(op, 0.001, 0.001, strategy.servant_cpu, False, weight=5)  # stands for 4 untimed calls too
    assert strategy.servant_cpu == pytest.approx(0.003 + 0.005)


def test_a_phase_change_is_judged_on_the_calls_since_the_change() -> None:
    """A glance whose latest samples all differ sharply restarts the window with them alone."""
    from pyorb.server.strategies.adaptive import MIN_CALLS, _Op
    op = _Op("X.op")
    op.connections = {1, 2, 3}
    assert op.shifted([(0.005, 0.0, 0.005)] * 8) is None  # no window seen yet: nothing to differ from
    op.reference = Observation(40, 3, 0.0005, 0.0, 0.0005)  # the last window: 0.5 ms CPU, no delay
    noisy = [(0.0006, 0.0006, 0.0), (0.0009, 0.0004, 0.0004)]  # within the floor: noise
    old, new = [(0.0005, 0.0005, 0.0)] * 3, [(0.005, 0.0, 0.005)] * MIN_CALLS
    assert op.shifted(noisy * 4) is None
    assert op.shifted([*old, *new[1:]]) is None  # too few new calls yet
    assert op.shifted([*new, *old]) is None  # the latest are like the window: no change (an outlier burst)
    changed = op.shifted([*old, *noisy, *new])
    assert changed is not None and (changed.calls, changed.clients) == (MIN_CALLS, 3)
    assert (changed.cpu, changed.delay) == (0.0, pytest.approx(0.005))  # the old calls are left out
    assert op.samples == new and op.reference == changed


def test_a_phase_change_moves_at_once_only_for_a_large_gain() -> None:
    model = Scripted()
    policy = model.policy()
    state = policy.state("X.op")
    state.candidate, state.streak = "thread_pool(4)", 1
    seen = Observation(4, 8, 0.0, 0.005, 0.005)
    model.answers.append(("thread_pool(4)", 140.0, 100.0))  # 1.4x: waits for the windows
    assert policy.judge("X.op", seen, urgent_only=True) is None
    assert (state.target, state.candidate, state.streak) == ("reactive", "thread_pool(4)", 1)  # streak untouched
    model.answers.append(("thread_pool(8)", 800.0, 100.0))
    move = policy.judge("X.op", seen, urgent_only=True)
    assert move is not None and state.target == "thread_pool(8)" and "changed over the last 4 calls" in move.reason
    state.hold = 4  # it flapped once: no more moves on one glance, however large the gain
    model.answers.append(("thread_pool(32)", 8000.0, 100.0))
    assert policy.judge("X.op", seen, urgent_only=True) is None
    assert state.target == "thread_pool(8)"


def test_an_inline_call_that_starts_blocking_moves_before_the_next_glance() -> None:
    """The strategy judges a phase change as the blocking calls return on the loop, not at a glance."""
    from pyorb.server.strategies.adaptive import MIN_CALLS, _Op
    model = Scripted()
    strategy = AdaptiveStrategy(max_threads=16, create=strategies.create, decide=model.decide)
    op = _Op("X.op")
    strategy.policy.add(op.name, op.target)
    op.connections = set(range(8))
    op.reference = Observation(40, 8, 0.0005, 0.0, 0.0005)  # the last window: fast calls
    model.answers.append(("thread_pool(8)", 800.0, 100.0))
    for n in range(1, MIN_CALLS + 1):
        assert op.target == "reactive", n
        strategy.finished(op, 0.005, 0.0, strategy.servant_cpu, True, inline=True)  # blocked 5 ms
    assert op.target == "thread_pool(8)" and strategy.moves == 1
    assert strategy.policy.glances == 0 and strategy.switches[0].glance == 0
    strategy.close()


@pytest.mark.asyncio
async def test_a_call_that_starts_blocking_leaves_the_loop_within_a_fraction_of_a_window(
        serve: Any, clients: Any) -> None:
    served = serve(window=1.0, max_threads=16)  # glances every 0.2 s
    servant = Phased()
    load = Load(proxies(clients, served.activate(servant), 8))
    runner = asyncio.ensure_future(load.run(4.0))
    try:
        await asyncio.sleep(1.3)  # fast calls: a window inline, the reference a change differs from
        assert served.strategy.targets[OP] == "reactive"
        changed = served.strategy.policy.glances
        servant.sleep = 0.005
        await wait_until(lambda: served.strategy.targets[OP] != "reactive")
        first = served.strategy.switches[0]
        assert first.glance - changed <= 1  # within a glance: judged as the blocking calls return
        assert first.new == "thread_pool(8)"  # sized for the new calls and every client
        await asyncio.sleep(0.5)
        assert served.strategy.moves == 1
    finally:
        load.stop = True
        await runner
    answered_once(load, servant, served)


@pytest.mark.asyncio
async def test_only_a_sample_of_a_fast_operation_s_calls_is_timed(serve: Any, clients: Any) -> None:
    from pyorb.server.strategies import adaptive
    timed: list[int] = []
    served = serve(window=0.2)
    original = served.strategy.finished

    def counting(op: Any, wall: float, cpu: float, others0: float, waited: bool, weight: int = 1,
                 inline: bool = False) -> None:
        timed.append(weight)
        original(op, wall, cpu, others0, waited, weight, inline)

    served.strategy.finished = counting  # type: ignore[method-assign]
    servant = Phased()
    load = Load(proxies(clients, served.activate(servant), 4))
    await load.run(1.0, calls=1500)
    assert len(load.sent) > 3 * len(timed)  # ~40 timed per 0.2 s window, hundreds served
    assert len(timed) <= adaptive.SAMPLES * (1.0 / 0.2 + 2)
    assert sum(timed) <= len(load.sent)  # each timed call stands for itself and the untimed ones before it
    assert served.strategy.last[OP].calls >= adaptive.MIN_CALLS
    answered_once(load, servant, served)


@pytest.mark.asyncio
async def test_a_pinned_strategy_times_its_calls_but_never_moves(serve: Any, clients: Any) -> None:
    served = serve(pin="thread_pool(4)")
    servant = Phased(sleep=0.002)
    load = Load(proxies(clients, served.activate(servant), 4))
    await load.run(0.6)
    assert served.strategy.targets == {OP: "thread_pool(4)"} and served.strategy.moves == 0
    # The blocking it measured: at least most of the 2 ms asked for, at most the longest sleep the
    # servant itself saw (a loaded machine wakes sleepers late: the model must see that too).
    assert 0.001 <= served.strategy.last[OP].delay <= max(servant.slept), (served.strategy.last[OP], servant.slept)
    answered_once(load, servant, served)


class _Rec:
    def __init__(self, strategy: str, throughput: float, reason: str) -> None:
        self.strategy, self.throughput, self.reason = strategy, throughput, reason


def _never(workload: Workload, current: str) -> tuple[Advice, float]:
    return _Rec(current, 1.0, "scripted: stay"), 1.0
