"""Dispatch statistics, cheap enough to leave on.

Each strategy and each operation has a :class:`Recorder`.  Recording a call
costs a few attribute updates under an uncontended lock and two appends to
bounded deques; percentiles are computed only when a snapshot is taken, over
the most recent ``window`` calls (means are over all calls).
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from rich.table import Table

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


class Recorder:
    """Counts and timings of the calls through one strategy or one operation.

    ``failed`` counts calls answered with a system exception made by the
    server (the servant raised something undeclared, dropped its AMH handler,
    or missed a deadline); ``dropped`` counts replies that could not be
    delivered (client gone, request cancelled).
    """

    __slots__ = ("name", "_lock", "started", "served", "failed", "dropped", "_wait_total", "_service_total",
                 "_wait", "_service", "queued", "threads")

    def __init__(self, name: str, window: int = WINDOW) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.started = 0
        self.served = 0
        self.failed = 0
        self.dropped = 0
        self._wait_total = 0.0
        self._service_total = 0.0
        self._wait: deque[float] = deque(maxlen=window)
        self._service: deque[float] = deque(maxlen=window)
        # A strategy's gauges (callables), read at snapshot time.
        self.queued: Callable[[], int] = _zero
        self.threads: Callable[[], int] = _zero

    def start(self) -> None:
        with self._lock:
            self.started += 1

    def finish(self, wait: float, service: float, failed: bool) -> None:
        with self._lock:
            self.served += 1
            self.failed += failed
            self._wait_total += wait
            self._service_total += service
        self._wait.append(wait)
        self._service.append(service)

    def drop(self) -> None:
        with self._lock:
            self.dropped += 1

    def snapshot(self) -> RecorderSnapshot:
        with self._lock:
            served, started = self.served, self.started
            wait_total, service_total = self._wait_total, self._service_total
            failed, dropped = self.failed, self.dropped
        return RecorderSnapshot(
            self.name, served, max(0, started - served), failed, dropped,
            Timing.of(wait_total, served, list(self._wait)),
            Timing.of(service_total, served, list(self._service)),
            self.queued(), self.threads(),
        )


def _zero() -> int:
    return 0


@dataclass(frozen=True)
class ServerStats:
    """A snapshot of a server's dispatch: per strategy and per operation."""

    strategies: tuple[RecorderSnapshot, ...] = field(default_factory=tuple)
    operations: tuple[RecorderSnapshot, ...] = field(default_factory=tuple)
    connections: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def table(self) -> Table:
        """The snapshot as a rich table (times in milliseconds)."""
        from rich.table import Table

        table = Table(title=f"pyorb dispatch statistics ({self.connections} connections open)")
        for col in ("", "served", "in flight", "queued", "threads", "failed", "dropped",
                    "wait mean", "wait p99", "service mean", "service p50", "service p99"):
            table.add_column(col, justify="left" if not col else "right")
        for title, rows in (("strategy", self.strategies), ("operation", self.operations)):
            for s in rows:
                table.add_row(
                    f"{title} {s.name}", str(s.served), str(s.in_flight),
                    str(s.queued) if title == "strategy" else "", str(s.threads) if title == "strategy" else "",
                    str(s.failed), str(s.dropped), _ms(s.wait.mean), _ms(s.wait.p99),
                    _ms(s.service.mean), _ms(s.service.p50), _ms(s.service.p99),
                )
        return table


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"
