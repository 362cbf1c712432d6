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

from pyorb.client.balancer import OutlierDetection
from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing.groupload import LoadResult, run
from pyorb.testing.kit import ServerProcess

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
