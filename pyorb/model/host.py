"""The whole host: the server shares its cores with the load generator and the sink.

On one machine a closed-loop experiment is one network: each call also
needs CPU in the client process (the load generator) and, for a middle
tier, in the sink.  Each of those processes is single-threaded Python (or
one GIL), so each is a single-server queue of its own; and all of them,
the server's GIL included, share ``cores`` CPU cores.

That sharing is not product-form.  It is modelled by a slowdown per
process, found by fixed-point iteration: with the throughput X of the last
solution, process i is runnable a fraction u_i = X·D_i·s_i of the time
(X with one call fewer: by the arrival theorem that is what a call finds)
(its demand D_i per call stretched by its slowdown s_i); when it runs
while K others are runnable it gets min(1, cores / (1 + K + b)) of a core
(b: other runnable work on the machine, e.g. a load average not ours), so
s_i = E[max(1, (1 + K + b) / cores)] with K the sum of the others'
independent Bernoulli(u_j).  The stretched demands go back into exact MVA
until X settles.  Only CPU stretches: blocking delays and think time do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from pyorb.model.mva import Station, solve


@dataclass(frozen=True)
class Host:
    """The machine a server shares with its clients (and sink), for a one-host experiment or deployment."""

    cores: int = 2
    """CPU cores every process on the machine shares."""
    client: float = 0.0
    """CPU seconds per call of the co-located load generator (one process: at most one core)."""
    sink: float = 0.0
    """CPU seconds per call of a co-located sink behind a middle tier (one process)."""
    background: float = 0.0
    """Other runnable processes on average (a load average beyond the experiment's own)."""

    def __post_init__(self) -> None:
        if self.cores < 1:
            raise ValueError(f"cores must be >= 1, got {self.cores}")
        for name in ("client", "sink", "background"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")

    @property
    def server_only(self) -> bool:
        """True if nothing else on the host needs CPU: the model is the server's alone."""
        return self.client == 0 and self.sink == 0 and self.background == 0


ServerStation = Callable[[float], Station]
"""The server's station with its CPU stretched by the given slowdown."""

_ITERATIONS = 200
_TOLERANCE = 1e-5


def throughput(clients: int, think: float, server: ServerStation, cpu: float, processes: int, host: Host) -> float:
    """X(N) of the server (``processes`` identical processes sharing ``cpu`` per call) on ``host``.

    ``server(s)`` builds the server's station with CPU demand stretched by s;
    ``think`` is every delay outside the stations (client think time,
    loopback, a delay that holds no thread).
    """
    if clients <= 0:
        return 0.0
    demands = [cpu / processes] * processes + [d for d in (host.client, host.sink) if d > 0]
    slow = [1.0] * len(demands)
    x = 0.0
    for _ in range(_ITERATIONS):
        stations = [server(slow[0])] + [Station(f"process {i}", d * slow[i])
                                        for i, d in enumerate(demands) if i >= processes]
        points = solve(stations, clients, think)
        x = points[-1].throughput
        # Arrival theorem: a call finds the others as they are with one call fewer (none at N = 1).
        seen = points[-2].throughput if clients > 1 else 0.0
        busy = [min(1.0, seen * d * s) for d, s in zip(demands, slow)]
        target = slowdowns(busy, host.cores, host.background)
        target[:processes] = [target[0]] * processes  # identical workers: one slowdown
        change = max(abs(t - s) for t, s in zip(target, slow))
        slow = [(s + t) / 2 for s, t in zip(slow, target)]  # damped: the map overshoots near saturation
        if change < _TOLERANCE:
            break
    return x


def slowdowns(busy: Sequence[float], cores: int, background: float = 0.0) -> list[float]:
    """Per process: the mean stretch of its CPU time, E[max(1, (1 + K + b) / cores)] with K the
    number of the other processes runnable (independent, each with probability ``busy[j]``)."""
    out = []
    for i in range(len(busy)):
        dist = [1.0]  # P(K = k) over the others: a Poisson-binomial distribution
        for j, p in enumerate(busy):
            if j != i:
                dist = [a * (1 - p) + b * p for a, b in zip(dist + [0.0], [0.0] + dist)]
        out.append(sum(pk * max(1.0, (1 + k + background) / cores) for k, pk in enumerate(dist)))
    return out
