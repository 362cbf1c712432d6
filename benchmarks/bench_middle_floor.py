#!/usr/bin/env python3
"""The AMH middle tier against its floor: N closed-loop clients, a middle tier, a sink with delay D.

The goal set for the pyorb middle tier (AMH-ST, one thread) is
95 % of the ideal throughput N/D at N = 400 and D = 40 ms.  This script
measures how much of N/D any asyncio chain of three processes gets on this
machine, by swapping each tier for a bare uvloop one that does the least
its role needs (benchmarks/bare_sink_client.py, benchmarks/bare_middle.py):

  chains   CLIENT/MIDDLE/SINK, each bare or pyorb; MIDDLE also none (the
           client calls the sink directly), omniorb-tpc or omniorb-pool-N
           (omniORBpy's middle tier as the sweeps run it).  pyorb's client is
           ``python -m pyorb.loadtest.generator`` (the generator of the
           experiments), its middle tier ``pyorb.servers.middle --model
           amh-st`` and its sink ``pyorb.servers.sink --model amh``, as the
           client-scalability sweep runs them.

Each run starts fresh servers; the chains rotate from one repetition to the
next.  The table gives the share of N/D (throughput ÷ N/D) and the mean
latency, medians of the clean runs with their min-max spread.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import psutil  # type: ignore[import-untyped]
from benchmarks.bench_echo import Run, Table, judge, rotate, run_benchmark, summarize
from benchmarks.common import ROOT, RunDefaults, ServerProcess, add_run_options, generator_result, positive, settle_run_options

PY = sys.executable
BARE = ["-m", "benchmarks.bare_middle"]
CLIENT_SLACK_S = 60.0  # connecting N clients and exiting, on top of the window
DEFAULT_CHAINS = ("bare/none/bare", "bare/bare/bare", "pyorb/bare/bare", "bare/pyorb/pyorb", "pyorb/pyorb/bare",
                  "pyorb/pyorb/pyorb")
NORMAL = RunDefaults(seconds=5.0, warmup=1.0, repeats=3)
QUICK = RunDefaults(seconds=1.0, warmup=0.5, repeats=1)


@dataclass(frozen=True)
class Chain:
    client: str
    middle: str
    sink: str

    @property
    def key(self) -> str:
        return f"{self.client}/{self.middle}/{self.sink}"

    @property
    def label(self) -> str:
        tiers = [self.client] + ([] if self.middle == "none" else [self.middle]) + [self.sink]
        return " → ".join(tiers)


def chain(text: str) -> Chain:
    """argparse type: CLIENT/MIDDLE/SINK."""
    parts = text.split("/")
    if (len(parts) != 3 or parts[0] not in ("bare", "pyorb") or parts[2] not in ("bare", "pyorb")
            or not (parts[1] in ("bare", "pyorb", "none", "omniorb-tpc") or _pool_size(parts[1]))):
        raise argparse.ArgumentTypeError(f"expected CLIENT/MIDDLE/SINK (bare|pyorb / bare|pyorb|none|omniorb-tpc|"
                                         f"omniorb-pool-N / bare|pyorb): {text}")
    return Chain(*parts)


def _pool_size(middle: str) -> str:
    size = middle.removeprefix("omniorb-pool-")
    return size if middle.startswith("omniorb-pool-") and size.isdigit() and int(size) > 0 else ""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--clients", type=positive(int), default=400, help="N, closed-loop clients (default 400)")
    p.add_argument("--delay", type=positive(float), default=0.04, help="D, the sink's delay in seconds (default 0.04)")
    p.add_argument("--chains", type=chain, nargs="+", default=[chain(c) for c in DEFAULT_CHAINS],
                   metavar="CLIENT/MIDDLE/SINK", help=f"the chains to run (default: {' '.join(DEFAULT_CHAINS)})")
    add_run_options(p, NORMAL, QUICK, "one short run of each chain (a smoke test)")
    ns = p.parse_args(argv)
    settle_run_options(p, ns, NORMAL, QUICK)
    return ns


def sink_command(kind: str, delay: float) -> list[str]:
    if kind == "bare":
        return [PY, *BARE, "sink", "--delay", f"{delay:g}"]
    return [PY, "-m", "pyorb.servers.sink", "--model", "amh", "--delay", f"{delay:g}", "--cpu", "0"]


def middle_command(kind: str, sink_ior: str) -> list[str]:
    if kind == "bare":
        return [PY, *BARE, "middle", "--sink", sink_ior]
    if kind.startswith("omniorb-"):  # as pyorb.loadtest.sweep runs omniORBpy's middle tier
        threading = ["--threading", "pool", "--pool-size", _pool_size(kind)] if _pool_size(kind) else \
            ["--threading", "tpc"]
        return [PY, "-m", "pyorb.servers.omni", "middle", *threading, "--sink", sink_ior, "--sink-connections", "200"]
    return [PY, "-m", "pyorb.servers.middle", "--model", "amh-st", "--sink", sink_ior]


def client_command(kind: str, ref: str, ns: argparse.Namespace) -> list[str]:
    window = ["--warmup", f"{ns.warmup:g}", "--duration", f"{ns.seconds:g}"]
    if kind == "bare":
        return [PY, "-m", "benchmarks.bare_sink_client", ref, "--connections", str(ns.clients), *window]
    return [PY, "-m", "pyorb.loadtest.generator", ref, "--clients", str(ns.clients), *window]


def run_point(c: Chain, rep: int, seq: int, ns: argparse.Namespace) -> Run:
    run = Run(c.key, rep, seq, {"clients": ns.clients, "delay": ns.delay})
    started = time.monotonic()
    sink = ServerProcess(sink_command(c.sink, ns.delay), f"{c.sink} sink")
    middle: ServerProcess | None = None
    err = ""
    try:
        with sink as ref:
            if c.middle != "none":
                middle = ServerProcess(middle_command(c.middle, ref), f"{c.middle} middle tier")
                ref = middle.__enter__()
            servers = {"sink": sink, "middle": middle}
            meters = {name: psutil.Process(s.proc.pid) for name, s in servers.items() if s is not None and s.proc}
            before = {name: _cpu(m) for name, m in meters.items()}
            try:
                t0 = time.perf_counter()
                done = subprocess.run(client_command(c.client, ref, ns), cwd=ROOT, capture_output=True,
                                      timeout=ns.warmup + ns.seconds + CLIENT_SLACK_S + ns.clients / 50)
                wall = time.perf_counter() - t0
                busy = {name: (_cpu(m) - before[name]) / wall for name, m in meters.items()}
                run.client_rc, err = done.returncode, done.stderr.decode(errors="replace")
                found = generator_result(done.stdout)
            finally:
                if middle is not None:
                    middle.__exit__(None, None, None)
        if found is not None:
            ideal = ns.clients / ns.delay
            run.result = {"calls_per_s": found["throughput"], "share": found["throughput"] / ideal,
                          "mean_ms": found["mean_ms"], "p99_ms": found["p99_ms"], "errors": found["errors"],
                          "client_cores": found["cpu_s"] / found["wall_s"],
                          **{f"{name}_cores": cores for name, cores in busy.items()}}
        problems = [p for p in (sink.problem(), middle.problem() if middle is not None else None) if p]
        judge(run, "; ".join(problems) or None, err)
    finally:
        sink.stderr.close()
        if middle is not None:
            middle.stderr.close()
    run.wall_s = time.monotonic() - started
    return run


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def show(c: Chain, run: Run) -> str:
    if not run.result:
        return "no result"
    return f"{run.result['share']:.1%} of N/D, mean {run.result['mean_ms']:.2f} ms"


def tables(chains: list[Chain], ns: argparse.Namespace, by_key: dict[str, list[Run]]) -> list[Table]:
    rows = []
    for c in chains:
        runs = by_key.get(c.key, [])
        share, mean = summarize(runs, "share"), summarize(runs, "mean_ms")
        if share.median is None or mean.median is None:
            rows.append([c.label, "—", "—", "—", "—", "—", "—", "—", share.runs])
            continue
        cores = [summarize(runs, f"{tier}_cores").median for tier in ("client", "middle", "sink")]
        rows.append([c.label, f"{share.median:.1%}", f"{share.low:.1%}–{share.high:.1%}", f"{mean.median:.2f}",
                     f"{mean.low:.2f}–{mean.high:.2f}", *("—" if x is None else f"{x:.2f}" for x in cores),
                     share.runs])
    return [Table(f"N = {ns.clients} clients, D = {ns.delay * 1000:g} ms, ideal N/D = {ns.clients / ns.delay:,.0f} "
                  f"calls/s", ["client → middle → sink", "share of N/D", "min–max", "mean latency, ms", "min–max",
                               "client cores", "middle cores", "sink cores", "clean runs"], rows,
                  ("left",) + ("right",) * 8,
                  "Medians over the clean runs.  Cores: CPU seconds per second of the client's run (the client's "
                  "own, from its start to its end; the servers', over the same interval).  bare: "
                  "benchmarks/bare_sink_client.py, benchmarks/bare_middle.py; pyorb: the generator, the amh-st middle "
                  "tier and the amh sink of the experiments.")]


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    chains = list(dict.fromkeys(ns.chains))
    return run_benchmark("bench_middle_floor", argv, ns, lambda rep: rotate(chains, rep), run_point, show,
                         lambda by_key: tables(chains, ns, by_key))


if __name__ == "__main__":
    sys.exit(main())
