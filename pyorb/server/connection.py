"""One client connection on the server side: GIOP messages to calls."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Any, Callable

from omniORB import CORBA

from pyorb import marshal
from pyorb.aio.protocol import GIOPProtocol
from pyorb.giop import codec
from pyorb.giop.cdr import CDRWriter
from pyorb.giop.connection import Role
from pyorb.giop.ior import IOR
from pyorb.giop.messages import (
    GIOP_1_0,
    CancelRequest,
    CloseConnection,
    LocateReply,
    LocateRequest,
    LocateStatus,
    Message,
    MessageError,
    ReplyStatus,
    Request,
)
from pyorb.server.adapter import BUILTIN_NAMES, IS_A, ObjectAdapter
from pyorb.server.dispatch import Call
from pyorb.server.load import ServerLoad
from pyorb.server.reply import ReplyInbox, ReplySink, encode_reply
from pyorb.server.servant import ServantInfo, Style

if TYPE_CHECKING:
    from pyorb.config import Config

log = logging.getLogger(__name__)

ObjrefConverter = Callable[[Any, str], Any]


def _ior_body(target: IOR, le: bool, align: int) -> bytes:
    w = CDRWriter(le, base=align)
    target.encode(w)
    return w.getvalue()


class ServerConnection(GIOPProtocol):
    """Decodes requests, finds the servant and hands a :class:`Call` to the strategy."""

    __slots__ = ("adapter", "_convert", "_on_closed", "load", "inbox", "tasks", "waiting", "max_message_size", "in_flight",
                 "draining", "_refuse", "_version", "unsent", "parked")

    def __init__(
        self,
        config: Config,
        adapter: ObjectAdapter,
        objref_converter: ObjrefConverter,
        on_closed: Callable[[ServerConnection], None],
        load: ServerLoad,
        inbox: ReplyInbox,
        refuse: bool = False,
    ) -> None:
        super().__init__(Role.SERVER, config)
        self.adapter = adapter
        self._convert = objref_converter
        self._on_closed = on_closed
        self.load = load
        self.inbox = inbox
        self.tasks: dict[int, asyncio.Task[None]] | None = None  # made for the first call run as a task
        self.waiting: dict[int, Call] | None = None  # calls on threads or AMH handlers, for CancelRequest
        self.max_message_size = config.max_message_size
        self.in_flight = 0  # counted by load, on the loop thread
        self.draining = False
        self._refuse = refuse
        self._version = GIOP_1_0  # of the last request: CloseConnection speaks it
        self.unsent = 0  # reply bytes made on threads, not yet queued here (ReplyInbox keeps it)
        self.parked = False  # a strategy holds our queued calls until we are not congested

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport.set_write_buffer_limits(high=self.config.write_buffer_limit)  # type: ignore[union-attr]
        if self._refuse:
            self.load.refused(self.peer)
            self.close_idle()

    # -- incoming messages ---------------------------------------------------
    def message_received(self, message: Message) -> None:
        if type(message) is Request:
            self._request(message)
        elif type(message) is LocateRequest:
            self._locate(message)
        elif type(message) is CancelRequest:
            self._cancel(message.request_id)
        elif type(message) is CloseConnection:
            log.debug("client %s sent CloseConnection", self.peer)
            self.close()
        elif type(message) is MessageError:
            log.warning("client %s reported a MessageError; closing", self.peer)
            self.close()

    def _request(self, req: Request) -> None:
        if req.addressing_disposition:
            self._needs_addressing_mode(req)
            return
        found = self.adapter.lookup(req.object_key)
        if found is None:
            self._not_here(req)
            return
        route = found.routes.get(req.operation)
        if route is None:
            self._builtin_or_missing(req, found.info)
            return
        entry = route.entry
        op = entry.op
        try:
            args = op.args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts,
                                  self.value_bounds)
        except CORBA.SystemException as exc:
            log.warning("cannot unmarshal the arguments of %s from %s: %s", op.name, self.peer, exc)
            self._system_exception(req, CORBA.MARSHAL(exc.minor, CORBA.COMPLETED_NO))
            return
        if op.args.has_objrefs and entry.style is not Style.SYNC:
            args = op.args.convert_objrefs(args, self._convert)
        self._version = req.version
        call = Call(found.servant, entry, args, req.request_id, req.version, req.little_endian,
                    req.response_expected, self, route.stats)
        # ServerLoad.started, inline: this runs for every request.
        load = self.load
        self.in_flight += 1
        load.total += 1
        if self.in_flight >= load.max_per_connection or load.total >= load.max_total:
            load.full(self)
        if route.deadline is not None:
            call.timer = self.loop.call_later(route.deadline, call.expire)
        task = route.strategy.dispatch(call)
        if task is not None and req.response_expected:
            rid = req.request_id
            if self.tasks is None:
                self.tasks = {}
            self.tasks[rid] = task
            task.add_done_callback(functools.partial(self._task_done, call))
        elif task is None and req.response_expected and not call.done:
            # Queued for a thread, running on one, or an AMH request pending:
            # a CancelRequest must reach it too.
            if self.waiting is None:
                self.waiting = {}
            self.waiting[req.request_id] = call

    def _task_done(self, call: Call, task: asyncio.Task[None]) -> None:
        if self.tasks is not None:
            self.tasks.pop(call.request_id, None)
        if not call.done and task.cancelled():
            call.abandon()  # CancelRequest (or shutdown) before the task's first step

    def _builtin_or_missing(self, req: Request, info: ServantInfo) -> None:
        builtin = BUILTIN_NAMES.get(req.operation)
        if builtin is None:
            known = req.operation in info.declared
            exc = CORBA.NO_IMPLEMENT if known else CORBA.BAD_OPERATION
            self._system_exception(req, exc(0, CORBA.COMPLETED_NO))
            return
        sink = ReplySink(req.request_id, req.version, req.little_endian, builtin, req.response_expected, self)
        if builtin is IS_A:
            try:
                (repo_id,) = builtin.args.unpack(req.body, req.body_offset, req.little_endian)
            except CORBA.SystemException:
                sink.exception(CORBA.MARSHAL(0, CORBA.COMPLETED_NO))
                return
            sink.result(info.is_a(repo_id))
        else:
            sink.result(False)

    def _not_here(self, req: Request) -> None:
        target = self.adapter.forwarded(req.object_key)
        if target is None:
            self._system_exception(req, CORBA.OBJECT_NOT_EXIST(0, CORBA.COMPLETED_NO))
        elif req.response_expected:
            self.send(encode_reply(req.request_id, ReplyStatus.LOCATION_FORWARD, req.version, req.little_endian,
                                   lambda a: _ior_body(target, req.little_endian, a)))

    def _system_exception(self, req: Request, exc: CORBA.SystemException) -> None:
        if req.response_expected:
            le = req.little_endian
            self.send(encode_reply(req.request_id, ReplyStatus.SYSTEM_EXCEPTION, req.version, le,
                                   lambda a: marshal.pack_system_exception(exc, a, le)))

    def _needs_addressing_mode(self, req: Request) -> None:
        if req.response_expected:
            def key_addr(align: int) -> bytes:
                w = CDRWriter(req.little_endian, base=align)
                w.short(0)  # GIOP::KeyAddr: we only understand object keys
                return w.getvalue()

            self.send(encode_reply(req.request_id, ReplyStatus.NEEDS_ADDRESSING_MODE, req.version,
                                   req.little_endian, key_addr))

    def _locate(self, req: LocateRequest) -> None:
        le, body = req.little_endian, b""
        target = self.adapter.forwarded(req.object_key)
        if self.adapter.lookup(req.object_key) is not None:
            status = LocateStatus.OBJECT_HERE
        elif target is not None:
            status = LocateStatus.OBJECT_FORWARD
            probe = LocateReply(req.request_id, status, b"", req.version, le)
            body = _ior_body(target, le, codec.body_offset(probe))
        else:
            status = LocateStatus.UNKNOWN_OBJECT
        self.send(codec.encode(LocateReply(req.request_id, status, body, req.version, le)))

    def _cancel(self, request_id: int) -> None:
        task = self.tasks.pop(request_id, None) if self.tasks is not None else None
        if task is not None:
            task.cancel()
            return
        call = self.waiting.pop(request_id, None) if self.waiting is not None else None
        if call is not None:
            # Not started yet: it never runs.  Started: its reply is dropped.
            call.cancelled()

    # -- flow control ----------------------------------------------------------
    # A client that sends requests but does not read the replies fills our
    # write buffer; stop reading from it until the buffer drains, so that it
    # cannot make us run requests and queue replies without bound.  (Only the
    # server does this: a client that stopped reading replies while its
    # requests are stuck could deadlock with its server.)
    def pause_writing(self) -> None:
        super().pause_writing()
        self.reading.hold("peer not reading")
        self.load.output_paused(self)

    def resume_writing(self) -> None:
        super().resume_writing()
        self.load.output_resumed(self)
        self.unpark()
        self.reading.release("peer not reading")

    @property
    def congested(self) -> bool:
        return self.write_paused or self.unsent >= self.config.write_buffer_limit

    def unpark(self) -> None:
        if self.parked and not self.congested:
            self.parked = False
            self.adapter.registry.connection_resumed(self)

    def output_held(self) -> None:
        self.load.output_grew()

    def reassembly_changed(self, delta: int) -> None:
        self.load.reassembly_changed(self, delta)

    # -- lifecycle -----------------------------------------------------------
    def request_finished(self, request_id: int) -> None:
        # ServerLoad.finished, inline: this runs for every request.
        waiting = self.waiting
        if waiting is not None:
            waiting.pop(request_id, None)
        self.in_flight -= 1
        load = self.load
        load.total -= 1
        if load.held or self.draining:
            load.wake(self)

    def drain(self) -> None:
        """Take no new requests; close with CloseConnection once the last is answered."""
        self.draining = True
        self.reading.hold("draining")
        if self.in_flight == 0:
            self.close_idle()

    def close_idle(self) -> None:
        """Tell the client that no request is lost (CloseConnection), then close."""
        if self.is_open:
            self.send(codec.encode(CloseConnection(self._version)))
            self.close()

    def closed(self, exc: BaseException | None) -> None:
        # Calls still queued for a thread never run: nobody would read their
        # replies (a client that vanished with a thousand requests queued
        # must not cost a thousand servant calls).  Handlers already running
        # finish; their replies are dropped by the closed channel.
        waiting, self.waiting = self.waiting, None
        if waiting:
            for call in list(waiting.values()):
                call.cancelled()
        self.tasks = None
        self.load.forget(self)
        self._on_closed(self)
