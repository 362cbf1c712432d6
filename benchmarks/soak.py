#!/usr/bin/env python3
"""Soak test: closed-loop clients through the AMH middle tier for a bounded time.

Starts a sink (``pyorb.servers.sink``) and a middle tier
(``pyorb.servers.middle``) as processes on loopback, then runs N closed-loop
clients (asyncio, one pyorb Client each) that send a unique token per call and
check that the reply carries that token.  Every ``--sample`` seconds it
records the middle tier's and the sink's RSS, threads and CPU time.  At the end
it reports calls, lost (errors) and mismatched replies, and RSS growth after
the warm-up; ``--markdown`` writes the report.  Its last stdout line is the
run as every load generator reports it (``pyorb.loadtest.stats.LoadResult``,
read back by ``read_result``).  Loopback only; stops by itself after
``--duration`` seconds.

    python -m benchmarks.soak --duration 600 --clients 200 --delay 0.005 --markdown docs/reliability-run.md
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import psutil
from rich.console import Console
from rich.table import Table

import pyorb
from pyorb.idl import bench_idl
from pyorb.loadtest.stats import LoadResult


@dataclass
class Tally:
    """The live counts of the clients (the sampler reads ``calls`` as they run)."""

    calls: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    mismatched: int = 0

    def result(self, ns: argparse.Namespace, cpu_s: float, wall_s: float) -> LoadResult:
        """The run as every load generator reports it.  No latency summary: a soak of up to a day
        keeps no list of every call's latency."""
        return LoadResult.measured("soak", ns.clients, self.calls, sum(self.errors.values()), ns.duration, [], cpu_s,
                                   wall_s, mismatched=self.mismatched, errors_by_kind=dict(self.errors),
                                   model=ns.model, delay=ns.delay)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    p.add_argument("--clients", type=int, default=200, help="closed-loop clients (default 200)")
    p.add_argument("--delay", type=float, default=0.005, help="sink delay per call in seconds (default 0.005)")
    p.add_argument("--model", default="amh", help="middle-tier model (default amh)")
    p.add_argument("--sample", type=float, default=10.0, help="seconds between RSS samples (default 10)")
    p.add_argument("--warmup", type=float, default=0.2, help="fraction of the run treated as warm-up (default 0.2)")
    p.add_argument("--markdown", type=Path, help="write the report here as Markdown")
    ns = p.parse_args(argv)
    if not 0 < ns.duration <= 24 * 3600 or ns.clients < 1 or ns.sample <= 0 or not 0 <= ns.warmup < 1:
        p.error("--duration must be in (0, 86400], --clients >= 1, --sample > 0, 0 <= --warmup < 1")
    return ns


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    ior = proc.stdout.readline().strip()
    proc.stdout.readline()
    if not ior.startswith("IOR:"):
        proc.kill()
        raise SystemExit(f"soak: {args[0]} did not start")
    return proc, ior


async def client_loop(ref: str, tokens: itertools.count[int], tally: Tally, end: float) -> None:
    sink_iface = bench_idl().Bench.Sink
    async with pyorb.Client() as client:
        proxy = client.resolve(ref, sink_iface)
        while time.monotonic() < end:
            token = next(tokens)
            try:
                got = await proxy.work(token, timeout=30)
            except Exception as exc:  # every failure is counted, by type
                name = type(exc).__name__ if not hasattr(exc, "_NP_RepositoryId") else str(exc)
                tally.errors[name] = tally.errors.get(name, 0) + 1
                continue
            tally.calls += 1
            tally.mismatched += got != token


async def sampler(procs: dict[str, psutil.Process], samples: list[dict[str, Any]], end: float, every: float,
                  tally: Tally, t0: float) -> None:
    while True:
        row: dict[str, Any] = {"t": time.monotonic() - t0, "calls": tally.calls}
        for name, proc in procs.items():
            with proc.oneshot():
                cpu = proc.cpu_times()
                row[name] = (proc.memory_info().rss, proc.num_threads(), cpu.user + cpu.system)
        samples.append(row)
        if time.monotonic() >= end:
            return
        await asyncio.sleep(min(every, max(0.0, end - time.monotonic())))


async def run(ns: argparse.Namespace, ref: str, procs: dict[str, psutil.Process]) -> tuple[Tally, list[dict[str, Any]]]:
    tally, samples = Tally(), []
    t0 = time.monotonic()
    end = t0 + ns.duration
    tokens = itertools.count(1)
    await asyncio.gather(sampler(procs, samples, end, ns.sample, tally, t0),
                         *(client_loop(ref, tokens, tally, end) for _ in range(ns.clients)))
    return tally, samples


def report(ns: argparse.Namespace, tally: Tally, samples: list[dict[str, Any]], procs: list[str]) -> list[Table]:
    after = [s for s in samples if s["t"] >= ns.warmup * ns.duration] or samples
    summary = Table(title=f"soak: {ns.clients} clients, {ns.duration:g} s, sink delay {ns.delay * 1e3:g} ms, "
                          f"middle tier {ns.model}")
    for col in ("calls", "calls/s", "lost (errors)", "mismatched", *(f"{p} RSS growth after warm-up" for p in procs)):
        summary.add_column(col, justify="right")
    growth = []
    for p in procs:
        base, last = after[0][p][0], max(s[p][0] for s in after)
        growth.append(f"{(last - base) / base * 100:+.1f} % ({base / 2**20:.1f} → {last / 2**20:.1f} MiB peak)")
    lost = sum(tally.errors.values())
    summary.add_row(str(tally.calls), f"{tally.calls / ns.duration:,.0f}",
                    f"{lost}" + (f" {tally.errors}" if lost else ""), str(tally.mismatched), *growth)
    timeline = Table(title="samples")
    for col in ("t (s)", "calls", *(f"{p} RSS MiB / threads / CPU s" for p in procs)):
        timeline.add_column(col, justify="right")
    for s in samples:
        timeline.add_row(f"{s['t']:.0f}", str(s["calls"]),
                         *(f"{s[p][0] / 2**20:.1f} / {s[p][1]} / {s[p][2]:.1f}" for p in procs))
    return [summary, timeline]


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    sink, sink_ior = start("pyorb.servers.sink", "--delay", str(ns.delay))
    middle, ref = start("pyorb.servers.middle", "--sink", sink_ior, "--model", ns.model)
    try:
        procs = {"middle": psutil.Process(middle.pid), "sink": psutil.Process(sink.pid)}
        cpu, wall = time.process_time(), time.perf_counter()
        tally, samples = asyncio.run(run(ns, ref, procs))
        result = tally.result(ns, time.process_time() - cpu, time.perf_counter() - wall)
    finally:
        for proc in (middle, sink):
            proc.communicate(timeout=30)  # closes stdin: the servers stop
    tables = report(ns, tally, samples, ["middle", "sink"])
    console = Console(width=200)
    for t in tables:
        console.print(t)
    if ns.markdown:
        from rich import box
        md = Console(record=True, width=200, file=open("/dev/null", "w"))
        for t in tables:
            t.box = box.MARKDOWN
            md.print(t)
        cmd = "python " + " ".join(["benchmarks/soak.py", *(argv if argv is not None else sys.argv[1:])])
        ns.markdown.write_text(f"Command: `{cmd}`\n\nMachine: {platform.machine()}, {psutil.cpu_count()} CPUs, "
                               f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
                               + md.export_text() + "\n")
    result.emit()
    ok = result.errors == 0 and tally.mismatched == 0 and result.calls > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
