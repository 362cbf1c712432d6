"""Shared fixtures: every asyncio test runs on both asyncio's loop and uvloop."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Mapping

import pytest


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
