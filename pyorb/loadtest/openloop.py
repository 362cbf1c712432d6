"""An open-loop load generator for ``Bench::Sink.work``: calls on a schedule, whatever the replies.

A closed-loop client waits for each reply before its next call, so an
overloaded server slows its own load down and never shows what happens past
its capacity.  Here the calls leave at a fixed rate (one every ``1/rate``
seconds, spread round-robin over ``connections`` client connections) for
``seconds``, and each outcome is recorded: a reply, TRANSIENT (the server
shed the call), TIMEOUT (the call's ``timeout`` passed first), or another
error.  Bounded in count (``rate * seconds`` calls) and time (``seconds +
timeout`` and a grace).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

GRACE_S = 1.0
"""Seconds past the last call's timeout after which an unanswered call counts as a timeout."""


@dataclass
class Outcomes:
    """What became of the calls of one run (latencies in seconds, by outcome)."""

    offered: float
    """Calls per second the schedule asked for."""
    seconds: float
    """Length of the schedule."""
    sent: int = 0
    ok: list[float] = field(default_factory=list)
    in_window: int = 0
    """Replies that came before the schedule ended (the steady state, not the drain of a backlog after it)."""
    warmup: float = 0.0
    """Seconds from the schedule's start before replies count as :attr:`steady`."""
    steady: int = 0
    """Replies that came from ``warmup`` seconds into the schedule to its end: the calls a
    server answers once its queue has filled up to what admission control lets it hold."""
    shed: list[float] = field(default_factory=list)
    timeouts: int = 0
    errors: int = 0

    @property
    def goodput(self) -> float:
        """Replies per second while the schedule ran."""
        return self.in_window / self.seconds

    @property
    def steady_goodput(self) -> float:
        """Replies per second from ``warmup`` seconds into the schedule to its end."""
        return self.steady / (self.seconds - self.warmup)

    def ok_quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1) of the replied calls' latency; 0 with none."""
        return _quantile(self.ok, q)

    def shed_quantile(self, q: float) -> float:
        """The ``q`` quantile of how long a shed call took to be refused; 0 with none."""
        return _quantile(self.shed, q)


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[min(998, max(0, round(q * 1000) - 1))]


async def _one(sink: Any, token: int, timeout: float, out: Outcomes, end: float, warm: float) -> None:
    from omniORB import CORBA

    t0 = time.perf_counter()
    try:
        await sink.work(token, timeout=timeout)
    except CORBA.TRANSIENT:
        out.shed.append(time.perf_counter() - t0)
    except CORBA.TIMEOUT:
        out.timeouts += 1
    except CORBA.Exception:
        out.errors += 1
    else:
        done = time.perf_counter()
        out.ok.append(done - t0)
        out.in_window += done <= end
        out.steady += warm <= done <= end


async def _schedule(sinks: list[Any], rate: float, seconds: float, timeout: float, warmup: float = 0.0) -> Outcomes:
    out = Outcomes(rate, seconds, warmup=warmup)
    count = max(1, int(rate * seconds))
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = time.perf_counter() + seconds
    warm = end - seconds + warmup
    pending: set[asyncio.Task[None]] = set()
    for i in range(count):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = loop.create_task(_one(sinks[i % len(sinks)], i, timeout, out, end, warm))
        pending.add(task)
        task.add_done_callback(pending.discard)
        out.sent += 1
    if pending:
        _, late = await asyncio.wait(set(pending), timeout=timeout + GRACE_S)
        for task in late:
            task.cancel()
        out.timeouts += len(late)
        await asyncio.gather(*late, return_exceptions=True)
    return out


async def offer(ref: str, rate: float, seconds: float, connections: int = 16, timeout: float = 2.0,
                warmup: float = 0.0) -> Outcomes:
    """Send ``rate`` calls per second to the sink ``ref`` for ``seconds`` over
    ``connections`` connections, each call with ``timeout``; what became of
    them (replies from ``warmup`` seconds on also count as steady)."""
    import pyorb
    from pyorb.idl import bench_idl

    if rate <= 0 or seconds <= 0 or connections < 1 or timeout <= 0 or not 0 <= warmup < seconds:
        raise ValueError(f"offer needs a positive rate, seconds and timeout, at least one connection and "
                         f"0 <= warmup < seconds, got rate={rate}, seconds={seconds}, connections={connections}, "
                         f"timeout={timeout}, warmup={warmup}")
    iface = bench_idl().Bench.Sink
    clients = [pyorb.Client() for _ in range(connections)]
    try:
        sinks = [c.resolve(ref, iface) for c in clients]
        # Connected before the clock starts (a call shed now has connected too).
        await asyncio.gather(*(s.work(0, timeout=max(timeout, 10.0)) for s in sinks), return_exceptions=True)
        return await _schedule(sinks, rate, seconds, timeout, warmup)
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


async def capacity(ref: str, seconds: float, concurrency: int = 4, timeout: float = 10.0) -> float:
    """Replies per second with ``concurrency`` calls kept outstanding (a
    closed loop, one connection each): the sink's capacity, when
    ``concurrency`` keeps it busy without queueing much."""
    import pyorb
    from pyorb.idl import bench_idl

    iface = bench_idl().Bench.Sink
    clients = [pyorb.Client() for _ in range(concurrency)]
    replies = 0
    try:
        sinks = [c.resolve(ref, iface) for c in clients]
        await asyncio.gather(*(s.work(0, timeout=timeout) for s in sinks), return_exceptions=True)
        end = time.perf_counter() + seconds

        async def loop(sink: Any) -> None:
            nonlocal replies
            from omniORB import CORBA

            while time.perf_counter() < end:
                try:
                    await sink.work(1, timeout=timeout)
                except CORBA.Exception:
                    continue
                replies += time.perf_counter() <= end

        await asyncio.gather(*(loop(s) for s in sinks))
        return replies / seconds
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
