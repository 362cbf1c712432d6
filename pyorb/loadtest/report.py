"""A sweep's outputs: the CSV, PNG figures in the papers' style, Markdown tables.

Figures follow the papers: throughput against clients (log scale) with the
ideal N/D line dashed, one line per model; omniORBpy baselines drawn dashed
grey-toned beside pyorb's models; points where the load generator was the
bottleneck drawn as hollow markers (the number is a lower bound, not a
measurement of the server).
"""

from __future__ import annotations

import csv
import math
import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

Row = dict[str, Any]


def write_csv(rows: Sequence[Row], path: Path) -> None:
    if not rows:
        return
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(model: str) -> dict[str, Any]:
    return {"linestyle": "--" if model.startswith("omniorb") else "-", "marker": "o", "markersize": 4}


def _lines(ax: Any, rows: Sequence[Row], x: str, y: Callable[[Row], float], group: str = "model") -> None:
    for name in dict.fromkeys(r[group] for r in rows):
        # A point with no completed call measured nothing: leave it out rather than draw a zero.
        mine = sorted((r for r in rows if r[group] == name and int(r["calls"]) > 0), key=lambda r: float(r[x]))
        xs, ys = [float(r[x]) for r in mine], [y(r) for r in mine]
        (line,) = ax.plot(xs, ys, label=name, **_style(str(name)))
        bound = [(a, b) for a, b, r in zip(xs, ys, mine) if _true(r["generator_bound"])]
        if bound:
            ax.plot(*zip(*bound), linestyle="none", marker="o", markersize=9, markerfacecolor="none",
                    color=line.get_color())


def _log_scales(ax: Any, x: bool, y: bool) -> None:
    """Log axes where the data allow them (matplotlib refuses an axis with no positive value)."""
    for line in ax.get_lines():
        xs, ys = line.get_xdata(), line.get_ydata()
        x = x and any(float(v) > 0 for v in xs)
        y = y and any(float(v) > 0 and not math.isnan(float(v)) for v in ys)
    if x:
        ax.set_xscale("log")
    if y:
        ax.set_yscale("log")


def _true(value: Any) -> bool:
    return value is True or str(value) == "True"


NOTE_FONTSIZE = 7


def _finish(fig: Any, path: Path, note: str) -> None:
    _footer(fig, note)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)


def _footer(fig: Any, note: str) -> Any:
    """Put ``note`` under the axes, wrapped to the figure's width; returns the text.

    About 0.55 em per character at the footer's size; the axes are laid out
    above however many lines it takes, so no figure size cuts it off."""
    width_pt = fig.get_figwidth() * 72 * 0.97
    per_line = max(20, int(width_pt / (NOTE_FONTSIZE * 0.55)))
    lines = textwrap.wrap(note, per_line) or [""]
    text = fig.text(0.01, 0.005, "\n".join(lines), fontsize=NOTE_FONTSIZE, color="dimgray", va="bottom")
    footer = (len(lines) * NOTE_FONTSIZE * 1.3 + 4) / (fig.get_figheight() * 72)
    fig.tight_layout(rect=(0, footer, 1, 1))
    return text


NOTE = ("hollow circle: load generator near one core (a lower bound); dashed: omniORBpy baselines; "
        "points with no completed call are left out")


def plot_client_scalability(rows: Sequence[Row], path: Path) -> None:
    plt = _pyplot()
    delays = sorted({float(r["delay_ms"]) for r in rows})
    fig, axes = plt.subplots(2, len(delays), figsize=(6 * len(delays), 7.5), squeeze=False)
    for col, delay in enumerate(delays):
        mine = [r for r in rows if float(r["delay_ms"]) == delay]
        top, bottom = axes[0][col], axes[1][col]
        _lines(top, mine, "clients", lambda r: float(r["throughput"]))
        ns = sorted({int(r["clients"]) for r in mine})
        top.plot(ns, [n / (delay / 1000) for n in ns], "k:", label="ideal N/D")
        top.set(title=f"Client scalability, sink delay {delay:g} ms", xlabel="clients N",
                ylabel="throughput (replies/s)")
        _log_scales(top, True, True)
        _lines(bottom, mine, "clients", lambda r: float(r["server_threads"]))
        bottom.set(title="Middle-tier threads (peak)", xlabel="clients N", ylabel="threads")
        _log_scales(bottom, True, True)
        top.legend(fontsize=7)
        top.grid(True, alpha=0.3)
        bottom.grid(True, alpha=0.3)
    _finish(fig, path, NOTE)


def plot_latency_scalability(rows: Sequence[Row], path: Path) -> None:
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    _lines(left, rows, "delay_ms", lambda r: float(r["throughput"]))
    delays = sorted({float(r["delay_ms"]) for r in rows if float(r["delay_ms"]) > 0})
    n = int(rows[0]["clients"])
    left.plot(delays, [n / (d / 1000) for d in delays], "k:", label="ideal N/D")
    left.set(title=f"Latency scalability, {n} clients", xlabel="sink delay (ms)", ylabel="throughput (replies/s)")
    _log_scales(left, False, True)
    _lines(right, rows, "delay_ms", lambda r: float(r["mean_ms"]))
    right.plot([0, *delays], [0, *delays], "k:", label="sink delay")
    right.set(title="Mean response time", xlabel="sink delay (ms)", ylabel="response time (ms)", yscale="symlog")
    for ax in (left, right):
        ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)
    _finish(fig, path, NOTE)


def workload_name(row: Row) -> str:
    cpu, delay = float(row["cpu_ms"]), float(row["delay_ms"])
    return f"{cpu:g} ms CPU" if cpu else f"{delay:g} ms delay"


def plot_harkema(rows: Sequence[Row], path: Path) -> None:
    plt = _pyplot()
    loads = list(dict.fromkeys(workload_name(r) for r in rows))
    fig, axes = plt.subplots(2, len(loads), figsize=(5 * len(loads), 7.5), squeeze=False)
    for col, load in enumerate(loads):
        mine = [r for r in rows if workload_name(r) == load]
        _lines(axes[0][col], mine, "clients", lambda r: float(r["throughput"]))
        axes[0][col].set(title=f"Throughput, {load} (exponential)", xlabel="clients", ylabel="requests/s")
        _log_scales(axes[0][col], True, False)
        _lines(axes[1][col], mine, "clients", lambda r: float(r["mean_ms"]))
        axes[1][col].set(title="Mean response time", xlabel="clients", ylabel="ms")
        _log_scales(axes[1][col], True, True)
        for ax in axes[:, col]:
            ax.grid(True, alpha=0.3)
        axes[0][col].legend(fontsize=7)
    _finish(fig, path, NOTE)


def plot_ami_smi(rows: Sequence[Row], path: Path) -> None:
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    seq = [r for r in rows if int(r["calls"]) and r["mode"] in ("smi", "sequential") and int(r["window"]) == 0
           and _is_table1(r)]
    names = [f"{r['label']}\n→ {r['model']}" for r in seq]
    means = [float(r["mean_ms"]) for r in seq]
    left.barh(names, means, color=["tab:blue" if r["client"] == "pyorb" else "tab:gray" for r in seq])
    left.set(title="Table 1: latency of sequential calls (mean)", xlabel="ms")
    thr = list(rows)  # the sequential rows' throughput is Table 2's sequential baseline
    right.barh([f"{r['label']}\n→ {r['model']}" for r in thr], [float(r["throughput"]) for r in thr],
               color=["tab:blue" if r["client"] == "pyorb" else "tab:gray" for r in thr])
    right.set(title="Table 2: throughput", xlabel="replies/s")
    for ax in (left, right):
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(True, axis="x", alpha=0.3)
    _finish(fig, path, "blue: pyorb client; grey: omniORBpy client; → the server model")


def _is_table1(row: Row) -> bool:
    return "sequential" in str(row["label"])


PLOTS: dict[str, Callable[[Sequence[Row], Path], None]] = {
    "client-scalability": plot_client_scalability, "latency-scalability": plot_latency_scalability,
    "harkema": plot_harkema, "ami-smi": plot_ami_smi,
}


def _fmt(value: Any, digits: int = 0) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "–" if math.isnan(number) else f"{number:,.{digits}f}"


def markdown_table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table (the columns the docs quote)."""
    head = ("model / client", "N", "delay ms", "CPU ms", "gen", "replies/s", "% ideal", "p50 ms", "p99 ms",
            "mean ms", "min ms", "max ms", "jitter ms", "errors", "server CPU %", "threads", "RSS MiB",
            "KiB/client", "gen CPU %", "gen-bound", "load avg", "note")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = (r["label"] if r["label"] != r["model"] else r["model"]) + (
            f" → {r['model']}" if r["label"] != r["model"] else "")
        values = (cells, r["clients"], _fmt(r["delay_ms"]), _fmt(r["cpu_ms"]), r["generator"],
                  _fmt(r["throughput"]), _fmt(r["efficiency_pct"], 1), _fmt(r["p50_ms"], 1), _fmt(r["p99_ms"], 1),
                  _fmt(r["mean_ms"], 2), _fmt(r["min_ms"], 2), _fmt(r["max_ms"], 1), _fmt(r["jitter_ms"], 2),
                  r["errors"], _fmt(r["server_cpu_pct"]), r["server_threads"], _fmt(r["server_rss_mib"], 1),
                  _fmt(r["server_kib_per_client"], 2), _fmt(r["generator_cpu_pct"]),
                  "**yes**" if _true(r["generator_bound"]) else "", _fmt(r.get("load_avg", "nan"), 1), r.get("note", ""))
        lines.append("| " + " | ".join(str(v) for v in values) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(experiment: str, rows: Sequence[Row], out: Path) -> list[Path]:
    """CSV, PNG and Markdown table of one experiment; the paths written."""
    if not rows:
        return []
    paths = [out / f"{experiment}.csv", out / f"{experiment}.png", out / f"{experiment}.md"]
    write_csv(rows, paths[0])
    PLOTS[experiment](rows, paths[1])
    paths[2].write_text(markdown_table(rows))
    return paths
