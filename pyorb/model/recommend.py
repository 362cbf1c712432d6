"""Which strategy to run: the models of :mod:`pyorb.model.strategies` compared."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from pyorb.model.host import Host
from pyorb.model.strategies import DEFAULT, LOOP, Calibration, Prediction, Workload, parse_spec, predict

POOL_SIZES = (2, 4, 8, 16, 32, 64, 128, 256)
"""Thread-pool sizes always considered (besides the size the workload needs)."""

NEAR_BEST = 0.98
"""A strategy within 2 % of the best predicted throughput counts as as good: then fewer threads win."""

_PREFERENCE_SYNC = ("reactive", "amh", "thread_pool", "locality", "threaded", "thread_per_connection",
                    "thread_per_request")
_PREFERENCE_ASYNC = ("amh", "reactive", "thread_pool", "locality", "threaded", "thread_per_connection",
                     "thread_per_request")


@dataclass(frozen=True)
class Recommendation:
    """The strategy to run, what it should give, and the alternatives weighed."""

    strategy: str
    """A spec pyorb's strategy registry parses, e.g. ``"reactive"``, ``"thread_pool(8)"``."""
    threads: int
    """Dispatcher threads it holds (0 for the loop strategies)."""
    throughput: float
    """Predicted calls/s."""
    response: float
    """Predicted mean response time, s."""
    reason: str
    """One sentence."""
    predictions: tuple[Prediction, ...]
    """Every strategy considered, best throughput first."""


def candidates(workload: Workload, calibration: Calibration | None = None) -> tuple[str, ...]:
    """The registry specs :func:`recommend` weighs by default: the loop, pools of several sizes
    (including the size that keeps the GIL busy for this workload), a thread per connection and per
    request, and ``threaded``."""
    cal = calibration or DEFAULT
    pool = cal.thread_pool
    busy = workload.cpu + pool.overhead
    # Calls in service needed so that one is always on the GIL while the others block.
    needed = math.ceil((busy + pool.handoff + workload.delay) / busy) if busy > 0 else 1
    sizes = sorted({s for s in POOL_SIZES if s < max(2, workload.clients)} | {max(1, min(needed, workload.clients))})
    return ("reactive", "amh", *(f"thread_pool({s})" for s in sizes), "thread_per_connection",
            "thread_per_request", "threaded")


def recommend(workload: Workload, *, strategies: Sequence[str] | None = None,
              calibration: Calibration | None = None, sync: bool = True, host: Host | None = None) -> Recommendation:
    """The strategy with the highest predicted throughput; among those within 2 % of it, the one
    holding the fewest threads, then the simplest.

    ``sync``: the servant method is synchronous (a blocking delay blocks the
    thread that runs it: the loop under ``reactive``/``amh``); ``False`` for
    coroutine or AMH servants, which hold no thread while they wait.  Results
    are cached per argument set; a first call with N ≤ 1000 takes well under
    a millisecond.  ``host``: clients (and a sink) on the server's own cores
    (:mod:`pyorb.model.host`; slower, an exact MVA per fixed-point step).
    """
    specs = tuple(strategies) if strategies is not None else candidates(workload, calibration)
    if not specs:
        raise ValueError("no strategies to choose from")
    return _recommend(workload, specs, calibration or DEFAULT, sync, host)


@lru_cache(maxsize=1024)
def _recommend(workload: Workload, specs: tuple[str, ...], cal: Calibration, sync: bool,
               host: Host | None) -> Recommendation:
    preds = sorted((predict(s, workload, cal, sync=sync, host=host) for s in specs), key=lambda p: -p.throughput)
    best = preds[0].throughput
    order = _PREFERENCE_SYNC if sync else _PREFERENCE_ASYNC
    near = [p for p in preds if p.throughput >= NEAR_BEST * best]
    chosen = min(near, key=lambda p: (p.threads, _rank(order, p.strategy), p.response))
    return Recommendation(chosen.strategy, chosen.threads, chosen.throughput, chosen.response,
                          _reason(chosen, workload, sync, preds), tuple(preds))


def _rank(order: Sequence[str], spec: str) -> int:
    name = parse_spec(spec)[0]
    return order.index(name) if name in order else len(order)


def _reason(p: Prediction, w: Workload, sync: bool, preds: Sequence[Prediction]) -> str:
    name = parse_spec(p.strategy)[0]
    rate = f"{p.throughput:,.0f} calls/s predicted"
    workers = parse_spec(p.strategy)[1] if name == "amh" else ()
    if workers:
        return f"{workers[0]} worker processes, each with its own loop and GIL, use the cores ({rate})"
    if not sync:
        return (f"a coroutine/AMH servant holds no thread while it waits, so one event loop serves all "
                f"{w.clients} calls ({rate}, GIL {p.utilisation:.0%} busy)")
    if name in LOOP:
        if w.delay > 0:
            return (f"threads would gain less than {1 - NEAR_BEST:.0%} here (few calls at once, or a delay short "
                    f"against the CPU), so calls run inline on the loop ({rate}, no threads)")
        return f"short synchronous CPU work: inline on the loop avoids thread hand-offs ({rate}, no threads)"
    if w.delay > 0:
        return (f"each call blocks its thread for {w.delay * 1e3:.3g} ms, which would stall the event loop; "
                f"{p.threads} threads overlap the blocking and give {rate}, within {1 - NEAR_BEST:.0%} of the best "
                f"of {len(preds)} strategies with the fewest threads")
    return f"{rate}, the best of {len(preds)} strategies within {1 - NEAR_BEST:.0%} with the fewest threads"
