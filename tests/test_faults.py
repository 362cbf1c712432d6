"""Faults under closed-loop load through an object group.

Replicas are the sink (``python -m pyorb.servers.sink``) in their own
processes over loopback; the load is :mod:`pyorb.testing.groupload`, whose
every call ends ok, failed with a CORBA exception, or counted as lost.
A replica is stalled with SIGSTOP (only the pid this test started, resumed
with SIGCONT in ``finally``), or reached through toxiproxy
(:mod:`pyorb.testing.toxiproxy`), which adds latency, limits bandwidth,
resets connections or stops forwarding.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import time
from typing import Callable, Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.client.balancer import Hedging, OutlierDetection
from pyorb.giop.ior import IOR, GroupComponent, build_ior, group_ior
from pyorb.testing.groupload import LoadResult, run
from pyorb.testing.kit import ServerProcess
from pyorb.testing.toxiproxy import Proxy, Toxiproxy, find_server

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench
import Bench__POA  # noqa: E402  (made by load_idl)

STALL_AT = 2.0  # seconds into the run
CALLERS = 60
TIMEOUT = 2.0


@pytest.fixture
def replicas() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        for _ in range(3):
            started.append(ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--delay", "0.02"]))
        yield started
    finally:
        for process in started:
            if process.proc.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
            process.stop()


def _group(replicas: list[ServerProcess], group_id: int) -> IOR:
    return group_ior([IOR.from_string(p.ior) for p in replicas], GroupComponent("pyorb-faults", group_id))


def _stalled_run(replicas: list[ServerProcess], idempotent: bool,
                 detection: OutlierDetection | None = OutlierDetection()) -> LoadResult:
    victim = replicas[1].pid
    try:
        return asyncio.run(run(_group(replicas, 1 + idempotent), STALL_AT + 3.0, CALLERS, TIMEOUT,
                               idempotent=idempotent, detection=detection,
                               events=[(STALL_AT, lambda: os.kill(victim, signal.SIGSTOP))]))
    finally:
        os.kill(victim, signal.SIGCONT)


def _check_accounting(result: LoadResult) -> None:
    assert result.lost == 0 and result.duplicates == 0 and result.late == 0, result


def test_a_stalled_replica_holds_only_the_callers_it_had(replicas: list[ServerProcess]) -> None:
    """60 callers over three replicas, one SIGSTOPped: without outlier
    detection every caller ends up waiting on it until its 2 s timeout; with
    it, about the third that were on it when it stopped, and the others go on."""
    result = _stalled_run(replicas, idempotent=False)
    _check_accounting(result)
    assert set(result.errors) <= {"TIMEOUT COMPLETED_MAYBE"}, result.errors
    # The callers stuck on it time out once each: about 20, more before it is
    # passed over (on a loaded machine, up to about 35), and a back-off probe.
    assert 0 < result.failed <= CALLERS // 3 + 20, result.errors
    before = result.rate(STALL_AT - 1.0, STALL_AT)
    during = result.rate(STALL_AT + 0.5, STALL_AT + 1.5)  # well before the 2 s timeout
    assert before > 0 and during > 0.3 * before, (before, during, result.bins)


def test_idempotent_calls_leave_a_stalled_replica_without_failing(replicas: list[ServerProcess]) -> None:
    """Declared idempotent, the calls the stalled replica held are re-sent to
    the others once it is ejected: no caller sees an error, none gets two answers."""
    result = _stalled_run(replicas, idempotent=True)
    _check_accounting(result)
    assert result.errors == {}, result.errors
    before = result.rate(STALL_AT - 1.0, STALL_AT)
    during = result.rate(STALL_AT + 0.5, STALL_AT + 1.5)
    assert before > 0 and during > 0.3 * before, (before, during, result.bins)


def test_outlier_detection_rejects_nonsense() -> None:
    for bad in ({"multiple": 0.5}, {"floor": -1.0}, {"weight": 0.0}, {"skew": 0.9}):
        with pytest.raises(ValueError, match="outlier detection needs"):
            OutlierDetection(**bad)


def test_hedging_takes_idempotent_calls_off_a_stalled_member_and_never_non_idempotent_ones(
        replicas: list[ServerProcess]) -> None:
    """Outlier detection off, so only hedging can help: with one of three
    replicas SIGSTOPped, an idempotent call sent to it is answered by
    another replica within a small part of its 5 s timeout, and its own
    copy is cancelled; a call not declared idempotent waits on the stalled
    replica until its timeout and is never copied."""
    victim = replicas[1]

    async def run() -> tuple[list[float], list[object], dict[str, int], list[object]]:
        group = _group(replicas, 7)
        async with pyorb.Client(pyorb.Config(call_timeout=5.0), outlier_detection=None,
                                hedging=Hedging()) as client:
            safe = client.resolve(group, Bench.Sink, idempotent={"work"})
            plain = client.resolve(group, Bench.Sink)
            for token in range(12):  # every member's round trip is known
                assert await safe.work(token) == token
            os.kill(victim.pid, signal.SIGSTOP)
            took = []
            for token in range(100, 106):  # round robin: two of these go to the stalled member
                started = time.monotonic()
                assert await safe.work(token) == token
                took.append(time.monotonic() - started)
            (stats,) = client.group_stats().values()
            hedged = dict(vars(stats))
            plain_outcomes = await asyncio.gather(*(plain.work(t, timeout=1.0) for t in range(200, 206)),
                                                  return_exceptions=True)
            os.kill(victim.pid, signal.SIGCONT)
            # The stalled copies' replies come late, if at all, and reach no one.
            after = [await safe.work(t) for t in range(300, 312)]
            return took, plain_outcomes, {**hedged, "plain hedges": stats.hedges - hedged["hedges"]}, after

    try:
        took, plain_outcomes, hedged, after = asyncio.run(run())
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    assert max(took) < 2.0, took  # not the 5 s timeout: another replica answered
    assert hedged["hedges"] >= 1 and hedged["won"] >= 1, hedged
    assert hedged["plain hedges"] == 0, hedged
    timed_out = [o for o in plain_outcomes if isinstance(o, CORBA.TIMEOUT)]
    assert timed_out and all(o == t for o, t in zip(plain_outcomes, range(200, 206))
                             if not isinstance(o, CORBA.TIMEOUT)), plain_outcomes
    assert after == list(range(300, 312))


def test_hedges_stay_within_their_budget() -> None:
    m = Members(hedging=Hedging(budget=0.1, burst=2.0))
    for _ in range(5):
        m.answer(m.a, 0.01)
        m.answer(m.b, 0.02)
    delays, sent = [], []
    for _ in range(100):  # 100 calls to a, each found unanswered after its delay
        delays.append(m.balancer.hedge_delay(m.a))
        sent.append(m.balancer.hedge_to({m.a}))
    # a's round trip plus two deviations (5 ms, then less), above its 10 ms mean
    assert all(d is not None and 0.01 < d < 0.03 for d in delays), delays[:3]
    hedges = [r.endpoint for r in sent if r is not None]
    # The burst (2) and a tenth of the calls, give or take rounding: never more.
    assert 10 <= len(hedges) <= 2 + 10 and set(hedges) == {m.b}, len(hedges)
    stats = m.balancer.hedge_stats
    assert (stats.calls, stats.hedges, stats.throttled) == (100, len(hedges), 100 - len(hedges))
    m.balancer.failed(m.b)  # backing off: no hedge goes there
    assert m.balancer.hedge_to({m.a}) is None and m.balancer.hedge_stats.hedges == len(hedges)


def test_hedging_rejects_nonsense() -> None:
    for bad in ({"delay": 0.0}, {"min_delay": -1.0}, {"max_hedges": 0}, {"budget": 0.0}, {"budget": 1.5},
                {"burst": 0.5}):
        with pytest.raises(ValueError, match="hedging needs"):
            Hedging(**bad)  # type: ignore[arg-type]


class Counting(Bench__POA.Sink):  # type: ignore[misc]
    """A replica that counts the calls it gets and answers them, or with ``failure`` if given."""

    def __init__(self, failure: CORBA.SystemException | None = None) -> None:
        self.failure, self.calls = failure, 0

    def work(self, token: int) -> int:
        self.calls += 1
        if self.failure is not None:
            raise self.failure
        return token


def _through_refusing_member(failure: CORBA.SystemException, idempotent: bool) -> tuple[list[object], int, int]:
    """20 calls through a group of a replica answering ``failure`` and a healthy
    one: each call's outcome, and how many calls each replica saw."""

    async def run() -> tuple[list[object], int, int]:
        async with pyorb.Server() as bad_server, pyorb.Server() as good_server:
            bad, good = Counting(failure), Counting()
            members = [IOR.from_string(bad_server.ior(bad_server.activate(bad, "Sink"))),
                       IOR.from_string(good_server.ior(good_server.activate(good, "Sink")))]
            async with pyorb.Client(pyorb.Config(call_timeout=10)) as client:
                sink = client.resolve(group_ior(members, GroupComponent("pyorb-faults", 9)), Bench.Sink,
                                      idempotent={"work"} if idempotent else ())
                outcomes = await asyncio.gather(*(sink.work(i) for i in range(20)), return_exceptions=True)
            return outcomes, bad.calls, good.calls

    return asyncio.run(run())


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_member_that_answers_transient_completed_no_passes_the_call_on(idempotent: bool) -> None:
    """TRANSIENT completed NO says the call did not run: another member takes it, idempotent or not."""
    outcomes, refused, served = _through_refusing_member(CORBA.TRANSIENT(0, CORBA.COMPLETED_NO), idempotent)
    assert outcomes == list(range(20))
    assert refused == 10 and served == 20  # round robin sent it half; each came back once, answered elsewhere


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_member_that_answers_comm_failure_maybe_passes_on_only_idempotent_calls(idempotent: bool) -> None:
    """COMM_FAILURE completed MAYBE: the call may have run, so only an idempotent call goes to another member."""
    outcomes, refused, served = _through_refusing_member(CORBA.COMM_FAILURE(0, CORBA.COMPLETED_MAYBE), idempotent)
    if idempotent:
        assert outcomes == list(range(20)) and (refused, served) == (10, 20)
    else:
        failed = [o for o in outcomes if isinstance(o, CORBA.COMM_FAILURE)]
        assert len(failed) == refused == 10 and served == 10
        assert all(f.completed == CORBA.COMPLETED_MAYBE for f in failed)
        assert all(o == i for i, o in enumerate(outcomes) if not isinstance(o, CORBA.COMM_FAILURE))


# -- one replica behind toxiproxy ---------------------------------------------------

FAULT_AT = 1.5  # seconds into a run
PROXIED_CALLERS = 30


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[Toxiproxy]:
    if find_server() is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs toxiproxy (.ci/run), yet it is not there")
        pytest.skip("no toxiproxy server (go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.9.0)")
    with Toxiproxy() as server:
        yield server


@pytest.fixture
def proxied(toxiproxy: Toxiproxy, replicas: list[ServerProcess]) -> Iterator[tuple[IOR, Proxy]]:
    """A group of the three replicas, the second reached through a proxy."""
    middle = replicas[1]
    proxy = toxiproxy.proxy(f"replica{middle.pid}", ("127.0.0.1", middle.port))
    members = [IOR.from_string(replicas[0].ior),
               build_ior("IDL:Bench/Sink:1.0", proxy.host, proxy.port, b"Sink"),
               IOR.from_string(replicas[2].ior)]
    try:
        yield group_ior(members, GroupComponent("pyorb-faults", proxy.port)), proxy
    finally:
        toxiproxy.request("DELETE", f"/proxies/{proxy.name}")


def _proxied_run(group: IOR, idempotent: bool, fault: Callable[[], object] | None = None, seconds: float = FAULT_AT + 2.5,
                 callers: int = PROXIED_CALLERS) -> LoadResult:
    events = [(FAULT_AT, fault)] if fault is not None else []
    result = asyncio.run(run(group, seconds, callers, TIMEOUT, idempotent=idempotent,
                             events=events))
    _check_accounting(result)
    assert result.ok > 0, result
    return result


def test_latency_and_jitter_on_a_member_cost_no_call(proxied: tuple[IOR, Proxy]) -> None:
    group, proxy = proxied
    proxy.latency(100, jitter=50)
    proxy.latency(20, jitter=10, stream="upstream")
    result = _proxied_run(group, idempotent=False)
    assert result.errors == {}, result.errors


def test_a_slow_link_to_a_member_costs_no_call(proxied: tuple[IOR, Proxy]) -> None:
    """Replies cut into 3-byte pieces, and a 2 KB/s link: calls take longer, none fails or is lost."""
    group, proxy = proxied
    proxy.slicer(3, size_variation=2, delay_us=200)
    proxy.bandwidth(2)
    result = _proxied_run(group, idempotent=False)
    assert result.errors == {}, result.errors


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_member_whose_connections_are_reset(proxied: tuple[IOR, Proxy], idempotent: bool) -> None:
    """From the fault on, every connection to the member is reset: the calls it
    held fail with COMM_FAILURE completed MAYBE, or go elsewhere if idempotent;
    it is then left out, not handed a third of the calls on each new connection."""
    group, proxy = proxied
    result = _proxied_run(group, idempotent, lambda: proxy.reset_peer())
    if idempotent:
        assert result.errors == {}, result.errors
    else:
        assert set(result.errors) == {"COMM_FAILURE COMPLETED_MAYBE"}, result.errors
        assert result.failed <= PROXIED_CALLERS // 3 + 10, result.errors


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_member_that_stops_forwarding_is_ejected(proxied: tuple[IOR, Proxy], idempotent: bool) -> None:
    """A half-open member (its link stops carrying data, connections stay up)
    holds the calls it had; outlier detection leaves it out well before the
    2 s timeout, and its idempotent calls go elsewhere."""
    group, proxy = proxied
    result = _proxied_run(group, idempotent, lambda: proxy.stall())
    if idempotent:
        assert result.errors == {}, result.errors
    else:
        assert set(result.errors) == {"TIMEOUT COMPLETED_MAYBE"}, result.errors
        assert result.failed <= PROXIED_CALLERS // 3 + 10, result.errors
    before = result.rate(FAULT_AT - 1.0, FAULT_AT)
    during = result.rate(FAULT_AT + 0.5, FAULT_AT + 1.5)
    assert before > 0 and during > 0.3 * before, (before, during, result.bins)


def test_a_lone_idempotent_caller_leaves_a_stalled_member_before_its_timeout(proxied: tuple[IOR, Proxy]) -> None:
    """One caller, so no other call's placement notices the stall: the client's
    own check on a timer ejects the member and re-sends the call."""
    group, proxy = proxied
    result = _proxied_run(group, True, lambda: proxy.stall(), callers=1)
    assert result.errors == {}, result.errors
    # Calls went on within the 2 s timeout after the stall: no gap of a whole timeout.
    after = result.bins[int(FAULT_AT / result.bin):]
    gap = max(len(list(run)) for zero, run in itertools.groupby(after, key=lambda n: n == 0) if zero) if 0 in after else 0
    assert gap * result.bin < 1.0, after


def test_the_stall_ab_benchmark_prints_its_table() -> None:
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "benchmarks.stall_ab", "--repeats", "1", "--callers", "12", "--stall-at", "1"],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| on ", "| off "))]
    assert [row.split("|")[1:4] for row in rows] == [
        [" off ", " no ", " off "], [" off ", " yes ", " off "], [" on ", " no ", " off "], [" on ", " yes ", " off "],
        [" off ", " yes ", " on "], [" on ", " yes ", " on "]], done.stdout


# -- the balancer's rules, on a clock the test moves -----------------------------------


class Members:
    """Two members' pending calls as a client would report them, on a clock the test sets."""

    def __init__(self, hedging: Hedging | None = None) -> None:
        from pyorb.client.calls import route_for

        group = group_ior([build_ior("IDL:Bench/Sink:1.0", "127.0.0.1", port, b"Sink") for port in (5001, 5002)],
                          GroupComponent("pyorb-faults", 99))
        route = route_for(group, (1, 2))
        assert route is not None and route.group is not None
        self.now = 100.0
        self.sent: dict[object, list[float]] = {m.endpoint: [] for m in route.group.members}
        self.ejected: list[int] = []
        from pyorb.client.balancer import Balancer

        self.balancer = Balancer(route.group, "round_robin", lambda e: len(self.sent[e]), lambda: self.now,
                                 detection=OutlierDetection(), oldest=lambda e: min(self.sent[e], default=None),
                                 ejected=lambda e: self.ejected.append(e.port), hedging=hedging)
        self.a, self.b = (m.endpoint for m in route.group.members)

    def answer(self, endpoint: object, after: float) -> None:
        """A call to ``endpoint`` sent now and answered ``after`` seconds later."""
        self.balancer.replied(endpoint, self.now - after)  # type: ignore[arg-type]


def test_the_last_member_answering_is_never_ejected_and_back_off_grows_then_shrinks() -> None:
    m = Members()
    for _ in range(5):
        m.answer(m.a, 0.01)
        m.answer(m.b, 0.01)
    m.sent[m.a].append(m.now)
    m.sent[m.b].append(m.now)
    m.now += 0.5  # both silent for far longer than max(0.2, 5 x 10 ms)
    m.balancer.sweep()
    assert m.ejected == [5001]  # one of them; the other is all that is left
    assert m.balancer.is_down(m.a) and not m.balancer.is_down(m.b)
    m.now += 0.3  # past the first back-off (0.25 s): one probe at a time, and it is still stalled
    m.balancer.sweep()
    assert m.ejected == [5001, 5001] and m.balancer.is_down(m.a)
    m.now += 0.3  # the second back-off is 0.5 s: still out
    assert m.balancer.is_down(m.a)
    m.sent[m.a].clear()  # the stalled calls timed out
    m.now += 0.3
    assert not m.balancer.is_down(m.a) and m.balancer.pick() is not None
    m.answer(m.a, 0.01)  # the probe came back: a member again, its next back-off shorter
    assert not m.balancer.is_down(m.a)
