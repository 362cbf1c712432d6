"""One outstanding call: its future, timer, and what to do with its reply."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from omniORB import CORBA

from pyorb.client.calls import LocationForward, reply_result
from pyorb.giop.ior import IOR
from pyorb.giop.messages import Reply

if TYPE_CHECKING:
    from pyorb.client.connection import ClientConnection
    from pyorb.marshal import Operation


class Invocation:
    """A request in flight.  The connection completes it with the reply, or
    fails it; the timer or the caller's cancellation abandons it.

    ``retarget`` is called with a forwarded IOR (LOCATION_FORWARD), or with
    ``target`` again after a CloseConnection, and must re-send this
    invocation there.
    """

    __slots__ = ("op", "args", "future", "conn", "request_id", "timer", "forwards", "retarget", "convert", "target",
                 "resent")

    def __init__(
        self,
        op: Operation,
        args: tuple[Any, ...],
        future: asyncio.Future[Any],
        retarget: Callable[[Invocation, IOR], None],
        convert: Callable[[Any], Any],
        target: IOR,
    ) -> None:
        self.op = op
        self.args = args
        self.future = future
        self.conn: ClientConnection | None = None
        self.request_id = 0
        self.timer: asyncio.TimerHandle | None = None
        self.forwards = 0
        self.retarget = retarget
        self.convert = convert
        self.target = target
        self.resent = False

    # -- outcomes --------------------------------------------------------------
    def complete(self, reply: Reply) -> None:
        if self.future.done():
            return
        try:
            self.future.set_result(reply_result(self.op, reply, self.convert))
        except LocationForward as fwd:
            self.forwards += 1
            self.retarget(self, fwd.target)
        except CORBA.Exception as exc:  # the user or system exception the reply carries
            self.fail(exc)

    def connection_closed_unanswered(self) -> None:
        """The server sent CloseConnection before answering: it ran none of
        the pending requests, so re-send once on a new connection (as
        omniORB does); a second time the caller gets TRANSIENT, completed NO."""
        if self.future.done():
            return
        if self.resent:
            self.fail(CORBA.TRANSIENT(0, CORBA.COMPLETED_NO))
            return
        self.resent = True
        self.conn = None
        self.retarget(self, self.target)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)

    def timed_out(self) -> None:
        self.timer = None
        if not self.future.done():
            self.future.set_exception(CORBA.TIMEOUT(0, CORBA.COMPLETED_MAYBE))

    def finished(self, _fut: asyncio.Future[Any]) -> None:
        """Done callback of the future: release the slot, cancel on the wire."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        conn = self.conn
        if conn is not None and conn.pending.pop(self.request_id, None) is not None:
            # Still pending: the caller gave up (timeout or cancellation).
            conn.cancel_request(self.request_id)
