#!/usr/bin/env python3
"""The papers' own test of a performance model: predict each measured point (issue #17).

Reads the measured sweeps in docs/figures (harkema.csv, client-scalability.csv,
latency-scalability.csv, the reruns on a quiet machine in docs/figures/quiet/,
and a short rerun of Harkema's points on a quiet machine,
model-validation.harkema-quiet.csv), predicts every pyorb point with pyorb.model (the
default Calibration, or with --calibrate / --calibration one measured by
bench_strategies.py; no parameter is fitted to these points), and prints
prediction against measurement with the error per point, the median
absolute error and the worst point per experiment.  --out writes
model-validation.md and model-validation.png there (default docs/figures).

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
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from pyorb.model import Calibration, Workload, predict  # noqa: E402

FIGURES = ROOT / "docs" / "figures"
EXPERIMENTS = {
    "harkema": [FIGURES / "harkema.csv"],
    "client-scalability": [FIGURES / "client-scalability.csv"],
    "latency-scalability": [FIGURES / "latency-scalability.csv"],
    "quiet reruns": sorted((FIGURES / "quiet").glob("*.csv")),
    # A short rerun of Harkema's points on the quiet machine (issue #17), made with
    #   pyorb loadtest harkema --models tpc,tpr-8,amh-st --clients 2,16,128 --duration 2 --warmup 0.5
    #       --generator asyncio --max-minutes 3 --out /tmp/harkema-quiet
    "harkema, quiet rerun": [FIGURES / "model-validation.harkema-quiet.csv"],
}
MIDDLE_TIER = {"client-scalability", "latency-scalability"}
SPECS = {"tpc": ("thread_per_connection", True), "tpr-8": ("thread_pool(8)", True), "amh-st": ("amh", False),
         "amh-2": ("amh-2", False)}
MEDIAN_GOAL, WORST_GOAL = 0.10, 0.25


@dataclass(frozen=True)
class Row:
    """One measured point and its prediction."""

    experiment: str
    source: str
    model: str
    clients: int
    delay_ms: float
    cpu_ms: float
    measured: float
    predicted: float
    measured_ms: float
    predicted_ms: float
    load_avg: float
    generator_bound: bool

    @property
    def error(self) -> float:
        """Relative throughput error of the prediction."""
        return (self.predicted - self.measured) / self.measured


def read(experiment: str, path: Path, cal: Calibration, skipped: list[str]) -> list[Row]:
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
            middle = experiment in MIDDLE_TIER or path.name.startswith(("client-", "latency-"))
            spec, sync = SPECS[r["model"]]
            w = Workload(int(r["clients"]), float(r["cpu_ms"]) / 1e3, float(r["delay_ms"]) / 1e3)
            p = predict(spec, w, cal, sync=sync, middle=middle)
            rows.append(Row(experiment, path.name, r["model"], w.clients, float(r["delay_ms"]), float(r["cpu_ms"]),
                            x, p.throughput, float(r["mean_ms"]), p.response * 1e3, float(r["load_avg"] or "nan"),
                            r.get("generator_bound") == "True"))
    if omni:
        skipped.append(f"{path.relative_to(FIGURES)}: {omni} omniORBpy rows "
                       "(pyorb's calibration does not describe omniORBpy)")
    return rows


def summary(rows: Sequence[Row]) -> tuple[float, Row]:
    """(median absolute error, worst point)."""
    return statistics.median(abs(r.error) for r in rows), max(rows, key=lambda r: abs(r.error))


def verdict(median: float, worst: Row) -> str:
    ok = median <= MEDIAN_GOAL and abs(worst.error) <= WORST_GOAL
    return "meets the goal" if ok else "misses the goal"


def markdown(rows: Sequence[Row], skipped: Sequence[str], command: str) -> str:
    lines = ["| experiment | model | N | delay ms | CPU ms | measured calls/s | predicted | error | measured ms | "
             "predicted ms | load avg |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.experiment} | {r.model} | {r.clients} | {r.delay_ms:g} | {r.cpu_ms:g} | "
                     f"{r.measured:,.0f} | {r.predicted:,.0f} | {r.error:+.0%} | {r.measured_ms:.3g} | "
                     f"{r.predicted_ms:.3g} | {r.load_avg:.2g} |")
    lines += ["", "| experiment | points | median abs error | worst point | verdict |", "|---|---:|---:|---|---|"]
    for name in dict.fromkeys(r.experiment for r in rows):
        group = [r for r in rows if r.experiment == name]
        median, worst = summary(group)
        lines.append(f"| {name} | {len(group)} | {median:.0%} | {worst.model} N={worst.clients} delay "
                     f"{worst.delay_ms:g} ms cpu {worst.cpu_ms:g} ms: {worst.error:+.0%} | {verdict(median, worst)} |")
    median, worst = summary(rows)
    lines.append(f"| all | {len(rows)} | {median:.0%} | {worst.model} N={worst.clients} ({worst.experiment}): "
                 f"{worst.error:+.0%} | {verdict(median, worst)} |")
    lines += ["", f"Command: `{command}`.  Goal (issue #17): median absolute throughput error <= "
              f"{MEDIAN_GOAL:.0%}, no point worse than {WORST_GOAL:.0%}.  Not used: {len(skipped)} rows:", ""]
    lines += [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[Row], path: Path, calibrated: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 7))
    for name in dict.fromkeys(r.experiment for r in rows):
        group = [r for r in rows if r.experiment == name]
        ax.scatter([r.measured for r in group], [r.predicted for r in group], label=name, alpha=0.8)
    lo = min(min(r.measured for r in rows), min(r.predicted for r in rows)) / 1.5
    hi = max(max(r.measured for r in rows), max(r.predicted for r in rows)) * 1.5
    line = [lo, hi]
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
    ax.set_ylabel(f"predicted calls/s (pyorb.model, {calibrated})")
    ax.set_title("pyorb.model against the measured sweeps")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_table(rows: Sequence[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="pyorb.model: predicted against measured throughput")
    for col in ("experiment", "model", "N", "delay ms", "CPU ms", "measured", "predicted", "error", "load avg"):
        table.add_column(col, justify="left" if col in ("experiment", "model") else "right")
    for r in rows:
        flag = "" if abs(r.error) <= WORST_GOAL else " !"
        table.add_row(r.experiment, r.model, str(r.clients), f"{r.delay_ms:g}", f"{r.cpu_ms:g}", f"{r.measured:,.0f}",
                      f"{r.predicted:,.0f}", f"{r.error:+.0%}{flag}", f"{r.load_avg:.2g}")
    console = Console(width=160)
    console.print(table)
    for name in [*dict.fromkeys(r.experiment for r in rows), None]:
        group = [r for r in rows if name is None or r.experiment == name]
        median, worst = summary(group)
        console.print(f"{name or 'all'}: {len(group)} points, median |error| {median:.0%}, worst "
                      f"{worst.model} N={worst.clients} delay {worst.delay_ms:g} ms cpu {worst.cpu_ms:g} ms "
                      f"{worst.error:+.0%}: {verdict(median, worst)}")


def calibration(ns: argparse.Namespace) -> Calibration:
    """The default calibration, or one from a strategy benchmark (read, or run now)."""
    path = ns.calibration
    if ns.calibrate:
        path = Path(tempfile.mkdtemp()) / "calibration.json"
        # Bounded: echo only, 1 and 64 clients, one 1 s window per strategy, loopback.
        subprocess.run([sys.executable, str(ROOT / "loadtests" / "bench_strategies.py"), "--workloads", "echo",
                        "--clients", "1", "64", "--repeats", "1", "--seconds", "1", "--warmup", "0.3",
                        "--json", str(path)], cwd=ROOT / "loadtests", check=True, timeout=300,
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
    cal = calibration(ns)
    print(f"calibration: {cal}")
    skipped: list[str] = []
    rows = [row for name, paths in EXPERIMENTS.items() for path in paths if path.exists()
            for row in read(name, path, cal, skipped)]
    if not rows:
        print("no usable points", file=sys.stderr)
        return 1
    print_table(rows)
    for s in skipped:
        print(f"not used: {s}")
    command = "python loadtests/validate_model.py" + ("" if ns.out == FIGURES else f" --out {ns.out}")
    command += " --calibrate" if ns.calibrate else f" --calibration {ns.calibration}" if ns.calibration else ""
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "model-validation.md").write_text(markdown(rows, skipped, command))
    if not ns.no_plot:
        plot(rows, ns.out / "model-validation.png",
             "calibration measured now" if ns.calibrate or ns.calibration else "default calibration")
    median, worst = summary(rows)
    return 0 if not math.isnan(median) else 1


if __name__ == "__main__":
    sys.exit(main())
