"""Service demands of the papers' sink: a delay and/or CPU work per call."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Demand:
    """Per call: ``delay`` seconds of waiting and ``cpu`` seconds of computing,
    each fixed or drawn from an exponential distribution with that mean
    (Harkema et al. use exponential demands)."""

    delay: float = 0.0
    cpu: float = 0.0
    exponential: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("delay", "cpu"):
            value = getattr(self, name)
            if not 0 <= value <= 3600:
                raise ValueError(f"--{name} must be between 0 and 3600 seconds, got {value:g}")
        object.__setattr__(self, "_rng", random.Random(self.seed))

    def draw(self) -> tuple[float, float]:
        """This call's (delay, cpu) in seconds."""
        if not self.exponential:
            return self.delay, self.cpu
        rng: random.Random = self._rng  # type: ignore[attr-defined]
        return (rng.expovariate(1 / self.delay) if self.delay else 0.0,
                rng.expovariate(1 / self.cpu) if self.cpu else 0.0)


def spin(seconds: float) -> None:
    """Compute for ``seconds`` of this thread's CPU time (doSomeWork).

    Thread CPU time, not wall time: on a busy machine the work stays the same
    amount of computing, as a fixed loop count would.
    """
    if seconds <= 0:
        return
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x ^= i * 2654435761
