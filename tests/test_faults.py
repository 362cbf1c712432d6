"""Faults under closed-loop load through an object group: a stalled replica.

Replicas are the sink (``python -m pyorb.servers.sink``) in their own
processes over loopback; the load is :mod:`pyorb.testing.groupload`, whose
every call ends ok, failed with a CORBA exception, or counted as lost.
A replica is stalled with SIGSTOP (only the pid this test started, resumed
with SIGCONT in ``finally``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.client.balancer import OutlierDetection
from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing.groupload import LoadResult, run
from pyorb.testing.kit import ServerProcess

Bench = pyorb.load_idl("idl/bench.idl").Bench
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
    # The callers stuck on it time out once each (about 20, a few more
    # before it is passed over), plus at most a back-off probe.
    assert 0 < result.failed <= CALLERS // 3 + 15, result.errors
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
            OutlierDetection(**bad)  # type: ignore[arg-type]


class Refusing(Bench__POA.Sink):  # type: ignore[misc]
    """A replica that answers every call with ``failure`` (counting them) instead of running it."""

    def __init__(self, failure: CORBA.SystemException) -> None:
        self.failure, self.calls = failure, 0

    def work(self, token: int) -> int:
        self.calls += 1
        raise self.failure


class Counting(Bench__POA.Sink):  # type: ignore[misc]
    def __init__(self) -> None:
        self.calls = 0

    def work(self, token: int) -> int:
        self.calls += 1
        return token


def _through_refusing_member(failure: CORBA.SystemException, idempotent: bool) -> tuple[list[object], int, int]:
    """20 calls through a group of a replica answering ``failure`` and a healthy
    one: each call's outcome, and how many calls each replica saw."""

    async def run() -> tuple[list[object], int, int]:
        async with pyorb.Server() as bad_server, pyorb.Server() as good_server:
            bad, good = Refusing(failure), Counting()
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
