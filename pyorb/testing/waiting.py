"""Waiting in tests for something another task, thread or process will do.

A test that needs a condition to become true polls it, bounded in time, and
fails with a message naming the condition when the bound passes: it never
hangs and never sleeps for a fixed guess.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

__all__ = ["wait_until", "wait_until_blocking"]


def _timed_out(condition: Callable[[], object], timeout: float, what: str | None) -> TimeoutError:
    name = what or getattr(condition, "__qualname__", repr(condition))
    return TimeoutError(f"{name} was still false after {timeout:g} s of polling")


async def wait_until(condition: Callable[[], object], timeout: float = 10.0, *,
                     interval: float = 0.005, what: str | None = None) -> None:
    """Return once ``condition()`` is true; raise TimeoutError if it is still false after ``timeout`` seconds.

    The condition is checked on the running loop between sleeps of ``interval``
    seconds, so other tasks run meanwhile; ``what`` names it in the error.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise _timed_out(condition, timeout, what)
        await asyncio.sleep(interval)


def wait_until_blocking(condition: Callable[[], object], timeout: float = 10.0, *,
                        interval: float = 0.05, what: str | None = None) -> None:
    """:func:`wait_until` for code without an event loop: sleeps the calling thread between checks."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise _timed_out(condition, timeout, what)
        time.sleep(interval)
