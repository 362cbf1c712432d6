"""Shared fixtures: every asyncio test runs on both asyncio's loop and uvloop."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Mapping

import pytest
import pytest_asyncio

import pyorb


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Callable[[], Any]]:
    factories: dict[str, Callable[[], Any]] = {"asyncio": asyncio.new_event_loop}
    if item.get_closest_marker("client_loop_only"):
        return factories  # the code under test runs in other processes
    try:
        import uvloop
    except ImportError:  # uvloop is optional (not on Windows)
        return factories
    factories["uvloop"] = uvloop.new_event_loop
    return factories


@pytest_asyncio.fixture
async def clients() -> AsyncIterator[Callable[..., list[pyorb.Client]]]:
    """``clients(n, **config)``: n pyorb Clients (each its own connections) on the test's loop, closed after it."""
    made: list[pyorb.Client] = []

    def make(n: int, **config: Any) -> list[pyorb.Client]:
        new = [pyorb.Client(pyorb.Config(**config)) for _ in range(n)]
        made.extend(new)
        return new

    yield make
    await asyncio.gather(*(c.close() for c in made))
