"""Latency summaries shared by the load generators (standard library only)."""

from __future__ import annotations

import json
import math
import statistics
import sys
from typing import Any, Sequence


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """min, mean, percentiles, max and jitter (standard deviation) in milliseconds."""
    if not seconds:
        return {k: math.nan for k in ("min_ms", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "jitter_ms")}
    ms = sorted(s * 1000 for s in seconds)

    def pct(q: float) -> float:
        return ms[min(len(ms) - 1, int(q * len(ms)))]

    return {
        "min_ms": ms[0], "mean_ms": statistics.fmean(ms), "p50_ms": pct(0.50), "p90_ms": pct(0.90),
        "p99_ms": pct(0.99), "max_ms": ms[-1], "jitter_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0,
    }


def result(mode: str, clients: int, calls: int, errors: int, seconds: float, latencies: Sequence[float],
           cpu_s: float, wall_s: float, **extra: Any) -> dict[str, Any]:
    """The one JSON object a generator prints."""
    return {"mode": mode, "clients": clients, "calls": calls, "errors": errors, "seconds": seconds,
            "throughput": calls / seconds if seconds > 0 else 0.0, **latency_summary(latencies),
            "cpu_s": cpu_s, "wall_s": wall_s, **extra}


def emit(obj: dict[str, Any]) -> None:
    """Print the result as the generator's last stdout line (NaN as null)."""
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in obj.items()}
    print(json.dumps(clean), flush=True)
    sys.stdout.flush()
