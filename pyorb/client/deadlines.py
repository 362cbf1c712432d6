"""Call timeouts grouped by deadline, behind one lazily re-armed loop timer.

A loop timer created and cancelled for every call would cost a sequential
caller more than the rest of its call's bookkeeping together.  Deadlines
are rounded up to the next multiple of :data:`RESOLUTION` (a *slot*), so a
timeout fires at most that much late, never early.  All clients on one
event loop share its slots (a load generator runs thousands of clients with
one call each).

One timer per loop stands for the earliest slot, as gRPC's and Netty's
deadline timers do: a new slot re-arms it only if it is earlier than the
armed one, and a finished call only leaves its slot (the timer stays).
When the timer fires it times out the calls of every slot that is due and
arms itself for the earliest slot left, if any: so a call that finishes in
time costs a dictionary entry, and the timer outlives the last call by at
most the timeout of the call it was armed for.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import weakref
from typing import Protocol

RESOLUTION = 0.005  # seconds: the most a timeout may fire late

# The timer serves every call on its loop: it runs in a context of its own, so it
# does not keep alive (for up to a timeout) the context of the caller that armed it,
# such as the request a servant was serving when it called onwards.
_TIMER_CONTEXT = contextvars.Context()


class Expiring(Protocol):
    def timed_out(self) -> None: ...


class Deadlines:
    """The timeouts of one event loop's calls, bucketed by rounded-up deadline."""

    # No reference to the loop: the loop is the key of the weak map that holds these.
    __slots__ = ("_slots", "_timer", "_armed")

    def __init__(self) -> None:
        self._slots: dict[int, dict[Expiring, None]] = {}  # slot number -> its calls (a dict as an ordered set)
        self._timer: asyncio.TimerHandle | None = None
        self._armed = 0  # the slot number the timer fires for

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
            slot = self._slots[number] = {}
            if self._timer is None or number < self._armed:
                self._arm(number, loop)
        slot[entry] = None
        return number

    @staticmethod
    def time_left(number: int, loop: asyncio.AbstractEventLoop) -> float:
        """Seconds until slot ``number`` (from :meth:`add`) expires on ``loop``."""
        return number * RESOLUTION - loop.time()

    def remove(self, entry: Expiring, number: int) -> None:
        """Forget ``entry`` (its call finished)."""
        slot = self._slots.get(number)
        if slot is not None and slot.pop(entry, 0) is None and not slot:
            del self._slots[number]

    def _arm(self, number: int, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed = number
        self._timer = loop.call_at(number * RESOLUTION, self._fire, loop, context=_TIMER_CONTEXT)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        # The armed slot is due whatever the clock says (a loop may run a timer a
        # clock tick early), and so is every slot whose time has come since.
        due = max(self._armed, math.floor(loop.time() / RESOLUTION))
        slots = self._slots
        numbers = sorted(number for number in slots if number <= due)
        for number in numbers:
            for entry in slots.pop(number, ()):  # gone if a timed-out call's outcome ended all its calls
                entry.timed_out()
        if slots and self._timer is None:  # a call timed out above may have added a slot, and armed for it
            self._arm(min(slots), loop)

    def __len__(self) -> int:
        return sum(len(slot) for slot in self._slots.values())


_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines] = weakref.WeakKeyDictionary()
