"""Dispatch statistics, cheap enough to leave on.

Each operation under each strategy has a :class:`Recorder`.  Recording a
call costs a clock read, a few attribute updates and an append to each of
two bounded deques; snapshots merge the recorders per strategy and per operation, with
percentiles over each recorder's most recent ``window`` calls (means over all
calls).
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from pyorb import _accelerator

if TYPE_CHECKING:
    from rich.table import Table

    from pyorb.server.admission import Admission

WINDOW = 4096
"""Recent calls over which percentiles are computed."""


@dataclass(frozen=True)
class Timing:
    """Seconds: mean over all calls, percentiles over the recent window."""

    mean: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0
    max: float = 0.0

    @classmethod
    def of(cls, total: float, count: int, recent: list[float]) -> Timing:
        if not recent:
            return cls()
        if len(recent) == 1:
            v = recent[0]
            return cls(total / count, v, v, v, v)
        q = statistics.quantiles(recent, n=100, method="inclusive")
        return cls(total / count, q[49], q[89], q[98], max(recent))


@dataclass(frozen=True)
class RecorderSnapshot:
    """One strategy's or one operation's figures at one moment."""

    name: str
    served: int
    in_flight: int
    failed: int
    dropped: int
    wait: Timing
    service: Timing
    queued: int = 0
    threads: int = 0
    rejected: int = 0
    """Requests a server interceptor refused (e.g. NO_PERMISSION): they never reached the servant."""
    targets: tuple[tuple[str, str], ...] = ()
    """(operation, the strategy its new calls go to now), for a strategy that moves them (``adaptive``)."""
    shed: int = 0
    """Calls admission control answered TRANSIENT without running them (counted in ``failed`` too)."""
    queue_age: float = 0.0
    """Seconds the oldest call queued now has waited (the event-loop strategies: the loop's lag); 0 without
    admission control."""
    expired: int = 0
    """Requests whose deadline (the client's or the server's) passed before servant code could start:
    never run, answered TIMEOUT (completed NO); counted in ``served`` and ``failed`` too."""
    shed_queued: int = 0
    """Of ``shed``, the calls shed after they were queued: a thread took them once they had waited past the
    target, or they reached the queueing limit.  Each cost the server its arguments and a place in the queue;
    the rest were refused as they arrived."""


class Recorder:
    """Counts and timings of the calls of one operation under one strategy.

    ``failed`` counts calls answered with a system exception (the servant
    raised something undeclared, dropped its AMH handler, or missed a
    deadline); ``dropped`` counts replies that could not be delivered (client
    gone, request cancelled).  ``started`` is only written on the event-loop
    thread; the rest are written from dispatcher threads too, so under
    ``lock`` (uncontended, it costs well under a percent of a call, and
    ``+=`` on an attribute is not atomic across threads).  ``shed`` counts
    the calls its ``admission`` control refused, ``shed_queued`` those of them
    refused after they were queued; ``expired`` the calls never
    started because their deadline had passed when they reached a thread or
    the servant.
    """

    __slots__ = ("started", "served", "failed", "dropped", "rejected", "wait_total", "service_total", "waits",
                 "services", "lock", "shed", "shed_queued", "admission", "expired")

    def __init__(self, window: int = WINDOW) -> None:
        self.lock = threading.Lock()
        self.started = 0
        self.served = 0
        self.failed = 0
        self.dropped = 0
        self.rejected = 0  # loop thread only: interceptors run there
        self.wait_total = 0.0
        self.service_total = 0.0
        # The recent calls' waits and service times, in two windows of floats
        # rather than one of pairs: a float is not tracked by the garbage
        # collector, a tuple is, and a window of thousands of surviving tuples
        # made the collector run, and walk them all, every few thousand calls.
        self.waits: deque[float] = deque(maxlen=window)
        self.services: deque[float] = deque(maxlen=window)
        self.shed = 0
        self.shed_queued = 0
        self.admission: Admission | None = None
        """The operation's admission control under its strategy (None: every call is queued)."""
        self.expired = 0

    def finish(self, wait: float, service: float, failed: bool) -> None:
        """One request's outcome, from any thread: worker threads may finish
        requests of one recorder at the same time and ``+=`` is not atomic."""
        with self.lock:
            self.served += 1
            self.wait_total += wait
            self.service_total += service
            if failed:
                self.failed += 1
            self.waits.append(wait)
            self.services.append(service)


class Gauges:
    """A strategy's live figures, read when a snapshot is taken."""

    __slots__ = ("queued", "threads")

    def __init__(self) -> None:
        self.queued: Callable[[], int] = _zero
        self.threads: Callable[[], int] = _zero


def merge(name: str, recorders: Iterable[Recorder], gauges: Gauges | None = None) -> RecorderSnapshot:
    """One snapshot of several recorders (an operation's, or a strategy's)."""
    started = served = failed = dropped = rejected = shed = shed_queued = expired = 0
    wait_total = service_total = age = 0.0
    waits: list[float] = []
    services: list[float] = []
    for r in recorders:
        with r.lock:  # one consistent reading per recorder
            started += r.started
            served += r.served
            failed += r.failed
            dropped += r.dropped
            rejected += r.rejected
            shed += r.shed
            shed_queued += r.shed_queued
            expired += r.expired
            wait_total += r.wait_total
            service_total += r.service_total
            waits.extend(r.waits)
            services.extend(r.services)
        if r.admission is not None:
            age = max(age, r.admission.age())
    return RecorderSnapshot(
        name, served, max(0, started - served), failed, dropped,
        Timing.of(wait_total, served, waits),
        Timing.of(service_total, served, services),
        gauges.queued() if gauges else 0, gauges.threads() if gauges else 0, rejected,
        _targets(gauges), shed, age, expired, shed_queued,
    )


def _targets(gauges: Gauges | None) -> tuple[tuple[str, str], ...]:
    targets: Callable[[], dict[str, str]] | None = getattr(gauges, "targets", None)  # only adaptive's have it
    return tuple(sorted(targets().items())) if targets is not None else ()


def _zero() -> int:
    return 0


@dataclass(frozen=True)
class ServerStats:
    """A snapshot of a server's dispatch: per strategy and per operation."""

    strategies: tuple[RecorderSnapshot, ...] = field(default_factory=tuple)
    operations: tuple[RecorderSnapshot, ...] = field(default_factory=tuple)
    connections: int = 0
    tls_refused: int = 0
    """TLS handshakes refused (failed, timed out, or a plain client on a TLS port) since the start."""

    def table(self) -> Table:
        """The snapshot as a rich table (times in milliseconds)."""
        from rich.table import Table

        table = Table(title=f"pyorb dispatch statistics ({self.connections} connections open)",
                      caption="times in milliseconds: wait = queued before the servant ran, "
                              "service = in the servant")
        names = [f"{kind} {s.name}" for kind, rows in (("strategy", self.strategies),
                                                        ("operation", self.operations)) for s in rows]
        # The name column never wraps or truncates (the numbers' headers wrap instead).
        table.add_column("", no_wrap=True, min_width=max(map(len, names), default=0))
        for col in ("served", "in flight", "queued", "threads", "failed", "dropped", "rejected", "shed",
                    "shed queued", "expired", "queue age ms", "wait mean ms", "wait p99 ms", "service mean ms", "service p50 ms", "service p99 ms"):
            table.add_column(col, justify="right")
        for title, rows in (("strategy", self.strategies), ("operation", self.operations)):
            for s in rows:
                table.add_row(
                    f"{title} {s.name}", str(s.served), str(s.in_flight),
                    str(s.queued) if title == "strategy" else "", str(s.threads) if title == "strategy" else "",
                    str(s.failed), str(s.dropped), str(s.rejected), str(s.shed), str(s.shed_queued),
                    str(s.expired), _ms(s.queue_age), _ms(s.wait.mean), _ms(s.wait.p99),
                    _ms(s.service.mean), _ms(s.service.p50), _ms(s.service.p99),
                )
        return table


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


# With the compiled accelerator, the C twin takes its place: every answered call is counted by it.
_accelerator.twin(__name__, "Recorder.finish", "pyorb.server.call._cstats")
