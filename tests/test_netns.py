"""Object groups across hosts: network namespaces on a private bridge.

Each replica is the AMH sink on its own host (namespace, address, host
name), bound to the wildcard address and publishing its host name; the
client runs on another host and resolves those names through the hosts'
/etc/hosts.  Needs root: CI runs as root, so there these tests never skip.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from pyorb.idl import BENCH_IDL
from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing import netns

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "tests" / "peers" / "group_client.py"
SINKS = ("sink1", "sink2", "sink3")


@pytest.fixture(scope="module")
def network() -> Iterator[netns.Network]:
    netns.require()
    with netns.Network([*SINKS, "client"]) as net:
        yield net


@pytest.fixture
def replicas(network: netns.Network) -> Iterator[list[tuple[str, IOR, int]]]:
    started = []
    for host in SINKS:
        process = network.start(host, [sys.executable, "-m", "pyorb.servers.sink", "--host", "0.0.0.0", "--port",
                                       "2809", "--key", "Sink", "--delay", "0.01", "--metrics", "0.0.0.0:9464"])
        started.append((host, IOR.from_string(process.ior), process))
    yield [(host, ior, process.pid) for host, ior, process in started]
    for _, _, process in started:
        process.stop()
        network.processes.remove(process)


def run_client(network: netns.Network, group: IOR, *options: str) -> dict[str, object]:
    metrics = [arg for host in SINKS for arg in ("--metrics", f"http://{host}:9464/metrics")]
    done = network.run("client", [sys.executable, str(CLIENT), group.to_string(), *metrics, *options], timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_each_replica_publishes_its_host_name_and_the_client_spreads_calls(
    network: netns.Network, replicas: list[tuple[str, IOR, int]]
) -> None:
    for host, ior, _ in replicas:
        assert ior.iiop is not None and (ior.iiop.host, ior.iiop.port) == (host, 2809)  # the wildcard publishes the name
    group = group_ior([ior for _, ior, _ in replicas], GroupComponent("netns", 1))
    result = run_client(network, group, "--seconds", "2", "--in-flight", "30")
    counts = list(result["served"].values())  # type: ignore[union-attr]
    assert result["errors"] == {} and sum(counts) == result["calls"], result
    assert min(counts) >= 0.9 * max(counts), counts  # round robin: within 10 %


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_replica_host_fails_and_calls_go_on(network: netns.Network, replicas: list[tuple[str, IOR, int]],
                                             how: str) -> None:
    group = group_ior([ior for _, ior, _ in replicas], GroupComponent("netns", 2))
    victim = replicas[1][2]
    signum = getattr(signal, how)
    timer = threading.Timer(1.0, os.kill, args=(victim, signum))
    timer.start()
    started = time.monotonic()
    try:
        result = run_client(network, group, "--seconds", "4", "--in-flight", "30", "--timeout", "1")
    finally:
        timer.cancel()
        if how == "SIGSTOP":
            os.kill(victim, signal.SIGCONT)
    assert time.monotonic() - started < 30  # nothing hung
    errors: dict[str, int] = result["errors"]  # type: ignore[assignment]
    expected = "COMM_FAILURE COMPLETED_MAYBE" if how == "SIGKILL" else "TIMEOUT COMPLETED_MAYBE"
    assert set(errors) <= {expected}, errors
    # Only the calls the failed replica held fail (30 in flight over 3 replicas, and a few
    # back-off probes for a stalled one); everything else completes on the other two.
    assert sum(errors.values()) <= 40, errors
    assert result["calls"] > 50 * max(1, sum(errors.values())) or not errors, result


def test_the_multihost_experiment_runs(network: netns.Network, tmp_path: Path) -> None:
    """loadtests/multihost.py, shortened: Locust's master and two workers on two
    client hosts, the middle tier and its sink group on others (its own network)."""
    import csv
    import subprocess

    done = subprocess.run([sys.executable, "-m", "loadtests.multihost", "--out", str(tmp_path),
                           "--seconds", "6", "--repeats", "1", "--failover-seconds", "12", "--kill-at", "6",
                           "--skip-big", "--users", "12"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    with (tmp_path / "summary.csv").open() as f:
        rows = {row["run"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"1 sink replica", "2 sink replicas", "3 sink replicas",
                         "failover: before the kill (3 replicas)", "failover: from 3 s after the kill (2 replicas)"}
    for row in rows.values():
        assert float(row["throughput"]) > 0.3 * float(row["ideal"]), row  # every phase carried load
    assert (tmp_path / "failover.png").stat().st_size > 10_000
    assert len((tmp_path / "failover.csv").read_text().splitlines()) > 5


def test_a_replica_leaves_gracefully_across_hosts(network: netns.Network,
                                                  replicas: list[tuple[str, IOR, int]]) -> None:
    group = group_ior([ior for _, ior, _ in replicas], GroupComponent("netns", 3))
    leaving = replicas[0][2]
    timer = threading.Timer(1.0, os.kill, args=(leaving, signal.SIGTERM))
    timer.start()
    try:
        result = run_client(network, group, "--seconds", "3", "--in-flight", "30")
    finally:
        timer.cancel()
    assert result["errors"] == {} and result["calls"] > 300, result


def test_an_omniorb_client_on_another_host_fails_over(network: netns.Network,
                                                      replicas: list[tuple[str, IOR, int]]) -> None:
    """omniORBpy calls the group reference with its first member's host gone (SIGKILL)."""
    group = group_ior([ior for _, ior, _ in replicas], GroupComponent("netns", 4))
    os.kill(replicas[0][2], signal.SIGKILL)
    done = network.run("client", [sys.executable, "-m", "pyorb.testing.omnipeer", "call", "--idl",
                                  str(BENCH_IDL), "--function",
                                  str(ROOT / "tests" / "peers" / "omni_group_calls.py") + ":work_many",
                                  "--target", group.to_string(), "--interface", "Bench::Sink", "--args", "[20]"],
                       timeout=120)
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {"ok": True, "result": 20}, (outcome, done.stderr[-2000:])


def test_a_killed_run_leaves_nothing_behind_for_long(network: netns.Network) -> None:
    """A process killed with SIGKILL cannot clean up: the next Network removes what it left."""
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; from pyorb.testing import netns; "
                              "netns.Network(['a', 'b']).__enter__(); print('up', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    stale = f"po{child.pid}n0-a"
    assert stale in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    with netns.Network(["x"]):
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert stale not in listed and not (netns.NETNS_DIR / stale).exists()


def test_processes_run_in_a_host_get_this_processs_import_path(network: netns.Network) -> None:
    """``run`` and ``popen`` give their children the import path, as ``start`` does (kit.child_env)."""
    import subprocess

    from pyorb.testing.kit import child_env

    show = [sys.executable, "-c", "import os; print(os.environ.get('PYTHONPATH'))"]
    done = network.run("client", show, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    child = network.popen("client", show, stdout=subprocess.PIPE)
    out, _ = child.communicate(timeout=60)
    expected = child_env()["PYTHONPATH"]
    assert (done.stdout.strip(), out.decode().strip()) == (expected, expected)
