"""Reading flow control: one switch, several reasons to hold it.

A connection stops reading when any reason holds (its peer does not read
our replies, too many of its requests are in flight, the server is draining)
and reads again when the last reason is released.
"""

from __future__ import annotations

from typing import Callable


class ReadGate:
    """Calls ``pause`` when the first reason is held and ``resume`` when the last is released."""

    __slots__ = ("_reasons", "_pause", "_resume", "closed")

    def __init__(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        self._reasons: set[str] = set()
        self._pause = pause
        self._resume = resume
        self.closed = False
        """Some reason holds: read nothing (an attribute, read once per message)."""

    def hold(self, reason: str) -> None:
        if reason not in self._reasons:
            self._reasons.add(reason)
            if len(self._reasons) == 1:
                self.closed = True
                self._pause()

    def release(self, reason: str) -> None:
        if reason in self._reasons:
            self._reasons.discard(reason)
            if not self._reasons:
                self.closed = False
                self._resume()
