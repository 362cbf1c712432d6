"""Mean Value Analysis of closed, single-class product-form queueing networks.

Pure arithmetic on Python floats: no I/O, nothing of pyorb.

Two solvers:

* :func:`solve` — exact MVA over N = 1..Nmax for any mix of queueing
  stations (FCFS with exponential service or processor sharing: the same
  mean values), delay (infinite-server) stations and load-dependent
  stations (a multi-server station with ``servers`` c, or any rate curve).
  Load-dependent stations use the *exact* load-dependent recursion on the
  marginal queue-length probabilities (no Seidmann approximation).  It costs
  O(Nmax²) per load-dependent station, O(Nmax) per other station.
* :func:`repairman` — one load-dependent station with all delays merged in
  front of it (the machine-repairman model), for a single population N in
  O(N) from the birth-death chain's stationary distribution, in log space.
  Every pyorb strategy model reduces to this shape, which is what keeps
  :func:`pyorb.model.recommend` fast.

Delay stations in series merge into one whose demand is the sum (their
joint normalising constant is that of one delay station), so "think time +
sleep + network" is a single number to the solvers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

Kind = Literal["queue", "delay", "multi", "rate"]


@dataclass(frozen=True)
class Station:
    """One service centre.

    ``demand`` is the total service demand of one job (visits × service
    time) in seconds.  ``kind``:

    * ``"queue"`` — one server (FCFS exponential or PS);
    * ``"delay"`` — infinite servers: a job never waits (think time, sleep);
    * ``"multi"`` — ``servers`` identical servers: with j jobs present it
      serves at min(j, servers) times one server's rate;
    * ``"rate"`` — a flow-equivalent server: ``rate(j)`` is its completion
      rate in jobs/s with j jobs present (``demand`` is unused).
    """

    name: str
    demand: float = 0.0
    kind: Kind = "queue"
    servers: int = 1
    rate: Callable[[int], float] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.demand < 0 or not math.isfinite(self.demand):
            raise ValueError(f"station {self.name!r}: demand must be finite and >= 0, got {self.demand}")
        if self.servers < 1:
            raise ValueError(f"station {self.name!r}: servers must be >= 1, got {self.servers}")
        if self.kind == "rate" and self.rate is None:
            raise ValueError(f"station {self.name!r}: kind 'rate' needs a rate function")

    def completion_rate(self, jobs: int) -> float:
        """Jobs/s completed with ``jobs`` present (load-dependent kinds only)."""
        if self.kind == "rate":
            assert self.rate is not None
            return self.rate(jobs)
        if self.demand == 0:
            return math.inf
        return min(jobs, self.servers) / self.demand


@dataclass(frozen=True)
class StationResult:
    """A station's mean values at one population."""

    name: str
    response: float
    """Mean residence time of a job per cycle (waiting + service), s."""
    queue: float
    """Mean number of jobs there (waiting + in service)."""
    utilisation: float
    """Busy fraction per server (X·D/c); for a rate station X / max rate seen so far."""


@dataclass(frozen=True)
class Point:
    """The network at one population N."""

    clients: int
    throughput: float
    """System throughput X(N), jobs/s."""
    response: float
    """R(N): the time per cycle outside the ``think`` station, s."""
    stations: tuple[StationResult, ...]


def solve(stations: Sequence[Station], clients: int, think: float = 0.0) -> list[Point]:
    """Exact MVA for N = 1..``clients``; ``think`` is a delay station outside R(N)."""
    if clients < 0:
        raise ValueError(f"clients must be >= 0, got {clients}")
    if think < 0:
        raise ValueError(f"think time must be >= 0, got {think}")
    queue = [0.0] * len(stations)
    # marginal[k][j]: P(j jobs at load-dependent station k) at the previous population.
    marginal: list[list[float]] = [[1.0] for _ in stations]
    peak = [0.0] * len(stations)
    points = []
    for n in range(1, clients + 1):
        residence = [_residence(s, queue[k], marginal[k], n) for k, s in enumerate(stations)]
        total = think + sum(residence)
        x = n / total if total > 0 else math.inf
        results = []
        for k, s in enumerate(stations):
            queue[k] = x * residence[k]
            if s.kind in ("multi", "rate"):
                marginal[k] = _next_marginal(s, marginal[k], x, n)
                peak[k] = max(peak[k], s.completion_rate(n))
            results.append(StationResult(s.name, residence[k], queue[k], _utilisation(s, x, peak[k])))
        points.append(Point(n, x, sum(residence), tuple(results)))
    return points


def _residence(s: Station, queue: float, marginal: list[float], n: int) -> float:
    if s.kind == "delay":
        return s.demand
    if s.kind == "queue":
        return s.demand * (1 + queue)  # arrival theorem: it sees the net with one job fewer
    # Load-dependent: R = sum_j j/mu(j) * P(j-1 jobs | n-1).
    return sum(j / s.completion_rate(j) * marginal[j - 1] for j in range(1, n + 1))


def _next_marginal(s: Station, previous: list[float], x: float, n: int) -> list[float]:
    nxt = [0.0] * (n + 1)
    for j in range(1, n + 1):
        nxt[j] = x / s.completion_rate(j) * previous[j - 1]
    # Clamp: the recursion for P(0) loses precision near saturation.
    nxt[0] = max(0.0, 1.0 - sum(nxt[1:]))
    return nxt


def _utilisation(s: Station, x: float, peak: float) -> float:
    if s.kind == "delay":
        return 0.0
    if s.kind == "rate":
        return min(1.0, x / peak) if peak > 0 else 0.0
    return min(1.0, x * s.demand / s.servers)


def repairman(clients: int, delay: float, rate: Callable[[int], float]) -> tuple[float, float]:
    """(X, mean jobs at the station) for ``clients`` jobs cycling between a
    delay station of demand ``delay`` and one station completing ``rate(j)``
    jobs/s with j present (``rate`` positive and non-decreasing in j).

    Exact: the population at the station is a birth-death chain with birth
    rate (N-j)/delay and death rate rate(j).  Its stationary probabilities
    rise to one mode and fall, so they are summed outwards from the mode
    until they drop below 1e-16 of it: about the square root of the
    population's spread in terms, not N, which keeps N = 1000 well under a
    millisecond.
    """
    if clients <= 0:
        return 0.0, 0.0
    if delay <= 0:  # every job is at the station
        return rate(clients), float(clients)
    if math.isinf(rate(1)):  # a station with no demand: every job is in the delay
        return clients / delay, 0.0
    weights = _weights(clients, delay, rate)
    norm = sum(weights.values())
    x = sum(w * rate(j) for j, w in weights.items() if j > 0) / norm
    jobs = sum(w * j for j, w in weights.items()) / norm
    return x, jobs


def _weights(n: int, delay: float, rate: Callable[[int], float]) -> dict[int, float]:
    """Unnormalised P(j at the station), relative to the mode, for the j that matter."""

    def ratio(j: int) -> float:  # P(j) / P(j-1)
        return (n - j + 1) / (delay * rate(j))

    lo, hi = 0, n  # the mode: the largest j whose ratio is >= 1 (ratio falls as j grows)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ratio(mid) >= 1.0:
            lo = mid
        else:
            hi = mid - 1
    weights = {lo: 1.0}
    w = 1.0
    for j in range(lo + 1, n + 1):
        w *= ratio(j)
        if w < _NEGLIGIBLE:
            break
        weights[j] = w
    w = 1.0
    for j in range(lo, 0, -1):
        w /= ratio(j)
        if w < _NEGLIGIBLE:
            break
        weights[j - 1] = w
    return weights


_NEGLIGIBLE = 1e-16
