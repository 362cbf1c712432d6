#!/usr/bin/env python3
"""Open-loop overload: goodput, latency and shedding at 1x to 10x a sink's capacity, per strategy.

    python -m benchmarks.bench_overload                 # every strategy and omniORBpy (about 5 minutes)
    python -m benchmarks.bench_overload --no-admission  # the same servers without admission control
    python -m benchmarks.bench_overload --quick         # a smoke run
    python -m benchmarks.bench_overload --tree /tmp/pyorb-before  # A/B against another copy of pyorb
    python -m benchmarks.bench_overload --server-cpus 1  # each sink on CPU 1, the generator on the others

Each server is a fresh sink process (Bench::Sink.work: ``--cpu`` seconds of
CPU per call, so every model has about the same capacity on one
interpreter): pyorb's sink under each strategy, with admission control
(``--target``, ``--interval``, ``--limit``: Config.queue_target,
queue_interval, queue_limit) unless ``--no-admission``, and omniORBpy's sink
(thread per connection, and a pool) beside them.  First its capacity: the
better of two runs of ``--capacity-concurrency`` closed-loop calls for
``--capacity-seconds``.
Then, for each factor of ``--factors``, an open-loop load of factor x
capacity (pyorb.loadtest.openloop: calls on a fixed schedule over
``--connections`` connections for ``--seconds``, each with ``--timeout``),
``--repeats`` times.  Per point: goodput (replies per second) and its share
of the capacity, the same counted from ``--warmup`` seconds into the point
(steady: the first calls of a point wait in a queue that is filling, up to
the queue limit, and many answer after the point ends), the replied calls' p50/p99 latency, the calls refused
TRANSIENT (shed) and how long the median one took to be refused, how many
of those a pyorb server shed only after it had queued them (read from its
Prometheus endpoint: each cost it the call's arguments and a place in the
queue, where a refusal on arrival costs neither), the calls that timed out,
and the server's peak RSS;
ranges are min-max over the repeats.  With ``--tree``, each pyorb server is
also run from that copy of pyorb, just before the one from this tree (an
A/B in one run: the machine's load changes under both alike), and both are
offered the same rates and counted against the same capacity, the one
measured for the copy (each server's own is reported too): a capacity
measured a few per cent apart would otherwise move the percentages of the
pair as much as the code does.

Where the CPU goes: the server's CPU time per served call (from the
capacity runs, where nothing is shed), and per point the server's, its
event loop's (its main thread: reading, refusing, writing) and this
generator's CPU (share of one core over the point) and the server's CPU
per refused call (its CPU time less the replied calls at the served cost,
over the refused calls), and the share of the server's CPU that went to
the calls it replied to (at the served cost): goodput against the capacity
the CPU the machine gave the server during that point would have had,
which the machine's other work does not shift.  On one interpreter,
goodput at k x capacity keeps the share (1 - k r) / (1 - r) of the
capacity, r being a refused call's cost over a served one's: 90 % at 10x
needs r <= 1.1 %.

``--server-cpus`` runs each sink, with all its threads, on the CPUs given
and this generator on the others.  Unpinned, the kernel spreads a sink's
threads over the CPUs, and every hand-over of the interpreter lock between
two of them then waits for the other CPU to wake: a share of a core the
server spends idle under load, which a server given its own CPU does not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import statistics
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import psutil  # type: ignore[import-untyped]
import uvloop
from benchmarks.common import ServerProcess, range_text
from rich.console import Console
from rich.table import Table

from pyorb.loadtest.openloop import capacity, offer

PY = sys.executable
PYORB_MODELS = ("reactive", "amh", "thread_pool(4)", "thread_per_request(8)", "thread_per_connection", "threaded",
                "locality(4)")
OMNI_MODELS = ("omniORBpy thread/conn", "omniORBpy pool(4)")
BARE_MODELS = ("bare thread/conn", "bare threaded")
"""Floors, not ORBs (benchmarks/bare_shed_sink.py): run only when named."""
QUICK_MODELS = ("reactive", "thread_pool(4)", "omniORBpy thread/conn")
SETTLE_S = 0.5  # between points: what a point left queued drains or is refused


def is_pyorb(model: str) -> bool:
    """A pyorb sink: neither omniORBpy's nor a bare floor (only pyorb's has admission control and metrics)."""
    return not model.startswith("omniORBpy") and model not in BARE_MODELS


@dataclass
class Run:
    """One repeat of one point."""

    factor: float
    offered: float
    sent: int
    goodput: float
    p50: float
    p99: float
    shed_p50: float
    shed: int
    timeouts: int
    errors: int
    rss_mib: float
    replied: int = 0
    wall: float = 0.0
    server_cpu: float = 0.0
    """Server process CPU seconds (user + system) over the point."""
    generator_cpu: float = 0.0
    """This process's CPU seconds over the point."""
    steady: float = 0.0
    """Replies per second from ``--warmup`` seconds into the point to its end."""
    loop_cpu: float = 0.0
    """CPU seconds of the server's main thread, its event loop, over the point (0 where threads are not listed)."""
    shed_queued: int | None = None
    """Of ``shed``, the calls the server shed after it had queued them (None: not a pyorb server that counts them)."""


@dataclass
class Server:
    """One server's capacity and runs."""

    model: str
    cpus: list[int] = field(default_factory=list)
    """The CPUs the sink's threads could run on when it was measured."""
    capacity: float = 0.0
    """Calls per second the load is offered and goodput counted against."""
    measured_capacity: float = 0.0
    """This server's own closed-loop capacity: ``capacity`` but in an A/B's second server, which shares
    the first's."""
    served_cpu: float = 0.0
    """Server CPU seconds per served call, from the capacity runs."""
    runs: list[Run] = field(default_factory=list)

    def shed_cpu(self, run: Run) -> float | None:
        """Server CPU seconds per refused call in ``run`` (None without refusals)."""
        if not run.shed:
            return None
        return max(run.server_cpu - run.replied * self.served_cpu, 0.0) / run.shed


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", help=f"servers (default: {', '.join(PYORB_MODELS + OMNI_MODELS)}; "
                                               f"also {', '.join(BARE_MODELS)})")
    p.add_argument("--factors", default="1,2,5,10", help="offered load as multiples of the capacity (default 1,2,5,10)")
    p.add_argument("--cpu", type=float, default=0.005, help="CPU seconds per call in the sink (default 0.005)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds of open-loop load per point (default 2)")
    p.add_argument("--repeats", type=int, default=2, help="repeats of every point (default 2)")
    p.add_argument("--connections", type=int, default=16, help="client connections (default 16)")
    p.add_argument("--timeout", type=float, default=2.0, help="each call's timeout in seconds (default 2)")
    p.add_argument("--capacity-seconds", type=float, default=2.0, help="closed-loop seconds for the capacity")
    p.add_argument("--capacity-concurrency", type=int, default=4, help="calls outstanding for the capacity")
    p.add_argument("--target", type=float, default=0.05, help="Config.queue_target (default 0.05)")
    p.add_argument("--interval", type=float, default=0.1, help="Config.queue_interval (default 0.1)")
    p.add_argument("--limit", type=float, default=0.5, help="Config.queue_limit (default 0.5)")
    p.add_argument("--warmup", type=float, default=None, metavar="S",
                   help="seconds into a point before replies count as steady goodput (default: --limit, the "
                        "longest a call may wait queued)")
    p.add_argument("--no-admission", action="store_true", help="pyorb's sinks without admission control")
    p.add_argument("--quick", action="store_true", help="a smoke run: three servers, 1x and 5x, short points")
    p.add_argument("--tree", help="also run each pyorb server from this copy of pyorb, just before this tree's")
    p.add_argument("--server-cpus", type=int, nargs="+", metavar="CPU",
                   help="run each sink on these CPUs and the generator on the others (default: unpinned)")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the runs as JSON here")
    ns = p.parse_args(argv)
    ns.generator_cpus = None
    if ns.server_cpus:
        allowed = os.sched_getaffinity(0)
        ns.server_cpus = set(ns.server_cpus)
        ns.generator_cpus = allowed - ns.server_cpus
        if not ns.server_cpus <= allowed or not ns.generator_cpus:
            p.error(f"--server-cpus {' '.join(map(str, sorted(ns.server_cpus)))}: the sink needs CPUs among "
                    f"{', '.join(map(str, sorted(allowed)))}, and the generator at least one of them left over")
    ns.factors = [float(f) for f in ns.factors.split(",")]
    if ns.quick:
        ns.factors, ns.seconds, ns.capacity_seconds = [1.0, 5.0], 0.5, 0.5
    ns.models = ns.models or list(QUICK_MODELS if ns.quick else PYORB_MODELS + OMNI_MODELS)
    if ns.warmup is None:
        ns.warmup = min(ns.limit, ns.seconds / 2)
    if min(ns.factors) <= 0 or ns.seconds <= 0 or ns.repeats < 1 or ns.connections < 1 or ns.cpu <= 0:
        p.error("--factors, --seconds and --cpu must be positive; --repeats and --connections at least 1")
    if not 0 <= ns.warmup < ns.seconds:
        p.error("--warmup must be at least 0 and less than --seconds")
    return ns


def command(model: str, ns: argparse.Namespace, tree: str | None = None, metrics: int | None = None) -> list[str]:
    cpu = ["--cpu", str(ns.cpu)]
    if model == "omniORBpy thread/conn":
        return [PY, "-m", "pyorb.servers.omni", "sink", *cpu]
    if model == "omniORBpy pool(4)":
        return [PY, "-m", "pyorb.servers.omni", "sink", "--threading", "pool", "--pool-size", "4", *cpu]
    if model in BARE_MODELS:
        lock = ["--lock"] if model == "bare threaded" else []
        return [PY, "-m", "benchmarks.bare_shed_sink", *cpu, "--target", str(ns.target), *lock]
    admission = [] if ns.no_admission else ["--queue-target", str(ns.target), "--queue-interval", str(ns.interval),
                                            "--queue-limit", str(ns.limit)]
    exporter = [] if metrics is None else ["--metrics", f"127.0.0.1:{metrics}"]
    sink = [PY, "-m", "pyorb.servers.sink", "--model", model, *cpu, *admission, *exporter]
    if tree is None:
        return sink
    # -P: the working directory (this tree) is not put before PYTHONPATH.
    return ["env", f"PYTHONPATH={tree}", PY, "-P", *sink[1:]]


async def point(ior: str, server: psutil.Process, factor: float, cap: float, ns: argparse.Namespace,
                metrics: str | None = None) -> Run:
    peak = [server.memory_info().rss]

    async def sample() -> None:
        while True:
            peak.append(server.memory_info().rss)
            await asyncio.sleep(0.1)

    sampler = asyncio.ensure_future(sample())
    queued = None if metrics is None else await asyncio.to_thread(_shed_queued, metrics)
    cpu, loop, own, wall = _cpu(server), _loop_cpu(server), time.process_time(), time.perf_counter()
    try:
        out = await offer(ior, factor * cap, ns.seconds, ns.connections, ns.timeout, ns.warmup)
    finally:
        sampler.cancel()
    x = out.extra
    if metrics is not None and queued is not None:
        after = await asyncio.to_thread(_shed_queued, metrics)
        queued = None if after is None else after - queued
    return Run(factor, x["offered"], x["sent"], out.throughput, _seconds(out.latency_ms["p50_ms"]),
               _seconds(out.latency_ms["p99_ms"]), _seconds(x["shed_p50_ms"]), x["shed"], x["timeouts"],
               x["other_errors"], max(peak) / 2**20, x["replied"], time.perf_counter() - wall, _cpu(server) - cpu,
               time.process_time() - own, x["steady_goodput"], _loop_cpu(server) - loop, queued)


def _free_port() -> int:
    """A loopback port free now, for the sink's Prometheus endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shed_queued(url: str) -> int | None:
    """The calls the sink at ``url`` shed after it had queued them, so far (None: it does not count them)."""
    from prometheus_client.parser import text_string_to_metric_families

    for _ in range(50):  # the endpoint starts just after the IOR is printed
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
            break
        except OSError:
            time.sleep(0.1)
    else:
        return None
    counts = [sample.value for family in text_string_to_metric_families(text) for sample in family.samples
              if sample.name == "pyorb_strategy_shed_queued_total"]
    return int(sum(counts)) if counts else None


def _seconds(ms: float | None) -> float:
    """A latency of the result in seconds, 0 for none (no call of that outcome)."""
    return 0.0 if ms is None or math.isnan(ms) else ms / 1e3


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _loop_cpu(process: psutil.Process) -> float:
    """CPU seconds of ``process``'s main thread: the sink's event loop, which
    reads, refuses and writes while dispatcher threads run the servant."""
    try:
        threads = process.threads()
    except (psutil.AccessDenied, NotImplementedError):
        return 0.0
    return next((float(t.user_time + t.system_time) for t in threads if t.id == process.pid), 0.0)


async def measure(model: str, ns: argparse.Namespace, tree: str | None = None,
                  shared: float | None = None) -> Server:
    """One server's capacity and points, offered ``shared`` calls per second times each factor if given
    (an A/B's second server), else its own capacity times each factor."""
    result = Server(model if tree is None else f"{model} ({tree})")
    port = _free_port() if is_pyorb(model) else None
    metrics = None if port is None else f"http://127.0.0.1:{port}/metrics"
    process = ServerProcess(command(model, ns, tree, port), result.model)
    if ns.server_cpus:
        os.sched_setaffinity(0, ns.server_cpus)  # the sink inherits it, and every thread it starts
    with process as ior:
        if ns.generator_cpus:
            os.sched_setaffinity(0, ns.generator_cpus)
        assert process.proc is not None
        server = psutil.Process(process.proc.pid)
        result.cpus = sorted(server.cpu_affinity())
        # The better of two: a shared machine only ever makes it look lower.
        cpu = _cpu(server)
        rates = [await capacity(ior, ns.capacity_seconds, ns.capacity_concurrency) for _ in range(2)]
        result.measured_capacity = max(rates)
        result.capacity = result.measured_capacity if shared is None else shared
        result.served_cpu = (_cpu(server) - cpu) / max(sum(rates) * ns.capacity_seconds, 1.0)
        for factor in ns.factors:
            for _ in range(ns.repeats):
                result.runs.append(await point(ior, server, factor, result.capacity, ns, metrics))
                await asyncio.sleep(SETTLE_S)
    problem = process.problem()
    if problem:
        print(f"bench_overload: {model}: {problem}", file=sys.stderr)
    return result


def table(server: Server, ns: argparse.Namespace) -> Table:
    if server.model in BARE_MODELS:
        admission = f", admitting at most {max(1, math.ceil(ns.target / ns.cpu))} calls unanswered"
    elif server.model.startswith("omniORBpy") or ns.no_admission:
        admission = ""
    else:
        admission = f", admission target {ns.target:g} s / interval {ns.interval:g} s / limit {ns.limit:g} s"
    own = "" if server.measured_capacity == server.capacity else \
        f" (the A/B's first server's; its own {server.measured_capacity:.0f})"
    t = Table(title=f"{server.model}: capacity {server.capacity:.0f} calls/s{own}{admission}; "
                    f"server CPU {1e6 * server.served_cpu:.0f} µs per served call")
    for col in ("load", "offered /s", "goodput /s", "% of capacity", "steady % of capacity", "p50 ms", "p99 ms", "shed", "shed queued",
                "shed p50 ms", "timeouts", "errors", "RSS MiB", "server CPU %", "loop CPU %", "generator CPU %", "server µs per shed call",
                "server CPU on replied calls %"):
        t.add_column(col, justify="right")
    for factor in ns.factors:
        runs = [r for r in server.runs if r.factor == factor]
        if not runs:
            continue
        t.add_row(f"{factor:g}x", f"{statistics.median(r.offered for r in runs):.0f}",
                  range_text([r.goodput for r in runs], "{:.0f}"),
                  range_text([100 * r.goodput / server.capacity for r in runs], "{:.0f}"),
                  range_text([100 * r.steady / server.capacity for r in runs], "{:.0f}"),
                  range_text([1e3 * r.p50 for r in runs], "{:.0f}"), range_text([1e3 * r.p99 for r in runs], "{:.0f}"),
                  range_text([r.shed for r in runs], "{:.0f}"),
                  range_text(queued, "{:.0f}") if (queued := [float(r.shed_queued) for r in runs if r.shed_queued is not None])
                  else "–",
                  range_text([1e3 * r.shed_p50 for r in runs], "{:.0f}"),
                  range_text([r.timeouts for r in runs], "{:.0f}"),
                  range_text([r.errors for r in runs], "{:.0f}"), range_text([r.rss_mib for r in runs], "{:.0f}"),
                  range_text([100 * r.server_cpu / r.wall for r in runs], "{:.0f}"),
                  "–" if server.model.startswith("omniORBpy") else  # no event loop: omniORB's own threads
                  range_text([100 * r.loop_cpu / r.wall for r in runs], "{:.0f}"),
                  range_text([100 * r.generator_cpu / r.wall for r in runs], "{:.0f}"),
                  _shed_cost(server, runs),
                  range_text([100 * min(r.replied * server.served_cpu / r.server_cpu, 1.0) for r in runs
                              if r.server_cpu > 0], "{:.0f}"))
    return t


def _shed_cost(server: Server, runs: list[Run]) -> str:
    costs = [1e6 * c for r in runs if (c := server.shed_cpu(r)) is not None]
    return range_text(costs, "{:.0f}") if costs else "–"


def _placement(ns: argparse.Namespace) -> str:
    if not ns.server_cpus:
        return "unpinned"
    return (f"each sink on CPU {', '.join(map(str, sorted(ns.server_cpus)))}, "
            f"the generator on CPU {', '.join(map(str, sorted(ns.generator_cpus)))}")


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    console = Console(width=200)  # every header whole: rich cuts a column it cannot fit with an ellipsis
    started = time.monotonic()
    results = []
    for model in ns.models:
        trees = [ns.tree, None] if ns.tree is not None and is_pyorb(model) else [None]
        shared = None
        for tree in trees:
            # uvloop: the generator's own overhead as small as it gets here
            result = uvloop.run(measure(model, ns, tree, shared))
            if len(trees) == 2:
                shared = result.capacity
            results.append(result)
            console.print(table(result, ns))
    load = " ".join(f"{x:.2f}" for x in psutil.getloadavg())
    console.print(f"{len(ns.models)} servers in {time.monotonic() - started:.0f} s; load average {load}; "
                  f"sink --cpu {ns.cpu:g}, {ns.connections} connections, call timeout {ns.timeout:g} s, "
                  f"{ns.seconds:g} s per point (steady from {ns.warmup:g} s), {ns.repeats} repeats; "
                  f"{_placement(ns)}")
    if ns.json:
        ns.json.write_text(json.dumps([asdict(r) for r in results], indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
