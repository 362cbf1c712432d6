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

from pyorb.server.call.dispatch import Call
from pyorb.server.strategies.threads import _join, _positive, _ThreadStrategy, run_admitted


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
        self._lock = threading.Lock()
        self._idle: dict[threading.Condition, Hashable | None] = {}  # waiting worker -> its last stream
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
        if len(self._threads) < self.size:
            self._grow(self._threads, self.size, "pyorb-locality", self._work)
        key = call.connection
        with self._lock:
            stream = self._streams.get(key)
            if stream is None:
                stream = self._streams[key] = deque()
            stream.append(call)
            self._queued += 1
            self._wake_one(key)

    def _wake_one(self, key: Hashable) -> None:  # holds the lock
        # Wake one idle worker, the one that served this stream last if it
        # waits: waking them all on every call costs more than the work.
        if not self._idle:
            return
        chosen = next((cv for cv, last in self._idle.items() if last == key), None)
        if chosen is None:
            chosen = next(iter(self._idle))
        del self._idle[chosen]  # woken: the next call must wake another worker
        chosen.notify()

    def _work(self) -> None:
        last: Hashable | None = None
        cv = threading.Condition(self._lock)
        while True:
            with self._lock:
                key = self._next_stream(last, cv)
                if key is None:
                    return
                if key is not last:
                    self.switches += 1
                call = self._streams[key].popleft()
                self._queued -= 1
                self._busy.add(key)
            last = key
            run_admitted(call)
            call = None  # type: ignore[assignment]  # keep no finished request alive
            with self._lock:
                self._busy.discard(key)
                if not self._streams[key]:
                    del self._streams[key]

    def _next_stream(self, last: Hashable | None, cv: threading.Condition) -> Hashable | None:  # holds the lock
        idle_since = monotonic()
        while True:
            if last is not None and self._streams.get(last) and last not in self._busy:
                return last
            free = [k for k, q in self._streams.items() if q and k not in self._busy]
            timeout: float | None = None
            if not free:
                if self._closing:
                    return None
            else:
                best = max(free, key=lambda k: (len(self._streams[k]), -self._streams[k][0].queued_at))
                waited = monotonic() - idle_since
                if last is None or len(self._streams[best]) >= self.threshold or waited >= self.wait or self._closing:
                    return best
                timeout = self.wait - waited
            self._idle[cv] = last
            try:
                cv.wait(timeout)
            finally:
                self._idle.pop(cv, None)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            for cv in list(self._idle):
                cv.notify()
        _join(self._threads)
