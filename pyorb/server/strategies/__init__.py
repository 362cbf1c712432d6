"""Dispatch strategies, chosen by name from a registry.

A spec is a name with optional arguments, as written in configuration:
``"reactive"``, ``"amh"``, ``"thread_pool(8)"``, ``"thread_per_request"``,
``"thread_per_request(64)"``, ``"thread_per_connection"``, ``"threaded"``,
``"locality(4, threshold=2, wait=0.001)"``, ``"adaptive(max_threads=32, window=0.1)"``.
:func:`register` adds a name.

=========================  =================================================
strategy                   what it guarantees
=========================  =================================================
``reactive``, ``amh``      synchronous servant code inline on the loop
                           thread, one call at a time in arrival order;
                           coroutine/AMH handlers as tasks, no thread held
                           while they wait
``thread_pool(n)``         at most n calls at once, started in FIFO order
``thread_per_request[(m)]``  a new thread per call; calls of one connection
                           overlap; with m (or out of threads), the rest
                           wait per connection, started round-robin
``thread_per_connection``  per connection one at a time, in order;
                           connections concurrent
``threaded``               one call at a time server-wide; per connection
                           in order
``locality(n, ...)``       at most n at once; per connection one at a time,
                           in order, back to back on one worker
``adaptive(...)``          per operation, inline or on a pool the queueing
                           model recommends, moved at run time; each call
                           answered once across moves; one connection's
                           calls to one operation start in arrival order
                           (they overlap on a pool, as in thread_pool);
                           at most max_threads threads per pool
=========================  =================================================

In every strategy, ``async def`` methods run as tasks on the event loop.
Admission control (:mod:`pyorb.server.admission`) refuses calls that would
wait too long, in every strategy.
"""

from __future__ import annotations

import ast
import inspect
from typing import Callable, Hashable, Iterator

from pyorb.server.call.dispatch import Strategy
from pyorb.server.strategies.adaptive import AdaptiveStrategy
from pyorb.server.strategies.locality import LocalityStrategy
from pyorb.server.strategies.loop import EventLoopStrategy
from pyorb.server.strategies.threads import (
    ThreadedStrategy,
    ThreadPerConnectionStrategy,
    ThreadPerRequestStrategy,
    ThreadPoolStrategy,
)

__all__ = [
    "AdaptiveStrategy", "EventLoopStrategy", "LocalityStrategy", "Strategy", "StrategyRegistry",
    "ThreadPerConnectionStrategy", "ThreadPerRequestStrategy", "ThreadPoolStrategy", "ThreadedStrategy", "create",
    "names", "parse", "register",
]

Factory = Callable[..., Strategy]


def _reactive() -> Strategy:
    return EventLoopStrategy("reactive")


def _amh() -> Strategy:
    return EventLoopStrategy("amh")


def _thread_per_connection() -> Strategy:
    return ThreadPerConnectionStrategy()


def _adaptive(max_threads: int = 32, window: float = 0.1, hold: int = 2, gain: float = 0.1) -> Strategy:
    # Its delegates are its own (create, not a registry): they serve only the operations it moves.
    return AdaptiveStrategy(max_threads, window, hold, gain, create=create)


_FACTORIES: dict[str, Factory] = {
    "reactive": _reactive,
    "amh": _amh,
    "thread_pool": ThreadPoolStrategy,
    "thread_per_request": ThreadPerRequestStrategy,
    "thread_per_connection": _thread_per_connection,
    "threaded": ThreadedStrategy,
    "locality": LocalityStrategy,
    "adaptive": _adaptive,
}


def register(name: str, factory: Factory) -> None:
    """Make ``factory`` available as strategy ``name`` (its arguments come from the spec)."""
    if not name.isidentifier():
        raise ValueError(f"strategy name must be an identifier, got {name!r}")
    _FACTORIES[name] = factory


def names() -> list[str]:
    """The registered strategies with their parameters, e.g. ``thread_pool(n)``."""
    out = []
    for name, factory in _FACTORIES.items():
        params = inspect.signature(factory).parameters
        out.append(name + (f"({', '.join(params)})" if params else ""))
    return out


def parse(spec: str) -> tuple[str, inspect.BoundArguments]:
    """Split ``"thread_pool(8)"`` into its name and arguments bound to the factory.

    Raises ValueError with a one-line message for an unknown name or bad arguments.
    """
    try:
        node = ast.parse(spec.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"malformed strategy {spec!r}; expected e.g. 'thread_pool(8)'") from None
    if isinstance(node, ast.Name):
        name, args, kwargs = node.id, [], {}
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        try:
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
        except ValueError:
            raise ValueError(f"strategy arguments must be literals in {spec!r}") from None
    else:
        raise ValueError(f"malformed strategy {spec!r}; expected e.g. 'thread_pool(8)'")
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(names())}")
    try:
        bound = inspect.signature(factory).bind(*args, **kwargs)
    except TypeError as exc:
        raise ValueError(f"bad arguments for strategy {name!r}: {exc}") from None
    bound.apply_defaults()
    return name, bound


def create(spec: str) -> Strategy:
    """A new strategy from its spec (ValueError if the spec or its values are bad)."""
    name, bound = parse(spec)
    return _FACTORIES[name](*bound.args, **bound.kwargs)


def _canonical(name: str, bound: inspect.BoundArguments) -> str:
    values = ", ".join(repr(v) for v in bound.arguments.values())
    return f"{name}({values})" if values else name


class StrategyRegistry:
    """A server's strategies: one instance per distinct spec, so servants
    naming the same spec (``"thread_pool(8)"``) share one pool."""

    def __init__(self) -> None:
        self._by_spec: dict[str, Strategy] = {}
        self._all: list[Strategy] = []

    def get(self, spec: str | Strategy) -> Strategy:
        if not isinstance(spec, str):
            if spec not in self._all:
                self._all.append(spec)
            return spec
        name, bound = parse(spec)
        key = _canonical(name, bound)
        strategy = self._by_spec.get(key)
        if strategy is None:
            strategy = self._by_spec[key] = _FACTORIES[name](*bound.args, **bound.kwargs)
            self._all.append(strategy)
        return strategy

    def __iter__(self) -> Iterator[Strategy]:
        return iter(list(self._all))

    def connection_closed(self, connection: Hashable) -> None:
        for strategy in self._all:
            strategy.connection_closed(connection)

    def connection_resumed(self, connection: Hashable) -> None:
        """The connection's client reads its replies again (optional ``connection_resumed`` of a strategy)."""
        for strategy in self._all:
            resumed = getattr(strategy, "connection_resumed", None)
            if resumed is not None:
                resumed(connection)

    def close(self) -> None:
        for strategy in self._all:
            strategy.close()
