"""Strategies that run servant code on the event loop thread itself."""

from __future__ import annotations

from typing import Hashable

from pyorb.server.dispatch import run_on_loop
from pyorb.server.stats import Gauges


class EventLoopStrategy:
    """Everything on the event loop thread (``reactive`` and ``amh``).

    Synchronous servant code runs inline, so it blocks the server while it
    runs (TAO's single-threaded reactive model): calls start in arrival order
    and one runs at a time.  Coroutine and AMH handlers run as tasks that
    interleave at their ``await`` points and occupy no thread while waiting.
    """

    def __init__(self, name: str = "reactive") -> None:
        self.name = name
        self.stats = Gauges()

    runs_sync_inline = True
    """Synchronous servant code runs inside ``dispatch``: a connection may run it itself (``Route.inline``)."""

    dispatch = staticmethod(run_on_loop)  # no extra call layer on the hot path

    def connection_closed(self, connection: Hashable) -> None:
        pass

    def close(self) -> None:
        pass
