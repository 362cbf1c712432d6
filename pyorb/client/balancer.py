"""Which member of an object group gets the next call.

A group reference (TAG_FT_GROUP, see :func:`pyorb.giop.ior.group_ior`) names
several replicas.  The client keeps one multiplexed connection per replica
and picks a member per call:

* ``round_robin``: the members in turn;
* ``least_pending``: the member with the fewest calls awaiting replies on
  the client's connection (ties in turn), so a slow or stalled replica gets
  fewer calls: what an AMH middle tier wants in front of its sinks.

A member that refused a connection, lost one or let a call time out is left
out for a back-off that doubles with each consecutive failure (from
``BACKOFF_MIN`` up to ``BACKOFF_MAX`` seconds), then tried again by the next
call that picks it; a success clears it.  When every member is backing off,
calls still go to them (the least recently failed first) rather than fail
without trying.
"""

from __future__ import annotations

import time
from typing import Callable, Collection

from pyorb.client.calls import Endpoint, GroupRoutes, Route

BACKOFF_MIN = 0.25
BACKOFF_MAX = 10.0
POLICIES = ("round_robin", "least_pending")


class Balancer:
    """The state of one group in one client."""

    __slots__ = ("key", "version", "members", "policy", "_pending", "_clock", "_turn", "_failures", "_down_until")

    def __init__(self, group: GroupRoutes, policy: str, pending: Callable[[Endpoint], int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown balancing policy {policy!r}; known: {', '.join(POLICIES)}")
        self.key = group.key
        self.version = group.version
        self.members = group.members
        self.policy = policy
        self._pending = pending
        self._clock = clock
        self._turn = 0
        self._failures: dict[Endpoint, int] = {}
        self._down_until: dict[Endpoint, float] = {}

    def pick(self, exclude: Collection[Endpoint] = ()) -> Route | None:
        """The member for the next call, None if every member is excluded."""
        candidates = [m for m in self.members if m.endpoint not in exclude]
        if not candidates:
            return None
        down = self._down_until
        if down:
            now = self._clock()
            healthy = [m for m in candidates if down.get(m.endpoint, 0.0) <= now]
            if not healthy:  # all backing off: the one whose back-off ends first
                return min(candidates, key=lambda m: down.get(m.endpoint, 0.0))
            candidates = healthy
        self._turn += 1
        if self.policy == "round_robin" or len(candidates) == 1:
            return candidates[self._turn % len(candidates)]
        pending = self._pending
        n = len(candidates)
        # Fewest pending calls; ties broken in turn so equal members share the load.
        return min((candidates[(self._turn + i) % n] for i in range(n)), key=lambda m: pending(m.endpoint))

    def failed(self, endpoint: Endpoint) -> None:
        """``endpoint`` refused, lost a connection or let a call time out: back off from it."""
        count = self._failures.get(endpoint, 0) + 1
        self._failures[endpoint] = count
        self._down_until[endpoint] = self._clock() + min(BACKOFF_MIN * 2 ** (count - 1), BACKOFF_MAX)

    def succeeded(self, endpoint: Endpoint) -> None:
        """A connection to ``endpoint`` opened (or a call on it succeeded): it is healthy again."""
        if self._failures.pop(endpoint, None) is not None:
            self._down_until.pop(endpoint, None)

    def is_down(self, endpoint: Endpoint) -> bool:
        return self._down_until.get(endpoint, 0.0) > self._clock()
