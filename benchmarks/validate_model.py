#!/usr/bin/env python3
"""The papers' own test of a performance model: predict each measured point.

Predicts every pyorb point of the measured sweeps with pyorb.model, twice:
the server-only model (the server gets the cores it asks for) and the host
model (pyorb.model.host: the load generator, and the sink behind a middle
tier, take CPU from the same cores).  Nothing is fitted per point: the server's
echo costs are the default Calibration (or --calibrate / --calibration,
measured by bench_strategies.py); the middle tier's forwarding costs
(Calibration.forward, blocking_forward) and the host's constants (asyncio
generator, Locust generator and sink CPU per call) are medians over the
CALIBRATION sets only, which are disjoint from the validation sets.
Prints prediction against measurement per point, the median absolute error
and the worst point per set and model; --out writes model-validation.md and
model-validation.png there (default docs/figures).

The sets, in this order:
  fresh        docs/figures/validation/harkema.csv, harkema-2.csv and
               latency-scalability.csv: short sweeps made for this check,
               the validation;
  calibration  docs/figures/validation/client-scalability.csv and locust.csv,
               measured the same day with the same code: the middle tier's
               forwarding costs and the host's constants come from these;
  earlier      docs/figures/quiet/*.csv and model-validation.harkema-quiet.csv:
               quiet reruns made before the compiled accelerator cut pyorb's cost per call
               (shown, not counted);
  busy         docs/figures/{harkema,client-scalability,latency-scalability}.csv:
               the recorded sweeps, taken while other work loaded the 2 cores
               (load average 4 to 45 per point): shown with their load average,
               and a third prediction that counts the load beyond the
               experiment's own processes as other runnable work
               (Host.background), to show how far the load explains the misses.

How a row becomes a model:
  harkema             the server itself: tpc = thread_per_connection, tpr-8 =
                      thread_pool(8) (synchronous servants: the CPU and the
                      sleep run in the dispatcher thread), amh-st = an AMH
                      servant (its delay holds no thread);
  client-/latency-    a middle tier in front of a sink whose delay is
  scalability         delay_ms: amh-st / amh-2 = AMH (1 or 2 worker
                      processes), tpc = a synchronous middle tier blocking
                      its connection's thread on the sink.
Clients are closed loops with no think time.  Rows not used, with the reason:
omniORBpy models (pyorb's calibration does not describe them) and points with
no completed calls (throughput 0 or nan: the measurement window was too short
or the run failed).

Goal of the issue: median absolute throughput error <= 10 %, no point worse
than 25 %.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]

from pyorb.model import Calibration, Host, Workload, predict

FIGURES = ROOT / "docs" / "figures"
FRESH = FIGURES / "validation"
FRESH_COMMANDS = {
    "harkema": "pyorb loadtest harkema --models tpc,tpr-8,amh-st --clients 2,16,128 --duration 2 --warmup 0.5 "
               "--generator asyncio --max-minutes 4",
    "latency-scalability": "pyorb loadtest latency-scalability --models amh-st,amh-2,tpc --clients 150 "
                           "--delays 0,0.01,0.02,0.04,0.08,0.16 --duration 2 --warmup 0.5 --generator asyncio "
                           "--max-minutes 3",
    "client-scalability": "pyorb loadtest client-scalability --models amh-st,tpc --clients 50,150,400,1000 "
                          "--delays 0.04 --duration 3 --warmup 1 --generator asyncio --max-minutes 3",
    "locust": "pyorb loadtest harkema --models amh-st,tpc --clients 16 --duration 3 --warmup 0.5 --generator locust "
              "--max-minutes 1.5",
}
EXPERIMENTS: dict[str, tuple[str, list[Path]]] = {
    "fresh: harkema": ("fresh", [FRESH / "harkema.csv"]),
    "fresh: harkema, 2nd run": ("fresh", [FRESH / "harkema-2.csv"]),
    "fresh: latency-scalability": ("fresh", [FRESH / "latency-scalability.csv"]),
    "calibration: client-scalability": ("calibration", [FRESH / "client-scalability.csv"]),
    "calibration: harkema, Locust": ("calibration", [FRESH / "locust.csv"]),
    "earlier: quiet reruns": ("earlier", sorted((FIGURES / "quiet").glob("*.csv"))),
    "earlier: harkema quiet rerun": ("earlier", [FIGURES / "model-validation.harkema-quiet.csv"]),
    "busy: harkema": ("busy", [FIGURES / "harkema.csv"]),
    "busy: client-scalability": ("busy", [FIGURES / "client-scalability.csv"]),
    "busy: latency-scalability": ("busy", [FIGURES / "latency-scalability.csv"]),
}
"""Roles: fresh = the validation; calibration = where the host's constants and the middle tier's
forwarding costs come from (measured the same day, with the same code); earlier = quiet reruns
made before the compiled accelerator's per-call work (shown, not counted); busy = the recorded sweeps."""
MIDDLE_TIER = ("client-", "latency-")
SPECS = {"tpc": ("thread_per_connection", True), "tpr-8": ("thread_pool(8)", True), "amh-st": ("amh", False),
         "amh-2": ("amh-2", False)}
MEDIAN_GOAL, WORST_GOAL = 0.10, 0.25
MIN_RATE = {"asyncio": 2000.0, "locust": 500.0}
"""Calls/s below which a row is not calibrated on: there a process's CPU per call is mostly its fixed cost per
second (timers, polling; the asyncio generator spent 400 µs a call at 190 calls/s), not the calls' cost.
One Locust process makes at most about 1,000 calls/s here, so its rows qualify from 500."""


@dataclass(frozen=True)
class HostCosts:
    """CPU per call of the processes beside the server, medians over the calibration sets."""

    generator: dict[str, float]
    """Per generator kind (asyncio, locust): seconds per call."""
    sink: float
    rows: int

    def host(self, generator: str, middle: bool, cores: int, background: float = 0.0) -> Host:
        return Host(cores, self.generator.get(generator, self.generator.get("asyncio", 0.0)),
                    self.sink if middle else 0.0, background)


def host_costs(paths: Sequence[Path]) -> HostCosts:
    """The generator's and the sink's CPU per call: the CSVs' cpu_pct ÷ throughput, medians over ``paths``."""
    generator: dict[str, list[float]] = {}
    sink: list[float] = []
    for path in paths:
        if not path.exists():
            continue
        with path.open() as f:
            for r in csv.DictReader(f):
                x = float(r["throughput"] or "nan")
                if not x >= MIN_RATE.get(r["generator"], math.inf):
                    continue
                generator.setdefault(r["generator"], []).append(float(r["generator_cpu_pct"]) / 100 / x)
                if r["sink_cpu_pct"] not in ("", "nan"):
                    sink.append(float(r["sink_cpu_pct"]) / 100 / x)
    return HostCosts({k: statistics.median(v) for k, v in generator.items()},
                     statistics.median(sink) if sink else 0.0, sum(map(len, generator.values())))


def middle_costs(paths: Sequence[Path], cal: Calibration) -> Calibration:
    """``cal`` with the middle tier's forwarding costs from the calibration sets' server CPU per call:
    ``forward`` from the AMH middle tier (amh-st), ``blocking_forward`` from the thread-per-connection
    one (tpc), medians over rows with at least MIN_RATE calls/s."""
    per_call: dict[str, list[float]] = {}
    for path in paths:
        if not (path.exists() and path.name.startswith(MIDDLE_TIER)):
            continue
        with path.open() as f:
            for r in csv.DictReader(f):
                x = float(r["throughput"] or "nan")
                if x >= MIN_RATE.get(r["generator"], math.inf) and r["server_cpu_pct"] not in ("", "nan"):
                    per_call.setdefault(r["model"], []).append(float(r["server_cpu_pct"]) / 100 / x)
    if "amh-st" not in per_call:
        return cal
    forward = max(0.0, statistics.median(per_call["amh-st"]) - cal.amh.overhead)
    blocking = cal.blocking_forward
    if "tpc" in per_call:
        blocking = max(0.0, statistics.median(per_call["tpc"]) - cal.thread_per_connection.overhead - forward)
    return dataclasses.replace(cal, forward=forward, blocking_forward=blocking)


@dataclass(frozen=True)
class Row:
    """One measured point and its predictions."""

    experiment: str
    role: str
    source: str
    model: str
    clients: int
    delay_ms: float
    cpu_ms: float
    generator: str
    measured: float
    server_only: float
    predicted: float
    """The host model's prediction."""
    loaded: float
    """The host model with the load average beyond the experiment's own processes as other work."""
    measured_ms: float
    predicted_ms: float
    load_avg: float

    @property
    def error(self) -> float:
        """Relative throughput error of the host model's prediction."""
        return (self.predicted - self.measured) / self.measured

    @property
    def server_error(self) -> float:
        """Relative throughput error of the server-only prediction."""
        return (self.server_only - self.measured) / self.measured

    @property
    def loaded_error(self) -> float:
        return (self.loaded - self.measured) / self.measured


def own_processes(spec: str, middle: bool) -> int:
    """The experiment's own processes: the generator, the server (its workers), the sink."""
    workers = int(spec[4:]) if spec.startswith("amh-") else 1
    return 1 + workers + (1 if middle else 0)


def read(experiment: str, role: str, path: Path, cal: Calibration, costs: HostCosts,
         skipped: list[str]) -> list[Row]:
    rows, omni = [], 0
    with path.open() as f:
        for r in csv.DictReader(f):
            where = (f"{path.relative_to(FIGURES)}: {r['model']} N={r['clients']} delay {r['delay_ms']} ms "
                     f"cpu {r['cpu_ms']} ms")
            x = float(r["throughput"] or "nan")
            if r["model"] not in SPECS:
                omni += 1
                continue
            if not x > 0:
                skipped.append(f"{where}: no completed calls ({r.get('note') or 'throughput ' + r['throughput']})")
                continue
            middle = path.name.startswith(MIDDLE_TIER)
            spec, sync = SPECS[r["model"]]
            w = Workload(int(r["clients"]), float(r["cpu_ms"]) / 1e3, float(r["delay_ms"]) / 1e3)
            load = float(r.get("load_avg") or "nan")
            host = costs.host(r["generator"], middle, cal.cores)
            busy = max(0.0, load - own_processes(spec, middle)) if math.isfinite(load) else 0.0
            alone = predict(spec, w, cal, sync=sync, middle=middle)
            p = predict(spec, w, cal, sync=sync, middle=middle, host=host)
            loaded = predict(spec, w, cal, sync=sync, middle=middle, host=dataclasses.replace(host, background=busy))
            rows.append(Row(experiment, role, path.name, r["model"], w.clients, float(r["delay_ms"]),
                            float(r["cpu_ms"]), r["generator"], x, alone.throughput, p.throughput, loaded.throughput,
                            float(r["mean_ms"]), p.response * 1e3, load))
    if omni:
        skipped.append(f"{path.relative_to(FIGURES)}: {omni} omniORBpy rows "
                       "(pyorb's calibration does not describe omniORBpy)")
    return rows


MODELS = {"server only": "server_error", "host": "error", "host + load": "loaded_error"}


def summary(rows: Sequence[Row], attr: str = "error") -> tuple[float, Row]:
    """(median absolute error, worst point) of one model's predictions."""
    worst = max(rows, key=lambda r: abs(getattr(r, attr)))
    return statistics.median(abs(getattr(r, attr)) for r in rows), worst


def verdict(median: float, worst: float) -> str:
    return "meets the goal" if median <= MEDIAN_GOAL and abs(worst) <= WORST_GOAL else "misses the goal"


def groups(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """Per experiment, then all fresh rows together."""
    out = [(name, [r for r in rows if r.experiment == name]) for name in dict.fromkeys(r.experiment for r in rows)]
    fresh = [r for r in rows if r.role == "fresh"]
    return out + ([("fresh: all (the validation)", fresh)] if fresh else [])


def summary_lines(rows: Sequence[Row]) -> list[str]:
    lines = ["| set | model | points | median abs error | worst point | verdict |",
             "|---|---|---:|---:|---|---|"]
    for name, group in groups(rows):
        for model, attr in MODELS.items():
            if model == "host + load" and group[0].role != "busy" or not group:
                continue
            median, worst = summary(group, attr)
            err = getattr(worst, attr)
            lines.append(f"| {name} | {model} | {len(group)} | {median:.0%} | {worst.model} N={worst.clients} delay "
                         f"{worst.delay_ms:g} ms cpu {worst.cpu_ms:g} ms: {err:+.0%} | {verdict(median, err)} |")
    return lines


def markdown(rows: Sequence[Row], skipped: Sequence[str], command: str, costs: HostCosts, cal: Calibration,
             ns_default: bool) -> str:
    lines = ["# pyorb.model against the measurements", "",
             f"Command: `{command}`.  Goal: median absolute throughput error <= {MEDIAN_GOAL:.0%}, "
             f"no point worse than {WORST_GOAL:.0%}.  Server costs: the {'default' if ns_default else 'measured'} "
             f"Calibration with the middle tier's forward {cal.forward * 1e6:.0f} µs and blocking_forward "
             f"{cal.blocking_forward * 1e6:.0f} µs per call from the calibration sets.  Host constants (medians "
             f"of CPU % ÷ calls/s over {costs.rows} calibration rows with "
             f"at least {MIN_RATE['asyncio']:.0f} calls/s, {MIN_RATE['locust']:.0f} with Locust): "
             + ", ".join(f"{k} generator {v * 1e6:.0f} µs" for k, v in sorted(costs.generator.items()))
             + f", sink {costs.sink * 1e6:.0f} µs per call; {cal.cores} cores.", "",
             "Only the fresh sets are the validation; the calibration sets gave the host constants and the "
             "forwarding costs; the earlier sets ran before the compiled accelerator made each call cheaper; the busy sets ran "
             "beside other work (see the load average).", "", *summary_lines(rows), "",
             "| set | model | N | delay ms | CPU ms | generator | measured calls/s | server only | host model | "
             "error | host + load | measured ms | predicted ms | load avg |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        loaded = f"{r.loaded:,.0f} ({r.loaded_error:+.0%})" if r.role == "busy" else ""
        lines.append(f"| {r.experiment} | {r.model} | {r.clients} | {r.delay_ms:g} | {r.cpu_ms:g} | {r.generator} | "
                     f"{r.measured:,.0f} | {r.server_only:,.0f} ({r.server_error:+.0%}) | {r.predicted:,.0f} | "
                     f"{r.error:+.0%} | {loaded} | {r.measured_ms:.3g} | {r.predicted_ms:.3g} | {r.load_avg:.2g} |")
    lines += ["", f"Fresh sets: made with (each with `--out DIR`, then DIR/EXPERIMENT.csv copied to "
              f"docs/figures/validation/):", ""]
    lines += [f"- {name}: `{cmd}`" for name, cmd in FRESH_COMMANDS.items()]
    lines += ["", f"Not used: {len(skipped)} rows:", ""]
    lines += [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[Row], path: Path, calibrated: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 6.5), sharex=True, sharey=True)
    lo = min(min(r.measured for r in rows), min(r.predicted for r in rows)) / 1.5
    hi = max(max(r.measured for r in rows), max(r.server_only for r in rows)) * 1.5
    line = [lo, hi]
    for ax, attr, title in ((axes[0], "server_only", "server-only model"), (axes[1], "predicted", "host model")):
        for name in dict.fromkeys(r.experiment for r in rows):
            group = [r for r in rows if r.experiment == name]
            marker = {"fresh": "o", "calibration": "s", "earlier": "^", "busy": "x"}[group[0].role]
            ax.scatter([r.measured for r in group], [getattr(r, attr) for r in group], label=name, alpha=0.8,
                       marker=marker)
        ax.plot(line, line, color="black", linewidth=1, label="prediction = measurement")
        for band, style in ((MEDIAN_GOAL, ":"), (WORST_GOAL, "--")):
            for sign in (1, -1):
                ax.plot(line, [v * (1 + sign * band) for v in line], color="grey", linestyle=style, linewidth=0.8,
                        label=f"±{band:.0%}" if sign == 1 else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured calls/s")
        ax.set_title(f"{title} ({calibrated})")
    axes[0].set_ylabel("predicted calls/s")
    axes[1].legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_table(rows: Sequence[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="pyorb.model: predicted against measured throughput")
    for col in ("set", "model", "N", "delay ms", "CPU ms", "measured", "server only", "host model", "error",
                "load avg"):
        table.add_column(col, justify="left" if col in ("set", "model") else "right")
    for r in rows:
        flag = "" if abs(r.error) <= WORST_GOAL else " !"
        table.add_row(r.experiment, r.model, str(r.clients), f"{r.delay_ms:g}", f"{r.cpu_ms:g}", f"{r.measured:,.0f}",
                      f"{r.server_only:,.0f}", f"{r.predicted:,.0f}", f"{r.error:+.0%}{flag}", f"{r.load_avg:.2g}")
    console = Console(width=170)
    console.print(table)
    for line in summary_lines(rows)[2:]:
        console.print(line)


def calibration(ns: argparse.Namespace) -> Calibration:
    """The default calibration, or one from a strategy benchmark (read, or run now)."""
    path = ns.calibration
    if ns.calibrate:
        path = Path(tempfile.mkdtemp()) / "calibration.json"
        # Bounded: echo only, 1 and 64 clients, one 1 s window per strategy, loopback.
        subprocess.run([sys.executable, "-m", "benchmarks.bench_strategies", "--workloads", "echo",
                        "--clients", "1", "64", "--repeats", "1", "--seconds", "1", "--warmup", "0.3",
                        "--json", str(path)], cwd=ROOT, check=True, timeout=300,
                       stdout=subprocess.DEVNULL)
    if path is None:
        return Calibration()
    data = json.loads(path.read_text())
    return Calibration.from_benchmark(data["runs"], data.get("meta", {}).get("machine", {}).get("cpus"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=FIGURES, help="folder for model-validation.md/.png")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--calibration", type=Path, metavar="JSON",
                        help="calibrate from this output of bench_strategies.py --workloads echo --json JSON")
    source.add_argument("--calibrate", action="store_true",
                        help="measure the calibration first: a short bench_strategies.py run (about a minute)")
    ns = parser.parse_args(argv)
    calibrating = [p for role, paths in EXPERIMENTS.values() if role == "calibration" for p in paths]
    cal = middle_costs(calibrating, calibration(ns))
    costs = host_costs(calibrating)
    print(f"calibration: {cal}\nhost constants: {costs}")
    skipped: list[str] = []
    rows = [row for name, (role, paths) in EXPERIMENTS.items() for path in paths if path.exists()
            for row in read(name, role, path, cal, costs, skipped)]
    if not rows:
        print("no usable points", file=sys.stderr)
        return 1
    print_table(rows)
    for s in skipped:
        print(f"not used: {s}")
    command = "python -m benchmarks.validate_model" + ("" if ns.out == FIGURES else f" --out {ns.out}")
    command += " --calibrate" if ns.calibrate else f" --calibration {ns.calibration}" if ns.calibration else ""
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "model-validation.md").write_text(markdown(rows, skipped, command, costs, cal,
                                                           not (ns.calibrate or ns.calibration)))
    if not ns.no_plot:
        plot(rows, ns.out / "model-validation.png",
             "measured calibration" if ns.calibrate or ns.calibration else "default + calibration sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
