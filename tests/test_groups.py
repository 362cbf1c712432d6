"""Object groups: one reference, several replicas, calls balanced and failed over.

Replicas are the AMH paper's sink (``python -m pyorb.servers.sink``) in
their own processes over loopback; each counts the calls it served, read
from its Prometheus endpoint.  Hosts in network namespaces and Locust's
distributed mode are in tests/test_netns.py and loadtests/multihost.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.client.calls import route_for
from pyorb.giop.ior import IOR, GroupComponent, build_ior, group_ior
from pyorb.testing import LoopThread
from pyorb.testing.kit import ServerProcess
from pyorb.testing.waiting import wait_until_blocking
from tests.interop.conftest import failures, run_omni_client
from tests.interop.servants import TypesCoroutine

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench
import Bench__POA  # noqa: E402  (made by load_idl)

GROUP = GroupComponent("pyorb-tests", 7)
CLIENT = Path(__file__).resolve().parent / "peers" / "group_client.py"


class Replica:
    """A sink process with a metrics endpoint."""

    def __init__(self, delay: float = 0.0) -> None:
        self.process = ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--delay", str(delay),
                                      "--metrics", "127.0.0.1:0"])
        self.ior = IOR.from_string(self.process.ior)
        self._url: str | None = None

    def served(self) -> int:
        if self._url is None:
            deadline = time.monotonic() + 10
            while (found := re.search(r"metrics at (http://\S+)", self.process.stderr())) is None:
                assert time.monotonic() < deadline, self.process.stderr()
                time.sleep(0.05)
            self._url = found.group(1)
        with urllib.request.urlopen(self._url, timeout=5) as response:
            text = response.read().decode()
        found = re.search(r'^pyorb_requests_total\{operation="Bench::Sink.work"\} (\S+)$', text, re.M)
        return int(float(found.group(1))) if found else 0

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for replica in started:
        replica.stop()


def start(replicas: list[Replica], *delays: float) -> IOR:
    replicas.extend(Replica(delay) for delay in delays)
    return group_ior([r.ior for r in replicas], GROUP)


def test_a_group_reference_names_every_member() -> None:
    members = [build_ior("IDL:Bench/Sink:1.0", "127.0.0.1", port, b"Sink", alternates=[("::1", port)])
               for port in (5001, 5002, 5003)]
    group = group_ior(members, GROUP)
    assert len(group.profiles) == 3 and group.group == GROUP
    again = IOR.from_string(group.to_string())
    assert again.group == GROUP and all(p.group == GROUP for p in again.profiles)  # type: ignore[union-attr]
    route = route_for(again, (1, 2))
    assert route is not None and route.group is not None
    assert [m.endpoint[1] for m in route.group.members] == [5001, 5002, 5003]
    assert [f.endpoint[0] for f in route.group.members[0].fallbacks] == ["::1"]  # a member's alternates stay its own
    newer = group_ior(members[:2], GroupComponent("pyorb-tests", 7, version=2))
    assert route_for(newer, (1, 2)).group.version == 2  # type: ignore[union-attr]
    for bad in ([], [IOR.nil()], [build_ior("IDL:X:1.0", "h", 1, b"k", version=(1, 0))]):
        with pytest.raises(ValueError):
            group_ior(bad, GROUP)
    assert route_for(members[0], (1, 2)).group is None  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="balancing"):
        pyorb.Client(balancing="random")


def _load(group: IOR, calls: int, in_flight: int, **client: Any) -> tuple[int, list[BaseException]]:
    async def run() -> tuple[int, list[BaseException]]:
        errors: list[BaseException] = []
        done = 0
        async with pyorb.Client(pyorb.Config(call_timeout=10), **client) as c:
            sink = c.resolve(group, Bench.Sink)
            remaining = iter(range(calls))

            async def worker() -> None:
                nonlocal done
                for token in remaining:
                    try:
                        assert await sink.work(token) == token
                        done += 1
                    except CORBA.SystemException as exc:
                        errors.append(exc)

            await asyncio.gather(*(worker() for _ in range(in_flight)))
        return done, errors

    return asyncio.run(run())


def test_round_robin_spreads_calls_evenly(replicas: list[Replica]) -> None:
    # Outlier detection off: with it, a replica the machine's load pauses for
    # longer than its usual round trip is passed over by design (test_faults).
    group = start(replicas, 0.0, 0.0, 0.0)
    done, errors = _load(group, 300, 15, outlier_detection=None)
    assert (done, errors) == (300, [])
    assert [r.served() for r in replicas] == [100, 100, 100]


def test_least_pending_sends_fewer_calls_to_a_slow_replica(replicas: list[Replica]) -> None:
    # 125x slower: on a loaded machine the fast replica's 2 ms stretches tenfold, and the split stays far past 4:1
    group = start(replicas, 0.002, 0.25)
    done, errors = _load(group, 400, 20, balancing="least_pending")
    assert (done, errors) == (400, [])
    fast, slow = (r.served() for r in replicas)
    assert fast + slow == 400 and fast > 4 * slow, (fast, slow)


def _closed_loop(group: IOR, seconds: float, in_flight: int, during: Any, replicas: list[Replica],
                 *options: str, timeout: float = 2.0) -> tuple[int, dict[str, int]]:
    """tests/peers/group_client.py (closed-loop calls for ``seconds``, each
    bounded by ``timeout``) in its own process; ``during()`` runs once every
    replica has served calls (the load is on, however long the client took
    to start).  Calls done, and errors by "EXCEPTION COMPLETED_X"."""
    import json
    import subprocess
    import threading

    ended = threading.Event()

    def loaded() -> bool:
        try:
            return all(r.served() > 0 for r in replicas)
        except OSError:  # a metrics endpoint not answering yet
            return False

    def when_loaded() -> None:
        try:
            wait_until_blocking(lambda: ended.is_set() or loaded(), timeout=seconds + 60,
                                what="every replica serving calls")
        except TimeoutError:
            return  # the client never got going: its own result says why
        if not ended.is_set():
            during()

    trigger = threading.Thread(target=when_loaded)
    trigger.start()
    try:
        # The client's timeout also catches a hang: its run has a fixed length.
        done = subprocess.run([sys.executable, str(CLIENT), group.to_string(), "--seconds", str(seconds + 1.0),
                               "--in-flight", str(in_flight), "--timeout", str(timeout), *options],
                              capture_output=True, text=True, timeout=seconds + 60)
    finally:
        ended.set()
        trigger.join(70)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return int(result["calls"]), dict(result["errors"])


@pytest.mark.parametrize("idempotent", [False, True])
def test_kill_9_of_a_replica(replicas: list[Replica], idempotent: bool) -> None:
    group = start(replicas, 0.01, 0.01, 0.01)
    victim = replicas[1]
    survivors = (replicas[0], replicas[2])
    at_kill: list[int] = []

    def kill() -> None:
        at_kill.extend(r.served() for r in survivors)
        os.kill(victim.process.pid, signal.SIGKILL)

    # A generous call timeout: on a loaded machine a live replica may take seconds to answer, and only
    # the killed one's calls may fail.  Nothing hangs: the client process has a fixed run and a timeout.
    done, errors = _closed_loop(group, 3.0, 30, kill, replicas, *(["--idempotent"] if idempotent else []),
                                timeout=30.0)
    # Only calls the killed replica had accepted may fail, and only as "may have run".
    assert set(errors) <= {"COMM_FAILURE COMPLETED_MAYBE"} and sum(errors.values()) <= 30, errors
    if idempotent:
        assert errors == {}  # re-sent to the others
    served = [r.served() for r in survivors]
    # Calls went on after the kill, to both survivors, however slowly a loaded machine runs them.
    assert len(at_kill) == 2 and min(s - k for s, k in zip(served, at_kill)) >= 10, (at_kill, served)
    assert min(served) > done / 4, (done, served)


def test_a_stopped_replica_costs_timeouts_then_is_avoided(replicas: list[Replica]) -> None:
    group = start(replicas, 0.005, 0.005)
    frozen = replicas[0]

    def freeze() -> None:
        os.kill(frozen.process.pid, signal.SIGSTOP)

    try:
        done, errors = _closed_loop(group, 6.0, 10, freeze, replicas)
    finally:
        os.kill(frozen.process.pid, signal.SIGCONT)
    assert set(errors) == {"TIMEOUT COMPLETED_MAYBE"}, errors
    # The calls in flight on it when it stopped time out, then each back-off
    # probe costs one: far fewer timeouts than calls that went elsewhere.
    timeouts = errors["TIMEOUT COMPLETED_MAYBE"]
    assert timeouts <= 40 and done > 20 * timeouts, (done, timeouts)


def test_a_replica_leaves_gracefully_and_no_caller_sees_an_error(replicas: list[Replica]) -> None:
    group = start(replicas, 0.02, 0.02)
    leaving = replicas[0]
    at_leave: list[int] = []

    def leave() -> None:
        at_leave.append(replicas[1].served())
        os.kill(leaving.process.pid, signal.SIGTERM)

    done, errors = _closed_loop(group, 2.0, 20, leave, replicas, timeout=30.0)
    assert errors == {} and done > 0
    # Calls went on after the leave, to the one that stayed, however slowly a loaded machine runs them.
    assert at_leave and replicas[1].served() - at_leave[0] >= 10, (at_leave, replicas[1].served())
    assert leaving.process.stop() == 0  # it drained and exited by itself


@pytest.mark.interop
@pytest.mark.client_loop_only
def test_an_omniorb_client_fails_over_through_a_group_reference() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with LoopThread() as runner:
        async def begin() -> tuple[pyorb.Server, bytes]:
            server = pyorb.Server()
            await server.start()
            return server, server.activate(TypesCoroutine(server), "Types")

        server, key = runner.run(begin())
        try:
            live = IOR.from_string(server.ior(key))
            gone = build_ior(live.type_id, "127.0.0.1", dead, key)
            group = group_ior([gone, live], GROUP)
            results = run_omni_client(group.to_string(), "--cases", "echo_string,echo_long")
            assert not failures(results) and len(results) == 2
        finally:
            runner.run(server.close())


@pytest.mark.interop
def test_pyorb_group_binds_the_group_in_the_naming_service(replicas: list[Replica], omni_names: Any) -> None:
    """``pyorb group --bind``: clients find the group by name; re-binding with
    more members keeps the group's id and raises its version."""
    import subprocess

    replicas.extend(Replica() for _ in range(3))
    refs = [r.process.ior for r in replicas]

    def group_cmd(*members: str) -> IOR:
        done = subprocess.run([sys.executable, "-m", "pyorb", "group", *members, "--domain", "shop",
                               "--bind", "services/sink", "--naming", omni_names.corbaloc],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        return IOR.from_string(done.stdout.strip())

    first = group_cmd(*refs[:2])
    second = group_cmd(*refs)
    assert first.group is not None and second.group is not None
    assert (second.group.domain, second.group.group_id) == ("shop", first.group.group_id)
    assert (first.group.version, second.group.version) == (1, 2) and len(second.profiles) == 3

    async def through_naming() -> list[int]:
        from pyorb.naming import resolve_corbaname

        async with pyorb.Client() as client:
            sink = await resolve_corbaname(client, f"{omni_names.corbaname}#services/sink", Bench.Sink)
            return list(await asyncio.gather(*(sink.work(i) for i in range(30))))

    assert asyncio.run(through_naming()) == list(range(30))
    assert [r.served() for r in replicas] == [10, 10, 10]  # the bound reference is the 3-member group
    shown = subprocess.run([sys.executable, "-m", "pyorb", "ior", second.to_string()], capture_output=True,
                           text=True, timeout=60)
    assert "TAG_FT_GROUP" in shown.stdout and "domain 'shop'" in shown.stdout


def test_a_member_that_forwards_is_followed() -> None:
    """A member answers LOCATION_FORWARD (its object moved): the calls it gets go where it says."""

    class Counting(Bench__POA.Sink):  # type: ignore[misc]
        def __init__(self) -> None:
            self.calls = 0

        def work(self, token: int) -> int:
            self.calls += 1
            return token

    async def run() -> list[int]:
        async with pyorb.Server() as moved_to, pyorb.Server() as forwarding, pyorb.Server() as plain:
            target, stay = Counting(), Counting()
            new_home = IOR.from_string(moved_to.ior(moved_to.activate(target, "Sink")))
            forwarding.adapter.forward("Sink", new_home)
            forwarding_ior = build_ior("IDL:Bench/Sink:1.0", forwarding.host, forwarding.port, b"Sink")
            group = group_ior([forwarding_ior, IOR.from_string(plain.ior(plain.activate(stay, "Sink")))], GROUP)
            async with pyorb.Client() as client:
                sink = client.resolve(group, Bench.Sink)
                assert await asyncio.gather(*(sink.work(i) for i in range(20))) == list(range(20))
            return [target.calls, stay.calls]

    assert asyncio.run(run()) == [10, 10]

