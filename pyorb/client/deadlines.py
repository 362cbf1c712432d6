"""Call timeouts grouped by deadline: one loop timer per slot, not per call.

A client with thousands of calls in flight would otherwise create and cancel
one loop timer for each call, which costs more than the rest of the call's
bookkeeping together.  Deadlines are rounded up to the next multiple of
:data:`RESOLUTION`, so a timeout fires at most that much late, never early.
All clients on one event loop share its slots (a load generator runs
thousands of clients with one call each), and a slot's timer is cancelled
when its last call finishes, so no timer outlives the calls it is for.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Protocol

RESOLUTION = 0.005  # seconds: the most a timeout may fire late


class Expiring(Protocol):
    def timed_out(self) -> None: ...


class _Slot:
    __slots__ = ("entries", "timer")

    def __init__(self) -> None:
        self.entries: dict[Expiring, None] = {}  # a dict as an ordered set
        self.timer: asyncio.TimerHandle | None = None


class Deadlines:
    """The timeouts of one event loop's calls, bucketed by rounded-up deadline."""

    # No reference to the loop: the loop is the key of the weak map that holds these.
    __slots__ = ("_slots",)

    def __init__(self) -> None:
        self._slots: dict[int, _Slot] = {}

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Deadlines:
        """The loop's deadlines (made on first use, gone with the loop)."""
        found = _per_loop.get(loop)
        if found is None:
            found = _per_loop[loop] = cls()
        return found

    def add(self, entry: Expiring, timeout: float, loop: asyncio.AbstractEventLoop) -> int:
        """Call ``entry.timed_out()`` about ``timeout`` seconds from now (on
        ``loop``, the one these deadlines belong to); returns the slot for
        :meth:`remove`."""
        number = math.ceil((loop.time() + timeout) / RESOLUTION)
        slot = self._slots.get(number)
        if slot is None:
            slot = self._slots[number] = _Slot()
            slot.timer = loop.call_at(number * RESOLUTION, self._expire, number)
        slot.entries[entry] = None
        return number

    @staticmethod
    def time_left(number: int, loop: asyncio.AbstractEventLoop) -> float:
        """Seconds until slot ``number`` (from :meth:`add`) expires on ``loop``."""
        return number * RESOLUTION - loop.time()

    def remove(self, entry: Expiring, number: int) -> None:
        """Forget ``entry`` (its call finished)."""
        slot = self._slots.get(number)
        if slot is not None and slot.entries.pop(entry, 0) is None and not slot.entries:
            del self._slots[number]
            if slot.timer is not None:
                slot.timer.cancel()

    def _expire(self, number: int) -> None:
        slot = self._slots.pop(number, None)
        if slot is not None:
            for entry in slot.entries:
                entry.timed_out()

    def __len__(self) -> int:
        return sum(len(slot.entries) for slot in self._slots.values())


_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines] = weakref.WeakKeyDictionary()
