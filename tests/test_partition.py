"""A replica's host cut off the network under closed-loop load, then back.

Three sink replicas on their own hosts (network namespaces, see
pyorb.testing.netns) and a client host running :mod:`pyorb.testing.groupload`.
The partition takes the replica host's link down: what is sent to it is
dropped without a reset, so its connections hang instead of failing, as
across a real switch.  Needs root: CI runs as root, so there it never skips.
"""

from __future__ import annotations

import sys
import time
from typing import Iterator

import pytest

from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing import netns
from pyorb.testing.groupload import LoadResult

pytestmark = pytest.mark.integration  # opens sockets or starts processes

SINKS = ("sink1", "sink2", "sink3")
CALLERS = 30
PARTITION_AT = 3.0  # seconds after the client starts (about 1.5 s of it is start-up)
PARTITION_FOR = 3.0
SECONDS = 14.0
SERVED = ("import re, sys, urllib.request; text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode(); "
          "found = re.search(r'^pyorb_requests_total\\{operation=\"Bench::Sink.work\"\\} (\\S+)$', text, re.M); "
          "print(int(float(found.group(1))) if found else 0)")


@pytest.fixture(scope="module")
def network() -> Iterator[netns.Network]:
    netns.require()
    with netns.Network([*SINKS, "client"], subnet="10.213.9.0/24") as net:
        yield net


@pytest.fixture
def group(network: netns.Network) -> Iterator[IOR]:
    started = [network.start(host, [sys.executable, "-m", "pyorb.servers.sink", "--host", "0.0.0.0", "--port", "2809",
                                    "--key", "Sink", "--delay", "0.01", "--metrics", "0.0.0.0:9464"])
               for host in SINKS]
    try:
        yield group_ior([IOR.from_string(p.ior) for p in started], GroupComponent("partition", 1))
    finally:
        for process in started:
            process.stop()
            network.processes.remove(process)


def served(network: netns.Network, host: str) -> int:
    """The calls ``host``'s replica says it served, asked from the client host."""
    done = network.run("client", [sys.executable, "-c", SERVED, f"http://{host}:9464/metrics"], timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip())


def partitioned_run(network: netns.Network, group: IOR, idempotent: bool) -> tuple[LoadResult, int, int]:
    """The load with sink2's host cut off for a while: what the client saw,
    and the calls sink2 served from the heal to the end."""
    import subprocess

    argv = [sys.executable, "-m", "pyorb.testing.groupload", group.to_string(), "--seconds", str(SECONDS),
            "--in-flight", str(CALLERS), "--timeout", "2", *(["--idempotent"] if idempotent else [])]
    client = network.popen("client", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(PARTITION_AT)
        network.partition("sink2")
        try:
            time.sleep(PARTITION_FOR)
        finally:
            network.heal("sink2")
        at_heal = served(network, "sink2")
        out, err = client.communicate(timeout=SECONDS + 60)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
    assert client.returncode == 0, err.decode(errors="replace")[-3000:]
    return LoadResult.from_json(out.decode().strip().splitlines()[-1]), at_heal, served(network, "sink2")


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_partitioned_member_is_left_out_and_returns_after_the_heal(network: netns.Network, group: IOR,
                                                                     idempotent: bool) -> None:
    result, at_heal, at_end = partitioned_run(network, group, idempotent)
    assert result.lost == 0 and result.duplicates == 0 and result.late == 0, result
    if idempotent:
        assert result.errors == {}, result.errors  # its calls went to the other members once it was ejected
    else:
        # Only the callers waiting on it when the link went down time out (and a back-off probe or two).
        assert set(result.errors) == {"TIMEOUT COMPLETED_MAYBE"}, result.errors
        assert result.failed <= CALLERS // 3 + 10, result.errors
    # Healed, it takes calls again once its back-off ends (it doubled with each
    # failed probe: a few seconds after a partition this short) and TCP resends
    # what the partition dropped (the connection survives it), before the run ends.
    assert at_end - at_heal > 100, (at_heal, at_end)
