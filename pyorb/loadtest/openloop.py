"""An open-loop load generator for ``Bench::Sink.work``: calls on a schedule, whatever the replies.

A closed-loop client waits for each reply before its next call, so an
overloaded server slows its own load down and never shows what happens past
its capacity.  Here the calls leave at a fixed rate (one every ``1/rate``
seconds, spread round-robin over ``connections`` client connections) for
``seconds``, and each outcome is recorded: a reply, TRANSIENT (the server
shed the call), TIMEOUT (the call's ``timeout`` passed first), or another
error.  Bounded in count (``rate * seconds`` calls) and time (``seconds +
timeout`` and a grace).  :func:`offer` reports a
:class:`~pyorb.loadtest.stats.LoadResult`, as every load generator of pyorb
does: ``calls`` are the replies inside the schedule (its ``throughput`` is
the goodput), ``errors`` every call not replied to, and ``extra`` the
open loop's own counts (:data:`EXTRA_KEYS`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from pyorb.loadtest.stats import LoadResult, latency_summary

MODE = "open-loop"
"""The ``mode`` of the results :func:`offer` reports."""

EXTRA_KEYS = ("offered", "sent", "replied", "warmup", "steady", "steady_goodput", "shed", "shed_p50_ms", "timeouts",
              "other_errors")
"""What an open-loop result adds to a :class:`LoadResult`: the rate asked for, the calls sent, the replies
(also those after the schedule), the warm-up, the replies after it and their rate, the shed calls (TRANSIENT)
and the median time to refuse one (None with none), the calls whose timeout passed, the other errors."""

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
    def steady_goodput(self) -> float:
        """Replies per second from ``warmup`` seconds into the schedule to its end."""
        return self.steady / (self.seconds - self.warmup)

    def result(self, connections: int, cpu_s: float, wall_s: float) -> LoadResult:
        """These outcomes as every generator reports them (see the module's doc)."""
        return LoadResult.measured(
            MODE, connections, self.in_window, len(self.shed) + self.timeouts + self.errors, self.seconds, self.ok,
            cpu_s, wall_s, offered=self.offered, sent=self.sent, replied=len(self.ok), warmup=self.warmup,
            steady=self.steady, steady_goodput=self.steady_goodput, shed=len(self.shed),
            shed_p50_ms=latency_summary(self.shed)["p50_ms"], timeouts=self.timeouts, other_errors=self.errors)


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
                warmup: float = 0.0) -> LoadResult:
    """Send ``rate`` calls per second to the sink ``ref`` for ``seconds`` over
    ``connections`` connections, each call with ``timeout``; what became of
    them (replies from ``warmup`` seconds on also count as steady), with this
    process's CPU and wall time over the schedule."""
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
        cpu, wall = time.process_time(), time.perf_counter()
        out = await _schedule(sinks, rate, seconds, timeout, warmup)
        return out.result(connections, time.process_time() - cpu, time.perf_counter() - wall)
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
