"""Strategies that run servant code on the event loop thread itself."""

from __future__ import annotations

import asyncio
from typing import Hashable

from pyorb.server.call.dispatch import Call, run_on_loop
from pyorb.server.call.stats import Gauges


class EventLoopStrategy:
    """Everything on the event loop thread (``reactive`` and ``amh``).

    Synchronous servant code runs inline, so it blocks the server while it
    runs (TAO's single-threaded reactive model): calls start in arrival order
    and one runs at a time.  Coroutine and AMH handlers run as tasks that
    interleave at their ``await`` points and occupy no thread while waiting.

    Nothing waits in a queue of its own here: what waits is the event loop's
    work (requests received but not yet read or dispatched, replies, timers).
    Admission control judges a call by the loop's lag
    (:class:`pyorb.server.admission.LoopLag`).
    """

    def __init__(self, name: str = "reactive") -> None:
        self.name = name
        self.stats = Gauges()

    runs_sync_inline = True
    """Synchronous servant code runs inside ``dispatch``: a connection may run it itself (``Route.inline``)."""
    judges_arrivals = "loop"
    """``dispatch`` judges every call by the loop's lag alone (``Admission.admit``): a
    connection may ask the same before it reads the arguments (``Route.admission``)."""

    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        admission = call.stats.admission
        if admission is not None and not admission.admit(call):
            return None  # shed: answered TRANSIENT
        return run_on_loop(call)

    def connection_closed(self, connection: Hashable) -> None:
        pass

    def close(self) -> None:
        pass
