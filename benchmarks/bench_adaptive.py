#!/usr/bin/env python3
"""The adaptive strategy against fixed strategies on a workload that changes phase.

One run is a fresh pyorb sink server (Bench::Sink.work(token), a plain
synchronous servant) and a fresh omniORBpy client process with --clients
closed-loop threads, each on its own connection, on 127.0.0.1.  The
servant's demand per call changes at set times after the first call:

  cpu    --cpu-ms of CPU per call (holds the GIL);
  io     --io-ms of blocking sleep per call (no CPU);
  mixed  --mixed-cpu-ms of CPU, then --mixed-io-ms of sleep per call;

each phase lasting --seconds.  The server counts the replies it makes in
bins of BIN_S seconds, so every phase's throughput (calls/s) and the whole
run's come from the same run.  Models: reactive, thread_pool(n) for each
--pools n, thread_per_connection and --adaptive (adaptive(max_threads=64):
no cap below the largest fixed pool); or the --models given.  A model
``pinned:SPEC`` is adaptive held on SPEC: it times calls as adaptive does
but never moves, so against SPEC it shows the measurement's cost.
--repeats repetitions with the models' order rotated; medians over the clean
runs with their min-max spread; each phase's ratio to the best fixed
strategy's median.  Writes a plot of throughput over time (the median of
each bin over the repetitions) to --plot.

Run from the repository root: python -m benchmarks.bench_adaptive
(python -m benchmarks.bench_adaptive --quick for a smoke run).  The server
side is this script with --serve SPEC.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from benchmarks.bench_echo import (
    Run, Table, judge, rate, ratio, rotate, run_benchmark, spread, summarize)
from benchmarks.common import (
    ROOT, SERVER_START_S, RunDefaults, ServerProcess, add_run_options,
    generator_result, last_json, positive, read_first_line, settle_run_options, stop_process,
    tail)

PY = sys.executable
CLIENT = ["-m", "pyorb.loadtest.omni_generator", "--target", "sink", "--mode", "smi", "--ready"]
PHASES = ("cpu", "io", "mixed")
BIN_S = 0.25                    # the server's reply-count bins
CALL_TIMEOUT_S = 10.0           # the client's per-call timeout
CLIENT_SLACK_S = 30.0           # start-up and exit on top of the phases
NORMAL = RunDefaults(seconds=5.0, warmup=0.0, repeats=3)
QUICK = RunDefaults(seconds=1.0, warmup=0.0, repeats=1)
ADAPTIVE = "adaptive(max_threads=64)"
PINNED = "pinned:"


@dataclass(frozen=True)
class Point:
    """One measured configuration: a strategy spec."""

    model: str

    @property
    def key(self) -> str:
        """A stable name, used in the JSON and the notes."""
        return self.model


# -- the server side ------------------------------------------------------------


@dataclass(frozen=True)
class Demand:
    """Per call in one phase: seconds of CPU, then seconds of sleep."""

    cpu: float
    sleep: float


def demands(ns: argparse.Namespace) -> list[Demand]:
    """The phases' demands, in order."""
    return [Demand(ns.cpu_ms / 1e3, 0.0), Demand(0.0, ns.io_ms / 1e3),
            Demand(ns.mixed_cpu_ms / 1e3, ns.mixed_io_ms / 1e3)]


class PhasedCounter:
    """The phase clock (from the first call) and the reply counts per bin."""

    def __init__(self, phase_s: float) -> None:
        self.phase_s = phase_s
        self.start: float | None = None
        self.bins: list[int] = []
        self.lock = threading.Lock()

    def phase(self) -> int:
        """The current phase (the clock starts with the first call)."""
        now = time.monotonic()
        with self.lock:
            if self.start is None:
                self.start = now
        return min(len(PHASES) - 1, int((now - self.start) / self.phase_s))

    def replied(self) -> None:
        """One more reply, in the bin of now."""
        assert self.start is not None
        i = int((time.monotonic() - self.start) / BIN_S)
        with self.lock:
            if i >= len(self.bins):
                self.bins.extend([0] * (i + 1 - len(self.bins)))
            self.bins[i] += 1


def make_servant(counter: PhasedCounter, phases: list[Demand]) -> Any:
    """A plain synchronous Bench::Sink whose demand follows the phase clock."""
    from pyorb.idl import bench_idl
    from pyorb.servers.workload import spin

    class Phased(bench_idl().Bench__POA.Sink):  # type: ignore[misc]
        def work(self, token: int) -> int:
            demand = phases[counter.phase()]
            spin(demand.cpu)
            if demand.sleep:
                time.sleep(demand.sleep)
            counter.replied()
            return token

    return Phased()


async def serve(spec: str, ns: argparse.Namespace) -> int:
    """Serve until stdin ends; then print the bins and the adaptive moves as one JSON line."""
    import pyorb
    from pyorb.server import strategies
    from pyorb.server.strategies.adaptive import AdaptiveStrategy
    from pyorb.servers.runner import wait_for_stop

    if spec.startswith(PINNED):
        strategy: Any = AdaptiveStrategy(64, create=strategies.create, pin=spec[len(PINNED):])
    else:
        strategy = strategies.create(spec)
    counter = PhasedCounter(ns.seconds)
    async with pyorb.Server("127.0.0.1", 0, strategy=strategy) as server:
        key = server.activate(make_servant(counter, demands(ns)), "sink")
        print(server.ior(key), flush=True)
        await wait_for_stop(True, lambda: None)
        moves = []
        if isinstance(strategy, AdaptiveStrategy) and counter.start is not None:
            moves = [{"at": round(s.at - counter.start, 3), "old": s.old, "new": s.new, "reason": s.reason}
                     for s in strategy.switches]
    print(json.dumps({"bins": counter.bins, "bin_s": BIN_S, "moves": moves}), flush=True)
    return 0


# -- the driver -------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; --quick fills in what was not given."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p, NORMAL, QUICK, "a smoke run: 1 s phases, 1 repetition")
    p.add_argument("--clients", type=positive(int), default=16, help="closed-loop client threads (default 16)")
    p.add_argument("--pools", type=positive(int), nargs="+", default=[4, 16, 64], metavar="N",
                   help="thread_pool sizes compared (default 4 16 64)")
    p.add_argument("--models", nargs="+", metavar="SPEC",
                   help="measure exactly these (e.g. reactive pinned:reactive) instead of the default set")
    p.add_argument("--cpu-ms", type=positive(float), default=0.5, help="CPU per call, cpu phase (default 0.5)")
    p.add_argument("--io-ms", type=positive(float), default=5.0, help="sleep per call, io phase (default 5)")
    p.add_argument("--mixed-cpu-ms", type=positive(float), default=0.5,
                   help="CPU per call, mixed phase (default 0.5)")
    p.add_argument("--mixed-io-ms", type=positive(float), default=3.0,
                   help="sleep per call, mixed phase (default 3)")
    p.add_argument("--adaptive", default=ADAPTIVE, help=f"the adaptive spec (default {ADAPTIVE})")
    p.add_argument("--plot", type=Path, default=None,
                   help="where to write the plot (default docs/figures/adaptive.png; none with --quick)")
    p.add_argument("--serve", metavar="SPEC", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    settle_run_options(p, ns, NORMAL, QUICK)
    if ns.plot is None and not ns.quick:  # a smoke run does not replace the published figure
        ns.plot = ROOT / "docs" / "figures" / "adaptive.png"
    return ns


def models(ns: argparse.Namespace) -> list[str]:
    """The fixed strategies, then the adaptive one (or --models)."""
    if ns.models:
        return list(ns.models)
    return ["reactive", *(f"thread_pool({n})" for n in ns.pools), "thread_per_connection", ns.adaptive]


def fixed(ns: argparse.Namespace) -> list[str]:
    return [m for m in models(ns) if m != ns.adaptive and not m.startswith(PINNED)]


def server_command(pt: Point, ns: argparse.Namespace) -> list[str]:
    """This script as the server of ``pt``, with the run's phases."""
    return [PY, "-m", "benchmarks.bench_adaptive", "--serve", pt.model, "--seconds", str(ns.seconds),
            "--cpu-ms", str(ns.cpu_ms), "--io-ms", str(ns.io_ms), "--mixed-cpu-ms", str(ns.mixed_cpu_ms),
            "--mixed-io-ms", str(ns.mixed_io_ms)]


def drive_client(ior: str, ns: argparse.Namespace) -> tuple[int | None, bytes, str]:
    """Run the omniORBpy client through every phase; (rc, stdout, stderr tail)."""
    total = ns.seconds * len(PHASES)
    cmd = [PY, *CLIENT, ior, "--clients", str(ns.clients), "--connections", str(ns.clients), "--duration",
           str(total), "--warmup", "0", "--timeout", str(CALL_TIMEOUT_S)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        try:
            read_first_line(proc, SERVER_START_S)  # "ready": the first call is made, the phase clock runs
            out, _ = proc.communicate(timeout=total + CALL_TIMEOUT_S + CLIENT_SLACK_S)
            return proc.returncode, out, tail(err)
        except subprocess.TimeoutExpired as exc:
            stop_process(proc)
            return None, b"", f"client stopped: {exc}"
        finally:
            if proc.stdout is not None:
                proc.stdout.close()


def phase_figures(bins: list[int], ns: argparse.Namespace) -> dict[str, float]:
    """calls/s per phase and over the whole run, from the server's bins."""
    per_phase = round(ns.seconds / BIN_S)
    out: dict[str, float] = {}
    for i, name in enumerate(PHASES):
        counts = bins[i * per_phase:(i + 1) * per_phase]
        out[name] = round(sum(counts) / ns.seconds, 1)
    whole = bins[:per_phase * len(PHASES)]
    out["calls_per_s"] = round(sum(whole) / (ns.seconds * len(PHASES)), 1)
    return out


def run_point(pt: Point, rep: int, seq: int, ns: argparse.Namespace) -> Run:
    """One run: a fresh server, the client through the phases, the server's counts."""
    run = Run(pt.key, rep, seq, asdict(pt))
    started = time.monotonic()
    server = ServerProcess(server_command(pt, ns), f"{pt.model} server")
    try:
        with server as ior:
            run.client_rc, out, err = drive_client(ior, ns)
            client = generator_result(out)
            assert server.proc is not None and server.proc.stdin is not None and server.proc.stdout is not None
            server.proc.stdin.close()  # the server prints its counts and exits
            counts = last_json(server.proc.stdout.read())
            server.rc = server.proc.wait(SERVER_START_S)
        run.server_rc = server.rc
        if client is not None and counts is not None:
            run.result = {**client, **phase_figures(counts["bins"], ns), "bins": counts["bins"],
                          "moves": counts["moves"]}
        run.wall_s = round(time.monotonic() - started, 2)
        judge(run, server.problem(), err)
    finally:
        server.stderr.close()
    return run


def schedule(rep: int, ns: argparse.Namespace) -> list[Point]:
    """The models' order in repetition ``rep`` (rotated: none always runs first)."""
    return rotate([Point(m) for m in models(ns)], rep)


def shown(pt: Point, run: Run) -> str:
    """A run's figures in the progress line."""
    res = run.result or {}
    moves = f", {len(res.get('moves', []))} moves" if "adaptive" in pt.model else ""
    return " ".join(f"{p} {rate(res.get(p))}" for p in (*PHASES, "calls_per_s")) + " calls/s" + moves


# -- tables and the plot ------------------------------------------------------------


def best_fixed(by_key: dict[str, list[Run]], metric: str, ns: argparse.Namespace) -> tuple[str, float | None]:
    """The fixed strategy with the highest median of ``metric``."""
    meds = [(summarize(by_key.get(m, []), metric).median or 0.0, m) for m in fixed(ns)]
    value, name = max(meds)
    return name, value or None


def phase_table(by_key: dict[str, list[Run]], metric: str, title: str, ns: argparse.Namespace) -> Table:
    """Every model in one phase (or the whole run), with its ratio to the best fixed strategy."""
    best, best_value = best_fixed(by_key, metric, ns)
    rows = []
    for m in models(ns):
        sm = summarize(by_key.get(m, []), metric)
        rows.append([m, rate(sm.median), spread(sm), ratio(sm.median, best_value), sm.runs])
    return Table(title, ["strategy", "calls/s", "min–max", f"÷ best fixed ({best})", "clean"], rows,
                 ("left", "right", "right", "right", "left"),
                 "Medians over the clean runs of the calls the server answered in the phase, per second.")


def verdict_table(by_key: dict[str, list[Run]], ns: argparse.Namespace) -> Table:
    """The issue's targets: within 10 % of the best fixed in each phase; above every fixed overall."""
    rows = []
    ada = ns.adaptive
    for metric in (*PHASES, "calls_per_s"):
        a = summarize(by_key.get(ada, []), metric).median
        best, value = best_fixed(by_key, metric, ns)
        whole = metric == "calls_per_s"
        goal = 1.0 if whole else 0.9
        met = "—" if not (a and value) else ("yes" if (a > value if whole else a >= goal * value) else "no")
        rows.append(["whole run" if whole else metric, best, ratio(a, value),
                     "> 1.00× (beats every fixed)" if whole else "≥ 0.90×", met])
    return Table("Targets (adaptive ÷ best fixed, medians)",
                 ["phase", "best fixed", "adaptive ÷ best", "target", "met"], rows,
                 ("left", "left", "right", "left", "left"))


def overhead_table(by_key: dict[str, list[Run]], ns: argparse.Namespace) -> Table | None:
    """Each ``pinned:SPEC`` model against SPEC: what adaptive's timing costs when it never moves."""
    rows = []
    for m in models(ns):
        target = m[len(PINNED):]
        if not m.startswith(PINNED) or target not in by_key:
            continue
        cells = []
        for metric in (*PHASES, "calls_per_s"):
            a, b = summarize(by_key[m], metric), summarize(by_key[target], metric)
            cells.append(f"{rate(a.median)} ÷ {rate(b.median)} = {ratio(a.median, b.median)}")
        rows.append([f"{m} ÷ {target}", *cells])
    if not rows:
        return None
    return Table("The measurement's cost: adaptive pinned to a target ÷ that fixed strategy (medians)",
                 ["models", *PHASES, "whole run"], rows, ("left", "right", "right", "right", "right"))


def moves_note(by_key: dict[str, list[Run]], ns: argparse.Namespace) -> str:
    """The adaptive strategy's moves in each run, in one line."""
    parts = []
    for run in by_key.get(ns.adaptive, []):
        moves = (run.result or {}).get("moves", [])
        parts.append(f"rep {run.rep + 1}: " + (", ".join(f"{m['at']:.2f} s → {m['new']}" for m in moves)
                                              or "no moves"))
    return "Adaptive moves (seconds after the first call): " + "; ".join(parts) + "."


def tables(by_key: dict[str, list[Run]], ns: argparse.Namespace) -> list[Table]:
    """All tables, in reading order; also writes the plot."""
    demand = demands(ns)
    what = {"cpu": f"cpu phase ({demand[0].cpu * 1e3:g} ms CPU per call)",
            "io": f"io phase ({demand[1].sleep * 1e3:g} ms sleep per call)",
            "mixed": f"mixed phase ({demand[2].cpu * 1e3:g} ms CPU + {demand[2].sleep * 1e3:g} ms sleep per call)",
            "calls_per_s": f"whole run ({len(PHASES)} × {ns.seconds:g} s)"}
    tbls = [phase_table(by_key, m, what[m], ns) for m in (*PHASES, "calls_per_s")]
    verdict = verdict_table(by_key, ns)
    verdict.note = moves_note(by_key, ns)
    tbls.append(verdict)
    cost = overhead_table(by_key, ns)
    if cost is not None:
        tbls.append(cost)
    tbls[0].note = (f"{ns.clients} omniORBpy client threads (pyorb.loadtest.omni_generator), one connection "
                    f"each, closed loop, 127.0.0.1; phases of {ns.seconds:g} s from the first call. "
                    + tbls[0].note)
    try:
        if ns.plot is not None:
            plot(by_key, ns)
    except Exception as exc:  # noqa: BLE001 - the tables matter more than the figure
        print(f"bench_adaptive: no plot: {exc}", file=sys.stderr)
    return tbls


def median_bins(runs: list[Run], n: int) -> list[float]:
    """Each bin's median over the clean runs, in calls/s."""
    series = [(r.result or {}).get("bins", []) for r in runs if r.clean]
    series = [s + [0] * (n - len(s)) for s in series if s]
    return [statistics.median(s[i] for s in series) / BIN_S for i in range(n)] if series else []


def plot(by_key: dict[str, list[Run]], ns: argparse.Namespace) -> None:
    """Throughput over time per model, phase boundaries, and the adaptive moves of its first run."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = round(ns.seconds * len(PHASES) / BIN_S)
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    for m in models(ns):
        ys = median_bins(by_key.get(m, []), n)
        if ys:
            ax.plot([(i + 0.5) * BIN_S for i in range(n)], ys, label=m,
                    linewidth=2.4 if m == ns.adaptive else 1.2, zorder=3 if m == ns.adaptive else 2)
    for i, name in enumerate(PHASES):
        if i:
            ax.axvline(i * ns.seconds, color="grey", linestyle="--", linewidth=0.8)
        ax.text((i + 0.5) * ns.seconds, 1.01, name, transform=ax.get_xaxis_transform(), ha="center")
    first = next((r for r in by_key.get(ns.adaptive, []) if r.clean and r.result), None)
    for move in (first.result or {}).get("moves", []) if first else []:
        ax.axvline(move["at"], color="black", linewidth=0.6, alpha=0.5)
    ax.set_xlabel("seconds after the first call (thin black lines: adaptive moves, first run)")
    ax.set_ylabel(f"calls/s (median per {BIN_S:g} s bin over the runs)")
    ax.set_xlim(0, ns.seconds * len(PHASES))
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    ns.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(ns.plot)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with --serve, one server)."""
    ns = parse_args(argv)
    if ns.serve:
        from pyorb.servers import runner
        return runner.run(lambda: serve(ns.serve, ns))
    return run_benchmark("bench_adaptive", argv, ns, lambda rep: schedule(rep, ns), run_point, shown,
                         lambda by_key: tables(by_key, ns))


if __name__ == "__main__":
    sys.exit(main())
