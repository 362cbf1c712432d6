"""Turning a servant's outcome into a GIOP Reply for one request."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from threading import Lock, get_ident
from typing import TYPE_CHECKING, Any, Callable, Protocol

from omniORB import CORBA

from pyorb import marshal
from pyorb.giop.connection import GIOPConnection
from pyorb.giop.messages import GIOP_1_1, GIOP_1_2, ReplyStatus, Version

if TYPE_CHECKING:
    from pyorb.marshal import Operation

log = logging.getLogger(__name__)



class ReplyInbox:
    """Replies made on dispatcher threads, handed to the loop thread in batches.

    One per event loop.  A thread appends and wakes the loop only if no
    wake-up is pending, so under load many replies cost one wake-up (a
    write to the loop's self-pipe and a context switch) instead of one each.
    """

    __slots__ = ("loop", "_items", "_scheduled", "_count")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._items: deque[tuple[ReplySink, bytes | None]] = deque()
        self._scheduled = False
        self._count = Lock()  # for Channel.unsent, which several threads change

    def put(self, sink: ReplySink, data: bytes | None) -> None:
        """Queue ``data`` (None: nothing to send, only settle) from any thread."""
        if data is not None:
            # Counted as it is made: a pool that makes replies faster than the
            # loop queues them sees a client that does not read in time.
            channel = sink.channel
            with self._count:
                channel.unsent += len(data)
        self._items.append((sink, data))
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: the clients are gone anyway
                self._scheduled = False
                self._items.clear()
                sink._undelivered()

    def _drain(self) -> None:
        self._scheduled = False  # before popping: a put from now on schedules again
        items = self._items
        count = self._count
        parked: set[Channel] | None = None
        while items:
            sink, data = items.popleft()
            if data is None:
                sink._settled()
            else:
                channel = sink.channel
                with count:
                    channel.unsent -= len(data)
                sink._send(data)
                if channel.parked:
                    if parked is None:
                        parked = set()
                    parked.add(channel)
        if parked is not None:
            for channel in parked:
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

    @property
    def congested(self) -> bool:
        """Replies wait for the client (or for the loop) beyond the write buffer limit: start no more calls."""

    def unpark(self) -> None:
        """Loop thread: if :attr:`parked` and no longer congested, let the strategies start its calls again."""

    def send(self, data: bytes) -> bool: ...

    def request_finished(self, request_id: int) -> None:
        """Request ``request_id`` of the connection is over (loop thread)."""


# One lock for every sink's outcome: it is held only for a test-and-set, so sharing it costs little.
_TAKE = Lock()


class ReplySink:
    """The way back to the client for one request; usable once.

    It marshals in the calling thread (omniORB's marshaler is thread-safe)
    and hands the bytes to the connection.  A oneway request's sink sends
    nothing.  ``on_sent`` runs on the loop thread after the bytes are queued.
    """

    __slots__ = ("request_id", "version", "little_endian", "op", "response_expected", "channel", "done", "on_sent",
                 "expired")

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
        raise CORBA.BAD_INV_ORDER(0, CORBA.COMPLETED_NO)

    def claim(self) -> bool:
        """Mark the sink used: False if the deadline passed first (nothing to
        send); a second use is BAD_INV_ORDER for the caller."""
        return self._take() or not self._late()

    def result(self, value: Any) -> None:
        if not self._take():
            self._late()
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
            data = self._system_bytes(CORBA.DATA_CONVERSION(exc.minor, CORBA.COMPLETED_YES))
            failed = True
        except CORBA.MARSHAL as exc:  # a value pyorb cannot scrub: refused, never sent raw
            log.error("operation %s returned a value pyorb cannot send: %s", op.name, exc)
            data = self._system_bytes(CORBA.MARSHAL(exc.minor, CORBA.COMPLETED_YES))
            failed = True
        except CORBA.SystemException as exc:
            log.error("operation %s returned a value that does not match its IDL: %r", op.name, value)
            data = self._system_bytes(CORBA.BAD_PARAM(exc.minor, CORBA.COMPLETED_YES))
            failed = True
        self._finished(failed)
        self._deliver(data)

    def exception(self, exc: BaseException) -> None:
        """Send ``exc``: a declared user exception, a system exception, or UNKNOWN."""
        if not self.claim():
            return
        declared = isinstance(exc, CORBA.UserException) and getattr(exc, "_NP_RepositoryId", None) in self.op.exceptions
        self._finished(not declared)
        if self.response_expected:
            self._deliver(self.exception_bytes(exc))
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

    def exception_bytes(self, exc: BaseException) -> bytes:
        if isinstance(exc, CORBA.UserException) and getattr(exc, "_NP_RepositoryId", None) in self.op.exceptions:
            le, core = self.little_endian, self.channel.core
            cs, wide11 = core.char_set, self.version == GIOP_1_1 and bool(core.wide_giop11)
            try:
                return self._encode(ReplyStatus.USER_EXCEPTION,
                                    lambda a: self.op.pack_user_exception(exc, a, le, cs, wide11))
            except CORBA.SystemException as error:  # e.g. text the connection's char code set cannot carry
                log.warning("%s raised %s, which cannot be sent: %s", self.op.name, type(exc).__name__, error)
                return self._system_bytes(type(error)(error.minor, CORBA.COMPLETED_YES))
        if isinstance(exc, CORBA.SystemException):
            return self._system_bytes(exc)
        return self._system_bytes(CORBA.UNKNOWN(0, CORBA.COMPLETED_MAYBE))

    def _system_bytes(self, exc: CORBA.SystemException) -> bytes:
        le = self.little_endian
        return self._encode(ReplyStatus.SYSTEM_EXCEPTION, lambda a: marshal.pack_system_exception(exc, a, le))

    def _encode(self, status: ReplyStatus, pack: Callable[[int], bytes]) -> bytes:
        return self.channel.core.reply(self.request_id, status, self.version, self.little_endian, pack)

    def expire(self) -> None:
        """The request's deadline passed: the client gets TIMEOUT; a later reply is discarded."""
        with _TAKE:
            if self.done:
                return
            self.done = self.expired = True  # together: a racing reply sees both or neither
        self._finished(True)
        if self.response_expected:
            self._deliver(self._system_bytes(CORBA.TIMEOUT(0, CORBA.COMPLETED_MAYBE)))
        else:
            self._settle()

    def _deliver(self, data: bytes) -> None:
        channel = self.channel
        if len(data) > channel.max_message_size:
            log.error("reply to %s request %d is %d bytes, over the %d-byte limit; sending MARSHAL",
                      self.op.name, self.request_id, len(data), channel.max_message_size)
            data = self._system_bytes(CORBA.MARSHAL(0, CORBA.COMPLETED_YES))
        if get_ident() == channel.loop_thread:  # _send, inline: the common case
            if not channel.send(data):
                self._undelivered()
            if self.on_sent is not None:
                self.on_sent()
            self._settled()
            return
        channel.inbox.put(self, data)

    def _send(self, data: bytes) -> None:
        if not self.channel.send(data):
            self._undelivered()
        if self.on_sent is not None:
            self.on_sent()
        self._settled()  # after the reply: a draining connection closes behind it
