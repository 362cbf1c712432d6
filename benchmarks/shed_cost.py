#!/usr/bin/env python3
"""What refusing a call costs the server, against serving one: CPU time per call.

    python -m benchmarks.shed_cost --repeats 3
    python -m benchmarks.shed_cost --repeats 3 --tree /tmp/pyorb-before   # A/B against another copy of pyorb

Per strategy, two fresh sink processes (``pyorb.servers.sink --cpu 0``): one
whose admission control refuses every call (``--queue-target`` and
``--queue-interval`` of a microsecond: the queue is always "standing"), and
one without admission control that serves every call (the servant returns
at once, so this is the ORB's own cost of a call).  This process keeps
``--concurrency`` calls outstanding over ``--connections`` connections for
``--seconds`` and reads the server's CPU time (user + system, from
/proc) and its own before and after: CPU microseconds per call on each
side.  With ``--tree``, every run is repeated with the servers run from
that copy of pyorb (``git archive COMMIT | tar -x -C DIR``, its compiled
modules copied in), alternated with this one.  Both sides share the machine, so the rates swing with its load;
CPU time per call much less.

Overload (bench_overload.py) needs a refused call to cost the server a small
fraction r of a served one: on one interpreter goodput at k x capacity
keeps (1 - k r) / (1 - r) of the capacity, so 90 % at 10x needs r <= 1.1 %,
about 65 µs against the 5.9 ms a call of bench_overload.py's sink costs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any, Sequence

import psutil  # type: ignore[import-untyped]
import uvloop
from benchmarks.common import ServerProcess, range_text
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.loadtest.stats import LoadResult

PY = sys.executable
MODELS = ("threaded", "thread_pool(4)")
"""Strategies that queue calls: a sink with no work still builds a queue for its threads, which then stands.
``reactive`` and ``amh`` are judged by the event loop's lag alone, which such a sink hardly builds: few of their
calls are refused, and a run that refused few says nothing of a refusal's cost (it is left out, with a note)."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), help=f"strategies (default: {' '.join(MODELS)})")
    p.add_argument("--seconds", type=float, default=3.0, help="seconds of load per run (default 3)")
    p.add_argument("--repeats", type=int, default=3, help="runs per strategy and mode (default 3)")
    p.add_argument("--concurrency", type=int, default=64, help="calls outstanding (default 64)")
    p.add_argument("--connections", type=int, default=4, help="client connections (default 4)")
    p.add_argument("--tree", help="also run the servers from this copy of pyorb, alternated (an A/B)")
    ns = p.parse_args(argv)
    if ns.seconds <= 0 or ns.repeats < 1 or ns.concurrency < 1 or ns.connections < 1:
        p.error("--seconds must be positive; --repeats, --concurrency and --connections at least 1")
    return ns


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def drive(ior: str, server: psutil.Process, ns: argparse.Namespace) -> LoadResult:
    """Closed-loop calls for ``ns.seconds``: the replies (``calls``), the refusals (``errors``, and
    ``extra["shed"]``) and this process's CPU, with the server's CPU seconds in ``extra["server_cpu_s"]``."""
    iface = bench_idl().Bench.Sink
    clients = [pyorb.Client() for _ in range(ns.connections)]
    latencies: list[float] = []
    shed = 0
    try:
        sinks = [c.resolve(ior, iface) for c in clients]
        await asyncio.gather(*(s.work(0, timeout=10.0) for s in sinks), return_exceptions=True)
        cpu, own, wall = _cpu(server), time.process_time(), time.perf_counter()
        end = time.perf_counter() + ns.seconds

        async def caller(sink: Any) -> None:
            nonlocal shed
            while (sent := time.perf_counter()) < end:
                try:
                    await sink.work(1, timeout=10.0)
                except CORBA.TRANSIENT:
                    shed += 1
                else:
                    latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(caller(sinks[i % len(sinks)]) for i in range(ns.concurrency)))
        return LoadResult.measured("closed-loop", ns.connections, len(latencies), shed, ns.seconds, latencies,
                                   time.process_time() - own, time.perf_counter() - wall, shed=shed,
                                   server_cpu_s=_cpu(server) - cpu, concurrency=ns.concurrency)
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


def command(model: str, refuse: bool, tree: str | None) -> list[str]:
    admission = ["--queue-target", "1e-6", "--queue-interval", "1e-6"] if refuse else []
    sink = ["-m", "pyorb.servers.sink", "--model", model, "--cpu", "0", *admission]
    if tree is None:
        return [PY, *sink]
    # -P: the working directory (this tree) is not put before PYTHONPATH.
    return ["env", f"PYTHONPATH={tree}", PY, "-P", *sink]


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    trees: list[str | None] = [None] if ns.tree is None else [ns.tree, None]
    rows = []
    for model in ns.models:
        keys = [(tree, mode) for tree in trees for mode in ("refused", "served")]
        per_call: dict[tuple[str | None, str], list[float]] = {k: [] for k in keys}
        generator: dict[tuple[str | None, str], list[float]] = {k: [] for k in keys}
        rates: dict[tuple[str | None, str], list[float]] = {k: [] for k in keys}
        for _ in range(ns.repeats):
            for tree, mode in keys:  # alternated: the machine's load changes under all alike
                process = ServerProcess(command(model, mode == "refused", tree), f"{model} {mode}")
                with process as ior:
                    assert process.proc is not None
                    result = uvloop.run(drive(ior, psutil.Process(process.proc.pid), ns))
                ok, shed, server_cpu, own_cpu = result.calls, result.extra["shed"], result.extra["server_cpu_s"], result.cpu_s
                calls = shed if mode == "refused" else ok
                if mode == "refused" and ok > shed / 10:
                    # The server's CPU went to the calls it served: over the few refused, a meaningless figure.
                    print(f"shed_cost: {model}: only {shed} of {ok + shed} calls refused; the run is left out of "
                          f"the refused row (a strategy judged by the event loop's lag refuses few calls of a "
                          f"sink that does no work)", file=sys.stderr)
                else:
                    per_call[tree, mode].append(1e6 * server_cpu / max(calls, 1))
                generator[tree, mode].append(1e6 * own_cpu / max(ok + shed, 1))
                rates[tree, mode].append((ok + shed) / ns.seconds)
        for key in keys:
            rows.append((model if key[0] is None else f"{model} ({key[0]})", key[1], per_call[key], generator[key],
                         rates[key]))
    print(f"sink --cpu 0, {ns.concurrency} calls outstanding over {ns.connections} connections, {ns.seconds:g} s "
          f"per run, {ns.repeats} runs each: median (min–max); load average "
          f"{' '.join(f'{x:.2f}' for x in psutil.getloadavg())}")
    print("| strategy | calls | server CPU µs per call | generator CPU µs per call | calls/s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for model, mode, server, gen, rate in rows:
        cost = f"{statistics.median(server):.0f} ({range_text(server, '{:.0f}')})" if server else "– (see above)"
        print(f"| `{model}` | {mode} | {cost} | "
              f"{statistics.median(gen):.0f} ({range_text(gen, '{:.0f}')}) | "
              f"{statistics.median(rate):.0f} ({range_text(rate, '{:.0f}')}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
