"""One sweep point: fresh servers, one load generator run, one CSV row.

A :class:`Point` names the server model, the number of clients and the
sink's demand.  :func:`run_point` starts the sink (and the middle tier when
the point goes through one), meters every process, runs the load generator
(Locust where it can make the load, else pyorb's asyncio generator, or the
omniORBpy client for the AMI/SMI baselines) and returns the row: throughput
over the steady window, latency percentiles, errors, each process's CPU,
threads and RSS, and whether the generator itself was the bottleneck.
"""

from __future__ import annotations

import math
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyorb.loadtest import locustrun
from pyorb.loadtest.processes import Meter, Sampler, ServerProcess, run_child
from pyorb.loadtest.stats import read_result

GENERATOR_BOUND = 0.90
"""A generator using this fraction of a core or more is the bottleneck (it is one Python thread)."""
LOCUST_MAX_USERS = 200
LOCUST_MAX_RATE = 400.0
"""Locust (gevent, one greenlet and one request event per call) is used up to about these on 2 cores."""
OMNI_PREFIX = "omniorb-"


@dataclass(frozen=True)
class Point:
    """One measurement: a server model under one load."""

    experiment: str
    model: str
    clients: int
    delay: float
    cpu: float = 0.0
    exponential: bool = False
    through_middle: bool = True
    mode: str = "closed"  # generator mode: closed, sequential, pipelined, smi
    client: str = "pyorb"  # or "omniorb" (the AMI/SMI baselines)
    window: int = 0
    calls: int = 0
    requests: int = 0
    label: str = ""

    @property
    def slug(self) -> str:
        """A file name for this point's logs."""
        text = f"{self.model}-{self.client}-{self.mode}-n{self.clients}-d{self.delay:g}-c{self.cpu:g}-w{self.window}"
        return "".join(c if c.isalnum() or c in "-._" else "_" for c in text)

    @property
    def ideal(self) -> float:
        """N / D for closed-loop clients of a sink with delay D (NaN without a delay)."""
        return self.clients / self.delay if self.mode == "closed" and self.delay > 0 and not self.cpu else math.nan


@dataclass(frozen=True)
class Settings:
    """How every point of a sweep is run."""

    out: Path
    duration: float = 5.0
    warmup: float = 1.0
    generator: str = "auto"  # auto, locust or asyncio
    timeout: float = 30.0

    def warmup_for(self, point: Point) -> float:
        if point.requests:  # clients with a request budget (Harkema): every request counts
            return 0.0
        return max(self.warmup, 2 * (point.delay + point.cpu))

    def duration_for(self, point: Point) -> float:
        if point.calls:  # a count of calls: the duration only bounds it
            return max(self.duration, 60.0)
        return max(self.duration, 4 * (point.delay + point.cpu))


def check_model(model: str) -> None:
    """ValueError (one line) for a model no server knows."""
    if model.startswith(OMNI_PREFIX):
        _omni_threading(model)
        return
    from pyorb.servers.models import resolve_model

    resolve_model(model)


def _omni_threading(model: str) -> list[str]:
    rest = model[len(OMNI_PREFIX):]
    if rest == "tpc":
        return ["--threading", "tpc"]
    size = rest.removeprefix("pool").lstrip("-")
    if rest.startswith("pool") and size.isdigit() and int(size) > 0:
        return ["--threading", "pool", "--pool-size", size]
    raise ValueError(f"unknown omniORBpy model {model!r}: use omniorb-tpc or omniorb-pool-N")


def _demand(point: Point) -> list[str]:
    args = ["--delay", f"{point.delay:g}", "--cpu", f"{point.cpu:g}"]
    return args + (["--distribution", "exponential", "--seed", "1"] if point.exponential else [])


def server_args(point: Point) -> tuple[list[str], list[str] | None]:
    """The sink's and the middle tier's arguments (``python ARGS``); no middle tier for a direct point."""
    omni = point.model.startswith(OMNI_PREFIX)
    if not point.through_middle:
        if omni:
            return ["-m", "pyorb.servers.omni", "sink", *_omni_threading(point.model), *_demand(point)], None
        return ["-m", "pyorb.servers.sink", "--model", point.model, *_demand(point)], None
    # The sink is always AMH (no thread per pending call), so that only the middle tier differs.
    sink = ["-m", "pyorb.servers.sink", "--model", "amh", *_demand(point)]
    if omni:
        return sink, ["-m", "pyorb.servers.omni", "middle", *_omni_threading(point.model), "--sink", "{sink}",
                      "--sink-connections", "200"]
    return sink, ["-m", "pyorb.servers.middle", "--model", point.model, "--sink", "{sink}"]


def choose_generator(point: Point, settings: Settings) -> str:
    if point.client == "omniorb":
        return "omniorb"
    if point.mode != "closed" or settings.generator == "asyncio":
        return "asyncio"
    if settings.generator == "locust":
        if not locustrun.available():
            raise ValueError("--generator locust needs Locust (the loadtest extra): pip install 'pyorb-asyncio[loadtest]'")
        return "locust"
    rate = point.clients / max(point.delay + point.cpu, 1e-3)
    fits = point.clients <= LOCUST_MAX_USERS and rate <= LOCUST_MAX_RATE
    return "locust" if fits and locustrun.available() else "asyncio"


def run_point(point: Point, settings: Settings) -> dict[str, Any]:
    """Measure one point in fresh processes; the CSV row."""
    sink_args, middle_args = server_args(point)
    logs = settings.out / "logs" / point.experiment / point.slug
    logs.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        sink = stack.enter_context(ServerProcess("sink", sink_args, logs))
        middle = None
        if middle_args is not None:
            args = [a.replace("{sink}", sink.ior) for a in middle_args]
            middle = stack.enter_context(ServerProcess("middle", args, logs))
        server = middle or sink
        assert sink.meter is not None and server.meter is not None
        sampler = stack.enter_context(Sampler([sink.meter] + ([server.meter] if middle else [])))
        time.sleep(2 * 0.25)  # idle samples: the server's RSS before the load
        generator = choose_generator(point, settings)
        measured, gen_meter = _generate(generator, point, settings, server.ior, logs)
    return _row(point, generator, measured, gen_meter, server.meter, sink.meter if middle else None, settings)


def _generate(generator: str, point: Point, settings: Settings, ref: str, logs: Path,
              ) -> tuple[dict[str, Any], Meter]:
    warmup, duration = settings.warmup_for(point), settings.duration_for(point)
    bound = warmup + duration + settings.timeout + 60 + point.clients / 100
    with Sampler([]) as sampler:
        if generator == "locust":
            prefix = logs / "locust"
            ramp = math.ceil(point.clients / 500)
            run_time = math.ceil(ramp + warmup + duration) + 1
            done, meter = run_child(locustrun.command(point.clients, run_time, prefix), bound, sampler,
                                    env=locustrun.environment(ref, point.requests, settings.timeout))
            (logs / "locust.stderr.txt").write_text(done.stderr)
            return locustrun.read_results(prefix, warmup, run_time), meter
        module = "pyorb.loadtest.omni_generator" if generator == "omniorb" else "pyorb.loadtest.generator"
        args = ["-m", module, ref, "--mode", point.mode, "--clients", str(point.clients),
                "--warmup", f"{warmup:g}", "--duration", f"{duration:g}", "--timeout", f"{settings.timeout:g}",
                "--window", str(max(point.window, 1)), "--calls", str(point.calls)]
        if generator == "asyncio":
            args += ["--requests", str(point.requests)]
        done, meter = run_child(args, bound, sampler)
    (logs / "generator.stderr.txt").write_text(done.stderr)
    try:
        found = read_result(done.stdout)
    except ValueError:
        found = None
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"the load generator failed (status {done.returncode}): "
                           f"{done.stderr.strip().splitlines()[-1:] or 'no output'}")
    return found.as_dict(), meter


def _window(meter: Meter, seconds: float) -> tuple[float, float]:
    """The measured window: the generator's last ``seconds`` (it stops right after it)."""
    end = meter.samples[-1].at if meter.samples else time.monotonic()
    return end - seconds, end


def _row(point: Point, generator: str, m: dict[str, Any], gen: Meter, server: Meter, sink: Meter | None,
         settings: Settings) -> dict[str, Any]:
    start, end = _window(gen, min(float(m["seconds"]), settings.duration_for(point)))
    gen_util = gen.utilisation(start - 0.3, end)
    throughput = float(m["throughput"])
    ideal = point.ideal
    grown = max(0, server.peak_rss() - server.first_rss())
    return {
        "experiment": point.experiment, "model": point.model, "label": point.label or point.model,
        "clients": point.clients, "delay_ms": point.delay * 1000, "cpu_ms": point.cpu * 1000,
        "distribution": "exponential" if point.exponential else "fixed", "mode": point.mode,
        "client": point.client, "window": point.window, "generator": generator,
        "calls": m["calls"], "errors": m["errors"], "seconds": round(float(m["seconds"]), 3),
        "throughput": round(throughput, 1), "ideal": round(ideal, 1),
        "efficiency_pct": round(100 * throughput / ideal, 1) if ideal > 0 else math.nan,
        **{k: _ms(m.get(k)) for k in ("min_ms", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "jitter_ms")},
        "server_cpu_pct": _pct(server.utilisation(start, end)), "server_threads": server.peak_threads(),
        "server_rss_mib": round(server.peak_rss() / 2**20, 1),
        "server_kib_per_client": round(grown / 1024 / point.clients, 2),
        "sink_cpu_pct": _pct(sink.utilisation(start, end)) if sink else math.nan,
        "generator_cpu_pct": _pct(gen_util), "generator_threads": gen.peak_threads(),
        "generator_bound": bool(gen_util >= GENERATOR_BOUND),
        # Other work on the machine competes with the servers and the generator: say how much there was.
        "load_avg": round(os.getloadavg()[0], 2),
        "note": _note(point, m),
    }


def _note(point: Point, m: dict[str, Any]) -> str:
    """Why a row does not measure the server's capacity, if it does not."""
    if point.mode == "closed" and int(m["calls"]) < 2 * point.clients and not point.requests:
        return "window too short: under 2 completed calls per client"
    return ""


def _ms(value: Any) -> float:
    return math.nan if value is None else round(float(value), 3)


def _pct(fraction: float) -> float:
    return math.nan if math.isnan(fraction) else round(100 * fraction, 1)
