"""``adaptive``: each operation moves, at run time, to the strategy a queueing model recommends.

A sample of each operation's synchronous servant calls is timed in the
thread that runs it: a call is timed when at least ``window / SAMPLES``
seconds have passed since the operation's last timed call started (so at
most SAMPLES per window, whatever the rate; every call of a slow one).  A
timed call reads wall time and the thread's own CPU time
(``time.thread_time``) around the upcall.  Wall time minus CPU time is
blocking delay plus time spent waiting for the GIL; the GIL part is
estimated as the servant CPU time the strategy's other calls consumed
meanwhile (each timed call standing for the untimed ones before it; bounded
by the gap), so that a CPU-bound call stretched by its neighbours in a pool
is not mistaken for a blocking one; and a call during which the thread
never gave up the CPU of its own accord (no voluntary context switch,
``RUSAGE_THREAD``) had no delay at all, whatever the gap: the OS ran
another process meanwhile.  Untimed calls cost a clock read, or nothing.

Every ``window / GLANCES`` seconds (a glance) each operation's new samples
are checked against its last window: if the latest MIN_CALLS or more of
them all differ sharply in CPU or delay per call (a phase change), the
window restarts from those samples alone and the model is asked at once,
so an operation that starts blocking leaves the loop within a glance or two
and its first pool is sized for the new calls, not a mix of old and new;
such a move needs a predicted gain of 1.5x or more.  Otherwise, every
``window`` seconds each busy operation's figures (the clients: connections
that called it in the last CLIENT_WINDOWS windows; CPU and delay per call)
go to :func:`pyorb.model.recommend`; the operation moves when the
recommendation differs from its current target, predicts at least ``gain``
more throughput than the model gives the current target, and holds for
``hold`` consecutive windows (one window when the gain is 1.5x or more: a
blocking call stalling the loop).  A move back to the target an operation
left shortly before doubles that operation's ``hold`` (up to
:data:`~pyorb.server.strategies.policy.MAX_HOLD`) and stops its one-window
and one-glance moves, so a workload the model sees two ways does not flap.
Those decisions are :class:`~pyorb.server.strategies.policy.AdaptivePolicy`'s,
a pure object this strategy feeds with observations and glances; the
strategy samples, detects phase changes, applies the moves and keeps each
connection's calls in order.

Targets are ``reactive`` (inline on the loop) and ``thread_pool(n)``, ``n``
the model's size rounded up to a power of two and capped at
``max_threads``; each target is one delegate strategy made by the registry,
shared by every operation that moves there (a pool left behind keeps its
idle threads until ``close``).  ``pin`` (not in the registry's spec) keeps
every operation on one target while still timing it: the measurement's own
cost, against that fixed strategy.

Guarantees: each call is dispatched to exactly one delegate, so it is
answered exactly once (as under that delegate) whatever moves happen.  The
calls of one connection to one operation start in arrival order: after a
move, a connection's new calls keep going to the old target until its calls
already queued there have started.  Calls may overlap once the operation is
on a pool (as under ``thread_pool``); calls to different operations of one
connection are not ordered with each other (as with per-operation
strategies).  ``async def`` methods run as tasks on the loop and AMH methods
on the loop (as under ``amh``); neither is observed or moved.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from time import perf_counter, thread_time
from typing import Any, Callable, Hashable

from pyorb.server.call.dispatch import Call, Strategy, run_on_loop
from pyorb.server.call.servant import Style
from pyorb.server.call.stats import Gauges
from pyorb.server.strategies.policy import GLANCES, INLINE, AdaptivePolicy, Decide, Observation, Switch

log = logging.getLogger(__name__)

CLIENT_WINDOWS = 4
"""The clients of an operation are the connections that called it in this many recent windows
(one window of a loop blocked by each call may serve only a few of them)."""
MIN_CALLS = 4
"""Timed calls an operation needs in a window (or a phase change in a glance) before the model is asked."""
SAMPLES = 40
"""Calls timed per operation per window, at most (the rest are only counted)."""
SHIFT = 0.5
"""A sample differs sharply from the last window when its CPU or delay per call differs by this
fraction of the window's ..."""
SHIFT_FLOOR = 0.0005
"""... and by at least this many seconds (timing noise on a shared machine is below it)."""


def _voluntary_switches() -> int:
    """Times this thread has given up the CPU of its own accord (Linux: per thread)."""
    return resource.getrusage(_THREAD).ru_nvcsw


try:
    import resource

    _THREAD = resource.RUSAGE_THREAD
    _waits: Callable[[], int] = _voluntary_switches
except (ImportError, AttributeError):  # not Linux: a count that always moves, so every call may have blocked
    _waits = itertools.count().__next__


Sample = tuple[float, float, float]
"""One timed call: (wall, cpu, delay) seconds."""


def _differs(ref: Observation, cpu: float, delay: float) -> bool:
    """Whether one call's figures differ sharply from ``ref``'s (a phase change, not noise)."""
    return (abs(cpu - ref.cpu) > max(SHIFT_FLOOR, SHIFT * ref.cpu)
            or abs(delay - ref.delay) > max(SHIFT_FLOOR, SHIFT * ref.delay))


def _mean(samples: list[Sample], clients: int) -> Observation:
    n = len(samples)
    return Observation(n, clients, sum(s[1] for s in samples) / n, sum(s[2] for s in samples) / n,
                       sum(s[0] for s in samples) / n)


class _Lane:
    """A connection's calls of one operation sent to ``target``, and how many of them have started.

    ``sent`` is written by the loop thread only and ``started`` by the
    threads that run the calls (under the lane's own lock, which the loop
    never takes: a loop thread blocked on a lock held by a pool thread
    would queue for the GIL behind every busy thread).  A lane serves one
    target; a connection whose calls change target gets a new lane.
    """

    __slots__ = ("target", "sent", "started", "lock")

    def __init__(self, target: str) -> None:
        self.target = target
        self.sent = self.started = 0
        self.lock = threading.Lock()

    @property
    def queued(self) -> bool:
        """Some of its calls have not started yet."""
        return self.sent > self.started


@dataclass
class _Op:
    """One operation's current target, its connections' lanes and its observations."""

    name: str
    target: str = INLINE
    lanes: dict[Hashable, _Lane] = field(default_factory=dict)
    # Sampling (loop thread only): the next call starting after ``due`` is timed; ``untimed`` since the last.
    due: float = 0.0
    untimed: int = 0
    # Timed calls since the last glance: appended by probes in any thread (list.append is atomic).
    fresh: list[Sample] = field(default_factory=list)
    # This window's (loop thread only).
    samples: list[Sample] = field(default_factory=list)
    glances: int = 0
    reference: Observation | None = None  # the last window's figures: what a phase change differs from
    connections: set[Hashable] = field(default_factory=set)
    recent: deque[set[Hashable]] = field(default_factory=lambda: deque(maxlen=CLIENT_WINDOWS))

    def take(self) -> list[Sample]:
        """The timed calls since the last glance (or phase change), handed over once."""
        fresh, self.fresh = self.fresh, []
        return fresh

    def clients(self) -> int:
        """Connections that called it in the recent windows and this one (closed loops: one client each)."""
        return len(self.connections.union(*self.recent))

    def observe(self) -> Observation | None:
        """This window's figures (None if too few calls), and start the next window."""
        samples, self.samples, self.glances = self.samples, [], 0
        clients = self.clients()
        self.recent.append(self.connections)
        self.connections = set()
        if len(samples) < MIN_CALLS:
            return None
        self.reference = _mean(samples, clients)
        return self.reference

    def shifted(self, fresh: list[Sample]) -> Observation | None:
        """The calls since a phase change, if the latest MIN_CALLS or more of ``fresh`` all differ
        sharply from the last window: the window then restarts with them."""
        ref = self.reference
        if ref is None or len(fresh) < MIN_CALLS:
            return None
        since = len(fresh)
        while since > 0 and _differs(ref, fresh[since - 1][1], fresh[since - 1][2]):
            since -= 1
        if len(fresh) - since < MIN_CALLS:
            return None
        self.samples, self.glances = fresh[since:], 1
        self.reference = _mean(self.samples, self.clients())
        return self.reference


class _Starter:
    """Stands in for the servant during one untimed call on a pool: marks its lane's call started.

    ``run_sync`` looks the method up on ``call.servant``; the stand-in
    answers with itself, puts the real servant back (so that error logs
    name its class) and runs the method.
    """

    __slots__ = ("call", "servant", "op", "lane")

    def __init__(self, call: Call, op: _Op, lane: _Lane | None) -> None:
        self.call, self.servant, self.op, self.lane = call, call.servant, op, lane

    def __getattr__(self, name: str) -> Any:
        return self._run

    def _start(self) -> None:
        self.call.servant = self.servant
        lane = self.lane
        if lane is not None:
            with lane.lock:
                lane.started += 1  # later calls of the connection may go elsewhere once all have started

    def _run(self, *args: Any) -> Any:
        self._start()
        return getattr(self.servant, self.call.entry.attr)(*args)


class _Probe(_Starter):
    """A timed call: as :class:`_Starter`, and reads the clocks around the upcall."""

    __slots__ = ("owner", "weight", "inline")

    def __init__(self, call: Call, op: _Op, lane: _Lane | None, owner: AdaptiveStrategy, weight: int,
                 inline: bool) -> None:
        super().__init__(call, op, lane)
        self.owner, self.weight, self.inline = owner, weight, inline

    def _run(self, *args: Any) -> Any:
        self._start()
        owner = self.owner
        others0 = owner.servant_cpu
        v0, t0, c0 = _waits(), perf_counter(), thread_time()
        try:
            return getattr(self.servant, self.call.entry.attr)(*args)
        finally:
            cpu, wall = thread_time() - c0, perf_counter() - t0
            owner.finished(self.op, wall, cpu, others0, _waits() != v0, self.weight, self.inline)


class AdaptiveGauges(Gauges):
    """Gauges plus ``targets``: ``stats()`` shows each operation's current target."""

    __slots__ = ("targets",)

    def __init__(self) -> None:
        super().__init__()
        self.targets: Callable[[], dict[str, str]] = dict


class AdaptiveStrategy:
    """``adaptive(max_threads=32, window=0.1, hold=2, gain=0.1)``: per operation, the model's choice.

    See the module docstring for what is observed, when an operation moves
    and what is guaranteed.  ``create`` makes the delegate strategies from
    their specs (the registry's ``create``); ``decide`` replaces the model
    (tests); ``pin`` keeps every operation on that target (still timed).
    ``targets`` maps each observed operation to its current target,
    ``switches`` keeps the recent moves.
    """

    def __init__(
        self,
        max_threads: int = 32,
        window: float = 0.1,
        hold: int = 2,
        gain: float = 0.1,
        *,
        create: Callable[[str], Strategy],
        decide: Decide | None = None,
        pin: str | None = None,
    ) -> None:
        for what, value in (("max_threads", max_threads), ("hold", hold)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"adaptive {what} must be a positive integer, got {value!r}")
        for what, number, low, high in (("window", window, 0.01, 60.0), ("gain", gain, 0.0, 10.0)):
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not low <= number <= high:
                raise ValueError(f"adaptive {what} must be between {low:g} and {high:g}, got {number!r}")
        self.max_threads, self.window, self.hold, self.gain = max_threads, float(window), hold, float(gain)
        self.name = f"adaptive(max_threads={max_threads}, window={window:g}, hold={hold}, gain={gain:g})"
        self._create = create
        self.policy = AdaptivePolicy(max_threads, hold, self.gain, decide=decide)
        """When to move an operation and where to (a pure object: this strategy feeds it and applies its moves)."""
        self._spacing = self.window / SAMPLES
        self._start = INLINE if pin is None else self.policy.clamp(pin)
        self._pinned = pin is not None
        self._delegates: dict[str, Strategy] = {}
        self._ops: dict[object, _Op] = {}  # by the call's Recorder: one per operation under this strategy
        self.servant_cpu = 0.0
        """Servant CPU seconds of all finished calls (the GIL estimate reads it)."""
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.switches: deque[Switch] = deque(maxlen=256)
        self.moves = 0
        """Moves since the start (``switches`` keeps only the recent ones)."""
        self.last: dict[str, Observation] = {}
        """Each operation's figures of the last window it was busy in."""
        gauges = AdaptiveGauges()
        gauges.targets = lambda: self.targets
        self.stats: Gauges = gauges  # typed as the protocol's (its attribute is invariant)
        self.stats.queued = lambda: sum(d.stats.queued() for d in list(self._delegates.values()))
        self.stats.threads = lambda: sum(d.stats.threads() for d in list(self._delegates.values()))

    @property
    def targets(self) -> dict[str, str]:
        """Operation (``"Module::Iface.op"``) -> the spec of the strategy its new calls go to now."""
        return {op.name: op.target for op in list(self._ops.values())}

    # -- the hot path --------------------------------------------------------------
    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        if call.entry.style is not Style.SYNC:
            return run_on_loop(call)  # coroutines and AMH handlers: on the loop, as under amh
        op = self._ops.get(call.stats)
        if op is None:
            op = self._new_op(call)
        key = call.connection
        op.connections.add(key)
        target = op.target
        lane = op.lanes.get(key)
        counted = None
        if target != INLINE or (lane is not None and lane.queued):  # inline with nothing queued: no bookkeeping
            if lane is not None and lane.queued:
                target = lane.target  # behind its earlier calls still queued there
            elif lane is None or lane.target != target:
                lane = op.lanes[key] = _Lane(target)
            if target != INLINE:
                lane.sent += 1
                counted = lane
        now = perf_counter()
        if now >= op.due:  # timed: it stands for itself and the untimed calls since the last timed one
            op.due = now + self._spacing
            call.servant = _Probe(call, op, counted, self, op.untimed + 1, target == INLINE)
            op.untimed = 0
        else:
            op.untimed += 1
            if counted is not None:
                call.servant = _Starter(call, op, counted)
        delegate = self._delegates.get(target) or self._delegate(target)
        return delegate.dispatch(call)

    def finished(self, op: _Op, wall: float, cpu: float, others0: float, waited: bool, weight: int = 1,
                 inline: bool = False) -> None:
        """A timed call returned (any thread): add it to its operation's samples.

        ``waited``: the thread gave up the CPU of its own accord during the
        call (it blocked, or waited for the GIL).  If it did not, the gap
        between wall and CPU time was the OS running something else: no delay.
        ``weight``: the calls it stands for (itself and the untimed ones before it).
        ``inline``: it ran on the loop thread, whose timers wait until every ready
        connection's call has run: a call that starts blocking the loop is
        checked for a phase change at once, not at the next glance.
        """
        others = self.servant_cpu - others0
        self.servant_cpu += cpu * weight  # unlocked: a lost update skews one estimate a little, no more
        delay = 0.0
        if waited:
            gil = min(max(0.0, wall - cpu), others)  # the GIL held by our other calls meanwhile
            delay = max(0.0, wall - cpu - gil)
        op.fresh.append((wall, cpu, delay))
        ref = op.reference
        if inline and ref is not None and delay > ref.delay + SHIFT_FLOOR and not self._closed:
            changed = op.shifted(op.fresh)
            if changed is not None:
                op.fresh = []  # in the restarted window now
                self._changed(op, changed)

    def _new_op(self, call: Call) -> _Op:
        type_id = getattr(type(call.servant), "_NP_RepositoryId", "")
        iface = type_id.split(":")[1].replace("/", "::") if type_id.count(":") >= 2 else type(call.servant).__name__
        op = self._ops[call.stats] = _Op(f"{iface}.{call.entry.op.name}", target=self._start)
        self.policy.add(op.name, op.target)
        if self._timer is None and not self._closed:
            self._timer = call.channel.loop.call_later(self.window / GLANCES, self._tick)
        return op

    def _delegate(self, spec: str) -> Strategy:
        delegate = self._delegates[spec] = self._create(spec)
        return delegate

    # -- every window ------------------------------------------------------------------
    def _tick(self) -> None:
        """A glance: each operation's new samples; a window's end every GLANCES glances of an operation."""
        self.policy.glance()
        for op in list(self._ops.values()):
            try:
                self._glance(op)
            except Exception:  # a failing model must not stop the serving
                log.exception("adaptive: deciding for %s failed; it stays on %s", op.name, op.target)
        if not self._closed:
            self._timer = asyncio.get_running_loop().call_later(self.window / GLANCES, self._tick)

    def _glance(self, op: _Op) -> None:
        fresh = op.take()
        op.samples += fresh
        op.glances += 1
        if self._changed(op, op.shifted(fresh)):
            return
        if op.glances >= GLANCES:
            self._release_lanes(op)
            seen = op.observe()
            if seen is not None:
                self.last[op.name] = seen
                if not self._pinned:
                    self._apply(op, self.policy.judge(op.name, seen))

    def _changed(self, op: _Op, changed: Observation | None) -> bool:
        """Judge a phase change, if any (loop thread): a move only for a large gain."""
        if changed is None:
            return False
        self.last[op.name] = changed
        log.debug("adaptive: %s changed: %.2f ms CPU, %.2f ms delay per call over %d calls",
                  op.name, changed.cpu * 1e3, changed.delay * 1e3, changed.calls)
        if not self._pinned:
            try:
                self._apply(op, self.policy.judge(op.name, changed, urgent_only=True))
            except Exception:  # a failing model must not stop the serving
                log.exception("adaptive: deciding for %s failed; it stays on %s", op.name, op.target)
        return True

    def _release_lanes(self, op: _Op) -> None:
        # A call cancelled before it started never reaches its probe: once
        # the old target has nothing queued, nothing can be waiting there.
        for key, lane in list(op.lanes.items()):
            if lane.target != op.target and lane.queued:
                delegate = self._delegates.get(lane.target)
                if delegate is None or delegate.stats.queued() == 0:
                    op.lanes[key] = _Lane(op.target)

    def move(self, operation: str, spec: str, reason: str = "moved by hand") -> None:
        """Move ``operation`` (a ``targets`` key) to ``spec`` now, as a recommendation would.

        Call it on the server's loop thread.  The model may move it again later.
        """
        op = next((o for o in list(self._ops.values()) if o.name == operation), None)
        if op is None:
            raise KeyError(f"no calls of {operation!r} seen yet")
        target = self.policy.clamp(spec)
        if target != op.target:
            self._apply(op, self.policy.move(op.name, target, reason))

    def _apply(self, op: _Op, switch: Switch | None) -> None:
        """Send ``op``'s new calls where the policy moved it (lanes keep each connection's order)."""
        if switch is None:
            return
        op.target = switch.new
        self.moves += 1
        self.switches.append(switch)
        log.info("adaptive: %s moves from %s to %s: %s", op.name, switch.old, switch.new, switch.reason)

    # -- lifecycle -----------------------------------------------------------------------
    def connection_closed(self, connection: Hashable) -> None:
        for op in list(self._ops.values()):
            op.lanes.pop(connection, None)
        for delegate in list(self._delegates.values()):
            delegate.connection_closed(connection)

    def connection_resumed(self, connection: Hashable) -> None:
        """Pass on to the delegates that park connections (``thread_pool``)."""
        for delegate in list(self._delegates.values()):
            resumed = getattr(delegate, "connection_resumed", None)
            if resumed is not None:
                resumed(connection)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for delegate in list(self._delegates.values()):
            delegate.close()
