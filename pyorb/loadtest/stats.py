"""What a load generator measured: one result type and the one JSON line every generator prints.

pyorb's generator (:mod:`pyorb.loadtest.generator`), omniORBpy's
(:mod:`pyorb.loadtest.omni_generator`), the bare floor client
(``benchmarks.bare_sink_client``), the open-loop generator
(:mod:`pyorb.loadtest.openloop`) and the in-process loops of the soak, the
shed-cost and the locator benchmarks all report a :class:`LoadResult`; one
printed by :meth:`LoadResult.emit` as a generator's last stdout line (or
written with :meth:`LoadResult.as_dict`) is read back with
:func:`read_result` (or :meth:`LoadResult.from_dict`).  Standard library only.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

LATENCY_KEYS = ("min_ms", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "jitter_ms")


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """min, mean, percentiles, max and jitter (standard deviation) in milliseconds."""
    if not seconds:
        return dict.fromkeys(LATENCY_KEYS, math.nan)
    ms = sorted(s * 1000 for s in seconds)

    def pct(q: float) -> float:
        return ms[min(len(ms) - 1, int(q * len(ms)))]

    return {
        "min_ms": ms[0], "mean_ms": statistics.fmean(ms), "p50_ms": pct(0.50), "p90_ms": pct(0.90),
        "p99_ms": pct(0.99), "max_ms": ms[-1], "jitter_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0,
    }


@dataclass(frozen=True)
class LoadResult:
    """One generator run: the calls answered inside the measured window and what they took.

    ``calls`` and ``errors`` count calls completed inside the window,
    ``seconds`` is its length, ``latency_ms`` the summary of the answered
    calls' round trips (:data:`LATENCY_KEYS`, NaN with no call),
    ``cpu_s`` and ``wall_s`` the generator process's own CPU and wall time,
    and ``extra`` what one kind of run adds (``window``, ``connections``, ...).
    """

    mode: str
    clients: int
    calls: int
    errors: int
    seconds: float
    latency_ms: Mapping[str, float]
    cpu_s: float
    wall_s: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def measured(cls, mode: str, clients: int, calls: int, errors: int, seconds: float,
                 latencies: Sequence[float], cpu_s: float, wall_s: float, **extra: Any) -> LoadResult:
        """The result of a run whose answered calls took ``latencies`` seconds each."""
        return cls(mode, clients, calls, errors, seconds, latency_summary(latencies), cpu_s, wall_s, extra)

    @property
    def throughput(self) -> float:
        """Answered calls per second of the window."""
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The flat JSON object of :meth:`emit` (NaN as None)."""
        flat = {"mode": self.mode, "clients": self.clients, "calls": self.calls, "errors": self.errors,
                "seconds": self.seconds, "throughput": self.throughput, **self.latency_ms,
                "cpu_s": self.cpu_s, "wall_s": self.wall_s, **self.extra}
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in flat.items()}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> LoadResult:
        """The result :meth:`as_dict` wrote (``throughput`` is recomputed, unknown keys go to ``extra``)."""
        known = {"mode", "clients", "calls", "errors", "seconds", "throughput", "cpu_s", "wall_s", *LATENCY_KEYS}
        missing = sorted({"mode", "clients", "calls", "errors", "seconds"} - set(obj))
        if missing:
            raise ValueError(f"not a load generator's result: it lacks {', '.join(missing)}: {dict(obj)!r:.300}")
        latency = {k: math.nan if obj.get(k) is None else float(obj[k]) for k in LATENCY_KEYS}
        return cls(str(obj["mode"]), int(obj["clients"]), int(obj["calls"]), int(obj["errors"]),
                   float(obj["seconds"]), latency, float(obj.get("cpu_s") or 0.0), float(obj.get("wall_s") or 0.0),
                   {k: v for k, v in obj.items() if k not in known})

    def emit(self) -> None:
        """Print the result as the generator's last stdout line."""
        print(json.dumps(self.as_dict()), flush=True)
        sys.stdout.flush()


def read_result(stdout: str | bytes) -> LoadResult:
    """The result a generator printed: its last stdout line that is a JSON object.

    Raises ValueError, quoting the output's end, when there is none.
    """
    text = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return LoadResult.from_dict(obj)
    raise ValueError(f"the load generator printed no result line; its output ended: {text[-300:]!r}")
