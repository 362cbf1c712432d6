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
queue nothing of their own (:meth:`Admission.admit`).

A connection asks it (:meth:`Admission.refusal`) as soon as
it knows a request's operation, before it reads the arguments or makes a
:class:`~pyorb.server.call.dispatch.Call`: a refusal then costs the server
little more than reading the request and writing the reply, which is what
keeps goodput up at many times the capacity (docs/reliability.md).

An arriving call is judged by the wait it can expect once threads have
been seen taking calls while others waited: the calls ahead of it (one per
connection with calls queued, for each of its own connection's), one
*pace* each, the pace being the time between two starts while calls waited
without a break (the queue running empty ends a measurement: the gap to the
next start holds idle time).  It is refused at
once if that reaches the ``limit``, which it would only reach in the queue,
having held memory and its client's time and cost a thread the refusal;
and, while the queue stands and for an interval after, if that reaches the
``target``.  So a standing queue keeps about a target's worth of calls and
its threads never run dry, where refusing every arrival while the oldest
call is old would empty it, end the shedding, and take every arrival for an
interval until it stood again, calls that threads then shed one by one.
A queue that is not standing yet refuses the same way the calls that would
start only after it could have stood for an interval (:meth:`CoDel.stands_by`)
having waited past the target: a thread would shed them as it took them, and
they would have cost the server their arguments and a place in the queue
for nothing.  The calls a burst brings that would start before then are
queued, as CoDel lets a burst through.

A request also waits before any strategy sees it: in the socket, until the
event loop reads it.  That wait is the loop's lag (:class:`LoopLag`), which
grows when the loop has more to do than it can, or when dispatcher threads
busy with servant code keep it from the interpreter lock.  CoDel sees the
longer of that lag and the queue's age, and an arrival's expected wait
counts the lag too.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Hashable

from omniORB import CORBA

from pyorb import _accelerator

if TYPE_CHECKING:
    from pyorb.server.call.dispatch import Call
    from pyorb.server.call.stats import Recorder

log = logging.getLogger(__name__)

SHED_MINOR = 0x4F4D0001
"""TRANSIENT minor code of a shed call: OMG's 1, "request discarded because of resource exhaustion"."""
LOG_PERIOD = 10.0
"""Seconds between two log lines about the calls one operation shed."""
PACE_WEIGHT = 0.125
"""Weight of the newest gap between two starts in the queue's pace (a moving average)."""
STALE_PACES = 4
"""A pace not measured for this many paces (or for an interval, if longer) predicts nothing."""
REFUSED = "overloaded: "
"""How the text a shed call's client gets begins."""
MAX_TEXTS = 256
"""Refusal texts one admission control keeps for reuse (see :meth:`Admission._refuse`)."""
# Per cause, the wait a refusal's text shows, in units per second (thousandths by default): an
# expected wait only to a hundredth, so that more of a standing queue's refusals share a text.
_SHOWN = {"expected wait": 100, "expected wait in a standing queue": 100, "expected wait past the interval": 100}


def shed_exception() -> CORBA.TRANSIENT:
    """What a shed call's client gets: TRANSIENT, completed NO (it may retry, here later or elsewhere)."""
    return CORBA.TRANSIENT(SHED_MINOR, CORBA.COMPLETED_NO)


@dataclass(frozen=True, slots=True)
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
    ``target``, and stops at the first observation below it;
    :meth:`lately` also remembers it for an ``interval`` after.
    """

    # Slots: the compiled twin of Admission.refusal reads and writes them at their offsets.
    __slots__ = ("target", "interval", "dropping", "_first_above", "_ended")

    def __init__(self, target: float, interval: float) -> None:
        self.target = target
        self.interval = interval
        self.dropping = False
        self._first_above: float | None = None  # when the queue will have been above target for an interval
        self._ended = float("-inf")  # when shedding last stopped

    def observe(self, sojourn: float, now: float) -> bool:
        """True if the call that waited ``sojourn`` seconds should be shed."""
        if sojourn < self.target:
            self._first_above = None
            if self.dropping:
                self.dropping = False
                self._ended = now
            return False
        if self._first_above is None:
            self._first_above = now + self.interval
        elif now >= self._first_above:
            self.dropping = True
        return self.dropping

    def lately(self, now: float) -> bool:
        """True while shedding, and for an ``interval`` after it stopped: a queue
        that drained by shedding, not by serving, stands again as soon as
        arrivals refill it."""
        return self.dropping or now - self._ended < self.interval

    def stands_by(self, sojourn: float, now: float) -> float:
        """The earliest time shedding can start if the queue's age, ``sojourn``
        now, grows with the clock from here: an interval after it first reached
        the target."""
        if self._first_above is not None:
            return self._first_above
        short = self.target - sojourn
        return now + (short if short > 0.0 else 0.0) + self.interval

    def would_shed(self, sojourn: float, now: float) -> bool:
        """What :meth:`observe` would answer for ``sojourn`` at ``now``, deciding nothing."""
        if sojourn < self.target:
            return False
        return self.dropping or (self._first_above is not None and now >= self._first_above)


class Admission:
    """Admission control for one operation under one strategy (thread-safe).

    It tracks the calls queued for the strategy's threads in arrival order,
    so the age of the oldest one is known at any moment: :class:`CoDel` is
    fed that age as calls arrive, and as a thread takes a call the longer
    of that age and the call's own wait (threads need not take calls in
    arrival order).  With a ``limit``, a timer on the event loop answers
    each call that reaches it.
    """

    __slots__ = ("policy", "operation", "where", "_stats", "_codel", "_lock", "_queued", "_backlog", "_timer", "_probe",
                 "_on_loop", "_pace", "_last_start", "_paced_at", "_backlogged", "_logged", "_unlogged", "_texts")

    def __init__(self, policy: AdmissionPolicy, operation: str, where: str, stats: Recorder) -> None:
        self.policy = policy
        self.operation = operation
        self.where = where  # the strategy's name, for the log
        self._stats = stats
        self._codel = None if policy.target is None else CoDel(policy.target, policy.interval)
        self._lock = threading.Lock()
        self._queued: OrderedDict[Call, None] = OrderedDict()
        self._backlog: dict[Hashable, int] = {}  # calls queued per connection
        self._timer: asyncio.TimerHandle | None = None
        self._probe: LoopLag | None = None  # the lag of the loop its calls arrive on
        self._on_loop = False  # its calls run on the loop (admit): its age is the loop's lag
        # Seconds between two starts while calls waited (None: not seen yet), for the wait an arrival can expect.
        self._pace: float | None = None
        self._last_start = 0.0
        self._paced_at = 0.0  # when the pace was last measured
        self._backlogged = False  # calls have waited without a break since the last call started
        self._logged = float("-inf")
        self._unlogged = 0
        self._texts: dict[tuple[str, int], str] = {}  # (why, the wait as shown) -> the client's text

    # -- what strategies report ---------------------------------------------------------
    def arrive(self, call: Call) -> bool:
        """``call`` is about to be queued (event-loop thread).  False: it was
        shed (answered TRANSIENT) and must not be queued."""
        lag = self._loop_lag(call.channel.loop)
        now = perf_counter()
        if lag:  # it waited in the socket that long before the loop read it: the limit bounds that too
            call.queued_at = min(call.queued_at, now - lag)
        with self._lock:
            refused = self._arrival(now, lag, call.connection)
            if refused is None:
                self._queued[call] = None
                backlog = self._backlog
                backlog[call.connection] = backlog.get(call.connection, 0) + 1
        if refused is not None:
            self._shed(call, refused[1], refused[0])
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
                return False  # the limit's timer took it: it is being answered TRANSIENT
            del self._queued[call]
            backlogged = self._backlogged  # before _dequeued, which clears it if this call was the last
            self._dequeued(call)
            if call.done:
                return False  # cancelled while it waited
            waited = now - call.queued_at
            why = self._judge(waited, now, True)
            if why is None:
                self._started(now, backlogged)
        if why is not None:
            self._shed(call, waited, why, queued=True)
        return why is None

    def overdue(self, call: Call) -> bool:
        """Whether :meth:`start` would not let ``call`` run if a thread took it
        now (it would be shed, or was answered already), deciding nothing: a
        thread that must wait for a lock before it runs a call refuses such a
        call first, without waiting."""
        now = perf_counter()
        with self._lock:
            if call not in self._queued or call.done:
                return True
            return self._judge(now - call.queued_at, now, False) is not None

    def admit(self, call: Call) -> bool:
        """``call`` runs at once on the event loop (event-loop thread): it is
        judged by the loop's lag alone.  False: it was shed."""
        self._on_loop = True
        if self._codel is None:
            return True
        behind = self._loop_lag(call.channel.loop)
        now = perf_counter()
        with self._lock:
            shed = self._codel.observe(behind, now)
        if shed:
            self._shed(call, behind, "event loop's lag")
        return not shed

    def refusal(self, loop: asyncio.AbstractEventLoop, queued: bool, connection: Hashable) -> str | None:
        """Would a call arriving now be shed?  Asked before the call exists (event-loop
        thread), by ``connection`` once it has found the call's route but not read its
        arguments: it judges the call as :meth:`arrive` (``queued``: for a
        strategy's queue) or, while the control sheds, :meth:`admit` would, and the same
        way.  A refusal is counted and logged as theirs are; it returns the text
        the client gets ("overloaded: ..."), None if the call is to be made."""
        codel = self._codel
        if queued:
            if self._pace is None and (codel is None or not codel.dropping):
                return None  # the queue never stood: the strategy judges the call, with its arguments read
            lag = self._loop_lag(loop)
            now = perf_counter()
            with self._lock:
                refused = self._arrival(now, lag, connection)
            return None if refused is None else self._refuse(refused[1], refused[0])
        if codel is None or not codel.dropping:
            return None  # not shedding: the strategy judges the call, with its arguments read
        lag = self._loop_lag(loop)
        now = perf_counter()
        with self._lock:
            shed = codel.observe(lag, now)
        return self._refuse(lag, "event loop's lag") if shed else None

    def age(self) -> float:
        """Seconds the oldest queued call has waited (0 if none), or for calls
        that run on the event loop its last measured lag: the queue's age now (any thread)."""
        probe = self._probe
        if self._on_loop and probe is not None:
            return probe.lag
        with self._lock:
            return self._oldest_age(perf_counter())

    # -- inside --------------------------------------------------------------------------
    def _judge(self, waited: float, now: float, decide: bool) -> str | None:  # holds the lock
        """Why a queued call that has waited ``waited`` must not start now
        (``"limit"`` or ``"queue's age"``), None if it may; ``decide``: CoDel
        takes this as an observation (else it is only asked).

        Threads do not take calls in arrival order (round-robin between
        connections, or a thread per connection), so a call that waited
        little says nothing of the others: CoDel sees the queue's age, the
        longer of this call's wait and the oldest wait still queued, and the
        queue stands while any call in it has waited past the target.  Only
        a call that itself waited past the target is shed, so a quiet
        connection's call still starts while a flooding one's queue stands."""
        limit = self.policy.limit
        if limit is not None and waited >= limit:
            return "limit"
        codel = self._codel
        if codel is None:
            return None
        age = max(waited, self._oldest_age(now))
        dropping = codel.observe(age, now) if decide else codel.would_shed(age, now)
        return "queue's age" if dropping and waited >= codel.target else None

    def _arrival(self, now: float, lag: float, connection: Hashable) -> tuple[str, float] | None:  # holds the lock
        """Why a call of ``connection`` arriving now, after ``lag`` in its socket,
        must not be queued, and the wait that says so; None if it may.

        CoDel sees the queue's age.  Once threads have been seen taking
        calls while others waited, the queue's pace tells how long this call
        can expect to wait: the calls ahead of it, one pace each.  Threads
        serve connections in turn (round-robin, or a thread each), so at
        most one call per connection with calls queued starts for each one
        of its own connection ahead of it: a quiet connection's call has few
        ahead of it however long another's queue is.  It is
        refused if that reaches the limit (it would only wait to be refused
        then), or if that reaches the target while the queue stands or for an
        interval after, or when the call would start only after the queue
        could have stood (see the module's notes)."""
        oldest = self._oldest_age(now)
        age = oldest if oldest > lag else lag
        codel = self._codel
        standing = codel is not None and codel.observe(age, now)
        pace = self._pace
        if pace is not None:
            since = now - self._paced_at
            if since > self.policy.interval and since > STALE_PACES * pace:
                pace = None  # no call started for several paces: the servants' speed may have changed since
        if pace is None:
            return ("queue's age", age) if standing else None
        backlog = self._backlog
        queued = len(self._queued)
        turns = (backlog.get(connection, 0) + 1) * len(backlog)
        expected = lag + (turns if turns < queued else queued) * pace
        limit = self.policy.limit
        if limit is not None and expected >= limit:
            return "expected wait", expected
        if codel is not None and expected >= codel.target:
            if codel.lately(now):
                return "expected wait in a standing queue", expected
            if now + expected >= codel.stands_by(age, now):
                return "expected wait past the interval", expected
        return None

    def _started(self, now: float, backlogged: bool) -> None:  # holds the lock
        """A queued call starts at ``now``: the gap since the last start is the
        queue's pace if calls waited all along (``backlogged``: an idle gap says
        nothing of it)."""
        if backlogged:
            gap = now - self._last_start
            pace = self._pace
            if pace is None or now - self._paced_at > max(self.policy.interval, STALE_PACES * pace):
                self._pace = gap  # a stale pace is measured afresh
            else:
                self._pace = pace + PACE_WEIGHT * (gap - pace)
            self._paced_at = now
        self._last_start = now
        self._backlogged = bool(self._queued)

    def _dequeued(self, call: Call) -> None:  # holds the lock
        backlog = self._backlog
        left = backlog[call.connection] - 1
        if left:
            backlog[call.connection] = left
        else:
            del backlog[call.connection]
        if not self._queued:
            # Emptied, by a start or by calls that left without one (cancelled,
            # or shed): threads may idle before the next start, and that gap
            # is no pace.  Taken for one, a second's idling would refuse a
            # burst's calls as if each took a second.
            self._backlogged = False

    def _loop_lag(self, loop: asyncio.AbstractEventLoop) -> float:  # event-loop thread
        probe = self._probe
        if probe is None or probe._loop() is not loop:
            probe = self._probe = LoopLag.of(loop)
        return probe.current()

    def _oldest_age(self, now: float) -> float:  # holds the lock
        queued = self._queued
        while queued:
            oldest = next(iter(queued))
            if not oldest.done:
                return now - oldest.queued_at
            queued.popitem(last=False)  # cancelled while it waited
            self._dequeued(oldest)
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
                self._dequeued(oldest)
                if not oldest.done:
                    late.append(oldest)
        for call in late:
            self._shed(call, now - call.queued_at, "limit", queued=True)
        if not loop.is_closed():
            self._arm(loop)

    def _shed(self, call: Call, waited: float, why: str, queued: bool = False) -> None:
        call.started_at = perf_counter()  # its statistics: the time it waited, no time in servant code
        call.exception(shed_exception(), self._refuse(waited, why, queued))

    def _refuse(self, waited: float, why: str, queued: bool = False) -> str:
        """Count and log one call shed (``queued``: after it was queued, not on
        arrival); the text its client gets.

        The text shows the wait rounded to a hundredth or a thousandth of a
        second, so a standing queue's refusals share a few texts: each is
        made once and then found by its rounded wait, the same string object
        each time (the connection finds its encoded reply by it, and its
        hash is kept)."""
        now = perf_counter()
        stats = self._stats
        with stats.lock:  # the loop and dispatcher threads shed: this lock also guards the log's counts
            stats.shed += 1
            if queued:
                stats.shed_queued += 1
            self._unlogged += 1
            report = now - self._logged >= LOG_PERIOD
            if report:
                count, self._unlogged, self._logged = self._unlogged, 0, now
        scale = _SHOWN.get(why, 1000)
        key = (why, round(waited * scale))
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) >= MAX_TEXTS:
                self._texts.clear()
            text = self._texts[key] = REFUSED + self._cause(key[1] / scale, why)
        if report:
            log.warning("overloaded: %s under %s answered %d calls TRANSIENT (completed NO, not started) since the "
                        "last report: %s", self.operation, self.where, count, text.removeprefix(REFUSED))
        return text

    def _cause(self, shown: float, why: str) -> str:
        policy = self.policy
        if why == "limit":
            return f"a call waited {shown:.3f} s to start, the limit is {policy.limit} s"
        if why == "expected wait":
            return (f"the calls queued ahead of it would keep it waiting about {shown:.2f} s to start, "
                    f"the limit is {policy.limit} s")
        if why == "expected wait past the interval":
            return (f"the calls queued ahead of it would keep it waiting about {shown:.2f} s to start, over the "
                    f"{policy.target} s target, by when the queue would have stood over it for {policy.interval} s")
        if why == "expected wait in a standing queue":
            return (f"the calls queued ahead of it would keep it waiting about {shown:.2f} s to start, over the "
                    f"{policy.target} s target, and the queue has stood for at least {policy.interval} s")
        return f"the {why} is {shown:.3f} s, over the {policy.target} s target for at least {policy.interval} s"


class LoopLag:
    """How late the event loop runs a timer due now: the queueing delay of
    everything it has to do (requests received but not yet read or
    dispatched included).

    One per loop (:meth:`of`), shared by every admission control on it.  A
    timer every ``period`` seconds measures it while someone asks
    (:meth:`current`); it stops after ``IDLE_S`` seconds without a question,
    so an idle server or a closed one costs nothing.  Event-loop thread only,
    but ``lag`` may be read from any.
    """

    __slots__ = ("_loop", "_period", "lag", "_due", "_asked", "_handle")

    IDLE_S = 1.0
    _probes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float = 0.005) -> None:
        self._loop = weakref.ref(loop)  # a strong one would keep the probe's loop in _probes for ever
        self._period = period
        self.lag = 0.0
        """The last lag measured (seconds)."""
        self._due = 0.0
        self._asked = 0.0
        self._handle: asyncio.TimerHandle | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> LoopLag:
        """The loop's probe, made on first use."""
        probe = cls._probes.get(loop)
        if probe is None:
            probe = cls._probes[loop] = cls(loop)
        return probe

    def current(self) -> float:
        """The lag, a stall still under way included (called on its loop)."""
        loop = self._loop()
        assert loop is not None  # it runs this
        now = self._asked = loop.time()
        if self._handle is None:
            self._schedule(now, self._period)
            return self.lag
        stalled = now - self._due
        return stalled if stalled > self.lag else self.lag

    def _schedule(self, now: float, period: float) -> None:
        loop = self.loop
        assert loop is not None
        self._due = now + period
        self._handle = loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        loop = self.loop
        assert loop is not None  # it runs this
        now = loop.time()
        self.lag = now - self._due
        if now - self._asked > self.IDLE_S:
            self._handle = None
            self.lag = 0.0
            return
        # After a stall the loop reads what queued up during it; measure again
        # as soon as that is done, not a period later: until the next tick the
        # stall's lag stands, and a shedding server would refuse fresh calls
        # with its loop idle.
        self._schedule(now, 0.0 if self.lag > self._period else self._period)


# With the compiled accelerator, the C twin judges each arrival the connection asks about.
_accelerator.twin(__name__, "Admission.refusal", "pyorb.server._cadmission")
