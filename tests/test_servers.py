"""The papers' servers (pyorb/servers/) as a user runs them: real processes over loopback."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from typing import Any, AsyncIterator, Iterator

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl

Bench = bench_idl().Bench
pytestmark = [pytest.mark.integration, pytest.mark.client_loop_only]  # the servers run in their own processes


class Proc:
    """A server process: its IOR, corbaloc, and a clean stop that returns (rc, stderr)."""

    def __init__(self, *args: str) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        assert self.p.stdout is not None
        self.ior = self.p.stdout.readline().strip()
        self.corbaloc = self.p.stdout.readline().strip()
        if not self.ior.startswith("IOR:"):
            self.p.kill()
            raise AssertionError(f"{args} did not start: {self.p.communicate()[1]}")

    def stop(self) -> tuple[int, str]:
        try:  # communicate closes stdin: the server stops at end of file
            _, err = self.p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise
        return self.p.returncode, err


@pytest.fixture
def procs() -> Iterator[Any]:
    started: list[Proc] = []

    def start(*args: str) -> Proc:
        proc = Proc(*args)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.p.poll() is None:
            proc.p.kill()
        proc.p.communicate()  # reaps it and closes its pipes


@pytest_asyncio.fixture
async def client() -> AsyncIterator[pyorb.Client]:
    async with pyorb.Client() as c:
        yield c


async def many_calls(ref: str, clients: int = 6, each: int = 3) -> list[int]:
    made = [pyorb.Client() for _ in range(clients)]
    try:
        return await asyncio.gather(*(c.resolve(ref, Bench.Sink).work(i * 100 + j)
                                      for i, c in enumerate(made) for j in range(each)))
    finally:
        await asyncio.gather(*(c.close() for c in made))


MODELS = ["amh-st", "tpr-st", "tpc", "tpr-2", "thread_per_request", "threaded", "locality(2)", "coroutine", "amh-2"]


@pytest.mark.asyncio
@pytest.mark.parametrize("model", MODELS)
async def test_middle_tier_forwards_to_the_sink_in_every_model(procs: Any, model: str) -> None:
    sink = procs("pyorb.servers.sink", "--delay", "0.01")
    middle = procs("pyorb.servers.middle", "--sink", sink.ior, "--model", model)
    expected = sorted(i * 100 + j for i in range(6) for j in range(3))
    assert sorted(await many_calls(middle.corbaloc)) == expected
    rc, err = middle.stop()
    assert rc == 0
    if model != "amh-2":  # the workers print their own tables
        assert "Bench::Sink.work" in err and "18" in err
    assert sink.stop()[0] == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("threading", ["tpc", "pool"])
async def test_omniorb_baselines(procs: Any, threading: str) -> None:
    sink = procs("pyorb.servers.omni", "sink", "--threading", threading, "--cpu", "0.001")
    middle = procs("pyorb.servers.omni", "middle", "--sink", sink.corbaloc, "--threading", threading)
    expected = sorted(i * 100 + j for i in range(6) for j in range(3))
    assert sorted(await many_calls(middle.ior)) == expected
    assert middle.stop()[0] == 0 and sink.stop()[0] == 0


@pytest.mark.asyncio
async def test_sink_exponential_demand_and_stats_on_sigusr1(procs: Any, client: pyorb.Client) -> None:
    sink = procs("pyorb.servers.sink", "--model", "thread_pool(2)", "--delay", "0.002", "--cpu", "0.001",
                 "--distribution", "exponential", "--seed", "7")
    proxy = client.resolve(sink.corbaloc, Bench.Sink)
    assert [await proxy.work(i) for i in range(5)] == list(range(5))
    sink.p.send_signal(signal.SIGUSR1)
    await asyncio.sleep(0.5)
    rc, err = sink.stop()
    assert rc == 0
    assert err.count("strategy thread_pool(2)") == 2  # once for the signal, once at exit
    assert "served" in err


@pytest.mark.asyncio
async def test_middle_reports_a_dead_sink_as_a_system_exception(procs: Any, client: pyorb.Client) -> None:
    sink = procs("pyorb.servers.sink")
    middle = procs("pyorb.servers.middle", "--sink", sink.corbaloc, "--model", "amh", "--timeout", "2")
    proxy = client.resolve(middle.corbaloc, Bench.Sink)
    assert await proxy.work(1) == 1
    sink.p.kill()
    sink.p.wait()
    with pytest.raises((CORBA.COMM_FAILURE, CORBA.TRANSIENT)):
        await proxy.work(2, timeout=10)
    assert middle.stop()[0] == 0


BAD_OPTIONS = [
    (["pyorb.servers.sink", "--model", "nonsense"], "unknown model 'nonsense'"),
    (["pyorb.servers.sink", "--delay", "-1"], "--delay must be between 0 and 3600"),
    (["pyorb.servers.sink", "--cpu", "abc"], "invalid float value"),
    (["pyorb.servers.sink", "--port", "70000"], "--port must be in 0..65535"),
    (["pyorb.servers.sink", "--model", "thread_pool(-2)"], "positive integer"),
    (["pyorb.servers.sink", "--workers", "0"], "--workers must be at least 1"),
    (["pyorb.servers.middle"], "the following arguments are required: --sink"),
    (["pyorb.servers.middle", "--sink", "IOR:zz"], "IOR"),
    (["pyorb.servers.middle", "--sink", "corbaloc::1.2@127.0.0.1:1/S", "--timeout", "0"], "--timeout must be positive"),
    (["pyorb.servers.omni", "sink", "--pool-size", "0"], "--pool-size must be at least 1"),
    (["pyorb.servers.omni", "middle"], "required: --sink"),
    (["pyorb.servers.omni", "bogus"], "invalid choice"),
]


@pytest.mark.parametrize("args, message", BAD_OPTIONS)
def test_bad_options_give_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_busy_port_is_one_line(procs: Any) -> None:
    sink = procs("pyorb.servers.sink")
    port = sink.corbaloc.rsplit(":", 1)[1].split("/")[0]
    done = subprocess.run([sys.executable, "-m", "pyorb.servers.sink", "--port", port], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and "cannot listen" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.asyncio
@pytest.mark.parametrize("stall", [False, True], ids=["sink-killed", "sink-stopped"])
async def test_thousands_pending_when_the_sink_fails_then_returns(procs: Any, stall: bool) -> None:
    """AMH middle tier with 2,000 AMI calls pending on its sink: killing the
    sink (or stopping it with SIGSTOP) fails every call with a system
    exception within the middle tier's timeout; a new sink on the same port
    then serves new calls through the same middle tier."""
    sink = procs("pyorb.servers.sink", "--delay", "30")
    port = sink.corbaloc.rsplit(":", 1)[1].split("/")[0]
    middle = procs("pyorb.servers.middle", "--sink", sink.corbaloc, "--model", "amh", "--timeout", "3")
    clients = [pyorb.Client() for _ in range(20)]
    try:
        calls = [asyncio.ensure_future(c.resolve(middle.corbaloc, Bench.Sink).work(i))
                 for c in clients for i in range(100)]
        await asyncio.sleep(1.0)  # all 2,000 pending at the sink
        assert not any(c.done() for c in calls)
        if stall:
            sink.p.send_signal(signal.SIGSTOP)
        else:
            sink.p.kill()
        started = asyncio.get_running_loop().time()
        results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 20)
        elapsed = asyncio.get_running_loop().time() - started
        kinds = {type(r).__name__ if not isinstance(r, CORBA.SystemException) else r._NP_RepositoryId
                 for r in results}
        assert all(isinstance(r, CORBA.SystemException) for r in results), kinds
        expected = {"IDL:omg.org/CORBA/TIMEOUT:1.0"} if stall else {"IDL:omg.org/CORBA/COMM_FAILURE:1.0"}
        assert kinds == expected
        assert elapsed < 10
        if stall:
            sink.p.kill()
        sink.p.wait()
        procs("pyorb.servers.sink", "--port", port)  # the sink returns
        assert await asyncio.gather(*(c.resolve(middle.corbaloc, Bench.Sink).work(5) for c in clients)) == [5] * 20
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    assert middle.stop()[0] == 0
