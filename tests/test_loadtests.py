"""The benchmark's servers and load generators work (a short smoke run, not a timing)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyorb.loadtest.stats import LoadResult, read_result

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]


def start(module: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=20)


PYORB_ECHO = ["pyorb.loadtest.generator", "--target", "echo", "--mode", "pipelined", "--window", "16"]
OMNI_ECHO = ["pyorb.loadtest.omni_generator", "--target", "echo", "--mode", "smi", "--clients", "4"]


def generate(ior: str, client: list[str], *window: str) -> LoadResult:
    """One load generator run against ``ior``: its result, after checking it exited 0."""
    module, *options = client
    done = subprocess.run([sys.executable, "-m", module, ior, *options, *window],
                          capture_output=True, text=True, timeout=90, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return read_result(done.stdout)


@pytest.mark.parametrize(("server", "client"), [
    ("pyorb.servers.echo", PYORB_ECHO),
    ("pyorb.servers.echo", OMNI_ECHO),
    ("pyorb.servers.omni echo", PYORB_ECHO),
], ids=["pyorb-pyorb", "omniorbpy-pyorb", "pyorb-omniorbpy"])
def test_load_generator_against_echo_server(server: str, client: list[str]) -> None:
    proc, ior = start(*server.split())
    try:
        assert ior.startswith("IOR:")
        result = generate(ior, client, "--duration", "1", "--warmup", "0.2")
        assert result.errors == 0 and result.calls > 100, result
        assert result.extra["target"] == "echo" and result.latency_ms["p50_ms"] > 0, result
    finally:
        stop(proc)


@pytest.mark.parametrize("client", [["pyorb.loadtest.generator", "--mode", "smi", "--clients", "2"],
                                    ["pyorb.loadtest.omni_generator", "--mode", "smi", "--clients", "2"]],
                         ids=["pyorb", "omniorbpy"])
def test_both_generators_make_the_same_sequential_calls_and_report_alike(client: list[str]) -> None:
    # The echo benchmark's sequential latency: N calls one after another after the warm-up, then stop.
    proc, ior = start("pyorb.servers.echo")
    try:
        result = generate(ior, [*client, "--target", "echo"], "--calls", "50", "--warmup", "0.2",
                          "--duration", "60")
        assert (result.mode, result.clients, result.calls, result.errors) == ("smi", 2, 100, 0), result
        assert 0 < result.latency_ms["min_ms"] <= result.latency_ms["p50_ms"] <= result.latency_ms["max_ms"]
        assert result.seconds < 60, result  # the calls ended the run, not the window
    finally:
        stop(proc)


def test_the_omniorbpy_generator_says_ready_after_its_first_call_and_fails_without_a_server() -> None:
    proc, ior = start("pyorb.servers.sink")
    try:
        done = subprocess.run([sys.executable, "-m", "pyorb.loadtest.omni_generator", ior, "--ready", "--clients",
                               "2", "--duration", "0.5", "--warmup", "0"],
                              capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        assert done.returncode == 0 and done.stdout.splitlines()[0] == "ready", done.stderr
        assert read_result(done.stdout).calls > 10
    finally:
        stop(proc)
    # The server is gone: the first call fails, the result says so and the status is 1.
    done = subprocess.run([sys.executable, "-m", "pyorb.loadtest.omni_generator", ior, "--ready", "--duration",
                           "0.5", "--timeout", "5"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert done.returncode == 1 and done.stdout.splitlines()[0] == "failed", (done.stdout, done.stderr)
    assert "the first call" in done.stderr and read_result(done.stdout).errors == 1


@pytest.mark.parametrize("mode", [[], ["--handoff", "--threads", "2"]])
def test_bare_floor_server_answers_the_omniorb_client_and_stops_at_stdin_eof(mode: list[str]) -> None:
    proc, ior = start("benchmarks.bare_echo_server", *mode)
    try:
        assert ior.startswith("IOR:")
        result = generate(ior, OMNI_ECHO, "--duration", "1", "--warmup", "0.2")
        assert result.errors == 0 and result.calls > 100, result
        _, err = proc.communicate("", timeout=20)  # stdin EOF: the benchmark's stop signal
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            stop(proc)


def test_marshal_benchmark_prints_its_table() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_marshal", "--number", "200", "--repeats", "2"],
                          capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "ping (unsigned long long)" in done.stdout and "unpack" in done.stdout
    assert f"pyorb from {ROOT / 'pyorb'}" in done.stdout.replace("\n", "")


@pytest.mark.parametrize(("client", "title"), [(["--concurrency", "8"], "pyorb -> pyorb echo, 8 in flight"),
                                               (["--omni-threads", "2"], "omniORBpy -> pyorb echo, 2 threads")],
                         ids=["pyorb-client", "omniorbpy-client"])
def test_alternating_ab_prints_both_sides(client: list[str], title: str) -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.ab_echo", "--against", str(ROOT), "--rounds", "1",
                           "--seconds", "0.5", *client],
                          capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "median this / against:" in done.stdout and done.stdout.count(str(ROOT)) >= 2
    assert f"{title}, 1 alternating rounds" in done.stdout, done.stdout


@pytest.mark.parametrize("module", [["benchmarks.bare_echo_server"], ["benchmarks.bare_middle", "sink"],
                                    ["benchmarks.bare_shed_sink"]], ids=lambda m: m[-1])
def test_bare_servers_stop_cleanly_at_sigterm(module: list[str]) -> None:
    """The house lifetime (pyorb.servers.runner): SIGTERM stops a bare server as stdin end of file does."""
    proc, ior = start(*module)
    try:
        assert ior.startswith("IOR:")
        proc.terminate()
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            stop(proc)


@pytest.mark.parametrize("shape", [["--connections", "8"], ["--connections", "1", "--in-flight", "8"]])
def test_bare_sink_client_times_real_calls_of_a_pyorb_sink(shape: list[str]) -> None:
    proc, ior = start("pyorb.servers.sink", "--model", "amh", "--delay", "0.01")
    try:
        assert ior.startswith("IOR:")
        done = subprocess.run([sys.executable, "-m", "benchmarks.bare_sink_client", ior, *shape,
                               "--warmup", "0.2", "--duration", "0.5"],
                              capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        result = read_result(done.stdout)
        # 8 calls in flight, each held 10 ms by the sink: about 800 calls/s, and none faster than the delay.
        assert result.errors == 0 and 100 < result.calls <= 8 * 0.5 / 0.01 + 8, result
        assert result.latency_ms["min_ms"] >= 8.5, result  # (a loop timer may fire up to 1 ms early)
    finally:
        stop(proc)


def test_bare_middle_tier_forwards_each_call_to_the_bare_sink_and_back() -> None:
    sink, sink_ior = start("benchmarks.bare_middle", "sink", "--delay", "0.01")
    middle, ior = start("benchmarks.bare_middle", "middle", "--sink", sink_ior)
    try:
        assert sink_ior.startswith("IOR:") and ior.startswith("IOR:")
        # pyorb's generator checks that each reply carries its own call's token back.
        done = subprocess.run([sys.executable, "-m", "pyorb.loadtest.generator", ior, "--clients", "8",
                               "--warmup", "0.2", "--duration", "0.5"],
                              capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["errors"] == 0 and 100 < result["calls"] <= 8 * 0.5 / 0.01 + 8, result
        assert result["min_ms"] >= 8.5, result  # every call waited for the sink
        for proc in (middle, sink):
            _, err = proc.communicate("", timeout=20)  # stdin EOF: the benchmark's stop signal
            assert proc.returncode == 0, err
    finally:
        for proc in (middle, sink):
            if proc.poll() is None:
                stop(proc)


@pytest.mark.parametrize("lock", [[], ["--lock"]], ids=["thread-per-connection", "threaded"])
def test_bare_shed_sink_serves_what_it_admits_and_refuses_the_rest_transient(lock: list[str]) -> None:
    """Admitting one call at a time (20 ms of work, a 20 ms queue), it serves
    some of eight simultaneous calls and answers the others at once with
    TRANSIENT, completed NO, which pyorb's client reads as a shed call."""
    import pyorb
    from omniORB import CORBA

    from pyorb.idl import bench_idl
    from pyorb.server.admission import SHED_MINOR

    proc, ior = start("benchmarks.bare_shed_sink", "--cpu", "0.02", "--target", "0.02", *lock)

    async def calls() -> list[object]:
        clients = [pyorb.Client() for _ in range(8)]
        try:
            sinks = [c.resolve(ior, bench_idl().Bench.Sink) for c in clients]
            return await asyncio.gather(*(s.work(100 + i, timeout=10) for i, s in enumerate(sinks)),
                                        return_exceptions=True)
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    try:
        assert ior.startswith("IOR:")
        outcomes = asyncio.run(calls())
        served = [o for o in outcomes if isinstance(o, int)]
        refused = [o for o in outcomes if isinstance(o, CORBA.TRANSIENT)]
        assert len(served) + len(refused) == 8, outcomes
        assert served and refused, outcomes
        assert set(served) <= set(range(100, 108)), served  # each call's own token back
        assert all(r.minor == SHED_MINOR and r.completed == CORBA.COMPLETED_NO for r in refused), refused
        _, err = proc.communicate("", timeout=20)  # stdin EOF: the benchmark's stop signal
        assert proc.returncode == 0, err
        assert f"{len(served)} calls admitted, {len(refused)} refused" in err, err
    finally:
        if proc.poll() is None:
            stop(proc)


def test_middle_floor_benchmark_prints_every_chain() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_middle_floor", "--quick", "--clients", "8",
                           "--delay", "0.01", "--chains", "bare/none/bare", "bare/bare/bare", "pyorb/pyorb/pyorb"],
                          capture_output=True, text=True, timeout=180, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "All runs clean." in done.stdout, done.stdout + done.stderr
    for label in ("bare → bare ", "bare → bare → bare", "pyorb → pyorb → pyorb"):
        assert label in done.stdout, done.stdout
    assert "Placement: unpinned." in done.stdout, done.stdout


def test_the_benchmarks_run_every_process_on_the_cpus_given_and_refuse_others() -> None:
    allowed = os.sched_getaffinity(0)
    cpu = max(allowed)
    command = [sys.executable, "-m", "benchmarks.bench_middle_floor", "--quick", "--clients", "2", "--delay", "0.01",
               "--chains", "bare/none/bare"]
    done = subprocess.run([*command, "--cpus", str(cpu)], capture_output=True, text=True, timeout=120, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert f"Placement: every process on CPU {cpu}." in done.stdout, done.stdout
    outside = max(allowed) + 1
    refused = subprocess.run([*command, "--cpus", str(outside)], capture_output=True, text=True, timeout=60,
                             check=False, cwd=ROOT)
    assert refused.returncode == 2, refused.stderr
    assert f"--cpus {outside}: this process may run only on CPUs {', '.join(map(str, sorted(allowed)))}" \
        in refused.stderr, refused.stderr


@pytest.mark.interop
def test_the_overload_benchmark_reports_each_server(tmp_path: Path) -> None:
    out = tmp_path / "overload.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_overload", "--quick", "--repeats", "1",
                           "--models", "thread_pool(2)", "omniORBpy thread/conn", "bare threaded", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for title in ("thread_pool(2): capacity", "omniORBpy thread/conn: capacity",
                  "bare threaded: capacity"):
        assert title in done.stdout, done.stdout
    assert "admitting at most 10 calls unanswered" in " ".join(done.stdout.split()), done.stdout
    assert "…" not in done.stdout, done.stdout  # no header or figure cut to fit the width
    servers = json.loads(out.read_text(encoding="utf-8"))
    assert [s["model"] for s in servers] == ["thread_pool(2)", "omniORBpy thread/conn", "bare threaded"]
    for server in servers:
        assert server["capacity"] > 0 and [r["factor"] for r in server["runs"]] == [1.0, 5.0], server
        assert all(r["sent"] > 0 and r["goodput"] > 0 and r["rss_mib"] > 0 for r in server["runs"]), server
        # pyorb's sink tells the calls it shed after queueing them, read from its Prometheus endpoint
        pyorb = server["model"] == "thread_pool(2)"
        assert all((0 <= r["shed_queued"] <= r["shed"]) if pyorb else r["shed_queued"] is None
                   for r in server["runs"]), server
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


@pytest.mark.interop
def test_an_overload_ab_offers_both_servers_the_same_rates(tmp_path: Path) -> None:
    """With --tree the pair's second server is offered what its first was, and counted against the same
    capacity, while each reports its own."""
    out = tmp_path / "ab.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_overload", "--quick", "--repeats", "1",
                           "--models", "thread_pool(2)", "--tree", str(ROOT), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = json.loads(out.read_text(encoding="utf-8"))
    assert first["model"] == f"thread_pool(2) ({ROOT})" and second["model"] == "thread_pool(2)", (first, second)
    assert first["capacity"] == first["measured_capacity"] > 0, first
    assert second["capacity"] == first["capacity"] and second["measured_capacity"] > 0, second
    assert [r["offered"] for r in second["runs"]] == [r["offered"] for r in first["runs"]], (first, second)
    if second["measured_capacity"] != second["capacity"]:
        assert "(the A/B's first server's; its own" in " ".join(done.stdout.split()), done.stdout


@pytest.mark.interop
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU for the sink and one for the generator")
def test_the_overload_benchmark_runs_the_sink_on_the_cpus_given_and_the_generator_on_the_others(
        tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    sink, rest = allowed[-1], allowed[:-1]
    out = tmp_path / "overload.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_overload", "--quick", "--repeats", "1",
                           "--models", "reactive", "--server-cpus", str(sink), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    [server] = json.loads(out.read_text(encoding="utf-8"))
    assert server["cpus"] == [sink], server["cpus"]
    assert f"each sink on CPU {sink}, the generator on CPU {', '.join(map(str, rest))}" in \
        " ".join(done.stdout.split()), done.stdout[-1000:]
    every = subprocess.run([sys.executable, "-m", "benchmarks.bench_overload", "--server-cpus", *map(str, allowed)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert every.returncode == 2 and "the generator at least one of them left over" in every.stderr, every.stderr


def test_bench_locator_runs_both_models_and_prints_the_ratio() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_locator", "--ids", "1000",
                           "--seconds", "0.5", "--warmup", "0.1", "--repeats", "1", "--clients", "2",
                           "--concurrency", "4", "--json"],
                          capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "locator / single throughput:" in done.stdout
    runs = json.loads(done.stdout.strip().splitlines()[-1])["runs"]
    for model in ("single", "locator"):
        (run,) = runs[model]
        result = LoadResult.from_dict(run)  # what every generator reports
        assert result.mode == model and result.errors == 0 and result.calls > 50, run
        assert result.latency_ms["p50_ms"] > 0 and result.extra["rss_after_mb"] > 0, run


@pytest.mark.asyncio
@pytest.mark.parametrize(("options", "timed"), [([], True), (["--untimed"], False)], ids=["timed", "untimed"])
async def test_the_sequential_generator_times_its_calls_unless_untimed(options: list[str], timed: bool) -> None:
    # Like-for-like with omniORBpy's generator, which sets no timeout: --untimed sends no deadline.
    import pyorb
    from pyorb.idl import bench_idl

    idl = bench_idl()
    deadlines: list[float | None] = []

    class Echo(idl.Bench__POA.Echo):  # type: ignore[misc,name-defined]
        def ping(self, stamp: int) -> int:
            context = pyorb.current()
            assert context is not None
            deadlines.append(context.deadline)
            return stamp

    async with pyorb.Server() as server:
        ior = server.ior(server.activate(Echo(), "Echo"))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pyorb.loadtest.generator", ior, "--target", "echo", "--mode", "sequential",
            "--calls", "20", "--warmup", "0", "--duration", "60", *options,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()
    result = read_result(out.decode())
    assert (result.calls, result.errors) == (20, 0), result
    assert len(deadlines) >= 20 and all((d is not None) is timed for d in deadlines), deadlines


@pytest.mark.parametrize("server", ["pyorb.servers.echo", "pyorb.servers.omni echo"])
def test_bare_echo_client_awaits_each_echoed_call(server: str) -> None:
    proc, ior = start(*server.split())
    try:
        assert ior.startswith("IOR:")
        result = generate(ior, ["benchmarks.bare_echo_client"], "--warmup", "0.1", "--duration", "0.4")
        # It checks each reply carries its own call's stamp back, and exits non-zero otherwise.
        assert result.errors == 0 and result.calls > 50 and result.mode == "bare-sequential", result
    finally:
        stop(proc)


def test_bare_echo_client_fails_on_an_exception_reply() -> None:
    proc, ior = start("pyorb.servers.sink", "--model", "amh")  # no ping: BAD_OPERATION
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.bare_echo_client", ior, "--warmup", "0",
                               "--duration", "0.2"], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
        assert done.returncode != 0 and "reply status 2 to request 1" in done.stderr, done.stderr
    finally:
        stop(proc)


def test_sequential_benchmark_prints_every_pair_and_the_ratios() -> None:
    cpu = min(os.sched_getaffinity(0))
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_sequential", "--rounds", "1", "--seconds", "0.3",
                           "--warmup", "0.1", "--cpus", str(cpu), "--servers", "pyorb", "bare floor",
                           "--clients", "pyorb, untimed", "omniORBpy", "bare asyncio"],
                          capture_output=True, text=True, timeout=180, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    for server in ("pyorb", "bare floor"):
        for client in ("pyorb, untimed", "omniORBpy", "bare asyncio"):
            assert f"{client} -> {server}:" in done.stderr, done.stderr
    assert done.stdout.count("1.00") >= 2, done.stdout  # omniORBpy's client against itself, per server
    assert f"placement: every process on CPU {cpu}\n" in done.stdout, done.stdout
