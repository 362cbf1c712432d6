"""Overload: fair thread shortage, and admission control that sheds early instead of collapsing.

The rule (pyorb.server.admission.CoDel) is checked alone with a fake clock;
the behaviour with real server processes and raw or pyorb clients over
loopback: a flooding connection cannot starve another under a thread cap,
no call waits past the queue limit, and an open-loop load at ten times a
sink's capacity is shed fast while the calls accepted keep their latency.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.admission_calls import QueuedCall as _Queued
from tests.attacks import flow_attacks as fa
from pyorb.loadtest.openloop import capacity, offer
from pyorb.loadtest.stats import LoadResult, read_result
from pyorb.server.admission import SHED_MINOR, AdmissionPolicy, CoDel, LoopLag
from pyorb.testing.kit import ServerProcess

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
TRANSIENT = "IDL:omg.org/CORBA/TRANSIENT:1.0"
COMPLETED_NO = 1


# -- the rule ------------------------------------------------------------------------


def test_a_queue_that_drains_within_each_interval_is_never_shed() -> None:
    codel = CoDel(target=0.05, interval=0.1)
    now = 0.0
    for _ in range(100):  # long waits, but one short one every 80 ms: a good queue
        for sojourn in (0.3, 0.4, 0.5, 0.01):
            assert not codel.observe(sojourn, now)
            now += 0.02
    assert not codel.dropping


def test_a_standing_queue_is_shed_until_a_call_waits_less_than_the_target() -> None:
    codel = CoDel(target=0.05, interval=0.1)
    assert [codel.observe(0.2, t) for t in (0.0, 0.05, 0.099)] == [False, False, False]  # not yet an interval
    assert codel.observe(0.2, 0.1) and codel.dropping  # above target for a whole interval
    assert codel.observe(0.06, 0.3)  # still above: keeps shedding, however long
    assert not codel.observe(0.049, 0.31) and not codel.dropping  # below target: stops at once
    assert not codel.observe(0.2, 0.32)  # above again: a new interval must pass first
    assert not codel.observe(0.2, 0.419)
    assert codel.observe(0.2, 0.421)


def test_asking_whether_a_call_would_be_shed_decides_nothing() -> None:
    codel, twin = CoDel(target=0.05, interval=0.1), CoDel(target=0.05, interval=0.1)
    for sojourn, now in ((0.2, 0.0), (0.2, 0.05), (0.2, 0.1), (0.2, 0.2), (0.01, 0.21), (0.2, 0.25), (0.3, 0.3)):
        asked = codel.would_shed(sojourn, now)
        assert codel.would_shed(sojourn, now) is asked  # asking twice changes nothing
        assert codel.observe(sojourn, now) is asked is twin.observe(sojourn, now)


@pytest.mark.asyncio
async def test_a_call_that_waited_little_does_not_end_shedding_while_older_calls_still_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads take calls round-robin between connections (or a thread per
    connection), not in arrival order: a quiet connection's call starts soon
    while a flooding one's queue stands.  That call starts, but the queue's
    age still says shed: the next arrival is refused, and an old call is shed
    when a thread takes it, not run late."""
    from pyorb.server import admission as module
    from pyorb.server.call.stats import Recorder

    clock = [0.0]
    monkeypatch.setattr(module, "perf_counter", lambda: clock[0])
    loop = asyncio.get_running_loop()
    control = module.Admission(AdmissionPolicy(target=0.05, interval=0.1), "op", "thread_pool(2)", Recorder())

    def arrive(at: float, connection: str) -> _Queued:
        clock[0] = at
        call = _Queued(loop, at, connection)
        assert control.arrive(call)  # type: ignore[arg-type]
        return call

    flood = [arrive(0.0, "flood"), arrive(0.0, "flood")]  # one connection's calls, waiting behind busy threads
    arrive(0.10, "flood")  # the queue's age passes the target: CoDel's interval starts
    quiet = arrive(0.19, "quiet")  # another connection's call, within the interval: queued
    clock[0] = 0.21
    assert not control.overdue(quiet)  # type: ignore[arg-type]
    assert control.start(quiet)  # type: ignore[arg-type]  # its turn: it waited 20 ms, it runs
    assert quiet.refused is None
    clock[0] = 0.22
    refused = control.refusal(loop, True, "flood")  # the flood's calls still wait: the queue stands
    assert refused is not None and "overloaded: the queue's age is 0.220 s" in refused, refused
    clock[0] = 0.23
    assert control.overdue(flood[0])  # type: ignore[arg-type]
    assert not control.start(flood[0])  # type: ignore[arg-type]  # waited 230 ms: shed, not run late
    assert flood[0].refused is not None and "the queue's age is 0.230 s" in flood[0].refused
    assert control.age() == pytest.approx(0.23)  # the flood's other call


def _control(monkeypatch: pytest.MonkeyPatch, policy: AdmissionPolicy) -> tuple[Any, list[float]]:
    """An admission control on a fake clock (set ``clock[0]``)."""
    from pyorb.server import admission as module
    from pyorb.server.call.stats import Recorder

    clock = [0.0]
    monkeypatch.setattr(module, "perf_counter", lambda: clock[0])
    return module.Admission(policy, "op", "thread_pool(1)", Recorder()), clock


@pytest.mark.asyncio
async def test_an_arrival_the_queue_would_keep_past_the_limit_is_refused_at_once_but_not_a_quiet_connections(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads took calls every 50 ms while others waited: a call with ten
    calls of its connection ahead of it would wait 0.5 s, the limit, and is
    refused as it arrives rather than at the limit.  Another connection's
    call waits for one turn, not for that queue, and is queued."""
    loop = asyncio.get_running_loop()
    control, clock = _control(monkeypatch, AdmissionPolicy(limit=0.5))
    flood = [_Queued(loop, 0.0, "flood") for _ in range(10)]
    assert all(control.arrive(call) for call in flood)
    assert control.refusal(loop, True, "flood") is None  # no pace seen yet: nothing to predict from
    for at, call in zip((0.05, 0.10), flood):
        clock[0] = at
        assert control.start(call)  # threads take calls while others wait: one every 50 ms
    clock[0] = 0.11
    for _ in range(2):  # 8 and 9 queued ahead: 0.40 and 0.45 s to wait
        assert control.refusal(loop, True, "flood") is None
        assert control.arrive(_Queued(loop, 0.11, "flood"))
    refused = control.refusal(loop, True, "flood")  # 10 ahead: 0.50 s
    assert refused is not None and "would keep it waiting about 0.50 s to start, the limit is 0.5 s" in refused
    late = _Queued(loop, 0.11, "flood")
    assert not control.arrive(late) and late.refused is not None and "about 0.50 s" in late.refused
    assert control.refusal(loop, True, "quiet") is None  # one turn ahead of it: 0.05 s
    assert control.arrive(_Queued(loop, 0.11, "quiet"))


@pytest.mark.asyncio
async def test_a_pace_measured_long_ago_refuses_no_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pace says how fast threads took calls while others waited; once
    none has started for a while the servants may be faster now, so a burst
    arriving then is queued whole, and the pace is measured again."""
    loop = asyncio.get_running_loop()
    control, clock = _control(monkeypatch, AdmissionPolicy(limit=0.5))
    first = [_Queued(loop, 0.0, "a") for _ in range(3)]
    assert all(control.arrive(call) for call in first)
    for at, call in zip((0.05, 0.10, 0.15), first):  # a pace of 50 ms
        clock[0] = at
        assert control.start(call)
    clock[0] = 5.0  # idle since
    burst = [_Queued(loop, 5.0, "a") for _ in range(20)]  # 1 s of work at the old pace
    assert control.refusal(loop, True, "a") is None
    assert all(control.arrive(call) for call in burst)
    for at, call in zip((5.001, 5.002, 5.003), burst):  # taken every millisecond now
        clock[0] = at
        assert control.start(call)
    assert control.refusal(loop, True, "a") is None  # 17 ahead at the new pace: far under the limit


@pytest.mark.asyncio
@pytest.mark.parametrize("left", ["taken by a thread", "dropped by its strategy"])
async def test_the_gap_after_a_queue_empties_without_a_start_is_no_pace(
        monkeypatch: pytest.MonkeyPatch, left: str) -> None:
    """The last calls of a backlog left the queue without starting (their
    clients went away, or the limit answered them): the threads then idled,
    and the gap between the start before and the next start, a second later,
    is idle time, not the pace.  Taken for the pace it would have the next
    burst refused call by call as if each took a second."""
    loop = asyncio.get_running_loop()
    control, clock = _control(monkeypatch, AdmissionPolicy(limit=0.5))
    first = [_Queued(loop, 0.0, "a") for _ in range(3)]
    assert all(control.arrive(call) for call in first)
    for at, call in zip((0.05, 0.10), first):  # a pace of 50 ms, the third still queued
        clock[0] = at
        assert control.start(call)
    first[2].done = True  # cancelled while it waited
    if left == "taken by a thread":
        clock[0] = 0.12
        assert not control.start(first[2])
    clock[0] = 1.2  # idle since: a burst
    burst = [_Queued(loop, 1.2, "a") for _ in range(3)]
    assert all(control.arrive(call) for call in burst)
    clock[0] = 1.201
    assert control.start(burst[0])
    assert control.refusal(loop, True, "a") is None  # two ahead of it: no wait that the limit would reach
    for at, call in zip((1.25, 1.30), burst[1:]):
        clock[0] = at
        assert control.start(call)  # the pace is measured again from starts while calls waited
    assert control._pace == pytest.approx(0.05, abs=0.002)


@pytest.mark.asyncio
async def test_a_standing_queue_takes_the_arrivals_that_would_wait_less_than_the_target(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """While the queue stands, an arrival is judged by the wait it can expect
    (the calls ahead of it at the pace threads take them), not by the oldest
    call's: one that would wait less than the target is queued, so the
    threads do not run dry while the standing queue drains, and one that
    would wait longer is refused at once."""
    loop = asyncio.get_running_loop()
    control, clock = _control(monkeypatch, AdmissionPolicy(target=0.05, interval=0.1))
    old = [_Queued(loop, 0.0, "a") for _ in range(4)]
    assert all(control.arrive(call) for call in old)
    for at, call in zip((0.06, 0.07, 0.12), old):  # over the target: CoDel's interval starts
        clock[0] = at
        assert control.start(call)  # while others waited: a pace of 10 ms, then 15 ms
    clock[0] = 0.20  # the oldest has waited 0.2 s, past the target for an interval: the queue stands
    assert control.refusal(loop, True, "b") is None  # one turn ahead of it: 0.015 s
    assert control.arrive(_Queued(loop, 0.20, "b"))
    assert control.arrive(_Queued(loop, 0.20, "a"))  # 2 ahead (a's one and b's turn): 0.03 s
    assert control.arrive(_Queued(loop, 0.20, "a"))  # 3 ahead: 0.045 s
    refused = control.refusal(loop, True, "a")  # 4 ahead: 0.06 s
    assert refused is not None and "about 0.06 s to start, over the 0.05 s target" in refused, refused
    assert "the queue has stood for at least 0.1 s" in refused
    clock[0] = 0.21
    assert not control.start(old[3])  # it waited 0.21 s itself: shed, not run late


def test_a_queue_can_stand_an_interval_after_its_age_first_reaches_the_target() -> None:
    codel = CoDel(target=0.05, interval=0.1)
    assert codel.stands_by(0.0, 1.0) == pytest.approx(1.15)  # its age reaches the target in 50 ms
    assert codel.stands_by(0.03, 1.0) == pytest.approx(1.12)
    assert codel.stands_by(0.2, 1.0) == pytest.approx(1.1)  # past the target already
    assert not codel.observe(0.06, 1.0)  # seen above the target: the interval runs from here
    assert codel.stands_by(0.2, 1.05) == pytest.approx(1.1)
    assert not codel.observe(0.01, 1.06)  # below again: it starts afresh
    assert codel.stands_by(0.0, 1.06) == pytest.approx(1.21)


@pytest.mark.asyncio
async def test_a_queue_not_standing_yet_refuses_the_arrivals_a_thread_would_shed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads take a call every 20 ms while others wait, and the queue's
    age has just reached the target: it could stand from 0.15 s on, and a
    call that waited past the target and starts after that would be shed by
    the thread that took it.  So an arrival expected to start then is
    refused as it arrives; the ones a burst brings that would start before
    are queued, however long they wait, as CoDel lets a burst through."""
    loop = asyncio.get_running_loop()
    control, clock = _control(monkeypatch, AdmissionPolicy(target=0.05, interval=0.1))
    first = [_Queued(loop, 0.0, "a") for _ in range(3)]
    assert all(control.arrive(call) for call in first)
    for at, call in zip((0.02, 0.04), first):
        clock[0] = at
        assert control.start(call)  # a pace of 20 ms, each under the target
    clock[0] = 0.05
    assert control.arrive(_Queued(loop, 0.05, "a"))  # the oldest has waited 0.05 s: the interval starts
    clock[0] = 0.08
    for _ in range(2):  # 2 and 3 ahead: 0.04 and 0.06 s, starting at 0.12 and 0.14 s
        assert control.refusal(loop, True, "a") is None
        assert control.arrive(_Queued(loop, 0.08, "a"))
    refused = control.refusal(loop, True, "a")  # 4 ahead: it would start at 0.16 s
    assert refused is not None and "about 0.08 s to start, over the 0.05 s target, by when the queue would " \
        "have stood over it for 0.1 s" in refused, refused
    late = _Queued(loop, 0.08, "a")
    assert not control.arrive(late) and late.refused is not None and "about 0.08 s" in late.refused
    assert control.refusal(loop, True, "b") is None  # another connection's call: 2 turns ahead of it
    assert control.arrive(_Queued(loop, 0.08, "b"))
    (op_shed, op_queued) = control._stats.shed, control._stats.shed_queued
    assert (op_shed, op_queued) == (2, 0)  # refused as they arrived, none queued first


@pytest.mark.asyncio
async def test_the_loops_lag_is_measured_again_as_soon_as_a_stall_is_over() -> None:
    """Once the loop has read what queued up during a stall, its lag is what a
    fresh call waits: a server that sheds must not keep refusing fresh calls,
    its loop idle, until a whole probe period has passed."""
    probe = LoopLag(asyncio.get_running_loop(), period=0.2)
    probe.current()  # starts its timer
    await asyncio.sleep(0.25)  # the first tick: no stall
    assert probe.lag < 0.2
    probe.current()  # still asked: it keeps measuring
    time.sleep(0.8)  # the loop stalls past the next tick
    assert probe.current() >= 0.5  # a call arriving now waited that long
    await asyncio.sleep(0.05)  # the late tick has run, and the loop has caught up
    assert probe.current() < 0.2, "the stall's lag stood after the loop had caught up"


def test_refusals_that_show_the_same_wait_share_one_text_and_the_log_names_the_cause_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """A standing queue refuses thousands of calls a second; their texts
    differ only in the wait shown, so each text is made once and the
    connection finds its encoded reply by the same string."""
    from pyorb.server import admission as module
    from pyorb.server.call.stats import Recorder

    stats = Recorder()
    control = module.Admission(AdmissionPolicy(target=0.05, interval=0.1, limit=0.5), "op", "threaded", stats)
    with caplog.at_level(logging.WARNING, logger="pyorb.server.admission"):
        first = control._refuse(0.2201, "queue's age")
    second = control._refuse(0.2204, "queue's age")
    assert first == "overloaded: the queue's age is 0.220 s, over the 0.05 s target for at least 0.1 s"
    assert second is first  # shown alike: the same object
    later = control._refuse(0.2206, "queue's age")
    assert later == first.replace("0.220", "0.221")
    expected = control._refuse(0.733, "expected wait")  # expected waits to a hundredth
    assert expected is control._refuse(0.7349, "expected wait")
    assert "about 0.73 s to start, the limit is 0.5 s" in expected
    assert control._refuse(0.7351, "expected wait") != expected
    assert stats.shed == 6  # each one counted
    [record] = [r for r in caplog.records if r.name == "pyorb.server.admission"]
    assert record.getMessage().endswith("since the last report: the queue's age is 0.220 s, over the 0.05 s "
                                        "target for at least 0.1 s"), record.getMessage()
    for i in range(module.MAX_TEXTS * 2):  # every wait different: the kept texts stay bounded
        assert control._refuse(1.0 + i / 1000, "limit").startswith("overloaded: a call waited 1.")
    assert len(control._texts) <= module.MAX_TEXTS


def test_a_policy_without_target_or_limit_refuses_nothing() -> None:
    assert not AdmissionPolicy().active
    assert AdmissionPolicy(target=0.1).active and AdmissionPolicy(limit=2.0).active
    with pytest.raises(ValueError, match="admission target must be a positive number of seconds"):
        AdmissionPolicy(target=-0.1)
    with pytest.raises(ValueError, match="admission interval must be a positive number of seconds"):
        AdmissionPolicy(interval=0)


# -- thread shortage: round-robin, bounded ---------------------------------------------


def system_exception(body: bytes) -> tuple[str, int, int] | None:
    """(repository id, minor, completed) of a little-endian GIOP 1.2 SYSTEM_EXCEPTION reply body
    (the bytes after the request id, as flow_attacks.replies gives them), None for another reply."""
    status, contexts = struct.unpack_from("<II", body, 0)
    if status != 2:
        return None
    at = 8
    for _ in range(contexts):  # {ulong id; sequence<octet> data}, each 4-aligned
        at = (at + 3) // 4 * 4
        (length,) = struct.unpack_from("<I", body, at + 4)
        at += 8 + length
    at = (16 + at + 7) // 8 * 8 - 16  # a GIOP 1.2 body is 8-aligned from the message start (16: header, id)
    (size,) = struct.unpack_from("<I", body, at)
    repo = body[at + 4:at + 4 + size - 1].decode()
    at = (at + 4 + size + 3) // 4 * 4
    minor, completed = struct.unpack_from("<II", body, at)
    return repo, minor, completed


def test_a_flood_waiting_for_threads_cannot_starve_another_connection_and_the_wait_is_bounded() -> None:
    server = ServerProcess([sys.executable, "-m", "tests.attacks.attack_server",
                            "--model", "thread_per_request(4)", "--set", "queue_limit=3.0"])
    try:
        attacker = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        victim = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        nap = lambda rid, ms: fa.request("nap", struct.pack("<i", ms), rid)  # noqa: E731
        attacker.sendall(b"".join(nap(rid, 100) for rid in range(1, 3001)))  # 75 s of work for 4 threads
        time.sleep(0.3)
        started = time.monotonic()
        victim.sendall(b"".join(nap(rid, 10) for rid in range(1, 6)))
        got = fa.replies(victim, 5, 30.0)
        took = time.monotonic() - started
        # Round-robin: each of its calls waits for one of the attacker's, not for its queue.
        assert sorted(got) == [1, 2, 3, 4, 5], got
        assert all(system_exception(body) is None for body in got.values()), got
        assert took < 2.9, took  # under the queue limit: served, not refused
        hit = fa.replies(attacker, 3000, 60.0)
        assert len(hit) == 3000  # every call answered, none left to its client's timeout
        refused = [system_exception(body) for body in hit.values() if system_exception(body) is not None]
        assert set(refused) == {(TRANSIENT, SHED_MINOR, COMPLETED_NO)}, set(refused)
        assert 2000 < len(refused) < 3000, len(refused)  # the limit refused most; some ran
        attacker.close()
        victim.close()
        assert server.proc.poll() is None, server.stderr()
    finally:
        assert server.stop() == 0, server.stderr()
    log = server.stderr()
    assert "Traceback" not in log, log
    assert "overloaded: Hardening::Target.nap under thread_per_request(4)" in log
    # The first refusal logged: one that waited to the limit, or one refused on arrival that would have
    assert "the limit is 3.0 s" in log and ("waited" in log or "would keep it waiting" in log), log


def test_a_standing_queue_refuses_a_request_before_reading_its_arguments() -> None:
    # One thread busy for 3 s and a call queued behind it: the queue stands.  A
    # request whose arguments do not unmarshal is refused as the queue's others
    # are, TRANSIENT with the same text: the refusal comes before the arguments.
    server = ServerProcess([sys.executable, "-m", "tests.attacks.attack_server", "--model", "thread_pool(1)",
                            "--set", "queue_target=0.05", "--set", "queue_interval=0.1"])
    try:
        client = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        nap = lambda rid, ms: fa.request("nap", struct.pack("<i", ms), rid)  # noqa: E731
        client.sendall(nap(1, 3000) + nap(2, 3000))
        time.sleep(0.3)
        client.sendall(nap(3, 10))  # the queue's age is over the target: CoDel's interval starts
        time.sleep(0.3)
        client.sendall(nap(4, 10))  # still over it an interval later: shed
        time.sleep(0.1)
        bad = lambda rid: fa.request("nap", b"\x01", rid)  # noqa: E731  # a long is 4 bytes: unreadable arguments
        client.sendall(bad(5) + bad(6))  # one read: the second is likely the first's reply sent again
        got = fa.replies(client, 3, 2.5)  # before the first nap ends: the queue still stands
        assert sorted(got) == [4, 5, 6], sorted(got)
        assert {system_exception(body) for body in got.values()} == {(TRANSIENT, SHED_MINOR, COMPLETED_NO)}, got
        for body in got.values():  # the ExceptionDetailMessage: wide text, its ASCII with zero bytes between
            text = body.replace(b"\x00", b"")
            assert b"overloaded: the queue's age is " in text and b"over the 0.05 s target for at least 0.1 s" in text
        client.close()
        assert server.proc.poll() is None, server.stderr()
    finally:
        assert server.stop() == 0, server.stderr()
    assert "Traceback" not in server.stderr()


# -- open-loop overload --------------------------------------------------------------


def test_ten_times_the_capacity_is_shed_fast_and_the_accepted_calls_keep_their_latency() -> None:
    server = ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--model", "thread_pool(2)", "--cpu", "0.005",
                            "--queue-target", "0.02", "--queue-limit", "0.5"])
    try:
        async def run() -> tuple[float, LoadResult]:
            cap = await capacity(server.ior, 1.5)
            return cap, await offer(server.ior, 10 * cap, 2.0, connections=8, timeout=5.0)

        cap, out = asyncio.run(run())
        assert cap > 20, cap
        x = out.extra
        # Without admission control the backlog (18 s of work) leaves most calls to their 5 s timeout.
        assert x["other_errors"] == 0 and x["timeouts"] < x["sent"] / 20, out
        assert x["shed"] > x["sent"] / 2, out
        assert out.errors == x["shed"] + x["timeouts"], out
        assert out.throughput > 0.3 * cap, (out.throughput, cap)  # the server keeps serving
        assert out.latency_ms["p99_ms"] < 3000, out
        assert x["shed_p50_ms"] < 3000, out
        # The one reader of every generator's output reads this one's too.
        assert read_result(json.dumps(out.as_dict())) == out
        assert server.proc.poll() is None, server.stderr()
    finally:
        assert server.stop() == 0, server.stderr()


def test_cpu_bound_threads_per_request_at_many_times_the_capacity_refuse_the_excess_rather_than_time_out() -> None:
    """Eight threads computing hold the interpreter lock: the event loop, which
    reads the requests and refuses the excess, must still get its turns, or the
    requests wait unread in their sockets until their clients give up."""
    import pyorb
    from omniORB import CORBA
    from pyorb.idl import bench_idl

    server = ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--model", "thread_per_request(8)",
                            "--cpu", "0.005", "--queue-target", "0.05", "--queue-limit", "0.5"])
    try:
        async def quiet() -> list[str]:
            """A client apart from the flood: one call every 0.25 s; how each ended."""
            outcomes = []
            async with pyorb.Client() as client:
                sink = client.resolve(server.ior, bench_idl().Bench.Sink)
                for token in range(10):
                    await asyncio.sleep(0.25)
                    try:
                        await sink.work(token, timeout=2.0)
                        outcomes.append("reply")
                    except CORBA.TRANSIENT as exc:
                        outcomes.append("refused" if exc.completed == CORBA.COMPLETED_NO else "other")
                    except CORBA.TIMEOUT:
                        outcomes.append("timeout")
            return outcomes

        async def run() -> tuple[LoadResult, list[str]]:
            # 1,800 calls/s: 5 ms of CPU each on one interpreter is at most 200/s, so nine times that or more.
            flood, calm = await asyncio.gather(offer(server.ior, 1800, 3.0, connections=16, timeout=2.0), quiet())
            return flood, calm

        out, calm = asyncio.run(run())
        x = out.extra
        # Before, the loop waited behind the servant threads and nearly every call timed out unread.
        assert x["other_errors"] == 0, out
        assert x["shed"] > x["sent"] / 2, out
        assert x["timeouts"] < x["sent"] / 20, out
        assert x["replied"] > 0, out  # the server keeps serving
        assert "timeout" not in calm and "other" not in calm and len(calm) == 10, calm
        assert server.proc.poll() is None, server.stderr()
    finally:
        assert server.stop() == 0, server.stderr()


# -- where the CPU goes --------------------------------------------------------------


def test_the_shed_cost_script_measures_a_refused_and_a_served_call() -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "benchmarks.shed_cost", "--repeats", "1", "--seconds", "0.5", "--models",
                           "threaded"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "calls refused" not in done.stderr, done.stderr  # its queue stood: (nearly) every call was refused
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line for line in done.stdout.splitlines()
            if line.startswith("| `")}
    assert set(rows) == {("`threaded`", "refused"), ("`threaded`", "served")}, done.stdout
    for line in rows.values():
        server_us = float(line.split("|")[3].split()[0])
        assert server_us > 0, line


def test_the_overload_benchmark_splits_the_servers_cpu_and_counts_steady_goodput(tmp_path: Path) -> None:
    import json
    import subprocess

    out = tmp_path / "overload.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_overload", "--quick", "--repeats", "1", "--models", "reactive",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    (server,) = json.loads(out.read_text(encoding="utf-8"))
    assert 0.004 < server["served_cpu"] < 0.05, server  # the sink's 5 ms of CPU per call, and the ORB's part
    for run in server["runs"]:
        assert run["server_cpu"] > 0 and run["generator_cpu"] > 0 and run["wall"] > 0, run
        assert 0 < run["steady"] and run["replied"] > 0, run
        # reactive runs the servant on the loop: its main thread has most of the server's CPU
        # (both are counted in clock ticks, hence the slack above)
        assert run["server_cpu"] / 2 < run["loop_cpu"] <= run["server_cpu"] + 0.05, run
