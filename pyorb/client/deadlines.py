"""Call timeouts grouped by deadline: one loop timer per slot, not per call.

A client with thousands of calls in flight would otherwise create and cancel
one loop timer for each call, which costs more than the rest of the call's
bookkeeping together.  Deadlines are rounded up to the next multiple of
:data:`RESOLUTION`, so a timeout fires at most that much late, never early.
"""

from __future__ import annotations

import asyncio
import math
from typing import Protocol

RESOLUTION = 0.005  # seconds: the most a timeout may fire late


class Expiring(Protocol):
    def timed_out(self) -> None: ...


class Deadlines:
    """Timeouts of one event loop's calls, bucketed by rounded-up deadline."""

    __slots__ = ("loop", "_slots")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # slot number -> the entries timing out then (a dict as an ordered set)
        self._slots: dict[int, dict[Expiring, None]] = {}

    def add(self, entry: Expiring, timeout: float) -> int:
        """Call ``entry.timed_out()`` about ``timeout`` seconds from now; returns the slot for :meth:`remove`."""
        slot = math.ceil((self.loop.time() + timeout) / RESOLUTION)
        entries = self._slots.get(slot)
        if entries is None:
            entries = self._slots[slot] = {}
            self.loop.call_at(slot * RESOLUTION, self._expire, slot)
        entries[entry] = None
        return slot

    def remove(self, entry: Expiring, slot: int) -> None:
        """Forget ``entry`` (its call finished); an empty slot's timer still fires, harmlessly."""
        entries = self._slots.get(slot)
        if entries is not None:
            entries.pop(entry, None)

    def _expire(self, slot: int) -> None:
        for entry in self._slots.pop(slot, ()):
            entry.timed_out()

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._slots.values())
