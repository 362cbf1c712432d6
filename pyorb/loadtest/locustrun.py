"""Locust, headless, in a subprocess; its CSV statistics read back.

Locust must never be imported here (it monkey-patches the process with
gevent): the driver runs ``python -m locust -f .../sink_sweep.py --headless
--csv ... --csv-full-history`` (the locustfile ships in this package, in
:mod:`pyorb.loadtest.locustfiles`) and reads
``*_stats_history.csv`` (one row a second with the running request count:
throughput over the steady window) and ``*_stats.csv`` (percentiles of the
whole run, Locust's only form).
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import sys
from pathlib import Path
from typing import Any

LOCUSTFILE_MODULE = "pyorb.loadtest.locustfiles.sink_sweep"


def locustfile() -> Path:
    """The sweep's locustfile: a module of this package, found without importing it (it needs gevent)."""
    spec = importlib.util.find_spec(LOCUSTFILE_MODULE)
    if spec is None or spec.origin is None:
        raise ImportError(f"{LOCUSTFILE_MODULE} is missing from this installation of pyorb")
    return Path(spec.origin)


def available() -> bool:
    """Whether Locust is installed (the loadtest extra) for this interpreter."""
    return importlib.util.find_spec("locust") is not None


def command(users: int, run_time_s: int, csv_prefix: Path) -> list[str]:
    # Locust run by this interpreter, not found on PATH: a service's PATH
    # often lacks its virtualenv's bin/.
    spawn = max(1, min(users, 500))
    return [sys.executable, "-m", "locust", "-f", str(locustfile()), "--headless", "-u", str(users), "-r", str(spawn),
            "-t", f"{run_time_s}s", "--csv", str(csv_prefix), "--csv-full-history", "--only-summary",
            "--stop-timeout", "5", "--loglevel", "WARNING", "--exit-code-on-error", "0"]


def environment(ref: str, requests: int, timeout: float) -> dict[str, str]:
    return {**os.environ, "PYORB_SINK_REF": ref, "PYORB_REQUESTS": str(requests), "PYORB_TIMEOUT": str(timeout)}


def read_results(csv_prefix: Path, warmup_s: float, run_time_s: float) -> dict[str, Any]:
    """Throughput over the steady window (after all users started and ``warmup_s``), percentiles, errors.

    A run too short for Locust to have written two rows of history (Locust
    2.46, the last for Python 3.10, writes its first row only after a few
    seconds) is measured over the whole run instead: its totals over
    ``run_time_s``, ramp-up included.
    """
    history = [r for r in _rows(Path(f"{csv_prefix}_stats_history.csv")) if r.get("Name") == "Aggregated"]
    totals = [r for r in _rows(Path(f"{csv_prefix}_stats.csv")) if r.get("Name") == "Aggregated"]
    if not totals:
        raise RuntimeError(f"Locust wrote no statistics ({csv_prefix}_stats*.csv)")
    total = totals[0]
    if len(history) >= 2:
        target = max(int(r["User Count"]) for r in history)
        started = next(int(r["Timestamp"]) for r in history if int(r["User Count"]) >= target)
        steady = [r for r in history if int(r["Timestamp"]) >= started + warmup_s]
        if len(steady) < 2:
            steady = history[-2:]
        first, last = steady[0], steady[-1]
        seconds: float = max(int(last["Timestamp"]) - int(first["Timestamp"]), 1)
        errors = int(last["Total Failure Count"]) - int(first["Total Failure Count"])
        requests = int(last["Total Request Count"]) - int(first["Total Request Count"])
    else:
        seconds = max(run_time_s, 1)
        errors = int(total["Failure Count"])
        requests = int(total["Request Count"])
    calls = requests - errors  # Locust counts both
    return {"calls": calls, "errors": errors, "seconds": seconds, "throughput": calls / seconds,
            "min_ms": _num(total, "Min Response Time"), "mean_ms": _num(total, "Average Response Time"),
            "p50_ms": _num(total, "50%"), "p90_ms": _num(total, "90%"), "p99_ms": _num(total, "99%"),
            "max_ms": _num(total, "Max Response Time"), "jitter_ms": math.nan}


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _num(row: dict[str, str], key: str) -> float:
    try:
        return float(row[key])
    except (KeyError, ValueError):
        return math.nan
