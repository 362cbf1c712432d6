"""Dispatch: running servant code for a decoded call and replying.

A strategy sees only a :class:`Call` (servant, operation, arguments and a
reply sink).  It knows nothing of sockets or GIOP, so thread-based strategies
can replace :class:`EventLoopStrategy` without touching the connection code.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Coroutine, Protocol

from omniORB import CORBA

from pyorb.giop.messages import Version
from pyorb.server.reply import Channel, ReplySink
from pyorb.server.servant import OpEntry, ResponseHandler, Style

log = logging.getLogger(__name__)


class Call(ReplySink):
    """One decoded request on its way to servant code, and its way back.

    It is its own reply sink (``result``/``exception``), so a request costs
    one object.  ``connection`` identifies the client connection, for
    per-connection strategies; strategies never touch it otherwise.
    """

    __slots__ = ("servant", "entry", "args", "connection")

    def __init__(
        self,
        servant: Any,
        entry: OpEntry,
        args: tuple[Any, ...],
        request_id: int,
        version: Version,
        little_endian: bool,
        response_expected: bool,
        channel: Channel,
    ) -> None:
        # ReplySink's fields are set here directly: this runs for every request.
        self.request_id = request_id
        self.version = version
        self.little_endian = little_endian
        self.op = entry.op
        self.response_expected = response_expected
        self.channel = channel
        self.done = False
        self.on_sent = None
        self.servant = servant
        self.entry = entry
        self.args = args
        self.connection = channel


class Strategy(Protocol):
    """Takes calls and makes sure each one is answered (``call.result`` or ``call.exception``)."""

    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        """Start ``call``; return the task running it, if it runs as one."""

    def close(self) -> None:
        """Release threads or other resources (the server is shutting down)."""


def _fail(call: Call, exc: BaseException) -> None:
    if not isinstance(exc, CORBA.Exception) or (
        isinstance(exc, CORBA.UserException) and exc._NP_RepositoryId not in call.entry.op.exceptions
    ):
        log.error("servant %s.%s raised an undeclared exception; the client gets CORBA.UNKNOWN",
                  type(call.servant).__name__, call.entry.op.name, exc_info=exc)
    if call.done:
        log.error("servant %s.%s raised after it had replied", type(call.servant).__name__, call.entry.op.name,
                  exc_info=exc)
        return
    call.exception(exc)


def run_sync(call: Call) -> None:
    """Run a synchronous servant method in the current thread and reply."""
    try:
        result = getattr(call.servant, call.entry.attr)(*call.args)
    except Exception as exc:
        _fail(call, exc)
        return
    call.result(result)


async def _run_coroutine(call: Call, coro: Coroutine[Any, Any, Any]) -> None:
    try:
        result = await coro
    except asyncio.CancelledError:
        call.done = True  # the client cancelled: it wants no reply
        raise
    except Exception as exc:
        _fail(call, exc)
        return
    call.result(result)


async def _run_amh(call: Call, coro: Coroutine[Any, Any, Any]) -> None:
    try:
        await coro
    except asyncio.CancelledError:
        call.done = True  # the client cancelled: it wants no reply
        raise
    except Exception as exc:
        _fail(call, exc)


def start_amh(call: Call) -> Coroutine[Any, Any, Any] | None:
    """Call an AMH method; return its coroutine if it has to keep running."""
    handler_cls = getattr(type(call.servant), "_pyorb_handler", ResponseHandler)
    rh = handler_cls(call)
    try:
        outcome = getattr(call.servant, call.entry.attr)(rh, *call.args)
    except Exception as exc:
        _fail(call, exc)
        return None
    del rh  # the servant (or its coroutine) owns the handler now
    return outcome if asyncio.iscoroutine(outcome) else None


class EventLoopStrategy:
    """Everything on the event loop thread: coroutine and AMH handlers as
    tasks, synchronous servant code inline (so it blocks the loop while it
    runs: the reactive model).  Requests of one connection run concurrently.
    """

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()

    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        style = call.entry.style
        if style is Style.SYNC:
            run_sync(call)
            return None
        if style is Style.COROUTINE:
            try:
                coro = getattr(call.servant, call.entry.attr)(*call.args)
            except Exception as exc:
                _fail(call, exc)
                return None
            return self.loop.create_task(_run_coroutine(call, coro))
        coro = start_amh(call)
        return None if coro is None else self.loop.create_task(_run_amh(call, coro))

    def close(self) -> None:
        pass
