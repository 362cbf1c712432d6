"""The request handler of a server connection: GIOP messages to calls.

The transport (:class:`~pyorb.aio.protocol.GIOPProtocol`) hands each message
to a :class:`RequestHandler`, which finds the servant, runs the server's
interceptors, answers a plain synchronous call inline or builds the
:class:`~pyorb.server.call.dispatch.Call` its route's strategy runs, and
answers what it cannot serve.  Of the transport it sees only what its base,
:class:`~pyorb.server.connection.ServerConnection`, keeps of its
:class:`~pyorb.server.connection.Wire`: ``send``, ``close``, the protocol
core that encodes its replies, the loop and who the peer is.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import time
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any, Callable, Mapping

import omniORB
from omniORB import CORBA

from pyorb import _accelerator, marshal
from pyorb.giop.cdr import CDRWriter
from pyorb.giop.detail import exception_detail_context, key_text
from pyorb.giop.fast12 import reply_12_to
from pyorb.giop.errors import ProtocolError
from pyorb.giop.policies import request_deadline
from pyorb.giop.codesets import CHAR_CONVERSIONS, code_set_name
from pyorb.giop.ior import IOR
from pyorb.giop.messages import (
    GIOP_1_0,
    GIOP_1_1,
    GIOP_1_2,
    CancelRequest,
    CloseConnection,
    LocateRequest,
    LocateStatus,
    Message,
    MessageError,
    ReplyStatus,
    Request,
    ServiceContext,
)
from pyorb.interceptors import ServerRequestInfo
from pyorb.marshal.body import IS_A
from pyorb.request_context import SERVING, serve_in_frame
from pyorb.server.adapter import BUILTIN_NAMES, Binding, ObjectAdapter, Route
from pyorb.server.admission import shed_exception
from pyorb.server.call.dispatch import Call, ManagedCall, servant_raised
from pyorb.server.call.reply import ReplySink, plain_reply_12, run_send_reply, service_contexts
from pyorb.server.call.servant import ServantInfo, Style
from pyorb.server.connection import ServerConnection, Wire

if TYPE_CHECKING:
    from pyorb.config import Config
    from pyorb.server.call.reply import ReplyInbox
    from pyorb.server.load import ServerLoad

log = logging.getLogger(__name__)

ObjrefConverter = Callable[[Any, str], Any]
_MAX_INTRODUCTIONS = 1024
"""LocateRequests of one connection forwarded to the full IOR before it names code sets."""
_SYNC = Style.SYNC  # a global: cheaper to read per request than the enum's attribute
_serve, _served = SERVING.set, SERVING.reset


class _Serving:
    """What ``pyorb.current()`` and onward calls see of a request answered inline with the client's deadline."""

    # Made with object.__new__ and filled by the caller: no __init__ frame per timed request.
    __slots__ = ("operation", "object_key", "deadline", "object_id")
    operation: str
    object_key: bytes
    deadline: float
    object_id: bytes | None


_new_serving = object.__new__

_REFUSALS: dict[tuple[bool, int | None, str], bytes] = {}
"""GIOP 1.2 replies of calls admission control refused, by byte order, fragment size and text
(the text names the wait: under a standing queue, many refusals share one)."""
_MAX_REFUSALS = 64


def _ior_body(target: IOR, le: bool, align: int) -> bytes:
    w = CDRWriter(le, base=align)
    target.encode(w)
    return w.getvalue()


class RequestHandler(ServerConnection):
    """Decodes requests, finds the servant and hands a :class:`Call` to the strategy."""

    __slots__ = ("_convert", "tasks", "waiting", "_reference", "_introduced", "_relocating", "interceptors")

    def __init__(
        self,
        config: Config,
        adapter: ObjectAdapter,
        objref_converter: ObjrefConverter,
        on_closed: Callable[[ServerConnection], None],
        load: ServerLoad,
        inbox: ReplyInbox,
        wire: Wire,
        refuse: bool = False,
        reference: Callable[[bytes], IOR] | None = None,
    ) -> None:
        super().__init__(config, adapter, on_closed, load, inbox, wire, refuse)
        self._convert = objref_converter
        self.tasks: dict[int, asyncio.Task[None]] | None = None  # made for the first call run as a task
        self.waiting: dict[int, Call] | None = None  # calls on threads or AMH handlers, for CancelRequest
        self._reference = reference  # the full IOR of a served key, for LocateRequest
        self._introduced = 0  # LocateRequests answered OBJECT_FORWARD to the object's full IOR
        self._relocating: set[bytes] | None = None  # keys forwarded, whose next LocateRequest checks the full IOR
        self.interceptors = adapter.interceptors  # the server's, fixed when it was made

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

    def _request(self, req: Request, info: ServerRequestInfo | None = None) -> None:
        """Decode a request and hand it to its strategy; ``info``: the server's
        interceptors admitted it (they run first, and may call this again later)."""
        if req.addressing_disposition:
            self._needs_addressing_mode(req)
            return
        # Before the lookup and the arguments (a first call may load modules): a
        # relative timeout counts from here.
        deadline = self._client_deadline(req) if req.service_contexts else None
        core = self.core  # it took the code sets from the first CodeSets context
        if core.char_set not in CHAR_CONVERSIONS:
            self._codeset_incompatible(req)
            return
        found = self.adapter.lookup(req.object_key)
        if found is None:
            self._not_here(req)
            return
        if found.manager is not None:
            if self.interceptors and info is None:
                self._intercept(req, found, None)
            else:
                found.manager.serve(self, req, info, deadline)
            return
        self.serve(req, found, info, deadline)

    def serve(self, req: Request, found: Binding, info: ServerRequestInfo | None = None,
              deadline: float | None = None, object_id: bytes | None = None, servant: Any = None,
              after: Callable[[ManagedCall], None] | None = None, cookie: Any = None,
              admitted: bool = False) -> bool:
        """Run ``req`` on ``found``'s servant under its route's strategy.

        ``deadline`` (``time.monotonic()``) is the client's or a manager's:
        the operation's own deadline is applied too, the tighter wins.  For a
        request a default servant or servant manager serves, ``object_id`` is
        what servant code reads from ``pyorb.current_object_id()``;
        ``servant`` (if not None) is the one a servant locator found, of the
        class whose routes ``found`` holds, and ``after`` (given the call
        and ``cookie``) runs on the loop thread once the call is settled.
        ``admitted``: the route's admission control was asked about this
        request already, and did not refuse it.  Returns True if a call took ``after`` (False: the request was
        answered, or refused, before this returned)."""
        route = found.routes.get(req.operation)
        if route is None:
            self._builtin_or_missing(req, found.info)
            return False
        core = self.core
        if self.interceptors and info is None:
            self._intercept(req, found, route)
            return False
        admission = route.admission
        if admission is not None and not admitted:  # while it sheds, a refusal costs no argument reading and no Call
            refused = admission.refusal(self.loop, route.queued, self)
            if refused is not None:
                self._overloaded(req, route, info, refused)
                return False
        entry = route.entry
        op = entry.op
        wide11 = False
        if req.version == GIOP_1_1 and op.args.has_wide:
            wide11 = self._wide_form(op, req)
        try:
            args = op.args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts,
                                  self.value_bounds, core.char_set, wide11)
        except CORBA.DATA_CONVERSION as exc:
            log.warning("cannot read the arguments of %s from %s in %s: %s", op.name, self.peer,
                        code_set_name(core.char_set), exc)
            self._unreadable(req, info, CORBA.DATA_CONVERSION(exc.minor, CORBA.COMPLETED_NO),
                             f"the arguments of {op.name} are not valid {code_set_name(core.char_set)}")
            return False
        except CORBA.SystemException as exc:
            log.warning("cannot unmarshal the arguments of %s from %s: %s", op.name, self.peer, exc)
            self._unreadable(req, info, CORBA.MARSHAL(exc.minor, CORBA.COMPLETED_NO),
                             f"the arguments of {op.name} do not match its IDL here")
            return False
        if entry.style is not _SYNC and op.args.has_objrefs:
            args = op.args.convert_objrefs(args, self._convert)
        self._version = req.version
        route.stats.started += 1  # loop thread only
        expected = req.response_expected
        if servant is None:
            servant = found.servant
        if route.inline and expected and info is None and req.version == GIOP_1_2:
            if deadline is None:
                self._answer_inline(servant, route, args, req, object_id)
                return False
            if monotonic() < deadline:  # else a Call answers TIMEOUT, unrun
                self._answer_inline_until(deadline, servant, route, args, req, object_id)
                return False
        limit = route.deadline
        if limit is not None:  # the server's own deadline for the operation: the tighter one wins
            own = monotonic() + limit
            deadline = own if deadline is None or own < deadline else deadline
        if object_id is None:
            call = Call(servant, entry, args, req.request_id, req.version, req.little_endian, expected, self,
                        route.stats, req.object_key, deadline)
        else:  # servant code finds the object id on its call (pyorb.current_object_id())
            call = ManagedCall(servant, entry, args, req.request_id, req.version, req.little_endian, expected,
                               self, route.stats, req.object_key, deadline)
            call.object_id, call.after, call.cookie = object_id, after, cookie
        if info is not None:
            call.intercepted = info
            # What receive_request set, for any strategy's thread.
            call.context = contextvars.copy_context()
        self.load.started(self)
        if after is not None and deadline is not None:  # a locator's own wait counts: what is left of it
            call.timer = self.loop.call_later(max(deadline - monotonic(), 0.0), call.expire)
        elif limit is not None:
            call.timer = self.loop.call_later(limit, call.expire)
        task = route.strategy.dispatch(call)
        if task is not None and expected:
            rid = req.request_id
            if self.tasks is None:
                self.tasks = {}
            self.tasks[rid] = task
            task.add_done_callback(functools.partial(self._task_done, call))
        elif task is None and expected and not call.done:
            # Queued for a thread, running on one, or an AMH request pending:
            # a CancelRequest must reach it too.
            if self.waiting is None:
                self.waiting = {}
            self.waiting[req.request_id] = call
        return True

    def _overloaded(self, req: Request, route: Route, info: ServerRequestInfo | None, detail: str) -> None:
        """Answer a request its route's admission control refused before its arguments
        were read, as a shed :class:`Call` is answered (TRANSIENT, completed NO, and
        ``detail``) and counted (started, served and failed; ``shed`` by the control).
        Interceptors that saw it arrive see it refused.  The GIOP 1.2 reply without
        their contexts depends only on the byte order and ``detail``: it is encoded once."""
        self._version = req.version
        stats = route.stats
        stats.started += 1  # loop thread only
        stats.finish(0.0, 0.0, True)
        contexts: tuple[ServiceContext, ...] = ()
        if info is not None:
            refusal = shed_exception()
            for interceptor in reversed(self.interceptors):
                run_send_reply(interceptor, info, refusal)
            contexts = service_contexts(info.reply_contexts)
        if not req.response_expected:
            return
        le = req.little_endian
        core = self.core
        key = (le, core.max_fragment_size, detail)
        reused = req.version == GIOP_1_2 and not contexts
        data = _REFUSALS.get(key) if reused else None
        if data is not None:
            data = reply_12_to(data, req.request_id, le)
        else:
            data = core.reply(req.request_id, ReplyStatus.SYSTEM_EXCEPTION, req.version, le,
                              lambda a: marshal.pack_system_exception(shed_exception(), a, le),
                              contexts + (exception_detail_context(detail, le),))
            limit = core.max_fragment_size
            if reused and (limit is None or len(data) <= limit):  # one message: its request id can be changed
                if len(_REFUSALS) >= _MAX_REFUSALS:
                    _REFUSALS.clear()
                _REFUSALS[key] = data
        if not self.send(data):
            with stats.lock:
                stats.dropped += 1

    def _client_deadline(self, req: Request) -> float | None:
        """The ``time.monotonic()`` deadline the client sent with ``req`` in an
        INVOCATION_POLICIES context, if any.  A malformed one is ignored (the
        call runs unbounded, as if the client had sent none), and logged."""
        try:
            return request_deadline(req.service_contexts, monotonic(), time.time)
        except ProtocolError as exc:
            log.info("ignoring the malformed INVOCATION_POLICIES context of %s request %d from %s: %s",
                     req.operation, req.request_id, self.peer, exc.reason)
            return None

    def _answer_inline(self, servant: Any, route: Route, args: tuple[Any, ...], req: Request,
                       object_id: bytes | None = None) -> None:
        """What ``Call``, ``run_on_loop`` and ``ReplySink.result`` do for a synchronous
        servant run on the loop thread, in one frame: the per-call path of a reactive
        server.  No other code runs between the request and its reply, so nothing
        else can see it in flight and it needs no sink, no lock and no load count.
        Any outcome but a reply that marshals within the size limit goes to a
        :class:`Call`, which owns the error replies and their logging.
        ``pyorb.current_object_id()`` finds ``object_id`` in this frame."""
        entry = route.entry
        started = perf_counter()
        try:  # without a deadline pyorb.current() finds ``req`` in this frame; with one, SERVING has it
            value = getattr(servant, entry.attr)(*args)
        except Exception as exc:
            servant_raised(self._late_call(servant, route, args, req, started), exc)
            return
        data = plain_reply_12(entry.op, value, req.request_id, req.little_endian, self.core, self.max_message_size)
        if data is None:
            self._late_call(servant, route, args, req, started).result(value)
            return
        stats = route.stats
        stats.finish(0.0, perf_counter() - started, False)
        if not self.send(data):
            with stats.lock:
                stats.dropped += 1

    def _answer_inline_until(self, deadline: float, servant: Any, route: Route, args: tuple[Any, ...],
                             req: Request, object_id: bytes | None = None) -> None:
        """:meth:`_answer_inline` for a request whose client's ``deadline`` has not
        passed: the servant runs with the request in :data:`SERVING`, as under a
        :class:`Call`, so ``pyorb.current()``, the calls it makes and the tasks it
        schedules see the deadline.  A reply made after the deadline is sent, as a
        Call on the loop sends it."""
        serving = _new_serving(_Serving)
        serving.operation = req.operation
        serving.object_key = req.object_key
        serving.deadline = deadline
        serving.object_id = object_id
        token = _serve(serving)
        try:
            self._answer_inline(servant, route, args, req)
        finally:
            _served(token)

    def _late_call(self, servant: Any, route: Route, args: tuple[Any, ...], req: Request, started: float) -> Call:
        """The :class:`Call` of a request answered inline whose outcome needs the general way."""
        call = Call(servant, route.entry, args, req.request_id, req.version, req.little_endian, True, self,
                    route.stats, req.object_key)
        call.queued_at = call.started_at = started
        self.load.started(self)  # the call's settling counts it finished
        return call

    # -- interceptors ------------------------------------------------------------
    def _intercept(self, req: Request, found: Binding, route: Route | None) -> None:
        """Run the server interceptors' receive_request in the request's own
        context, then dispatch in it (or refuse)."""
        info = ServerRequestInfo(req.operation, req.object_key, found.info.type_id, req.request_id,
                                 req.response_expected, self.peer, self.peer_certificate,
                                 {c.context_id: c.data for c in req.service_contexts})
        context = contextvars.copy_context()
        for ran, interceptor in enumerate(self.interceptors):
            try:
                pending = context.run(interceptor.receive_request, info)
            except BaseException as exc:  # noqa: BLE001 - an interceptor's failure is the request's
                self._refused(req, route, info, exc, ran)
                return
            if pending is not None and inspect.isawaitable(pending):
                self.load.started(self)  # counted while it waits: the limits bound these too
                context.run(self.loop.create_task, self._intercept_async(req, route, info, pending, ran))
                return
        context.run(self._request, req, info)

    async def _intercept_async(
        self, req: Request, route: Route | None, info: ServerRequestInfo, pending: Any, ran: int
    ) -> None:
        try:
            try:
                await pending
                for ran in range(ran + 1, len(self.interceptors)):
                    pending = self.interceptors[ran].receive_request(info)
                    if pending is not None and inspect.isawaitable(pending):
                        await pending
            except BaseException as exc:  # noqa: BLE001
                if not self.is_open:
                    return
                self._refused(req, route, info, exc, ran)
                if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                    raise
                return
        finally:
            self.load.finished(self)
        if self.is_open and not self.draining:
            self._request(req, info)

    def _refused(self, req: Request, route: Route | None, info: ServerRequestInfo, exc: BaseException, ran: int) -> None:
        """An interceptor raised in receive_request: the client gets its system exception, or UNKNOWN."""
        if isinstance(exc, CORBA.SystemException):
            refusal = type(exc)(exc.minor, CORBA.COMPLETED_NO, exc._info)
            log.info("request %s from %s refused by %s: %s", req.operation, self.peer,
                     type(self.interceptors[ran]).__name__, type(exc).__name__)
        else:
            log.error("server interceptor %s failed on %s; the client gets CORBA.UNKNOWN",
                      type(self.interceptors[ran]).__name__, req.operation, exc_info=exc)
            refusal = CORBA.UNKNOWN(omniORB.UNKNOWN_PythonException, CORBA.COMPLETED_NO)
        if route is not None:  # None: a managed key, whose servant (and route) is not known yet
            route.stats.rejected += 1
        for interceptor in reversed(self.interceptors[:ran]):
            run_send_reply(interceptor, info, refusal)
        self._system_exception(req, refusal, info.reply_contexts)

    def _wide_form(self, op: marshal.Operation, req: Request) -> bool:
        """True if this connection's GIOP 1.1 wide text is in the standard GIOP 1.1
        form, found from the first request that has some: a body that reads in
        that form (every wstring null-terminated, nothing left over) is taken as it."""
        core = self.core
        if core.wide_giop11 is None:
            try:
                op.args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts,
                               self.value_bounds, core.char_set, True)
                core.wide_giop11 = True
            except CORBA.SystemException:
                core.wide_giop11 = False
            log.debug("client %s sends GIOP 1.1 wide text in the GIOP %s form", self.peer,
                      "1.1" if core.wide_giop11 else "1.2")
        return core.wide_giop11

    def _codeset_incompatible(self, req: Request) -> None:
        # Every request of the connection: its text would be in a code set pyorb cannot read.
        log.warning("client %s chose char code set %s, which pyorb does not convert",
                    self.peer, code_set_name(self.core.char_set))
        self._system_exception(req, CORBA.CODESET_INCOMPATIBLE(0, CORBA.COMPLETED_NO), None,
                               f"this server does not convert the char code set {code_set_name(self.core.char_set)}")

    def _task_done(self, call: Call, task: asyncio.Task[None]) -> None:
        if self.tasks is not None:
            self.tasks.pop(call.request_id, None)
        if not call.done and task.cancelled():
            call.abandon()  # CancelRequest (or shutdown) before the task's first step

    def _builtin_or_missing(self, req: Request, info: ServantInfo) -> None:
        builtin = BUILTIN_NAMES.get(req.operation)
        if builtin is None:
            if req.operation in info.declared:
                self._system_exception(req, CORBA.NO_IMPLEMENT(omniORB.NO_IMPLEMENT_NoPythonMethod, CORBA.COMPLETED_NO),
                                       None, f"the servant of {info.type_id} has no method {req.operation}")
            else:
                self._system_exception(req, CORBA.BAD_OPERATION(omniORB.BAD_OPERATION_UnRecognisedOperationName,
                                                                CORBA.COMPLETED_NO),
                                       None, f"the object is a {info.type_id}, which has no operation {req.operation}")
            return
        if builtin is IS_A:
            sink = ReplySink(req.request_id, req.version, req.little_endian, builtin, req.response_expected, self)
            try:
                (repo_id,) = builtin.args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts,
                                                 self.value_bounds, self.core.char_set)
            except CORBA.SystemException:
                sink.exception(CORBA.MARSHAL(0, CORBA.COMPLETED_NO))
                return
            sink.result(info.is_a(repo_id))
        else:
            self.builtin_result(req, builtin, False)

    def builtin_result(self, req: Request, builtin: marshal.Operation, value: Any) -> None:
        """Reply to a built-in operation (``_non_existent``) with ``value``."""
        ReplySink(req.request_id, req.version, req.little_endian, builtin, req.response_expected, self).result(value)

    def _not_here(self, req: Request) -> None:
        target = self.adapter.forwarded(req.object_key)
        if target is None:
            self._system_exception(req, CORBA.OBJECT_NOT_EXIST(omniORB.OBJECT_NOT_EXIST_NoMatch, CORBA.COMPLETED_NO),
                                   None, f"no object with key {key_text(req.object_key)} on this server")
        else:
            self.forward(req, target)

    def forward(self, req: Request, target: IOR) -> None:
        """Answer ``req`` LOCATION_FORWARD to ``target``."""
        if req.response_expected:
            self.send(self.core.reply(req.request_id, ReplyStatus.LOCATION_FORWARD, req.version, req.little_endian,
                                      lambda a: _ior_body(target, req.little_endian, a)))

    def _unreadable(self, req: Request, info: ServerRequestInfo | None, exc: CORBA.SystemException,
                    detail: str) -> None:
        """Answer a request whose arguments cannot be read; interceptors that
        admitted it see the exception, and their reply contexts go with it."""
        contexts = None
        if info is not None:
            for interceptor in reversed(self.interceptors):
                run_send_reply(interceptor, info, exc)
            contexts = info.reply_contexts
        self._system_exception(req, exc, contexts, detail)

    def _system_exception(self, req: Request, exc: CORBA.SystemException,
                          contexts: Mapping[int, bytes] | None = None, detail: str | None = None) -> None:
        """Answer ``req`` with ``exc``; ``detail`` (the server's own words, never a
        servant's) goes to the client in an ExceptionDetailMessage context."""
        if req.response_expected:
            le = req.little_endian
            sent = service_contexts(contexts)
            if detail:
                sent += (exception_detail_context(detail, le),)
            self.send(self.core.reply(req.request_id, ReplyStatus.SYSTEM_EXCEPTION, req.version, le,
                                      lambda a: marshal.pack_system_exception(exc, a, le), sent))

    def _needs_addressing_mode(self, req: Request) -> None:
        if req.response_expected:
            def key_addr(align: int) -> bytes:
                w = CDRWriter(req.little_endian, base=align)
                w.short(0)  # GIOP::KeyAddr: we only understand object keys
                return w.getvalue()

            self.send(self.core.reply(req.request_id, ReplyStatus.NEEDS_ADDRESSING_MODE, req.version,
                                      req.little_endian, key_addr))

    def _locate(self, req: LocateRequest) -> None:
        found = self.adapter.lookup(req.object_key)
        if found is not None:
            if found.manager is not None:
                found.manager.locate(self, req)
            else:
                self.locate_here(req)
            return
        target = self.adapter.forwarded(req.object_key)
        if target is not None:
            self.locate_reply(req, LocateStatus.OBJECT_FORWARD, target)
        else:
            self.locate_reply(req, LocateStatus.UNKNOWN_OBJECT)

    def locate_here(self, req: LocateRequest) -> None:
        """The object is served here: OBJECT_HERE, or forwarded to its full IOR (see :meth:`_introduction`)."""
        target = self._introduction(req)
        if target is not None:
            self.locate_reply(req, LocateStatus.OBJECT_FORWARD, target)
        else:
            self.locate_reply(req, LocateStatus.OBJECT_HERE)

    def locate_reply(self, req: LocateRequest, status: LocateStatus, target: IOR | None = None) -> None:
        le = req.little_endian
        pack = None if target is None else functools.partial(_ior_body, target, le)
        self.send(self.core.locate_reply(req.request_id, status, req.version, le, pack))

    def locate_exception(self, req: LocateRequest, exc: CORBA.SystemException) -> None:
        """A GIOP 1.2 LocateReply with LOC_SYSTEM_EXCEPTION."""
        le = req.little_endian
        self.send(self.core.locate_reply(req.request_id, LocateStatus.LOC_SYSTEM_EXCEPTION, req.version, le,
                                         lambda a: marshal.pack_system_exception(exc, a, le)))

    def _introduction(self, req: LocateRequest) -> IOR | None:
        """The full IOR to forward a LocateRequest for a served object to, if any.

        A client that has named no code sets on this connection may hold a
        reference made from a corbaloc URL, which carries none: forwarded to
        the object's full IOR (as JacORB does), it learns them and can send
        UTF-8 and wide text.  omniORB locates every such reference before
        its first call on it, then locates the IOR it was forwarded to: that
        next LocateRequest for the key is told OBJECT_HERE, the one after
        (another corbaloc reference) is forwarded again.  Once the client
        names code sets, or after a bounded number of forwards (a client
        that ignores them cannot loop for ever), the answer is OBJECT_HERE.
        """
        if self._reference is None or self.core.code_sets_chosen or req.version == GIOP_1_0:
            return None
        relocating = self._relocating
        if relocating is None:
            relocating = self._relocating = set()
        key = req.object_key
        if key in relocating:
            relocating.discard(key)
            return None
        if self._introduced >= _MAX_INTRODUCTIONS:
            return None
        self._introduced += 1
        relocating.add(key)
        return self._reference(key)

    def _cancel(self, request_id: int) -> None:
        task = self.tasks.pop(request_id, None) if self.tasks is not None else None
        if task is not None:
            task.cancel()
            return
        call = self.waiting.pop(request_id, None) if self.waiting is not None else None
        if call is not None:
            # Not started yet: it never runs.  Started: its reply is dropped.
            call.cancelled()

    # -- lifecycle -----------------------------------------------------------
    def request_finished(self, request_id: int) -> None:
        waiting = self.waiting
        if waiting is not None:
            waiting.pop(request_id, None)
        self.load.finished(self)

    def closed(self, exc: BaseException | None) -> None:
        # Calls still queued for a thread never run: nobody would read their
        # replies (a client that vanished with a thousand requests queued
        # must not cost a thousand servant calls).  Handlers already running
        # finish; their replies are dropped by the closed channel.
        waiting, self.waiting = self.waiting, None
        if waiting:
            for call in list(waiting.values()):
                call.cancelled()
        super().closed(exc)  # the server takes the coroutines still running, to end them when it closes
        self.tasks = None


serve_in_frame(RequestHandler._answer_inline.__code__, "req", "object_id")
# With the compiled accelerator, the C twin takes its place: every request read passes it.
_accelerator.twin(__name__, "RequestHandler.message_received", "pyorb.server._crequests")
