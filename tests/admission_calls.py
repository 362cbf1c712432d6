"""A stand-in for a queued call, for the tests of admission control (its rule alone, and its compiled twin)."""

from __future__ import annotations

from typing import Any


class QueuedCall:
    """What admission control reads and writes of a queued call."""

    def __init__(self, loop: Any, now: float, connection: object = None) -> None:
        self.channel = type("Channel", (), {"loop": loop})()
        self.connection = connection
        self.queued_at = now
        self.started_at = 0.0
        self.done = False
        self.refused: str | None = None

    def exception(self, exc: BaseException, detail: str | None = None) -> None:
        self.done, self.refused = True, detail
