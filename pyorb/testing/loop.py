"""Helpers for synchronous code (tests, scripts) that drives pyorb.

:class:`LoopThread` runs an event loop (uvloop when available) in a
background thread; :class:`SyncProxy` makes a pyorb proxy callable from
blocking code through it.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Any, Awaitable, Callable, Coroutine, TypeVar, cast

from pyorb.client.proxy import ObjectRef

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed, asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return cast(asyncio.AbstractEventLoop, uvloop.new_event_loop())


class LoopThread:
    """An event loop in a daemon thread; ``run`` executes a coroutine on it."""

    def __init__(self, loop_factory: Callable[[], asyncio.AbstractEventLoop] = new_event_loop) -> None:
        self.loop = loop_factory()
        self._thread = threading.Thread(target=self.loop.run_forever, name="pyorb-loop", daemon=True)

    def start(self) -> LoopThread:
        self._thread.start()
        return self

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60.0) -> T:
        """Run ``coro`` on the loop and wait (at most ``timeout`` s) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()

    def __enter__(self) -> LoopThread:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


async def _call(method: Callable[..., Awaitable[T]], *args: Any) -> T:
    return await method(*args)  # the call itself must start on the loop thread


class SyncProxy:
    """A blocking view of a pyorb proxy: ``SyncProxy(proxy, loop).op(args)``.

    Results that are proxies come back wrapped; wrapped proxies passed as
    arguments are unwrapped, so blocking test code reads like omniORBpy code.
    """

    def __init__(self, proxy: ObjectRef, runner: LoopThread, timeout: float = 30.0) -> None:
        self._proxy = proxy
        self._runner = runner
        self._timeout = timeout

    @property
    def proxy(self) -> ObjectRef:
        return self._proxy

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._proxy, name)

        def call(*args: Any) -> Any:
            plain = tuple(_unwrap(a) for a in args)
            result = self._runner.run(_call(method, *plain), self._timeout)
            return self._wrap(result)

        return call

    def _narrow(self, interface: type) -> SyncProxy | None:
        """Like omniORB's ``_narrow``: a remote ``_is_a``, None if it fails."""
        repo_id = interface._NP_RepositoryId  # type: ignore[attr-defined]
        if not self._runner.run(_call(self._proxy._is_a, repo_id), self._timeout):
            return None
        return SyncProxy(self._proxy._narrow(interface), self._runner, self._timeout)

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, ObjectRef):
            return SyncProxy(value, self._runner, self._timeout)
        if isinstance(value, list):
            return [self._wrap(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._wrap(v) for v in value)
        return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, SyncProxy):
        return value.proxy
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value
