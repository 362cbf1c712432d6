"""``pyorb plan``: the strategies' queueing models for a workload, as a table (and a plot).

The workload comes from options (``--clients``, ``--cpu``, ``--delay``,
``--think``) or from a server's statistics saved as JSON (``--stats``): the
JSON form of ``server.stats()`` that :func:`stats_json` writes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional, Sequence

import typer
from rich.console import Console
from rich.table import Table

from pyorb.cli.console import out
from pyorb.model import Host, Prediction, Recommendation, Workload, candidates, predict, recommend

PLOT_INSTALL = ("--plot needs matplotlib (the loadtest extra): pip install 'pyorb-asyncio[loadtest]', "
                "or from a checkout: pip install -e '.[loadtest]'")
MAX_CLIENTS = 100_000
_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|µs)?\s*$")
UNITLESS_LIMIT_S = 2.0
"""A demand per call written without a unit and above this many seconds was most likely meant in ms or us."""
_SHARE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)\s*$")


def stats_json(stats: Any) -> str:
    """A server's statistics (``server.stats()``, a dataclass) as the JSON ``pyorb plan --stats`` reads."""
    return json.dumps(dataclasses.asdict(stats), indent=1)


def duration(text: str, option: str) -> float:
    """Seconds from ``"0.05"``, ``"50ms"``, ``"200us"`` (typer.BadParameter otherwise)."""
    m = _DURATION.match(text)
    if m is None:
        raise typer.BadParameter(f"expected a duration such as 0.05, 50ms or 200us, got {text!r}", param_hint=option)
    return float(m.group(1)) * _UNITS[m.group(2) or ""]


def unit_warning(text: str, option: str) -> str | None:
    """Why ``text``, a demand per call, is likely not what was meant: a number of seconds
    above :data:`UNITLESS_LIMIT_S` with no unit written (``--cpu 200`` for 200 ms).  None if it is plausible."""
    m = _DURATION.match(text)
    if m is None or m.group(2) or float(m.group(1)) <= UNITLESS_LIMIT_S:
        return None
    number = m.group(1)
    return (f"{option} {number} has no unit, so it is {number} seconds per call; write {number}ms or "
            f"{number}us for milliseconds or microseconds, or {number}s if you mean seconds")


def share(text: str) -> float:
    """A fraction from ``"0.25"`` or ``"25%"``; a bare number above 1 is refused with the
    fraction it probably meant (typer.BadParameter)."""
    m = _SHARE.match(text)
    if m is None:
        raise typer.BadParameter(f"expected a fraction such as 0.25 or 25%, got {text!r}", param_hint="--cpu-share")
    value = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if value > 1.0 and not m.group(2) and value <= 100.0:
        raise typer.BadParameter(f"{text.strip()} is not a fraction of the service time (0 to 1): for "
                                 f"{m.group(1)} % write {value / 100:g} or {m.group(1)}%", param_hint="--cpu-share")
    if value > 1.0:
        raise typer.BadParameter(f"a share of the service time is at most 1 (100%), got {text!r}",
                                 param_hint="--cpu-share")
    return value


def client_counts(text: str) -> list[int]:
    """``"64"``, ``"1,8,64"`` or a range ``"1-128"`` (powers of two inside it, and its ends)."""
    try:
        if "-" in text:
            lo, hi = (int(part) for part in text.split("-", 1))
            counts = {lo, hi} | {2**k for k in range(0, 17) if lo <= 2**k <= hi}
        else:
            counts = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise typer.BadParameter(f"expected N, N,M,... or LO-HI, got {text!r}", param_hint="--clients") from None
    if not counts or min(counts) < 1 or max(counts) > MAX_CLIENTS:
        raise typer.BadParameter(f"clients must be between 1 and {MAX_CLIENTS}, got {text!r}", param_hint="--clients")
    return sorted(counts)


def _namespace(value: Any) -> Any:
    """JSON objects as attribute objects: Workload.from_stats reads attributes (duck typing)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


def workload_from_file(path: Path, clients: Optional[int], think: float, cpu_share: float,
                       operation: Optional[str]) -> Workload:
    """The workload a statistics file describes (ValueError with the file's name if it cannot)."""
    try:
        stats = _namespace(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    try:
        return Workload.from_stats(stats, clients=clients, think=think, operation=operation, cpu_share=cpu_share)
    except (AttributeError, TypeError) as exc:
        raise ValueError(f"{path}: not the JSON of server.stats() ({exc})") from None


def plan_cmd(
    clients: Optional[str] = typer.Option(None, "--clients", "-n", help="Concurrent clients: N, a list N,M,... "
                                          "or a range LO-HI (its powers of two).  Default 64, or the calls in "
                                          "flight of --stats."),
    cpu: str = typer.Option("0", "--cpu", help="Servant CPU per call (Python code, holds the GIL): 0.001, 1ms, "
                            "200us."),
    delay: str = typer.Option("0", "--delay", help="Time per call blocked without CPU (sleep, I/O, a sink)."),
    think: str = typer.Option("0", "--think", help="Client think time between calls."),
    asynchronous: bool = typer.Option(False, "--async", help="The servant is a coroutine or AMH handler: its "
                                      "delay holds no thread (default: a synchronous method)."),
    middle: bool = typer.Option(False, "--middle", help="A middle tier: --delay is its call to a sink."),
    stats: Optional[Path] = typer.Option(None, "--stats", help="A server's statistics as JSON "
                                         "(pyorb.cli.plan.stats_json(server.stats())): the busiest operation's "
                                         "service time becomes --cpu and --delay.", exists=True, dir_okay=False),
    cpu_share: Optional[str] = typer.Option(None, "--cpu-share", help="With --stats: the fraction of the service "
                                            "time that is CPU (the rest blocks): 0.25 or 25% (default 1)."),
    operation: Optional[str] = typer.Option(None, "--operation", help="With --stats: the operation to plan for."),
    strategies: Optional[str] = typer.Option(None, "--strategies", help="Comma-separated specs to compare, e.g. "
                                             "'reactive,thread_pool(8),amh-2' (default: the loop, pools, thread "
                                             "per connection and per request, threaded)."),
    client_cpu: str = typer.Option("0", "--client-cpu", help="CPU per call of clients on the server's own "
                                   "host (a load generator beside it: about 34us for pyorb's asyncio generator); "
                                   "they take cores from the server."),
    sink_cpu: str = typer.Option("0", "--sink-cpu", help="With --middle: CPU per call of the sink on the same "
                                 "host (about 19us for pyorb's AMH sink)."),
    cores: int = typer.Option(2, "--cores", min=1, help="With --client-cpu/--sink-cpu: the host's CPU cores."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw throughput and response time against "
                                        "clients into this PNG (needs matplotlib)."),
) -> None:
    """Predict each dispatch strategy's throughput and response time (queueing models, MVA).

    Prints a table per strategy and the recommended one with its reason.
    The models and their calibration: docs/planning.md.
    """
    counts = client_counts(clients) if clients else None
    fraction = 1.0 if cpu_share is None else share(cpu_share)
    demands = {"--cpu": cpu, "--delay": delay, "--client-cpu": client_cpu, "--sink-cpu": sink_cpu}
    warnings = [unit_warning(text, option) for option, text in demands.items()]
    if cpu_share is not None and stats is None:
        warnings.append("--cpu-share splits the service time of --stats: without --stats it is ignored")
    for warning in filter(None, warnings):
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    if stats is not None:
        base = workload_from_file(stats, counts[0] if counts else None, duration(think, "--think"), fraction,
                                  operation)
    else:
        base = Workload(counts[0] if counts else 64, duration(cpu, "--cpu"), duration(delay, "--delay"),
                        duration(think, "--think"))
    workloads = [dataclasses.replace(base, clients=n) for n in (counts or [base.clients])]
    specs = _specs(strategies, workloads[-1])
    sync = not asynchronous
    host = Host(cores, duration(client_cpu, "--client-cpu"), duration(sink_cpu, "--sink-cpu") if middle else 0.0)
    rows = [[predict(s, w, sync=sync, middle=middle, host=host) for s in specs] for w in workloads]
    recs = [recommend(w, sync=sync, host=host) if strategies is None and not middle else
            _best(w, specs, sync, middle, host) for w in workloads]
    _print(out, base, sync, middle, workloads, specs, rows, recs)
    if not host.server_only:
        out.print(f"host: {cores} cores shared with clients ({_ms(host.client)} ms CPU per call)"
                  + (f" and a sink ({_ms(host.sink)} ms)" if host.sink else ""))
    if plot is not None:
        draw(plot, [w.clients for w in workloads], specs, rows)
        out.print(f"plot: {plot}")


def _specs(text: Optional[str], workload: Workload) -> list[str]:
    if text is None:
        return list(candidates(workload))
    specs = [s.strip() for s in re.split(r",(?![^()]*\))", text) if s.strip()]  # commas inside (...) stay
    if not specs:
        raise typer.BadParameter("no strategies given", param_hint="--strategies")
    return specs


def _best(w: Workload, specs: Sequence[str], sync: bool, middle: bool, host: Host) -> Recommendation:
    if not middle:
        return recommend(w, strategies=specs, sync=sync, host=host)
    preds = sorted((predict(s, w, sync=sync, middle=True, host=host) for s in specs), key=lambda p: -p.throughput)
    top = preds[0]
    return Recommendation(top.strategy, top.threads, top.throughput, top.response,
                          "the highest predicted throughput of the middle tier", tuple(preds))


def _print(out: Console, base: Workload, sync: bool, middle: bool, workloads: Sequence[Workload],
           specs: Sequence[str], rows: Sequence[Sequence[Prediction]], recs: Sequence[Recommendation]) -> None:
    kind = "coroutine/AMH servant" if not sync else "synchronous servant"
    out.print(f"workload: cpu {_ms(base.cpu)} ms, delay {_ms(base.delay)} ms, think {_ms(base.think)} ms per call; "
              f"{kind}{', middle tier' if middle else ''}")
    if len(workloads) == 1:
        out.print(_one(workloads[0], rows[0], recs[0]))
        rec = recs[0]
        out.print(f"recommended: {rec.strategy} ({rec.throughput:,.0f} calls/s, {_ms(rec.response)} ms): "
                  f"{rec.reason}")
        return
    table = Table(title="predicted calls/s (response ms)", title_justify="left")
    table.add_column("strategy")
    for w in workloads:
        table.add_column(f"N={w.clients}", justify="right")
    for i, spec in enumerate(specs):
        table.add_row(spec, *(f"{r[i].throughput:,.0f} ({_ms(r[i].response)})" for r in rows))
    out.print(table)
    best = Table(title="recommended", title_justify="left")
    for col in ("clients", "strategy", "threads", "calls/s", "response ms", "because"):
        best.add_column(col, justify="right" if col in ("clients", "threads", "calls/s", "response ms") else "left")
    for w, rec in zip(workloads, recs):
        best.add_row(str(w.clients), rec.strategy, str(rec.threads), f"{rec.throughput:,.0f}", _ms(rec.response),
                     rec.reason)
    out.print(best)


def _one(w: Workload, preds: Sequence[Prediction], rec: Recommendation) -> Table:
    table = Table(title=f"{w.clients} client{'s' if w.clients != 1 else ''}", title_justify="left",
                  caption="busy: the GIL's share of the time (the loop's, when the delay blocks it); "
                          "* the recommendation")
    for col in ("strategy", "threads", "calls/s", "response ms", "busy"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for p in sorted(preds, key=lambda p: -p.throughput):
        mark = " *" if p.strategy == rec.strategy else ""
        table.add_row(p.strategy + mark, str(p.threads), f"{p.throughput:,.0f}", _ms(p.response),
                      f"{p.utilisation:.0%}")
    return table


def _ms(seconds: float) -> str:
    return "inf" if math.isinf(seconds) else f"{seconds * 1e3:.3g}"


def draw(path: Path, clients: Sequence[int], specs: Sequence[str], rows: Sequence[Sequence[Prediction]]) -> None:
    """Throughput and response time against clients, one line per strategy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(PLOT_INSTALL) from None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    for i, spec in enumerate(specs):
        top.plot(clients, [r[i].throughput for r in rows], marker="o", label=spec)
        bottom.plot(clients, [r[i].response * 1e3 for r in rows], marker="o", label=spec)
    top.set_ylabel("predicted calls/s")
    bottom.set_ylabel("predicted response ms")
    bottom.set_xlabel("clients")
    if len(clients) > 1 and max(clients) / min(clients) > 8:
        bottom.set_xscale("log", base=2)
    bottom.set_yscale("log")
    top.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
