"""Dispatch: one decoded call on its way to servant code, and the strategy interface.

A strategy sees only a :class:`Call` (servant, operation, arguments and a
reply sink).  It knows nothing of sockets or GIOP; ``call.connection`` is an
opaque key for per-connection strategies.  The strategies themselves live in
:mod:`pyorb.server.strategies`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Hashable, Protocol

from omniORB import CORBA

from pyorb.giop.messages import GIOP_1_2, Version
from pyorb.request_context import SERVING, serve_in_frame
from pyorb.server.call.reply import _TAKE, Channel, ReplySink, plain_reply_12
from pyorb.server.call.servant import OpEntry, ResponseHandler, Style
from pyorb.server.call.stats import Gauges, Recorder

if TYPE_CHECKING:
    from pyorb.interceptors import ServerRequestInfo

log = logging.getLogger(__name__)

# Per-call tests read these globals: an enum member read off its class costs
# several times more in CPython 3.11 (the enum metaclass's attribute lookup).
_SYNC, _COROUTINE, _AMH = Style.SYNC, Style.COROUTINE, Style.AMH
_serve, _served = SERVING.set, SERVING.reset  # around servant code: pyorb.current() and deadline propagation


class Call(ReplySink):
    """One request: the servant to run, and its own reply sink (one object per request).

    It records its wait (queued until servant code starts) and service time
    (servant code start until the reply is decided) in the :class:`Recorder`
    of its operation under its strategy (which the connection counted as
    started when it made the call).

    ``deadline`` (``time.monotonic()`` seconds, or None) is the tighter of
    the client's timeout and the operation's deadline on the server: a call
    that reaches a thread or the servant after it is not started
    (:meth:`expired_unstarted`).  While servant code runs, the call is
    :data:`pyorb.request_context.SERVING` (``pyorb.current()`` reads it),
    except a plain synchronous method's call without a deadline: setting
    the variable would cost such a call more than a tenth of its
    instructions, so ``current()`` finds it in ``run_sync``'s or
    ``run_blocking``'s frame instead (:func:`~pyorb.request_context.serve_in_frame`).
    """

    __slots__ = ("servant", "entry", "args", "connection", "stats", "queued_at", "started_at", "coro", "timer",
                 "context", "object_key", "deadline")
    coro: Coroutine[Any, Any, Any]  # set only when it runs as a task on the loop

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
        stats: Recorder,
        object_key: bytes = b"",
        deadline: float | None = None,
    ) -> None:
        # ReplySink.__init__, without its frame (one Call per request)
        self.request_id = request_id
        self.version = version
        self.little_endian = little_endian
        self.op = entry.op
        self.response_expected = response_expected
        self.channel = channel
        self.done = self.expired = False
        self.on_sent: Callable[[], None] | None = None
        self.intercepted: ServerRequestInfo | None = None
        self.servant = servant
        self.entry = entry
        self.args = args
        self.connection: Hashable = channel  # type: ignore[assignment]  # connections hash by identity
        self.stats = stats
        self.timer: asyncio.TimerHandle | None = None  # the deadline's, cancelled when the call settles
        self.context: contextvars.Context | None = None  # set by server interceptors: servant code runs in it
        self.object_key = object_key
        self.deadline = deadline
        self.queued_at = self.started_at = perf_counter()

    @property
    def operation(self) -> str:
        """The operation's name on the wire (for :func:`pyorb.current`)."""
        return self.op.name

    def begin(self) -> None:
        """Servant code starts now (the end of the queue wait)."""
        self.started_at = perf_counter()

    def cancelled(self) -> None:
        """The client cancelled the request, or it was never run: no reply (any thread).
        Servant code that still replies later (it had started) is dropped quietly."""
        with _TAKE:
            taken = not self.done
            self.done = self.expired = True
        if taken:
            self._finished(False)
            if self.intercepted is not None:
                self._intercepted_outcome(asyncio.CancelledError())
            self._settle()
        self._undelivered()

    def expired_unstarted(self, late: float) -> None:
        """Its deadline passed ``late`` seconds before servant code could start: it
        never starts.  The client gets TIMEOUT, completed NO (if it still waits:
        when the deadline was its own, it has given up and sent CancelRequest)."""
        why = f"{self.op.name} request {self.request_id} expired {late * 1e3:.1f} ms before it started; not run"
        if self.expire(CORBA.TIMEOUT(0, CORBA.COMPLETED_NO, why), why):
            log.debug("%s", why)
            with self.stats.lock:
                self.stats.expired += 1

    def abandon(self) -> None:
        """Its task was cancelled before it ever ran, so the task's own
        ``except CancelledError`` never saw it: end the call here."""
        coro = getattr(self, "coro", None)  # set only for calls run as tasks
        if coro is not None:
            coro.close()  # never started: closing it keeps it from warning "never awaited"
        self.cancelled()

    def _finished(self, failed: bool) -> None:
        started = self.started_at
        self.stats.finish(started - self.queued_at, perf_counter() - started, failed)

    def _settled(self) -> None:
        timer = self.timer
        if timer is not None:  # the reply beat the deadline: nothing keeps the call alive
            timer.cancel()
            self.timer = None
        self.channel.request_finished(self.request_id)

    def _undelivered(self) -> None:
        with self.stats.lock:
            self.stats.dropped += 1


class ManagedCall(Call):
    """A call a default servant or servant manager serves: servant code reads
    ``object_id`` (:func:`pyorb.current_object_id`); ``after`` (a servant
    locator's postinvoke, given the call and its ``cookie``) runs on the loop
    thread once the call is settled."""

    __slots__ = ("object_id", "after", "cookie")
    object_id: bytes
    after: Callable[[ManagedCall], None] | None
    cookie: Any

    def _settled(self) -> None:
        Call._settled(self)
        after = self.after
        if after is not None:
            after(self)


class Strategy(Protocol):
    """Takes calls and makes sure each one is answered (``call.result`` or ``call.exception``).

    ``name`` is the registry spec it was made from (e.g. ``"thread_pool(8)"``);
    ``stats`` holds its ``queued``/``threads`` gauges.
    """

    name: str
    stats: Gauges

    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        """Start ``call``; return the task running it, if it runs as one on the loop."""

    def connection_closed(self, connection: Hashable) -> None:
        """A client connection is gone: release what was kept for it."""

    def close(self) -> None:
        """Release threads or other resources (the server is shutting down)."""


def servant_raised(call: Call, exc: BaseException) -> None:
    """Answer ``call`` with what its servant raised (UNKNOWN, logged, for an undeclared exception)."""
    if not isinstance(exc, CORBA.Exception) or (
        isinstance(exc, CORBA.UserException) and exc._NP_RepositoryId not in call.entry.op.exceptions
    ):
        log.error("servant %s.%s raised an undeclared exception; the client gets CORBA.UNKNOWN",
                  type(call.servant).__name__, call.entry.op.name, exc_info=exc)
    if call.done:
        if not call.expired:  # after its deadline the outcome is dropped quietly (the client has TIMEOUT)
            log.error("servant %s.%s raised after it had replied", type(call.servant).__name__, call.entry.op.name,
                      exc_info=exc)
        return
    call.exception(exc)


def run_sync(call: Call) -> None:
    """Run a synchronous servant method in the current thread and reply."""
    call.started_at = perf_counter()  # Call.begin, without its frame
    token = _serve(call) if call.deadline is not None else None  # without one, current() finds this frame
    try:
        result = getattr(call.servant, call.entry.attr)(*call.args)
    except Exception as exc:
        servant_raised(call, exc)
        return
    finally:
        if token is not None:
            _served(token)
    call.result(result)


def _expired(call: Call, deadline: float) -> bool:
    """True (and the call answered) if ``deadline``, the call's, has passed."""
    late = monotonic() - deadline
    if late < 0:
        return False
    call.expired_unstarted(late)
    return True


def run_blocking(call: Call) -> None:
    """Run a call's synchronous servant code (plain or AMH) in the current thread.

    The common case, a plain servant's GIOP 1.2 reply that marshals within the
    size limit, is made here in one frame: what ``run_sync`` and
    ``ReplySink.result`` do, without their frames; this thread writes it to
    the socket itself if the connection's output is idle and no batch of
    replies is on its way to the loop.  Any other outcome
    goes to the call's general methods, which own the error replies and
    logging."""
    if call.done:  # cancelled (CancelRequest) while it waited for a thread: never run
        return
    deadline = call.deadline
    if deadline is not None and _expired(call, deadline):
        return
    context = call.context
    if context is not None:  # what the server's interceptors set, on this thread too
        call.context = None
        context.run(_run_blocking, call)
        return
    entry = call.entry
    if entry.style is not _SYNC:
        _run_blocking(call)
        return
    call.started_at = started = perf_counter()
    token = _serve(call) if deadline is not None else None  # without one, current() finds this frame
    try:
        value = getattr(call.servant, entry.attr)(*call.args)
    except Exception as exc:
        servant_raised(call, exc)
        return
    finally:
        if token is not None:
            _served(token)
    if call.version != GIOP_1_2 or not call.response_expected:
        call.result(value)
        return
    channel = call.channel
    data = plain_reply_12(entry.op, value, call.request_id, call.little_endian, channel.core, channel.max_message_size)
    if data is None:
        call.result(value)
        return
    with _TAKE:  # ReplySink._take, without its frame
        taken = not call.done
        call.done = True
    if not taken:  # cancelled while it ran: dropped quietly
        call._late()
        return
    call.stats.finish(started - call.queued_at, perf_counter() - started, False)
    channel.inbox.deliver(call, data)


def _run_blocking(call: Call) -> None:
    if call.entry.style is _AMH:
        call.begin()
        token = _serve(call)
        try:
            coro = start_amh(call)
            if coro is not None:  # a plain def that returned a coroutine: it needs the loop (and this context)
                call.channel.loop.call_soon_threadsafe(_create_task, call, _run_amh(call, coro))
        finally:
            _served(token)
        return
    run_sync(call)


def _create_task(call: Call, coro: Coroutine[Any, Any, None]) -> None:
    call.channel.loop.create_task(coro)


async def _run_coroutine(call: Call, coro: Coroutine[Any, Any, Any]) -> None:
    try:
        result = await coro
    except asyncio.CancelledError:
        call.cancelled()  # the client cancelled: it wants no reply
        raise
    except Exception as exc:
        servant_raised(call, exc)
        return
    call.result(result)


async def _run_amh(call: Call, coro: Coroutine[Any, Any, Any]) -> None:
    try:
        await coro
    except asyncio.CancelledError:
        call.cancelled()  # the client cancelled: it wants no reply
        raise
    except Exception as exc:
        servant_raised(call, exc)


def start_amh(call: Call) -> Coroutine[Any, Any, Any] | None:
    """Call an AMH method; return its coroutine if it has to keep running."""
    handler_cls = getattr(type(call.servant), "_pyorb_handler", ResponseHandler)
    rh = handler_cls(call)
    try:
        outcome = getattr(call.servant, call.entry.attr)(rh, *call.args)
    except Exception as exc:
        servant_raised(call, exc)
        return None
    del rh  # the servant (or its coroutine) owns the handler now
    return outcome if asyncio.iscoroutine(outcome) else None


def run_on_loop(call: Call) -> asyncio.Task[None] | None:
    """Run ``call`` on the event loop thread (the caller's): inline if its
    code is synchronous, as a task if it is a coroutine or keeps running."""
    deadline = call.deadline
    if deadline is not None and _expired(call, deadline):
        return None
    style = call.entry.style
    if style is _SYNC:
        run_sync(call)
        return None
    token = _serve(call)  # the task copies the context it is made in
    try:
        if style is _COROUTINE:
            try:
                coro = getattr(call.servant, call.entry.attr)(*call.args)
            except Exception as exc:
                servant_raised(call, exc)
                return None
            call.coro = coro
            return call.channel.loop.create_task(_run_coroutine(call, coro))
        coro = start_amh(call)
        if coro is None:
            return None
        call.coro = coro
        return call.channel.loop.create_task(_run_amh(call, coro))
    finally:
        _served(token)


for _runner in (run_sync, run_blocking):  # the frames plain synchronous servant code runs under
    serve_in_frame(_runner.__code__, "call")
