"""One outstanding call: its future, deadline, and what to do with its reply."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from omniORB import CORBA

from pyorb.marshal import layout
from pyorb import _accelerator
from pyorb.client import connection, errors
from pyorb.client.calls import Intercepted, LocationForward, reply_result
from pyorb.client.deadlines import Deadlines
from pyorb.giop.ior import IOR
from pyorb.giop.messages import GIOP_1_1, Reply, ReplyStatus

_NO_EXCEPTION = ReplyStatus.NO_EXCEPTION  # a global: cheaper to read per reply than the enum's attribute

if TYPE_CHECKING:
    from pyorb.client.balancer import Balancer
    from pyorb.client.calls import Endpoint, Route
    from pyorb.client.connection import ClientConnection
    from pyorb.marshal import Operation


class Caller(Protocol):
    """What an :class:`Invocation` needs of the client that made it."""

    def _retarget(self, inv: Invocation, target: IOR) -> None:
        """Send ``inv`` (again) to ``target``."""

    def from_objref(self, omni_ref: Any, interface: Any = None) -> Any:
        """A proxy for an omniORB object reference in a reply."""

    def route(self, target: IOR) -> Route | None:
        """Where calls to ``target`` go (for error texts)."""


_future_init = asyncio.Future.__init__


class Invocation(asyncio.Future[Any]):
    """A request in flight, and the future its caller awaits (one object per
    call).  The connection completes it with the reply, or fails it; its
    deadline or the caller's cancellation abandons it (the server gets a
    CancelRequest).  Settling it directly, instead of through a done
    callback, saves the event loop one callback per call.

    Its ``caller`` (the client) re-sends it: to a forwarded IOR
    (LOCATION_FORWARD), or to ``target`` again after a CloseConnection.
    """

    __slots__ = ("op", "args", "conn", "request_id", "deadlines", "deadline", "forwards", "caller",
                 "target", "resent", "intercepted", "member", "tried", "idempotent", "route", "timeout",
                 "sent_at")
    # Set only where they are needed (not in __init__, to keep a call's cost):
    route: Route
    """Where the call was sent: set with ``conn``, read by error texts."""
    timeout: float
    """Set by expire_in."""

    def __init__(
        self,
        op: Operation,
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop | None,
        caller: Caller,
        target: IOR,
    ) -> None:
        # ``loop`` None: the running one, which the caller made sure of.  Future's own lookup of
        # it costs less than passing it by keyword (a dict per call).
        if loop is None:
            _future_init(self)
        else:
            _future_init(self, loop=loop)
        self.op = op
        self.args = args
        self.conn: ClientConnection | None = None
        self.request_id = 0
        self.deadlines: Deadlines | None = None
        self.deadline = 0  # its slot in ``deadlines``
        self.forwards = 0
        self.caller = caller  # one reference, not two bound methods made per call
        self.target = target
        self.resent = False
        self.intercepted: Intercepted | None = None  # the client's interceptors, if it has any
        self.member: tuple[Balancer, Endpoint] | None = None  # for a call to an object group: who was picked
        self.tried: set[Endpoint] | None = None  # group members that failed this call
        self.idempotent = False  # the caller says re-sending after a lost connection is safe
        self.sent_at = 0.0  # for a call to an object group: when it went to its member (time.monotonic)

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        self.release()
        return True

    # -- outcomes --------------------------------------------------------------
    def expire_in(self, timeout: float, loop: asyncio.AbstractEventLoop, deadlines: Deadlines | None = None) -> None:
        """Time the call out after ``timeout`` seconds; ``deadlines``: the loop's, if the caller has them at hand."""
        if deadlines is None:
            deadlines = Deadlines.of(loop)
        self.deadlines = deadlines
        self.timeout = timeout
        self.deadline = deadlines.add(self, timeout, loop)

    def complete(self, reply: Reply) -> None:
        if self.done():
            return
        member = self.member
        if member is not None:
            member[0].replied(member[1], self.sent_at)
        conn = self.conn
        if reply.reply_status is _NO_EXCEPTION and conn is not None and self.intercepted is None:
            # The common reply in one frame: nothing to release but the deadline
            # (the connection has dropped the call already), no interceptor to
            # tell.  A body that does not decode takes the general way, which
            # logs it and fails the call with MARSHAL.
            core = conn.core
            wide11 = bool(core.wide_giop11) and reply.version == GIOP_1_1
            try:
                value = self.op.reply_value(reply.body, reply.body_offset, reply.little_endian, reply.fragment_starts,
                                            conn.value_bounds, core.char_set, wide11, self.caller.from_objref)
            except CORBA.SystemException:
                pass
            else:
                if self.deadlines is not None:  # else nothing to release: the connection has dropped the call
                    self.release()
                self.set_result(value)
                return
        if self.intercepted is not None:
            self.intercepted.reply_contexts(reply.service_contexts)
        try:
            conn = self.conn
            if conn is not None:
                core = conn.core
                value = reply_result(self.op, reply, self.caller.from_objref, conn.value_bounds, core.char_set,
                                     core.wide_giop11, self.route, self.target)
            else:
                value = reply_result(self.op, reply, self.caller.from_objref, layout.DEFAULT_BOUNDS)
        except LocationForward as fwd:
            self.forwards += 1
            self.caller._retarget(self, fwd.target)
        except CORBA.SystemException as exc:
            if self.member is not None and _retryable(exc, self.idempotent):
                self.fail_over(self.member[1])
            else:
                self.fail(exc)
        except CORBA.Exception as exc:  # the user exception the reply carries
            self.fail(exc)
        else:
            self.succeed(value)

    def connection_closed_unanswered(self) -> None:
        """The server sent CloseConnection before answering: it ran none of
        the pending requests, so re-send once on a new connection (as
        omniORB does); a second time the caller gets TRANSIENT, completed NO."""
        if self.done():
            return
        if self.member is not None:  # a group member leaving: another one takes it
            self.fail_over(self.member[1])
            return
        if self.resent:
            callee = self.conn.callee if self.conn is not None else "the server"  # a bidirectional peer: its client
            self.fail(errors.closed_unanswered(self.op.name, self.sent_to(), callee))
            return
        self.resent = True
        self.conn = None
        self.caller._retarget(self, self.target)

    def succeed(self, value: Any) -> None:
        if not self.done():
            self.release()
            if self.intercepted is not None:
                self.intercepted.receive_reply(None)
            self.set_result(value)

    def fail(self, exc: BaseException) -> None:
        if not self.done():
            self.release()
            if self.intercepted is not None:
                self.intercepted.receive_reply(exc)
            self.set_exception(exc)

    def timed_out(self) -> None:
        """Called by :class:`~pyorb.client.deadlines.Deadlines` when the call's time is up."""
        self.deadlines = None
        if self.member is not None and self.conn is not None:  # a stalled replica: others get the next calls
            self.member[0].failed(self.member[1])
        route = self.sent_to()
        self.fail(errors.timed_out(self.op.name, route, self.timeout, sent=self.conn is not None))

    def sent_to(self) -> Route | None:
        """The route this call went to, or would go to if it has not been sent yet."""
        if self.conn is not None:
            return self.route
        try:
            return self.caller.route(self.target)
        except Exception:  # only for a message: an unusable reference has no route to name
            return None

    def lost(self, exc: CORBA.SystemException) -> None:
        """The connection carrying this call failed before the reply.  A call
        to an object group goes to another member if it cannot have run
        (completed NO) or the caller declared it idempotent; else it fails
        with ``exc``: a call that may have run is never re-sent silently."""
        member = self.member
        if member is None or self.done():
            self.fail(exc)
            return
        member[0].failed(member[1])
        if exc.completed != CORBA.COMPLETED_NO and not self.idempotent:
            self.fail(exc)
            return
        self.fail_over(member[1])

    def retry_elsewhere(self) -> None:
        """Leave this idempotent group call's member (ejected as stalled) for
        another one: the member gets a CancelRequest and its late reply is
        dropped, so the caller gets one answer.  The deadline stays."""
        assert self.member is not None and self.idempotent
        conn = self.conn
        if conn is not None and conn.pending.pop(self.request_id, None) is not None:
            conn.cancel_request(self.request_id)
        self.fail_over(self.member[1])

    def fail_over(self, endpoint: Endpoint) -> None:
        """Send this group call to another member than ``endpoint`` (and those tried before)."""
        tried = self.tried
        if tried is None:
            tried = self.tried = set()
        tried.add(endpoint)
        self.conn = None
        self.caller._retarget(self, self.target)

    def release(self) -> None:
        """The call is over: drop its deadline and, if the server still owes
        the reply (the caller gave up), its slot on the connection, telling
        the server with a CancelRequest."""
        deadlines = self.deadlines
        if deadlines is not None:
            self.deadlines = None
            deadlines.remove(self, self.deadline)
        conn = self.conn
        if conn is not None and conn.pending.pop(self.request_id, None) is not None:
            conn.cancel_request(self.request_id)


def _retryable(exc: CORBA.SystemException, idempotent: bool) -> bool:
    """Whether a group call whose member replied ``exc`` may go to another
    member: TRANSIENT that says the call did not run, and for an idempotent
    call TRANSIENT or COMM_FAILURE whatever it says."""
    if not isinstance(exc, (CORBA.TRANSIENT, CORBA.COMM_FAILURE)):
        return False
    return idempotent or (isinstance(exc, CORBA.TRANSIENT) and exc.completed == CORBA.COMPLETED_NO)


class Hedge(Invocation):
    """A second copy of an idempotent group call, sent to another member
    while the first is still unanswered (see :class:`pyorb.client.balancer.Hedging`).

    It has the call's operation, arguments, target, service contexts and
    deadline, and ends when the call does (cancelled, with a CancelRequest).  The client hands its answer (a result or a user
    exception) to the call; a system exception only ends the hedge, and the
    call goes on waiting for its own copy.  It is not passed on to another
    member: a hedge is one extra attempt.  Interceptors hear the outcome
    once, from the call.
    """

    __slots__ = ("call",)

    def __init__(self, call: Invocation) -> None:
        super().__init__(call.op, call.args, call.get_loop(), call.caller, call.target)
        self.call = call
        self.idempotent = True
        self.intercepted = call.intercepted  # its contexts travel with the copy too
        # The call's deadline, so that its time left travels with the copy;
        # not registered for a timer of its own: the call ending cancels it.
        self.deadlines, self.deadline = call.deadlines, call.deadline

    def succeed(self, value: Any) -> None:
        if not self.done():
            self.release()
            self.set_result(value)

    def fail(self, exc: BaseException) -> None:
        if not self.done():
            self.release()
            self.set_exception(exc)

    def fail_over(self, endpoint: Endpoint) -> None:
        self.fail(errors.hedge_ended(self.op.name, endpoint))


# With the compiled accelerator, the C twins take their places: once per call a client sends, times or
# reads.  All are declared here, where every original is loaded (connection.py needs this module only for types).
_accelerator.twin(__name__, "Invocation.complete", "pyorb.client._cinvocation")
_accelerator.twin(__name__, "Invocation.expire_in", "pyorb.client._cinvocation")
_accelerator.twin(connection.__name__, "ClientConnection.message_received", "pyorb.client._cinvocation")
_accelerator.twin(connection.__name__, "ClientConnection.start", "pyorb.client._cinvocation")
