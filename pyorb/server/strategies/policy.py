"""The adaptive strategy's decision policy: observations and a clock in, moves out.

:class:`AdaptivePolicy` is pure: it does no I/O, starts no timers and
reads no clock but the one it is given.  The strategy
(:mod:`pyorb.server.strategies.adaptive`) feeds it each operation's figures
(an :class:`Observation` per window, or one on a phase change) and the
passing of glances and windows (:meth:`AdaptivePolicy.glance`), and
applies the :class:`Switch` it returns, if any.

A move needs the recommendation to differ from the current target, to
predict at least ``gain`` more throughput than the model gives the current
target, and to hold for ``hold`` consecutive windows (one window when the
gain is 1.5x or more).  On a phase change only a 1.5x gain moves, at once.
A move back to the target an operation left shortly before doubles its
``hold`` (up to :data:`MAX_HOLD`) and stops its one-window and one-glance
moves, so a workload the model sees two ways does not flap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from pyorb.model import Workload

INLINE = "reactive"
MAX_HOLD = 16
"""Windows a recommendation must hold, at most, after repeated back-and-forth moves."""
URGENT = 0.5
"""A predicted gain at least this large (1.5x) moves after one window, unless the operation has flapped."""
BACK_AND_FORTH = 8
"""A move back to the previous target within this many times ``hold`` windows doubles ``hold``."""
GLANCES = 5
"""Glances per window: how often new samples are checked for a phase change."""
_POOL = re.compile(r"thread_pool\((\d+)\)")


class Advice(Protocol):
    """What the policy needs of a :class:`pyorb.model.Recommendation`."""

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
class Observation:
    """One operation's figures over one window (or the part of it since a phase change)."""

    calls: int
    """Timed calls the figures come from."""
    clients: int
    cpu: float
    """Mean servant CPU seconds per call."""
    delay: float
    """Mean seconds per call the servant was blocked, not computing nor waiting for the GIL."""
    wall: float
    """Mean seconds per call in servant code."""


@dataclass(frozen=True)
class Switch:
    """One move of one operation."""

    at: float
    """The policy's clock (``time.monotonic()`` unless given another) at the move."""
    operation: str
    old: str
    new: str
    reason: str
    glance: int = 0
    """The policy's glance count at the move (a window is :data:`GLANCES` glances)."""


@dataclass
class _State:
    """One operation's target as the policy knows it, and its hysteresis."""

    target: str
    hold: int
    candidate: str = ""
    streak: int = 0
    previous: str = ""
    moved_at: int = -(10**9)  # window number of the last move


class AdaptivePolicy:
    """Per operation, when to move and where to: see the module docstring.

    ``decide`` is the model (:func:`model_decision` unless given), ``clock``
    stamps the moves.  Targets are ``reactive`` and ``thread_pool(n)``, ``n``
    rounded up to a power of two and capped at ``max_threads``.
    """

    def __init__(self, max_threads: int, hold: int, gain: float, *, decide: Decide | None = None,
                 clock: Callable[[], float] = monotonic) -> None:
        self.max_threads, self.hold, self.gain = max_threads, hold, gain
        self._decide = decide
        self._clock = clock
        self._ops: dict[str, _State] = {}
        self.glances = 0
        """Glances since the start."""
        self.windows = 0
        """Windows since the start: every :data:`GLANCES` glances."""

    def add(self, operation: str, target: str) -> None:
        """An operation first seen, on ``target``."""
        self._ops[operation] = _State(target, self.hold)

    def state(self, operation: str) -> _State:
        return self._ops[operation]

    def glance(self) -> bool:
        """One glance has passed; whether it ended a window."""
        self.glances += 1
        if self.glances % GLANCES:
            return False
        self.windows += 1
        return True

    def judge(self, operation: str, seen: Observation, urgent_only: bool = False) -> Switch | None:
        """The move of ``operation`` for ``seen``, if the model's choice gains enough and has held long enough.

        ``urgent_only`` (a phase change seen in one glance): only a 1.5x gain
        moves, and the window-by-window agreement (``streak``) is left alone.
        """
        state = self._ops[operation]
        rec, now = self._decision()(self._workload(seen), state.target)
        wanted = self.clamp(rec.strategy)
        better = rec.throughput > now * (1.0 + self.gain) if now > 0 else rec.throughput > 0
        urgent = rec.throughput >= now * (1.0 + URGENT) and state.hold == self.hold
        if urgent_only:
            if wanted != state.target and better and urgent:
                return self.move(operation, wanted, f"{rec.reason} (predicted {rec.throughput:.0f}/s vs "
                                                    f"{now:.0f}/s now; changed over the last {seen.calls} calls)")
            return None
        if wanted == state.target or not better:
            state.candidate, state.streak = "", 0
            return None
        state.streak = state.streak + 1 if wanted == state.candidate else 1
        state.candidate = wanted
        if state.streak >= (1 if urgent else state.hold):
            return self.move(operation, wanted, f"{rec.reason} (predicted {rec.throughput:.0f}/s vs {now:.0f}/s now)")
        return None

    def move(self, operation: str, new: str, reason: str) -> Switch:
        """Record a move of ``operation`` to ``new`` (the policy's own, or one made by hand)."""
        state = self._ops[operation]
        old = state.target
        if new == state.previous and self.windows - state.moved_at <= BACK_AND_FORTH * state.hold:
            state.hold = min(MAX_HOLD, state.hold * 2)  # back and forth: ask for longer agreement next time
        state.previous, state.target, state.moved_at = old, new, self.windows
        state.candidate, state.streak = "", 0
        return Switch(self._clock(), operation, old, new, reason, self.glances)

    def clamp(self, spec: str) -> str:
        """The target for a recommended spec: pools rounded up to a power of two and capped at
        ``max_threads``, anything else inline."""
        m = _POOL.fullmatch(spec.replace(" ", ""))
        if m is None:
            return INLINE
        size = 1 << max(0, int(m.group(1)) - 1).bit_length()  # a power of two: fewer pools, fewer idle threads
        return f"thread_pool({min(size, self.max_threads)})"

    def _workload(self, seen: Observation) -> Workload:
        from pyorb.model import Workload

        return Workload(clients=max(1, seen.clients), cpu=seen.cpu, delay=seen.delay)

    def _decision(self) -> Decide:
        if self._decide is None:
            self._decide = model_decision(self.max_threads)
        return self._decide


__all__ = ["AdaptivePolicy", "Advice", "Decide", "Observation", "Switch", "model_decision"]
