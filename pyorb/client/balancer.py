"""Which member of an object group gets the next call.

A group reference (TAG_FT_GROUP, see :func:`pyorb.giop.ior.group_ior`) names
several replicas.  The client keeps one multiplexed connection per replica
and picks a member per call:

* ``round_robin``: the members in turn, passing over a member that holds
  far more of this client's pending calls than the others (more than
  ``skew`` times their mean, plus two) and has answered nothing for longer
  than its usual round trip (recent mean plus two mean deviations): a
  replica that stopped answering, before outlier detection (below) is sure
  of it;
* ``least_pending``: the member with the fewest calls awaiting replies on
  the client's connection (ties in turn), so a slow or stalled replica gets
  fewer calls: what an AMH middle tier wants in front of its sinks.

A member that refused a connection, lost one or let a call time out is left
out for a back-off that doubles with each failure in a row (from
``BACKOFF_MIN`` up to ``BACKOFF_MAX`` seconds), then takes one call at a
time until it answers (a probe); each answer shortens its next back-off.  A
connection that opens does not end a back-off: in front of a proxy, or of
a host that accepts and then stalls, it proves nothing.  When every member is backing off,
calls still go to them (the least recently failed first) rather than fail
without trying.

Outlier detection (:class:`OutlierDetection`) leaves out a member that has
stopped answering before its calls time out: the client keeps each member's
recent latency (an exponentially weighted mean of its replies' round
trips), and ejects a member whose oldest pending call has waited more than
``multiple`` times that latency (and at least ``floor`` seconds) while the
member answered nothing else, as gRPC's and Envoy's outlier detection eject
a failing endpoint.  An ejected member backs off as above; the calls it
holds that their caller declared idempotent go to another member at once.
The last member not backing off is never ejected.

Hedging (:class:`Hedging`, off unless a client is given one) cuts the tail
a slow or stalled member adds to idempotent calls, as gRPC's hedging policy
and Dean and Barroso's "The Tail at Scale" describe: a call still
unanswered after its member's usual round trip (recent mean plus two mean
deviations, about its 95th percentile) is sent once more to another
member; the first answer wins and the other copy is cancelled.  A budget
(a token bucket that each call fills by ``budget`` and each hedge empties
by one, as gRPC throttles retries) keeps hedges to about that share of the
calls, so a cluster that is slow everywhere is not sent twice the load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Collection

from pyorb.client.calls import Endpoint, GroupRoutes, Route

BACKOFF_MIN = 0.25
BACKOFF_MAX = 10.0
POLICIES = ("round_robin", "least_pending")


@dataclass(frozen=True)
class OutlierDetection:
    """When a client ejects a group member that stopped answering.

    A member is ejected once its oldest pending call has waited longer than
    ``max(floor, multiple * latency)`` seconds, ``latency`` being its recent
    mean round trip, and nothing else came back from it meanwhile.  Until
    a member has answered once, the group's other members' latency stands
    in for its own; with no latency known yet, nothing is ejected.
    ``weight`` is the share of each new round trip in the mean.
    ``skew``: round robin passes over a member holding more than ``skew``
    times the other members' mean of pending calls, plus two, that has
    answered nothing for longer than its mean round trip plus two mean
    deviations.
    """

    multiple: float = 5.0
    floor: float = 0.2
    weight: float = 0.1
    skew: float = 1.5

    def __post_init__(self) -> None:
        if not (self.multiple >= 1.0 and self.floor >= 0.0 and 0.0 < self.weight <= 1.0 and self.skew >= 1.0):
            raise ValueError(f"outlier detection needs multiple >= 1, floor >= 0, 0 < weight <= 1 and skew >= 1: "
                             f"got {self}")


@dataclass(frozen=True)
class Hedging:
    """When a client sends a second copy of an idempotent group call.

    A call declared idempotent that has no answer after ``delay`` seconds
    (None: its member's recent mean round trip plus two mean deviations,
    at least ``min_delay``; with no round trip known yet, no hedge) goes
    to another member not backing off, at most ``max_hedges`` extra times,
    ``delay`` apart.  Each call earns ``budget`` tokens (up to ``burst``)
    and each hedge spends one: without a token (or another member) the call
    tries again after twice its last wait.  Calls not declared idempotent
    are never hedged.
    """

    delay: float | None = None
    min_delay: float = 0.002
    max_hedges: int = 1
    budget: float = 0.1
    burst: float = 10.0

    def __post_init__(self) -> None:
        if not ((self.delay is None or self.delay > 0.0) and self.min_delay >= 0.0 and self.max_hedges >= 1
                and 0.0 < self.budget <= 1.0 and self.burst >= 1.0):
            raise ValueError(f"hedging needs delay None or > 0, min_delay >= 0, max_hedges >= 1, "
                             f"0 < budget <= 1 and burst >= 1: got {self}")


@dataclass
class HedgeStats:
    """What hedging did for one group in one client (:meth:`pyorb.Client.group_stats`)."""

    calls: int = 0
    """Idempotent calls placed (each earns part of a hedge)."""
    hedges: int = 0
    """Extra copies sent."""
    won: int = 0
    """Calls whose answer came from a hedge."""
    throttled: int = 0
    """Times a hedge was due but the budget had no token (the call waited another delay)."""


class Balancer:
    """The state of one group in one client.

    ``pending(endpoint)`` is how many of this client's calls await a reply
    from a member, ``oldest(endpoint)`` when (on ``clock``) the oldest of
    them was sent (None without one), and ``ejected(endpoint)`` is told when
    outlier detection ejects a member (``detection`` None: never).
    """

    __slots__ = ("key", "version", "members", "policy", "detection", "_pending", "_oldest", "_ejected", "_clock",
                 "_turn", "_failures", "_down_until", "_probing", "_latency", "_spread",
                 "_last_reply", "hedging", "hedge_stats", "_tokens")

    def __init__(self, group: GroupRoutes, policy: str, pending: Callable[[Endpoint], int],
                 clock: Callable[[], float] = time.monotonic, *,
                 detection: OutlierDetection | None = None,
                 oldest: Callable[[Endpoint], float | None] = lambda _e: None,
                 ejected: Callable[[Endpoint], None] = lambda _e: None,
                 hedging: Hedging | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown balancing policy {policy!r}; known: {', '.join(POLICIES)}")
        self.key = group.key
        self.version = group.version
        self.members = group.members
        self.policy = policy
        self.detection = detection
        self._pending = pending
        self._oldest = oldest
        self._ejected = ejected
        self._clock = clock
        self._turn = 0
        self._failures: dict[Endpoint, int] = {}
        self._down_until: dict[Endpoint, float] = {}
        self._probing: set[Endpoint] = set()  # back-off over, no answer yet: one call at a time
        self._latency: dict[Endpoint, float] = {}
        self._spread: dict[Endpoint, float] = {}  # mean deviation of the round trips from _latency
        self._last_reply: dict[Endpoint, float] = {}
        self.hedging = hedging
        self.hedge_stats = HedgeStats()
        self._tokens = hedging.burst if hedging is not None else 0.0

    def pick(self, exclude: Collection[Endpoint] = ()) -> Route | None:
        """The member for the next call, None if every member is excluded."""
        candidates = [m for m in self.members if m.endpoint not in exclude]
        if not candidates:
            return None
        if self._down_until or self._probing:
            candidates = self._available(candidates)
        self._turn += 1
        if self.detection is not None and len(candidates) > 1:
            # One member per call is checked, in turn: a stalled one is found
            # within a round of calls, even when the policy passes it over.
            suspect = candidates[self._turn % len(candidates)]
            if self._is_outlier(suspect.endpoint, self._clock()):
                self._eject(suspect.endpoint)
                candidates = [m for m in candidates if m is not suspect]
        return self._choose(candidates)

    def _available(self, candidates: list[Route]) -> list[Route]:
        """The candidates not backing off, and probing ones only while no probe is out."""
        now = self._clock()
        down, probing = self._down_until, self._probing
        healthy = []
        for m in candidates:
            endpoint = m.endpoint
            if down.get(endpoint, 0.0) > now:
                continue
            if endpoint in probing and self._pending(endpoint):
                if self.detection is not None and self._is_outlier(endpoint, now):
                    self._eject(endpoint)  # its probe stalled too
                continue
            healthy.append(m)
        if healthy:
            return healthy
        # All backing off or probing: the one whose back-off ends first.
        return [min(candidates, key=lambda m: down.get(m.endpoint, 0.0))]

    def _choose(self, candidates: list[Route]) -> Route:
        n = len(candidates)
        if n == 1:
            return candidates[0]
        pending = self._pending
        if self.policy == "round_robin":
            chosen = candidates[self._turn % n]
            if self.detection is None:
                return chosen
            counts = [pending(m.endpoint) for m in candidates]
            mine = counts[self._turn % n]
            others = (sum(counts) - mine) / (n - 1)
            if mine <= self.detection.skew * others + 2:
                return chosen
            # It keeps its turn if it has not answered yet (still connecting,
            # say), or is piling up yet answering as fast as usual: within its
            # mean round trip plus two deviations, as TCP bounds a round trip.
            silent = self._silent(chosen.endpoint, self._clock(), own=True)
            if silent is None or silent[0] <= silent[1] + 2 * self._spread.get(chosen.endpoint, 0.0):
                return chosen
            self._turn += 1
            return candidates[self._turn % n]
        # Fewest pending calls; ties broken in turn so equal members share the load.
        return min((candidates[(self._turn + i) % n] for i in range(n)), key=lambda m: pending(m.endpoint))

    def _is_outlier(self, endpoint: Endpoint, now: float) -> bool:
        silent = self._silent(endpoint, now)
        if silent is None:
            return False
        waited, latency = silent
        detection = self.detection
        assert detection is not None
        return waited > max(detection.floor, detection.multiple * latency)

    def _silent(self, endpoint: Endpoint, now: float, own: bool = False) -> tuple[float, float] | None:
        """How long ``endpoint`` has owed its oldest pending call with nothing
        else coming back, and its recent latency (the group's until it has
        its own, unless ``own``); None without a pending call or a latency."""
        sent = self._oldest(endpoint)
        if sent is None:
            return None
        latency = self._latency.get(endpoint)
        if latency is None:
            if own or not self._latency:
                return None
            latency = sum(self._latency.values()) / len(self._latency)
        return now - max(sent, self._last_reply.get(endpoint, sent)), latency

    def sweep(self) -> bool:
        """Eject the members that stopped answering (checked on a timer, for
        when no call is being placed); whether any member still owes calls."""
        now = self._clock()
        down = self._down_until
        # Members taking calls: a probing one is not, so it never counts as the last.
        available = sum(1 for m in self.members if down.get(m.endpoint, 0.0) <= now and m.endpoint not in self._probing)
        owing = False
        for member in self.members:
            endpoint = member.endpoint
            if not self._pending(endpoint):
                continue
            owing = True
            if down.get(endpoint, 0.0) > now or self.detection is None:
                continue
            if (available > 1 or endpoint in self._probing) and self._is_outlier(endpoint, now):
                if endpoint not in self._probing:
                    available -= 1
                self._eject(endpoint)
        return owing

    def _eject(self, endpoint: Endpoint) -> None:
        self.failed(endpoint)
        self._ejected(endpoint)

    def failed(self, endpoint: Endpoint) -> None:
        """``endpoint`` refused, lost a connection or let a call time out: back off from it.

        Failures while it is already backing off (its other calls timing
        out) do not lengthen the back-off."""
        now = self._clock()
        if self._down_until.get(endpoint, 0.0) > now:
            return
        count = self._failures.get(endpoint, 0) + 1
        self._failures[endpoint] = count
        self._down_until[endpoint] = now + min(BACKOFF_MIN * 2 ** (count - 1), BACKOFF_MAX)
        self._probing.add(endpoint)

    def replied(self, endpoint: Endpoint, sent: float) -> None:
        """``endpoint`` answered a call sent at ``sent`` (on the clock): its
        latency, and a shorter back-off next time it fails."""
        now = self._clock()
        self._last_reply[endpoint] = now
        if sent:
            sample = now - sent
            mean = self._latency.get(endpoint)
            if mean is None:
                self._latency[endpoint], self._spread[endpoint] = sample, sample / 2
            else:
                weight = self.detection.weight if self.detection is not None else 0.1
                self._latency[endpoint] = mean + weight * (sample - mean)
                self._spread[endpoint] += weight * (abs(sample - mean) - self._spread[endpoint])
        if endpoint in self._probing:
            self._probing.discard(endpoint)
            self._down_until.pop(endpoint, None)
        count = self._failures.get(endpoint)
        if count is not None:
            if count > 1:
                self._failures[endpoint] = count - 1
            else:
                del self._failures[endpoint]

    def is_down(self, endpoint: Endpoint) -> bool:
        return self._down_until.get(endpoint, 0.0) > self._clock()

    def latency(self, endpoint: Endpoint) -> float | None:
        """``endpoint``'s recent mean round trip in seconds (None before its first reply)."""
        return self._latency.get(endpoint)

    # -- hedging ---------------------------------------------------------------
    def hedge_delay(self, endpoint: Endpoint) -> float | None:
        """How long a call to ``endpoint`` waits before it is hedged (None: no hedge yet).

        Counts the call against the budget; the group's mean stands in
        for a member that has not answered yet."""
        hedging = self.hedging
        assert hedging is not None
        self.hedge_stats.calls += 1
        self._tokens = min(self._tokens + hedging.budget, hedging.burst)
        if hedging.delay is not None:
            return hedging.delay
        latency = self._latency.get(endpoint)
        if latency is None:
            if not self._latency:
                return None
            latency = sum(self._latency.values()) / len(self._latency)
            spread = sum(self._spread.values()) / len(self._spread)
        else:
            spread = self._spread[endpoint]
        return max(latency + 2 * spread, hedging.min_delay)

    def hedge_to(self, exclude: Collection[Endpoint]) -> Route | None:
        """A member for a hedge, not one of ``exclude`` nor backing off, if
        the budget has a token for it (which it then spends)."""
        member = self.pick(exclude)
        if member is None or self.is_down(member.endpoint):
            return None
        if self._tokens < 1.0:
            self.hedge_stats.throttled += 1
            return None
        self._tokens -= 1.0
        self.hedge_stats.hedges += 1
        return member
