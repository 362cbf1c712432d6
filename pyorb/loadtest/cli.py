"""``pyorb loadtest``: one command per experiment of the papers.

Each command runs its points in fresh processes with a progress bar and
writes ``OUT/<experiment>.csv``, ``.png`` and ``.md`` (a Markdown table);
server and generator logs go to ``OUT/logs/``.  Every point is bounded in
time (its duration, plus a kill timeout) and the whole sweep by
``--max-minutes``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pyorb.loadtest import experiments as ex
from pyorb.loadtest.report import write_outputs
from pyorb.loadtest.sweep import Point, Settings, check_model, run_point

loadtest_app = typer.Typer(
    help="The papers' load-test sweeps: client scalability, latency scalability, Harkema, AMI vs SMI.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
app = loadtest_app  # the name pyorb.cli.app mounts
console = Console(stderr=True, highlight=False)

ModelsOption = typer.Option(None, "--models", help="Comma-separated models (pyorb models, omniorb-tpc, "
                                                   "omniorb-pool-N); default: the experiment's set.")
DurationOption = typer.Option(5.0, "--duration", min=0.5, max=600, help="Seconds measured per point.")
WarmupOption = typer.Option(1.0, "--warmup", min=0, max=120, help="Seconds before the window (at least 2 delays).")
OutOption = typer.Option(Path("loadtest-results"), "--out", file_okay=False, help="Output folder.")
QuickOption = typer.Option(False, "--quick", help="A couple of points and models, about a second each.")
GeneratorOption = typer.Option("auto", "--generator", help="auto (Locust where it can make the load, else "
                                                           "pyorb's asyncio generator), locust or asyncio.")
MaxMinutesOption = typer.Option(15.0, "--max-minutes", min=0.1, help="Stop starting points after this long.")


def _split(text: str | None, kind: Callable[[str], Any], name: str) -> list[Any]:
    if text is None:
        return []
    try:
        values = [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list of numbers: {text!r}", param_hint=name) from None
    if not values or any(v < 0 for v in values):
        raise typer.BadParameter(f"need one or more non-negative values: {text!r}", param_hint=name)
    return values


def _models(text: str | None, defaults: ex.Defaults, quick: bool) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()] if text else list(
        defaults.quick_models if quick else defaults.models)
    for model in models:
        try:
            check_model(model)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--models") from None
    return models


def _settings(out: Path, duration: float, warmup: float, generator: str, quick: bool) -> Settings:
    if generator not in ("auto", "locust", "asyncio"):
        raise typer.BadParameter("use auto, locust or asyncio", param_hint="--generator")
    out.mkdir(parents=True, exist_ok=True)
    if quick:
        return Settings(out, duration=min(duration, 1.0), warmup=min(warmup, 0.3), generator=generator, timeout=5.0)
    return Settings(out, duration=duration, warmup=warmup, generator=generator)


def run_sweep(experiment: str, points: Sequence[Point], settings: Settings, max_minutes: float) -> None:
    """Run the points with a progress bar; write the outputs after each point."""
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    deadline = time.monotonic() + max_minutes * 60
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[point]}"))
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(experiment, total=len(points), point="")
        for point in points:
            if time.monotonic() > deadline:
                failures.append(f"{len(points) - len(rows) - len(failures)} points skipped: --max-minutes reached")
                break
            progress.update(task, point=f"{point.label or point.model} N={point.clients} D={point.delay * 1000:g}ms")
            try:
                rows.append(run_point(point, settings))
                write_outputs(experiment, rows, settings.out)
            except (RuntimeError, OSError) as exc:
                failures.append(f"{point.model} N={point.clients} D={point.delay:g}: {exc}")
            progress.advance(task)
    _summary(experiment, rows, failures, settings.out)


def _summary(experiment: str, rows: Sequence[dict[str, Any]], failures: Sequence[str], out: Path) -> None:
    for failure in failures:
        console.print(f"[yellow]warning:[/yellow] {failure}")
    bound = [r for r in rows if r["generator_bound"]]
    if bound:
        console.print(f"{len(bound)} point(s) generator-bound (the load generator used ≥ 90% of a core): "
                      + ", ".join(f"{r['label']} N={r['clients']}" for r in bound))
    if not rows:
        console.print(f"error: no point of {experiment} could be measured")
        raise typer.Exit(1)
    console.print(f"wrote {out / experiment}.csv, .png and .md ({len(rows)} points)")


@loadtest_app.command("client-scalability")
def client_scalability(
    models: Optional[str] = ModelsOption,
    clients: Optional[str] = typer.Option(None, "--clients", help="Comma-separated N (default per delay)."),
    delays: Optional[str] = typer.Option(None, "--delays", help="Comma-separated sink delays in seconds "
                                                                "(default 0.04 and 1)."),
    duration: float = DurationOption, warmup: float = WarmupOption, out: Path = OutOption,
    quick: bool = QuickOption, generator: str = GeneratorOption, max_minutes: float = MaxMinutesOption,
) -> None:
    """N closed-loop clients against the middle tier of each model (AMH paper)."""
    chosen = _models(models, ex.CLIENT_SCALABILITY, quick)
    sets: list[tuple[float, Sequence[int]]] = list(ex.SCALABILITY_QUICK if quick else ex.SCALABILITY_POINTS)
    if delays or clients:
        ds = _split(delays, float, "--delays") or [d for d, _ in sets]
        ns = _split(clients, int, "--clients")
        sets = [(d, ns or dict(sets).get(d, (1, 50, 150))) for d in ds]
    if any(d <= 0 for d, _ in sets) or any(n < 1 for _, ns in sets for n in ns):
        raise typer.BadParameter("delays must be positive and clients at least 1")
    run_sweep("client-scalability", ex.client_scalability(chosen, sets),
              _settings(out, duration, warmup, generator, quick), max_minutes)


@loadtest_app.command("latency-scalability")
def latency_scalability(
    models: Optional[str] = ModelsOption,
    clients: int = typer.Option(ex.LATENCY_CLIENTS, "--clients", min=1, max=20000, help="Closed-loop clients."),
    delays: Optional[str] = typer.Option(None, "--delays", help="Comma-separated sink delays in seconds."),
    duration: float = DurationOption, warmup: float = WarmupOption, out: Path = OutOption,
    quick: bool = QuickOption, generator: str = GeneratorOption, max_minutes: float = MaxMinutesOption,
) -> None:
    """A fixed number of clients (150), sink delay 0 to 160 ms (AMH paper)."""
    chosen = _models(models, ex.LATENCY_SCALABILITY, quick)
    ds = _split(delays, float, "--delays") or list(ex.LATENCY_QUICK if quick else ex.LATENCY_DELAYS)
    n = min(clients, 20) if quick and clients == ex.LATENCY_CLIENTS else clients
    run_sweep("latency-scalability", ex.latency_scalability(chosen, ds, n),
              _settings(out, duration, warmup, generator, quick), max_minutes)


@loadtest_app.command("harkema")
def harkema(
    models: Optional[str] = ModelsOption,
    clients: Optional[str] = typer.Option(None, "--clients", help="Comma-separated numbers of clients."),
    requests: int = typer.Option(ex.HARKEMA_REQUESTS, "--requests", min=1, max=100000,
                                 help="Requests per client (the window bounds them too)."),
    duration: float = DurationOption, warmup: float = WarmupOption, out: Path = OutOption,
    quick: bool = QuickOption, generator: str = GeneratorOption, max_minutes: float = MaxMinutesOption,
) -> None:
    """Harkema et al.: 1 ms CPU, 5 ms CPU, 50 ms delay (exponential), each threading strategy."""
    chosen = _models(models, ex.HARKEMA, quick)
    ns = _split(clients, int, "--clients") or list(ex.HARKEMA_QUICK_CLIENTS if quick else ex.HARKEMA_CLIENTS)
    if min(ns) < 1:
        raise typer.BadParameter("clients must be at least 1", param_hint="--clients")
    settings = _settings(out, duration, warmup, generator, quick)
    run_sweep("harkema", ex.harkema(chosen, ns, ex.HARKEMA_WORKLOADS, requests), settings, max_minutes)


@loadtest_app.command("ami-smi")
def ami_smi(
    models: Optional[str] = typer.Option(None, "--models", help="Comma-separated server models "
                                                                "(default amh-st,omniorb-tpc)."),
    calls: int = typer.Option(ex.AMI_CALLS, "--calls", min=1, max=1_000_000, help="Sequential calls (Table 1)."),
    threads: int = typer.Option(ex.SMI_THREADS, "--threads", min=1, max=1000, help="SMI client threads."),
    window: int = typer.Option(ex.AMI_WINDOW, "--window", min=1, max=10000, help="Pipelined AMI calls."),
    orbs: str = typer.Option("pyorb,omniorb", "--orbs", help="Client ORBs: pyorb, omniorb or both."),
    duration: float = DurationOption, warmup: float = WarmupOption, out: Path = OutOption,
    quick: bool = QuickOption, max_minutes: float = MaxMinutesOption,
) -> None:
    """AMI paper: latency of sequential calls (Table 1), threads vs pipelined AMI throughput (Table 2)."""
    chosen = _models(models, ex.AMI_SMI, quick)
    clients = [o.strip() for o in orbs.split(",") if o.strip()]
    if not clients or not set(clients) <= {"pyorb", "omniorb"}:
        raise typer.BadParameter("use pyorb, omniorb or pyorb,omniorb", param_hint="--orbs")
    if quick:
        calls, threads, window = min(calls, 500), min(threads, 4), min(window, 16)
    settings = _settings(out, duration, warmup, "asyncio", quick)
    run_sweep("ami-smi", ex.ami_smi(chosen, calls, threads, window, clients), settings, max_minutes)
