"""Closed-loop calls through an object group, with the book-keeping fault tests need.

``N`` callers each call ``Bench::Sink.work(token)`` with a token no other
call uses, then the next, until the run's time is up.  Every call ends in
exactly one of: its own token back (ok), a CORBA system exception (counted
by name and completion status), or nothing (lost: still unanswered when
the run ended, its deadline long past).  A reply that carries any other
token (an earlier call's, or another caller's) is a duplicate.  Completions are also
counted per ``bin`` seconds, so a test can see throughput over time.

In a test's own loop::

    result = asyncio.run(run(group_ior, seconds=6, in_flight=60, timeout=2.0, events=[(2.0, stall)]))

or in another process (a host of :mod:`pyorb.testing.netns`), printing the
result as one JSON line::

    python -m pyorb.testing.groupload GROUP_IOR --seconds 6 --in-flight 60 --timeout 2
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import time
from collections import Counter
from typing import Any, Callable, Sequence

from omniORB import CORBA

import pyorb
from pyorb.client.balancer import Hedging, OutlierDetection
from pyorb.giop.ior import IOR
from pyorb.idl import bench_idl

# How long past its own deadline a call may stay unanswered before the run
# gives up on it and counts it lost: generous, for a loaded machine.
LOST_AFTER_S = 10.0
# Latencies are counted in buckets 1 % wide (a percentile is off by at most
# that), so an hour of calls takes a few hundred counters, not a list.
_BUCKET = math.log(1.01)


@dataclasses.dataclass
class LoadResult:
    """What a closed-loop run saw."""

    seconds: float
    """How long the run lasted, from its first call to its last outcome."""
    ok: int = 0
    errors: dict[str, int] = dataclasses.field(default_factory=dict)
    """Failed calls by ``"EXCEPTION COMPLETED_X"``."""
    lost: int = 0
    """Calls with no outcome at all by the end of the run."""
    duplicates: int = 0
    """Replies that carried another token than their call sent."""
    late: int = 0
    """Calls that ended more than a second after their deadline."""
    bins: list[int] = dataclasses.field(default_factory=list)
    """Calls completed in each ``bin`` seconds from the start."""
    error_bins: list[int] = dataclasses.field(default_factory=list)
    """Calls failed in each ``bin`` seconds from the start."""
    bin: float = 0.1
    p50: float = 0.0
    """Median seconds from a call to its answer, over the calls answered ok."""
    p99: float = 0.0
    """99th percentile of the same."""
    p999: float = 0.0
    """99.9th percentile of the same."""
    hedges: int = 0
    """Copies of calls sent to a second member (hedging on)."""
    hedges_won: int = 0
    """Calls answered by their copy."""

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def rate(self, start: float, end: float) -> float:
        """Completed calls per second between ``start`` and ``end`` seconds from the start."""
        first, last = int(start / self.bin), int(end / self.bin)
        return sum(self.bins[first:last]) / max(end - start, 1e-9)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LoadResult:
        return cls(**json.loads(text))


async def run(group: IOR | str, seconds: float, in_flight: int, timeout: float = 2.0, *,
              idempotent: bool = False, balancing: str = "round_robin",
              detection: OutlierDetection | None = OutlierDetection(), bin: float = 0.1,
              events: Sequence[tuple[float, Callable[[], Any]]] = (),
              hedging: Hedging | None = None) -> LoadResult:
    """``in_flight`` callers for ``seconds`` through ``group`` with a call
    timeout of ``timeout`` seconds; each of ``events`` (seconds from the
    start, function) runs at its time on this loop."""
    Sink = bench_idl().Bench.Sink
    loop = asyncio.get_running_loop()
    result = LoadResult(seconds=0.0, bin=bin)
    counts = Counter[int]()
    error_counts = Counter[int]()
    errors = Counter[str]()
    latencies = Counter[int]()
    start = loop.time()
    end = start + seconds
    async with pyorb.Client(pyorb.Config(call_timeout=timeout), balancing=balancing,
                            outlier_detection=detection, hedging=hedging) as client:
        sink = client.resolve(group, Sink, idempotent={"work"} if idempotent else ())
        timers = [loop.call_at(start + at, what) for at, what in events]

        async def caller(n: int) -> None:
            token = (n + 1) << 40
            while loop.time() < end:
                token += 1
                sent = loop.time()
                try:
                    got = await asyncio.wait_for(sink.work(token), timeout + LOST_AFTER_S)
                except asyncio.TimeoutError:
                    result.lost += 1
                    continue
                except CORBA.SystemException as exc:
                    errors[f"{type(exc).__name__} {exc.completed}"] += 1
                    error_counts[int((loop.time() - start) / bin)] += 1
                else:
                    if got != token:  # an earlier call's reply, or another caller's
                        result.duplicates += 1
                    now = loop.time()
                    counts[int((now - start) / bin)] += 1
                    latencies[math.floor(math.log(max(now - sent, 1e-6)) / _BUCKET)] += 1
                    result.ok += 1
                if loop.time() - sent > timeout + 1.0:
                    result.late += 1

        try:
            await asyncio.gather(*(caller(n) for n in range(in_flight)))
        finally:
            for timer in timers:
                timer.cancel()
        for stats in client.group_stats().values():
            result.hedges += stats.hedges
            result.hedges_won += stats.won
    result.seconds = loop.time() - start
    size = int(result.seconds / bin) + 1
    result.bins = [counts[i] for i in range(size)]
    result.error_bins = [error_counts[i] for i in range(size)]
    result.errors = dict(errors)
    result.p50, result.p99, result.p999 = (_percentile(latencies, q) for q in (0.5, 0.99, 0.999))
    return result


def _percentile(buckets: Counter[int], q: float) -> float:
    """The ``q`` quantile of the latencies counted in ``buckets`` (the upper edge of its bucket)."""
    rank, seen = q * sum(buckets.values()), 0
    for index in sorted(buckets):
        seen += buckets[index]
        if seen >= rank:
            return math.exp((index + 1) * _BUCKET)
    return 0.0


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pyorb.testing.groupload", description=__doc__.split("\n")[0])
    parser.add_argument("group", help="the group's IOR")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--in-flight", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=2.0, help="each call's timeout in seconds")
    parser.add_argument("--idempotent", action="store_true", help="declare work idempotent")
    parser.add_argument("--balancing", default="round_robin")
    parser.add_argument("--no-outlier-detection", action="store_true")
    parser.add_argument("--hedging", action="store_true", help="hedge idempotent calls (pyorb.client.balancer.Hedging())")
    parser.add_argument("--bin", type=float, default=0.1, help="seconds per throughput bin")
    ns = parser.parse_args(argv)
    started = time.monotonic()
    result = asyncio.run(run(ns.group, ns.seconds, ns.in_flight, ns.timeout, idempotent=ns.idempotent,
                             balancing=ns.balancing, bin=ns.bin, hedging=Hedging() if ns.hedging else None,
                             detection=None if ns.no_outlier_detection else OutlierDetection()))
    assert time.monotonic() - started < ns.seconds + ns.timeout + LOST_AFTER_S + 60
    print(result.to_json(), flush=True)


if __name__ == "__main__":
    main()
