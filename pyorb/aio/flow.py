"""Reading flow control: one switch, several reasons to hold it.

A connection stops reading when any reason holds (its peer does not read
our replies, too many of its requests are in flight, the server is draining)
and reads again when the last reason is released.
"""

from __future__ import annotations

from typing import Protocol


class Reader(Protocol):
    """What a :class:`ReadGate` switches: the connection that owns it."""

    def _pause_reading(self) -> None: ...

    def _resume_reading(self) -> None: ...


class ReadGate:
    """Calls ``reader._pause_reading`` when the first reason is held and
    ``reader._resume_reading`` when the last is released."""

    # One per connection, so it keeps its reader rather than two bound
    # methods, and its reasons in a tuple (almost always the shared empty one).
    __slots__ = ("_reasons", "_reader", "closed")

    def __init__(self, reader: Reader) -> None:
        self._reasons: tuple[str, ...] = ()
        self._reader = reader
        self.closed = False
        """Some reason holds: read nothing (an attribute, read once per message)."""

    def hold(self, reason: str) -> None:
        if reason not in self._reasons:
            self._reasons += (reason,)
            if len(self._reasons) == 1:
                self.closed = True
                self._reader._pause_reading()

    def release(self, reason: str) -> None:
        if reason in self._reasons:
            self._reasons = tuple(r for r in self._reasons if r != reason)
            if not self._reasons:
                self.closed = False
                self._reader._resume_reading()
