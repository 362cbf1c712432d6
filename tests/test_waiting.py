"""pyorb.testing.wait_until: a condition polled with a time bound, never a hang."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pyorb.testing import wait_until, wait_until_blocking


@pytest.mark.asyncio
async def test_returns_once_another_task_makes_the_condition_true() -> None:
    done: list[int] = []
    asyncio.get_running_loop().call_later(0.05, done.append, 1)
    await wait_until(lambda: done, 10.0)
    assert done == [1]


@pytest.mark.asyncio
async def test_a_condition_still_false_fails_naming_it_after_the_bound() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="the queue drained was still false after 0.1 s"):
        await wait_until(lambda: False, 0.1, what="the queue drained")
    assert time.monotonic() - started >= 0.1


def test_the_blocking_form_waits_for_another_thread_and_names_the_function() -> None:
    flag = threading.Event()
    threading.Timer(0.05, flag.set).start()
    wait_until_blocking(flag.is_set, 10.0)

    def never() -> bool:
        return False

    with pytest.raises(TimeoutError, match="never was still false"):
        wait_until_blocking(never, 0.1)
