"""The client's deadline slots behind one loop timer: calls that finish in
time arm no timer of their own, and an earlier deadline still fires on time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyorb.client.deadlines import RESOLUTION, Deadlines
from pyorb.testing.waiting import wait_until


class Arming:
    """The running loop, with every timer asked of it noted (its time)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.armed: list[float] = []

    def time(self) -> float:
        return self.loop.time()

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> asyncio.TimerHandle:
        self.armed.append(when)
        return self.loop.call_at(when, callback, *args, context=context)


class Entry:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.at: float | None = None

    def timed_out(self) -> None:
        self.at = self.loop.time()


@pytest.mark.asyncio
async def test_calls_finishing_in_time_share_one_timer_and_an_earlier_deadline_still_fires_on_time() -> None:
    loop = asyncio.get_running_loop()
    arming = Arming(loop)
    deadlines = Deadlines()
    # A sequential caller: each call's deadline a slot later than the last, each finished in time.
    for i in range(200):
        entry = Entry(loop)
        deadlines.remove(entry, deadlines.add(entry, 30.0 + i * RESOLUTION, arming))  # type: ignore[arg-type]
        assert entry.at is None
    assert len(arming.armed) == 1 and len(deadlines) == 0
    late, soon = Entry(loop), Entry(loop)
    late_slot = deadlines.add(late, 20.0, arming)  # type: ignore[arg-type]
    added = loop.time()
    deadlines.add(soon, 0.05, arming)  # type: ignore[arg-type]
    await wait_until(lambda: soon.at is not None, timeout=30)
    assert soon.at is not None and soon.at >= added + 0.05 - 0.001  # never early (uvloop counts whole ms)
    assert late.at is None and len(deadlines) == 1
    deadlines.remove(late, late_slot)
    assert len(deadlines) == 0
