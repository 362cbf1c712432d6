"""Turning a servant's outcome into a GIOP Reply for one request."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from threading import Lock, get_ident
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

import omniORB
from omniORB import CORBA

from pyorb import _accelerator, marshal
from pyorb.giop.connection import GIOPConnection
from pyorb.giop.detail import exception_detail_context
from pyorb.giop.messages import GIOP_1_1, GIOP_1_2, ReplyStatus, ServiceContext, Version

if TYPE_CHECKING:
    from pyorb.interceptors import ServerInterceptor, ServerRequestInfo
    from pyorb.marshal import Operation

log = logging.getLogger(__name__)

# One lock for every sink's outcome and every connection's count of unsent
# replies: it is held only for a test-and-set or an addition, so sharing it
# costs little, and a reply made on a thread takes it once for both.
_TAKE = Lock()


class ReplyInbox:
    """Replies made on dispatcher threads, handed to the loop thread in batches
    (or, for a reply the thread wrote itself, the call to settle).

    One per event loop.  A thread appends and wakes the loop only if no
    wake-up is pending, so under load many replies cost one wake-up (a
    write to the loop's self-pipe and a context switch) instead of one each.
    """

    __slots__ = ("loop", "_items", "_scheduled", "carrying")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._items: deque[tuple[ReplySink, bytes | None]] = deque()
        self._scheduled = False  # a drain is on its way to the loop: a put joins it, with no wake-up of its own
        self.carrying = False
        """A drain is on its way to the loop and has replies to write, not only calls to settle: a reply
        made now joins its batch (one write on the loop) rather than being
        written alone by its thread."""

    def put(self, sink: ReplySink, data: bytes | None) -> None:
        """Queue ``data`` (None: nothing to send, only settle) from any thread."""
        if data is not None:
            # Counted as it is made: a pool that makes replies faster than the
            # loop queues them sees a client that does not read in time.
            channel = sink.channel
            with _TAKE:
                channel.unsent += len(data)
        self.add(sink, data)

    def add(self, sink: ReplySink, data: bytes | None) -> None:
        """:meth:`put` for ``data`` already counted in ``sink.channel.unsent`` (under ``_TAKE``)."""
        self._items.append((sink, data))
        if data is not None:
            self.carrying = True
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: the clients are gone anyway
                self._scheduled = self.carrying = False
                self._items.clear()
                sink._undelivered()

    def deliver(self, sink: ReplySink, data: bytes) -> None:
        """From a dispatcher thread: get ``data``, the reply of ``sink``, to its client.

        The thread writes it itself (``Channel.write_from_thread``) unless a
        batch of replies is already on its way to the loop, or an AMH handler
        waits to hear it was sent (``on_sent``): then it joins the loop's
        batch.  A thread's write costs it a system call (and, on the
        pure-Python path, a round of the interpreter lock, which many busy
        threads make dear), and a batch on its way costs nothing more; a
        drain that only settles calls writes nothing, so it stops no thread
        from writing.  Either way the loop settles the call."""
        if not self.carrying and sink.on_sent is None and sink.channel.write_from_thread(data):
            self.add(sink, None)  # written: the loop only settles the call
        else:
            self.put(sink, data)

    def _drain(self) -> None:
        self._scheduled = self.carrying = False  # before popping: a put from now on schedules again
        items = self._items
        # Each channel's replies of this drain go out in one write, now, and
        # leave its unsent count at once.
        held: dict[Channel, int] = {}
        try:
            while items:
                sink, data = items.popleft()
                if data is None:
                    sink._settled()
                    continue
                channel = sink.channel
                sent = held.get(channel)
                if sent is None:
                    channel.hold_output()
                    sent = 0
                held[channel] = sent + len(data)
                if not channel.send(data):  # as ReplySink._deliver on the loop thread
                    sink._undelivered()
                if sink.on_sent is not None:
                    sink.on_sent()
                sink._settled()  # after the reply: a draining connection closes behind it
        finally:
            if held:
                with _TAKE:
                    for channel, sent in held.items():
                        channel.unsent -= sent
                for channel in held:
                    channel.flush()
                    # After the count: a strategy that parked it since sees it here,
                    # or (parking after this) sees it no longer congested.
                    if channel.parked:
                        channel.unpark()


class Channel(Protocol):
    """Where replies go: a connection's output queue, owned by one loop thread."""

    loop: asyncio.AbstractEventLoop
    loop_thread: int
    max_message_size: int
    inbox: ReplyInbox
    write_paused: bool
    """The client does not read its replies: starting more of its calls only buffers more."""
    unsent: int
    """Bytes of replies made on other threads and not yet queued on the loop (kept by ReplyInbox)."""
    parked: bool
    """A strategy holds this connection's queued calls until it is no longer :attr:`congested`."""
    core: GIOPConnection
    """The connection's protocol state: it encodes the replies, in its code sets (safe from any thread)."""
    interceptors: tuple[Any, ...]
    """The server's request interceptors: their send_reply sees each outcome."""

    @property
    def congested(self) -> bool:
        """Replies wait for the client (or for the loop) beyond the write buffer limit: start no more calls."""

    def unpark(self) -> None:
        """Loop thread: if :attr:`parked` and no longer congested, let the strategies start its calls again."""

    def send(self, data: bytes) -> bool: ...

    def write_from_thread(self, data: bytes) -> bool:
        """Another thread: write ``data`` to the client now if the output is idle (False: give it to the inbox)."""

    def hold_output(self) -> None:
        """Queue what is sent from now on until :meth:`flush` (loop thread)."""

    def flush(self) -> None:
        """Write what is queued now (loop thread)."""

    def request_finished(self, request_id: int) -> None:
        """Request ``request_id`` of the connection is over (loop thread)."""


def service_contexts(contexts: Mapping[int, bytes] | None) -> tuple[ServiceContext, ...]:
    """Reply service contexts from an interceptor's ``id -> data`` mapping."""
    return tuple(ServiceContext(i, bytes(d)) for i, d in contexts.items()) if contexts else ()


def plain_reply_12(op: Operation, value: Any, request_id: int, little_endian: bool, core: GIOPConnection,
                   max_size: int) -> bytes | None:
    """The GIOP 1.2 NO_EXCEPTION reply carrying a servant's ``value``, or
    None if it does not marshal or is larger than ``max_size``: the per-call
    path of the inline and thread replies, whose every other outcome goes
    to :meth:`ReplySink.result`, which owns the error replies and their logging."""
    try:
        body = op.results.pack(op.result_tuple(value), 0, little_endian, core.char_set)
    except CORBA.SystemException:
        return None
    data = core.reply_12(request_id, 0, body, little_endian)  # 0: NO_EXCEPTION
    return data if len(data) <= max_size else None


def run_send_reply(interceptor: ServerInterceptor, info: ServerRequestInfo, exception: BaseException | None) -> None:
    """One interceptor's send_reply: its failure is logged, never the reply's."""
    try:
        interceptor.send_reply(info, exception)
    except Exception:
        log.exception("server interceptor %s failed in send_reply of %s", type(interceptor).__name__,
                      info.operation)


class ReplySink:
    """The way back to the client for one request; usable once.

    It marshals in the calling thread (omniORB's marshaler is thread-safe)
    and hands the bytes to the connection.  A oneway request's sink sends
    nothing.  ``on_sent`` runs on the loop thread after the bytes are queued.
    """

    __slots__ = ("request_id", "version", "little_endian", "op", "response_expected", "channel", "done", "on_sent",
                 "expired", "intercepted")

    def __init__(
        self,
        request_id: int,
        version: Version,
        little_endian: bool,
        op: Operation,
        response_expected: bool,
        channel: Channel,
    ) -> None:
        self.request_id = request_id
        self.version = version
        self.little_endian = little_endian
        self.op = op
        self.response_expected = response_expected
        self.channel = channel
        self.done = False
        self.on_sent: Callable[[], None] | None = None
        self.expired = False
        self.intercepted: ServerRequestInfo | None = None  # set when the server has interceptors

    def _take(self) -> bool:
        """Make this the one outcome (False: one was taken already).  Atomic:
        a worker's reply and the deadline's TIMEOUT may race from two threads."""
        with _TAKE:
            if self.done:
                return False
            self.done = True
            return True

    def _late(self) -> bool:
        """After a failed _take: True for a reply that lost to the deadline (dropped
        quietly: the client has had TIMEOUT); else a second reply, BAD_INV_ORDER."""
        if self.expired:
            log.debug("late outcome of %s request %d discarded", self.op.name, self.request_id)
            return True
        raise CORBA.BAD_INV_ORDER(0, CORBA.COMPLETED_NO,
                                  f"{self.op.name} request {self.request_id} has had its reply already")

    def claim(self) -> bool:
        """Mark the sink used: False if the deadline passed first (nothing to
        send); a second use is BAD_INV_ORDER for the caller."""
        return self._take() or not self._late()

    def result(self, value: Any) -> None:
        with _TAKE:  # _take, without its frame
            taken = not self.done
            self.done = True
        if not taken:
            self._late()
            return
        if self.intercepted is not None:
            self._intercepted_result(value)
            return
        if not self.response_expected:
            self._finished(False)
            self._settle()
            return
        op = self.op
        le = self.little_endian
        core = self.channel.core
        cs = core.char_set
        failed = False
        try:
            values = op.result_tuple(value)
            if self.version == GIOP_1_2:  # the common case, without a closure
                body = op.results.pack(values, 0, le, cs)
                data = core.reply_12(self.request_id, 0, body, le)  # 0: NO_EXCEPTION
            else:
                wide11 = self.version == GIOP_1_1 and bool(core.wide_giop11)
                data = self._encode(ReplyStatus.NO_EXCEPTION, lambda a: op.results.pack(values, a, le, cs, wide11))
        except CORBA.DATA_CONVERSION as exc:  # text the connection's char code set cannot carry
            log.warning("operation %s returned text the client's code set cannot carry: %s", op.name, exc)
            data = self._system_bytes(CORBA.DATA_CONVERSION(exc.minor, CORBA.COMPLETED_YES), (),
                                      f"the result of {op.name} holds text the connection's code set cannot carry")
            failed = True
        except CORBA.MARSHAL as exc:  # a value pyorb cannot scrub: refused, never sent raw
            log.error("operation %s returned a value pyorb cannot send: %s", op.name, exc)
            data = self._system_bytes(CORBA.MARSHAL(exc.minor, CORBA.COMPLETED_YES), (),
                                      f"the result of {op.name} cannot be sent by this server")
            failed = True
        except CORBA.SystemException as exc:
            log.error("operation %s returned a value that does not match its IDL: %r", op.name, value)
            data = self._system_bytes(CORBA.BAD_PARAM(exc.minor, CORBA.COMPLETED_YES), (),
                                      f"the servant's result of {op.name} does not match its IDL")
            failed = True
        if len(data) > self.channel.max_message_size:
            failed = True  # _deliver sends MARSHAL instead
        self._finished(failed)
        self._deliver(data)

    def _intercepted_result(self, value: Any) -> None:
        """result() for a request the server's interceptors saw: they see the
        servant's outcome first, and the reply carries the service contexts
        they added.  (A value that then fails to marshal is logged; the
        interceptors have seen a result.)"""
        info = self.intercepted
        assert info is not None
        self._intercepted_outcome(None)
        if not self.response_expected:
            self._finished(False)
            self._settle()
            return
        op, le, core = self.op, self.little_endian, self.channel.core
        cs, wide11 = core.char_set, self.version == GIOP_1_1 and bool(core.wide_giop11)
        contexts = service_contexts(info.reply_contexts)
        failed = False
        try:
            values = op.result_tuple(value)
            data = self._encode(ReplyStatus.NO_EXCEPTION, lambda a: op.results.pack(values, a, le, cs, wide11),
                                contexts)
        except CORBA.SystemException as exc:
            log.error("operation %s returned a value that cannot be sent: %r (%s)", op.name, value, exc)
            kind = type(exc) if isinstance(exc, (CORBA.DATA_CONVERSION, CORBA.MARSHAL)) else CORBA.BAD_PARAM
            data = self._system_bytes(kind(exc.minor, CORBA.COMPLETED_YES), contexts)
            failed = True
        self._finished(failed)
        self._deliver(data)

    def _intercepted_outcome(self, exception: BaseException | None) -> None:
        info = self.intercepted
        if info is None:
            return
        self.intercepted = None  # once per request
        for interceptor in reversed(self.channel.interceptors):
            run_send_reply(interceptor, info, exception)

    def exception(self, exc: BaseException, detail: str | None = None) -> None:
        """Send ``exc``: a declared user exception, a system exception, or UNKNOWN.

        ``detail``: for a system exception the server raises itself (never a
        servant's), its own words for the client, in an ExceptionDetailMessage."""
        if not self.claim():
            return
        declared = isinstance(exc, CORBA.UserException) and getattr(exc, "_NP_RepositoryId", None) in self.op.exceptions
        self._finished(not declared)
        info = self.intercepted
        if info is not None:
            self._intercepted_outcome(exc)
        if self.response_expected:
            self._deliver(self.exception_bytes(exc, service_contexts(info.reply_contexts) if info else (), detail))
        else:
            self._settle()

    def _finished(self, failed: bool) -> None:
        """The outcome is decided (``failed``: a system exception); for statistics.  Any thread."""

    def _settled(self) -> None:
        """On the loop thread, after the reply (if any) is queued: the request is over."""

    def _settle(self) -> None:
        if get_ident() == self.channel.loop_thread:
            self._settled()
        else:
            self.channel.inbox.put(self, None)

    def _undelivered(self) -> None:
        """The reply could not be handed to the connection (it is closed)."""
        log.debug("reply %d dropped: connection closed", self.request_id)

    def exception_bytes(self, exc: BaseException, contexts: tuple[ServiceContext, ...] = (),
                        detail: str | None = None) -> bytes:
        if isinstance(exc, CORBA.UserException) and getattr(exc, "_NP_RepositoryId", None) in self.op.exceptions:
            le, core = self.little_endian, self.channel.core
            cs, wide11 = core.char_set, self.version == GIOP_1_1 and bool(core.wide_giop11)
            try:
                return self._encode(ReplyStatus.USER_EXCEPTION,
                                    lambda a: self.op.pack_user_exception(exc, a, le, cs, wide11), contexts)
            except CORBA.SystemException as error:  # e.g. text the connection's char code set cannot carry
                log.warning("%s raised %s, which cannot be sent: %s", self.op.name, type(exc).__name__, error)
                return self._system_bytes(type(error)(error.minor, CORBA.COMPLETED_YES), contexts)
        if isinstance(exc, CORBA.SystemException):
            return self._system_bytes(exc, contexts, detail)
        if isinstance(exc, CORBA.UserException):
            return self._system_bytes(CORBA.UNKNOWN(omniORB.UNKNOWN_UserException, CORBA.COMPLETED_MAYBE), contexts,
                                      f"{self.op.name} raised {getattr(exc, '_NP_RepositoryId', '?')}, "
                                      "which its IDL does not declare")
        # omniORB's code and the exception's type, never its message or traceback (they stay in the server's log).
        return self._system_bytes(CORBA.UNKNOWN(omniORB.UNKNOWN_PythonException, CORBA.COMPLETED_MAYBE), contexts,
                                  f"{self.op.name} raised a Python {type(exc).__name__}, which its IDL does not "
                                  "declare (the server's log has the details)")

    def _system_bytes(self, exc: CORBA.SystemException, contexts: tuple[ServiceContext, ...] = (),
                      detail: str | None = None) -> bytes:
        """A SYSTEM_EXCEPTION reply; ``detail`` (the server's own words, never a
        servant's) goes to the client in an ExceptionDetailMessage context."""
        le = self.little_endian
        if detail:
            contexts += (exception_detail_context(detail, le),)
        return self._encode(ReplyStatus.SYSTEM_EXCEPTION, lambda a: marshal.pack_system_exception(exc, a, le),
                            contexts)

    def _encode(self, status: ReplyStatus, pack: Callable[[int], bytes],
                contexts: tuple[ServiceContext, ...] = ()) -> bytes:
        return self.channel.core.reply(self.request_id, status, self.version, self.little_endian, pack, contexts)

    def expire(self, timeout: CORBA.TIMEOUT | None = None, detail: str | None = None) -> bool:
        """The request's deadline passed: the client gets ``timeout`` (by default
        TIMEOUT, completed MAYBE, and ``detail`` in an ExceptionDetailMessage);
        a later reply is discarded.  False if the request already had its outcome."""
        with _TAKE:
            if self.done:
                return False
            self.done = self.expired = True  # together: a racing reply sees both or neither
        self._finished(True)
        if timeout is None:
            timeout = CORBA.TIMEOUT(0, CORBA.COMPLETED_MAYBE)
        info = self.intercepted
        if info is not None:
            self._intercepted_outcome(timeout)
        if self.response_expected:
            self._deliver(self._system_bytes(timeout, service_contexts(info.reply_contexts) if info else (), detail))
        else:
            self._settle()
        return True

    def _deliver(self, data: bytes) -> None:
        channel = self.channel
        if len(data) > channel.max_message_size:
            log.error("reply to %s request %d is %d bytes, over the %d-byte limit; sending MARSHAL",
                      self.op.name, self.request_id, len(data), channel.max_message_size)
            data = self._system_bytes(CORBA.MARSHAL(omniORB.MARSHAL_MessageSizeExceedLimitOnServer,
                                                    CORBA.COMPLETED_YES), (),
                                      f"the reply to {self.op.name} is {len(data)} bytes, over this server's "
                                      f"{channel.max_message_size}-byte limit")
        if get_ident() == channel.loop_thread:  # _send, inline: the common case
            if not channel.send(data):
                self._undelivered()
            if self.on_sent is not None:
                self.on_sent()
            self._settled()
            return
        channel.inbox.deliver(self, data)


# With the compiled accelerator, the C twin takes its place: once per call a servant's value becomes a reply.
_accelerator.twin(__name__, "plain_reply_12", "pyorb.server.call._creply")
