"""``adaptive``: each operation moves, at run time, to the strategy a queueing model recommends.

Every synchronous servant call of an operation is observed in the thread
that runs it: wall time and the thread's own CPU time (``time.thread_time``)
around the upcall.  Wall time minus CPU time is blocking delay plus time
spent waiting for the GIL; the GIL part is estimated as the servant CPU
time the strategy's other calls consumed meanwhile (bounded by the gap), so
that a CPU-bound call stretched by its neighbours in a pool is not mistaken
for a blocking one; and a call during which the thread never gave up the
CPU of its own accord (no voluntary context switch, ``RUSAGE_THREAD``) had
no delay at all, whatever the gap: the OS ran another process meanwhile.
Every ``window`` seconds each busy operation's figures
(the clients: connections that called it in the last CLIENT_WINDOWS
windows; CPU and delay per call) go to :func:`pyorb.model.recommend`; the
operation moves when the recommendation differs from its current target,
predicts at least ``gain`` more throughput than the model gives the current
target, and holds for ``hold`` consecutive windows (one window when the gain
is 1.5x or more: a blocking call stalling the loop).  A move back to the
target an operation left shortly before doubles that operation's ``hold``
(up to :data:`MAX_HOLD`), so a workload the model sees two ways does not
flap.

Targets are ``reactive`` (inline on the loop) and ``thread_pool(n)``, ``n``
the model's size rounded up to a power of two and capped at
``max_threads``; each target is one delegate strategy made by the registry,
shared by every operation that moves there (a pool left behind keeps its
idle threads until ``close``).

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
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from time import monotonic, perf_counter, thread_time
from typing import TYPE_CHECKING, Any, Callable, Hashable, Protocol

from pyorb.server.dispatch import Call, Strategy, run_on_loop
from pyorb.server.servant import Style
from pyorb.server.stats import Gauges

if TYPE_CHECKING:
    from pyorb.model import Workload

log = logging.getLogger(__name__)

INLINE = "reactive"
MAX_HOLD = 16
"""Windows a recommendation must hold, at most, after repeated back-and-forth moves."""
CLIENT_WINDOWS = 4
"""The clients of an operation are the connections that called it in this many recent windows
(one window of a loop blocked by each call may serve only a few of them)."""
MIN_CALLS = 4
"""Calls an operation needs in a window before the model is asked about it."""
URGENT = 0.5
"""A predicted gain at least this large (1.5x) moves after one window, unless the operation has flapped."""
BACK_AND_FORTH = 8
"""A move back to the previous target within this many times ``hold`` windows doubles ``hold``."""
_POOL = re.compile(r"thread_pool\((\d+)\)")


def _voluntary_switches() -> int:
    """Times this thread has given up the CPU of its own accord (Linux: per thread)."""
    return resource.getrusage(_THREAD).ru_nvcsw


try:
    import resource

    _THREAD = resource.RUSAGE_THREAD
    _waits: Callable[[], int] = _voluntary_switches
except (ImportError, AttributeError):  # not Linux: a count that always moves, so every call may have blocked
    _waits = itertools.count().__next__


class Advice(Protocol):
    """What the strategy needs of a :class:`pyorb.model.Recommendation`."""

    @property
    def strategy(self) -> str: ...
    @property
    def throughput(self) -> float: ...
    @property
    def reason(self) -> str: ...


Decide = Callable[["Workload", str], "tuple[Advice, float]"]
"""(workload, current target) -> (recommendation, predicted throughput of the current target)."""


def model_decision(max_threads: int) -> Decide:
    """The default decision: :func:`pyorb.model.recommend` between ``reactive`` and thread pools
    of at most ``max_threads`` (the model's own candidate sizes, capped)."""
    from pyorb.model import candidates, recommend

    def decide(workload: Workload, current: str) -> tuple[Advice, float]:
        pools = {min(int(m.group(1)), max_threads)
                 for m in map(_POOL.fullmatch, candidates(workload)) if m is not None}
        specs = ["reactive", *(f"thread_pool({n})" for n in sorted(pools))]
        rec = recommend(workload, strategies=specs, sync=True)
        now = rec if rec.strategy == current else recommend(workload, strategies=[current], sync=True)
        return rec, now.throughput

    return decide


@dataclass(frozen=True)
class Switch:
    """One move of one operation."""

    at: float
    """``time.monotonic()`` of the move."""
    operation: str
    old: str
    new: str
    reason: str


@dataclass(frozen=True)
class Observation:
    """One operation's figures over one window."""

    calls: int
    clients: int
    cpu: float
    """Mean servant CPU seconds per call."""
    delay: float
    """Mean seconds per call the servant was blocked, not computing nor waiting for the GIL."""
    wall: float
    """Mean seconds per call in servant code."""


class _Lane:
    """A connection's calls of one operation not yet started on ``target``."""

    __slots__ = ("target", "queued")

    def __init__(self, target: str) -> None:
        self.target = target
        self.queued = 0


@dataclass
class _Op:
    """One operation's current target, observations and hysteresis state."""

    name: str
    target: str = INLINE
    lock: threading.Lock = field(default_factory=threading.Lock)
    lanes: dict[Hashable, _Lane] = field(default_factory=dict)
    # This window's sums (under lock: probes write them from dispatcher threads).
    calls: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    delay: float = 0.0
    connections: set[Hashable] = field(default_factory=set)  # loop thread only
    recent: deque[set[Hashable]] = field(default_factory=lambda: deque(maxlen=CLIENT_WINDOWS))
    # Hysteresis.
    candidate: str = ""
    streak: int = 0
    hold: int = 2
    previous: str = ""
    moved_at: int = -(10**9)  # window number of the last move

    def observe(self) -> Observation | None:
        """This window's figures (None if too few calls), and start the next window."""
        with self.lock:
            calls, wall, cpu, delay = self.calls, self.wall, self.cpu, self.delay
            self.calls, self.wall, self.cpu, self.delay = 0, 0.0, 0.0, 0.0
        self.recent.append(self.connections)
        self.connections = set()
        clients = len(set().union(*self.recent))  # closed-loop clients: one connection each
        if calls < MIN_CALLS:
            return None
        return Observation(calls, clients, cpu / calls, delay / calls, wall / calls)


class _Probe:
    """Stands in for the servant during one call: times the upcall in the thread that runs it.

    ``run_sync`` looks the method up on ``call.servant``; the probe answers
    with itself, puts the real servant back (so that error logs name its
    class) and runs the method between two clock reads.
    """

    __slots__ = ("call", "servant", "op", "owner", "lane")

    def __init__(self, call: Call, op: _Op, owner: AdaptiveStrategy, lane: _Lane | None) -> None:
        self.call, self.servant, self.op, self.owner, self.lane = call, call.servant, op, owner, lane

    def __getattr__(self, name: str) -> Any:
        return self._run

    def _run(self, *args: Any) -> Any:
        call, servant, op, owner, lane = self.call, self.servant, self.op, self.owner, self.lane
        call.servant = servant
        if lane is not None:
            with op.lock:
                if lane.queued > 0:
                    lane.queued -= 1  # started: later calls of the connection may go elsewhere
        others0 = owner.servant_cpu
        v0, t0, c0 = _waits(), perf_counter(), thread_time()
        try:
            return getattr(servant, call.entry.attr)(*args)
        finally:
            cpu, wall = thread_time() - c0, perf_counter() - t0
            owner.finished(op, wall, cpu, others0, _waits() != v0)


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
    (tests).  ``targets`` maps each observed operation to its current target,
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
        self._decide = decide
        self._delegates: dict[str, Strategy] = {}
        self._ops: dict[object, _Op] = {}  # by the call's Recorder: one per operation under this strategy
        self.servant_cpu = 0.0
        """Servant CPU seconds of all finished calls (the GIL estimate reads it)."""
        self._windows = 0
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
            with op.lock:
                if lane is None:
                    lane = op.lanes[key] = _Lane(target)
                elif lane.queued:
                    target = lane.target  # behind its earlier calls still queued there
                else:
                    lane.target = target
                if target != INLINE:
                    lane.queued += 1
                    counted = lane
        call.servant = _Probe(call, op, self, counted)
        delegate = self._delegates.get(target) or self._delegate(target)
        return delegate.dispatch(call)

    def finished(self, op: _Op, wall: float, cpu: float, others0: float, waited: bool) -> None:
        """A probed call returned (any thread): add it to its operation's window.

        ``waited``: the thread gave up the CPU of its own accord during the
        call (it blocked, or waited for the GIL).  If it did not, the gap
        between wall and CPU time was the OS running something else: no delay.
        """
        others = self.servant_cpu - others0
        self.servant_cpu += cpu  # unlocked: a lost update skews one estimate a little, no more
        delay = 0.0
        if waited:
            gil = min(max(0.0, wall - cpu), others)  # the GIL held by our other calls meanwhile
            delay = max(0.0, wall - cpu - gil)
        with op.lock:
            op.calls += 1
            op.wall += wall
            op.cpu += cpu
            op.delay += delay

    def _new_op(self, call: Call) -> _Op:
        type_id = getattr(type(call.servant), "_NP_RepositoryId", "")
        iface = type_id.split(":")[1].replace("/", "::") if type_id.count(":") >= 2 else type(call.servant).__name__
        op = self._ops[call.stats] = _Op(f"{iface}.{call.entry.op.name}", hold=self.hold)
        if self._timer is None and not self._closed:
            self._timer = call.channel.loop.call_later(self.window, self._tick)
        return op

    def _delegate(self, spec: str) -> Strategy:
        delegate = self._delegates[spec] = self._create(spec)
        return delegate

    # -- every window ------------------------------------------------------------------
    def _tick(self) -> None:
        self._windows += 1
        for op in list(self._ops.values()):
            self._release_lanes(op)
            seen = op.observe()
            if seen is not None:
                self.last[op.name] = seen
                try:
                    self._consider(op, seen)
                except Exception:  # a failing model must not stop the serving
                    log.exception("adaptive: deciding for %s failed; it stays on %s", op.name, op.target)
        if not self._closed:
            self._timer = asyncio.get_running_loop().call_later(self.window, self._tick)

    def _release_lanes(self, op: _Op) -> None:
        # A call cancelled before it started never reaches its probe: once
        # the old target has nothing queued, nothing can be waiting there.
        for lane in list(op.lanes.values()):
            if lane.target != op.target and lane.queued:
                delegate = self._delegates.get(lane.target)
                if delegate is None or delegate.stats.queued() == 0:
                    with op.lock:
                        lane.queued = 0

    def _consider(self, op: _Op, seen: Observation) -> None:
        rec, now = self._decision()(self._workload(seen), op.target)
        wanted = self._clamp(rec.strategy)
        better = rec.throughput > now * (1.0 + self.gain) if now > 0 else rec.throughput > 0
        if wanted == op.target or not better:
            op.candidate, op.streak = "", 0
            return
        op.streak = op.streak + 1 if wanted == op.candidate else 1
        op.candidate = wanted
        urgent = rec.throughput >= now * (1.0 + URGENT) and op.hold == self.hold
        if op.streak >= (1 if urgent else op.hold):
            self._move(op, wanted, f"{rec.reason} (predicted {rec.throughput:.0f}/s vs {now:.0f}/s now)")

    def move(self, operation: str, spec: str, reason: str = "moved by hand") -> None:
        """Move ``operation`` (a ``targets`` key) to ``spec`` now, as a recommendation would.

        Call it on the server's loop thread.  The model may move it again later.
        """
        op = next((o for o in list(self._ops.values()) if o.name == operation), None)
        if op is None:
            raise KeyError(f"no calls of {operation!r} seen yet")
        target = self._clamp(spec)
        if target != op.target:
            self._move(op, target, reason)

    def _move(self, op: _Op, new: str, reason: str) -> None:
        old = op.target
        if new == op.previous and self._windows - op.moved_at <= BACK_AND_FORTH * op.hold:
            op.hold = min(MAX_HOLD, op.hold * 2)  # back and forth: ask for longer agreement next time
        op.previous, op.target, op.moved_at = old, new, self._windows
        op.candidate, op.streak = "", 0
        self.moves += 1
        self.switches.append(Switch(monotonic(), op.name, old, new, reason))
        log.info("adaptive: %s moves from %s to %s: %s", op.name, old, new, reason)

    def _workload(self, seen: Observation) -> Workload:
        from pyorb.model import Workload

        return Workload(clients=max(1, seen.clients), cpu=seen.cpu, delay=seen.delay)

    def _decision(self) -> Decide:
        if self._decide is None:
            self._decide = model_decision(self.max_threads)
        return self._decide

    def _clamp(self, spec: str) -> str:
        """The target for a recommended spec: pools rounded up to a power of two and capped at
        ``max_threads``, anything else inline."""
        m = _POOL.fullmatch(spec.replace(" ", ""))
        if m is None:
            return INLINE
        size = 1 << max(0, int(m.group(1)) - 1).bit_length()  # a power of two: fewer pools, fewer idle threads
        return f"thread_pool({min(size, self.max_threads)})"

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
