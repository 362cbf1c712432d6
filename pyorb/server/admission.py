"""Admission control: refuse a call at once when the server cannot serve it in time.

A call that a strategy cannot start waits in a queue.  A queue that drains
now and then absorbs bursts; a queue that never drains only adds delay, and
past some point every call it holds is answered after its client gave up.
CoDel (Nichols and Jacobson, "Controlling Queue Delay") tells the two apart
by the *sojourn* time, how long calls wait: while some call waited less than
``target`` within the last ``interval``, the queue is good; once every call
seen for a whole ``interval`` waited longer, it is a standing queue and the
server sheds: each call that would wait longer than ``target`` is answered
CORBA.TRANSIENT, completed NO, at once (its client may retry elsewhere or
later), until a call waits less than ``target`` again.

:class:`CoDel` is that rule alone, fed sojourn times and a clock.
:class:`Admission` applies it (and an optional hard ``limit`` on any call's
wait) to the calls of one operation under one strategy.  A strategy that
queues calls reports each one as it queues it (:meth:`Admission.arrive`)
and as a thread takes it (:meth:`Admission.start`); the event-loop strategies
queue nothing of their own and report the event loop's lag instead
(:meth:`Admission.admit`, :class:`LoopLag`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Callable

from omniORB import CORBA

if TYPE_CHECKING:
    from pyorb.server.dispatch import Call
    from pyorb.server.stats import Recorder

log = logging.getLogger(__name__)

SHED_MINOR = 0x4F4D0001
"""TRANSIENT minor code of a shed call: OMG's 1, "request discarded because of resource exhaustion"."""
LOG_PERIOD = 10.0
"""Seconds between two log lines about the calls one operation shed."""


@dataclass(frozen=True)
class AdmissionPolicy:
    """When calls of an operation are refused rather than queued (seconds; None: never).

    ``target``: CoDel's target, the wait a call may have in a good queue;
    the server sheds once every call for ``interval`` waited longer.
    ``limit``: no call waits longer than this, whatever the load (a
    waiting call is answered TRANSIENT when it reaches it).
    """

    target: float | None = None
    interval: float = 0.1
    limit: float | None = None

    def __post_init__(self) -> None:
        for name in ("target", "limit"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"admission {name} must be a positive number of seconds or None, got {value!r}")
        if isinstance(self.interval, bool) or not isinstance(self.interval, (int, float)) or self.interval <= 0:
            raise ValueError(f"admission interval must be a positive number of seconds, got {self.interval!r}")

    @property
    def active(self) -> bool:
        """True if it may ever refuse a call."""
        return self.target is not None or self.limit is not None


class CoDel:
    """CoDel's decision, without I/O: is the queue standing, so that calls are shed?

    :meth:`observe` takes one sojourn time (how long a call waited, or how
    long the oldest queued call has waited so far) and the clock's time.
    Shedding starts when no observation for ``interval`` seconds was below
    ``target``, and stops at the first observation below it.
    """

    def __init__(self, target: float, interval: float) -> None:
        self.target = target
        self.interval = interval
        self.dropping = False
        self._first_above: float | None = None  # when the queue will have been above target for an interval

    def observe(self, sojourn: float, now: float) -> bool:
        """True if the call that waited ``sojourn`` seconds should be shed."""
        if sojourn < self.target:
            self._first_above = None
            self.dropping = False
            return False
        if self._first_above is None:
            self._first_above = now + self.interval
        elif now >= self._first_above:
            self.dropping = True
        return self.dropping


class Admission:
    """Admission control for one operation under one strategy (thread-safe).

    It tracks the calls queued for the strategy's threads in arrival order,
    so the age of the oldest one is known at any moment: that age, and the
    wait of each call a thread takes, feed :class:`CoDel`.  With a
    ``limit``, a timer on the event loop answers each call that reaches it.
    """

    def __init__(self, policy: AdmissionPolicy, operation: str, where: str, stats: Recorder) -> None:
        self.policy = policy
        self.operation = operation
        self.where = where  # the strategy's name, for the log
        self._stats = stats
        self._codel = None if policy.target is None else CoDel(policy.target, policy.interval)
        self._lock = threading.Lock()
        self._queued: OrderedDict[Call, None] = OrderedDict()
        self._timer: asyncio.TimerHandle | None = None
        self._lag: Callable[[], float] | None = None  # for calls that run at once: the loop's lag
        self._logged = float("-inf")
        self._unlogged = 0

    # -- what strategies report ---------------------------------------------------------
    def arrive(self, call: Call) -> bool:
        """``call`` is about to be queued (event-loop thread).  False: it was
        shed (answered TRANSIENT) and must not be queued."""
        now = perf_counter()
        with self._lock:
            age = self._oldest_age(now)
            shed = self._codel is not None and self._codel.observe(age, now)
            if not shed:
                self._queued[call] = None
        if shed:
            self._shed(call, age, "queue")
            return False
        if self.policy.limit is not None and self._timer is None:
            self._arm(call.channel.loop)
        return True

    def start(self, call: Call) -> bool:
        """A thread takes ``call`` (any thread).  False: it must not run (it
        was shed now or earlier, or cancelled)."""
        now = perf_counter()
        with self._lock:
            if call not in self._queued:
                return False  # shed at its limit already
            del self._queued[call]
            if call.done:
                return False  # cancelled while it waited
            waited = now - call.queued_at
            limit = self.policy.limit
            shed = (limit is not None and waited >= limit) or (
                self._codel is not None and self._codel.observe(waited, now))
        if shed:
            self._shed(call, waited, "limit" if limit is not None and waited >= limit else "queue")
        return not shed

    def admit(self, call: Call, lag: Callable[[], float]) -> bool:
        """``call`` runs at once on the event loop, which is ``lag()`` seconds
        behind (event-loop thread; ``lag`` is also the queue's :meth:`age`).
        False: it was shed."""
        self._lag = lag
        if self._codel is None:
            return True
        behind = lag()
        now = perf_counter()
        with self._lock:
            shed = self._codel.observe(behind, now)
        if shed:
            self._shed(call, behind, "event loop's lag")
        return not shed

    def age(self) -> float:
        """Seconds the oldest queued call has waited (0 if none): the queue's age now."""
        if self._lag is not None:
            return self._lag()
        with self._lock:
            return self._oldest_age(perf_counter())

    @property
    def shedding(self) -> bool:
        return self._codel is not None and self._codel.dropping

    # -- inside --------------------------------------------------------------------------
    def _oldest_age(self, now: float) -> float:  # holds the lock
        queued = self._queued
        while queued:
            oldest = next(iter(queued))
            if not oldest.done:
                return now - oldest.queued_at
            queued.popitem(last=False)  # cancelled while it waited
        return 0.0

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.policy.limit is not None
        with self._lock:
            age = self._oldest_age(perf_counter())
            if not self._queued:
                return
        self._timer = loop.call_later(max(0.0, self.policy.limit - age), self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The limit's timer: answer every queued call that has waited ``limit``."""
        self._timer = None
        limit = self.policy.limit
        assert limit is not None
        now = perf_counter()
        late: list[Call] = []
        with self._lock:
            while self._queued:
                oldest = next(iter(self._queued))
                if not oldest.done and now - oldest.queued_at < limit:
                    break
                self._queued.popitem(last=False)
                if not oldest.done:
                    late.append(oldest)
        for call in late:
            self._shed(call, now - call.queued_at, "limit")
        if not loop.is_closed():
            self._arm(loop)

    def _shed(self, call: Call, waited: float, why: str) -> None:
        stats = self._stats
        with stats.lock:
            stats.shed += 1
        call.exception(CORBA.TRANSIENT(SHED_MINOR, CORBA.COMPLETED_NO))
        self._log(waited, why)

    def _log(self, waited: float, why: str) -> None:
        now = perf_counter()
        self._unlogged += 1
        if now - self._logged < LOG_PERIOD:
            return
        policy = self.policy
        if why == "limit":
            cause = f"a call waited {waited:.3f} s for a thread, the limit is {policy.limit} s"
        else:
            cause = (f"the {why} age is {waited:.3f} s, over the {policy.target} s target for at least "
                     f"{policy.interval} s")
        log.warning("overloaded: %s under %s answered %d calls TRANSIENT (completed NO, not started) since the "
                    "last report: %s", self.operation, self.where, self._unlogged, cause)
        self._logged = now
        self._unlogged = 0


class LoopLag:
    """How late the event loop runs a timer due now: the queueing delay of
    everything it has to do (requests read but not yet dispatched included).

    A timer every ``period`` seconds measures it; :meth:`current` includes a
    stall still under way.  Event-loop thread only.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float = 0.005) -> None:
        self._loop = loop
        self._period = period
        self.lag = 0.0
        self._due = loop.time() + period
        self._handle = loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        now = self._loop.time()
        self.lag = now - self._due
        self._due = now + self._period
        self._handle = self._loop.call_at(self._due, self._tick)

    def current(self) -> float:
        return max(self.lag, self._loop.time() - self._due)

    def close(self) -> None:
        """Stop measuring (any thread: the server closes its strategies off the loop)."""
        try:
            self._loop.call_soon_threadsafe(self._stop)
        except RuntimeError:  # the loop is closed: the timer never runs again anyway
            pass

    def _stop(self) -> None:
        self._handle.cancel()
