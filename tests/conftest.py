"""Shared fixtures: every asyncio test runs on both asyncio's loop and uvloop.

Test modules that open sockets or start processes are marked ``integration``
(``interop`` tests are, too, by :func:`pytest_collection_modifyitems`), so
``pytest -m "not integration"`` is the fast unit run.  With
``PYORB_UNIT_GUARD=1`` every test not marked ``integration`` fails if it
makes an IP socket or starts a process other than omniidl (see
:func:`unit_guard`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from typing import Any, AsyncIterator, Callable, Iterator, Mapping

import pytest
import pytest_asyncio

import pyorb


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("interop") and not item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def unit_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Under ``PYORB_UNIT_GUARD=1``, a test not marked ``integration`` that makes an
    IP socket or starts a process fails: the check that the unit run is one.

    It sees what Python code does during the test itself: uvloop's sockets
    (made in C) and module- or session-scoped fixtures set up before it are
    out of its sight, so run the unit subset with it on asyncio's loop too
    (every asyncio test runs on both).
    """
    if os.environ.get("PYORB_UNIT_GUARD") != "1" or request.node.get_closest_marker("integration"):
        yield
        return
    tried: list[str] = []
    real_socket = socket.socket

    class GuardedSocket(real_socket):  # type: ignore[misc, valid-type]
        def __init__(self, family: int = -1, *args: Any, **kwargs: Any) -> None:
            if family in (socket.AF_INET, socket.AF_INET6, -1):  # the loop's self-pipe (AF_UNIX) may be made
                tried.append(f"socket.socket({family}, ...)")
                raise OSError(f"unit_guard: {request.node.nodeid} is not marked integration but makes an IP socket")
            super().__init__(family, *args, **kwargs)

    real_popen_init = subprocess.Popen.__init__

    def no_process(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        # load_idl compiles an IDL file with omniidl once per process, in whichever test asks first.
        if any("omniidl" in str(arg) for arg in (args if isinstance(args, (list, tuple)) else [args])):
            real_popen_init(self, args, *rest, **kwargs)
            return
        tried.append(f"subprocess.Popen({args!r})")
        raise OSError(f"unit_guard: {request.node.nodeid} is not marked integration but starts a process")

    monkeypatch.setattr(socket, "socket", GuardedSocket)
    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    yield
    assert not tried, f"{request.node.nodeid} is not marked integration but tried: {tried}"


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
