"""Locality-aware scheduling of request streams (the thread-per-request paper).

Each client connection's requests form a stream.  Serving a stream's
requests back to back on one worker keeps its working set in that worker's
cache; the paper's policy, implemented here:

* an idle worker keeps serving the stream it served last while that stream
  has queued requests;
* otherwise it switches to the unattended stream with the most queued
  requests (the oldest first among equals) when that stream has at least
  ``threshold`` of them;
* if none reaches the threshold it waits up to ``wait`` seconds for its own
  stream (or a stream to reach the threshold), then takes the largest stream
  anyway, so that no request starves.
"""

from __future__ import annotations

import threading
from collections import deque
from time import monotonic
from typing import Hashable

from pyorb.server.dispatch import Call, run_blocking
from pyorb.server.strategies.threads import _join, _positive, _ThreadStrategy


class LocalityStrategy(_ThreadStrategy):
    """``locality(n, threshold=1, wait=0.0)``: ``n`` workers with stream affinity.

    Guarantees: at most ``n`` calls in servant code at once; the calls of one
    connection run one at a time in arrival order (a stream is served by one
    worker at a time); a worker serves its stream's queued calls back to back.
    """

    def __init__(self, n: int, threshold: int = 1, wait: float = 0.0) -> None:
        self.size = _positive("locality worker count", n)
        self.threshold = _positive("locality threshold", threshold)
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 10:
            raise ValueError(f"locality wait must be between 0 and 10 seconds, got {wait!r}")
        self.wait = float(wait)
        super().__init__(f"locality({n}, threshold={threshold}, wait={wait:g})")
        self._cv = threading.Condition()
        self._streams: dict[Hashable, deque[Call]] = {}
        self._busy: set[Hashable] = set()  # streams a worker is serving now
        self._queued = 0
        self._closing = False
        self._threads: list[threading.Thread] = []
        self.switches = 0
        """Times a worker started serving a stream other than its last one."""
        self.stats.queued = lambda: self._queued
        self.stats.threads = lambda: sum(t.is_alive() for t in self._threads)

    def _submit(self, call: Call) -> None:
        if not self._threads:
            self._threads = [self._thread(self._work, name=f"pyorb-locality-{i}") for i in range(self.size)]
        with self._cv:
            stream = self._streams.get(call.connection)
            if stream is None:
                stream = self._streams[call.connection] = deque()
            stream.append(call)
            self._queued += 1
            self._cv.notify_all()

    def _work(self) -> None:
        last: Hashable | None = None
        while True:
            with self._cv:
                key = self._next_stream(last)
                if key is None:
                    return
                if key is not last:
                    self.switches += 1
                call = self._streams[key].popleft()
                self._queued -= 1
                self._busy.add(key)
            last = key
            run_blocking(call)
            call = None  # type: ignore[assignment]  # keep no finished request alive
            with self._cv:
                self._busy.discard(key)
                if not self._streams[key]:
                    del self._streams[key]
                self._cv.notify_all()

    def _next_stream(self, last: Hashable | None) -> Hashable | None:  # holds the lock
        idle_since = monotonic()
        while True:
            if last is not None and self._streams.get(last) and last not in self._busy:
                return last
            free = [k for k, q in self._streams.items() if q and k not in self._busy]
            if not free:
                if self._closing:
                    return None
                self._cv.wait()
                continue
            best = max(free, key=lambda k: (len(self._streams[k]), -self._streams[k][0].queued_at))
            waited = monotonic() - idle_since
            if last is None or len(self._streams[best]) >= self.threshold or waited >= self.wait or self._closing:
                return best
            self._cv.wait(self.wait - waited)

    def close(self) -> None:
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        _join(self._threads)
