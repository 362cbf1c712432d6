"""One outstanding call: its future, timer, and what to do with its reply."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

from omniORB import CORBA

from pyorb import marshal
from pyorb.giop.cdr import CDRReader
from pyorb.giop.errors import ProtocolError
from pyorb.giop.ior import IOR
from pyorb.giop.messages import Reply, ReplyStatus

if TYPE_CHECKING:
    from pyorb.client.connection import ClientConnection
    from pyorb.marshal import Operation

log = logging.getLogger(__name__)

_UNMARSHAL_FAILED = CORBA.MARSHAL


class Invocation:
    """A request in flight.  The connection completes it with the reply, or
    fails it; the timer or the caller's cancellation abandons it.

    ``retarget`` is called with a forwarded IOR (LOCATION_FORWARD) and must
    re-send this invocation there.
    """

    __slots__ = ("op", "args", "future", "conn", "request_id", "timer", "forwards", "retarget", "convert")

    def __init__(
        self,
        op: Operation,
        args: tuple[Any, ...],
        future: asyncio.Future[Any],
        retarget: Callable[[Invocation, IOR], None],
        convert: Callable[[Any], Any],
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

    # -- outcomes --------------------------------------------------------------
    def complete(self, reply: Reply) -> None:
        if self.future.done():
            return
        status = reply.reply_status
        try:
            if status is ReplyStatus.NO_EXCEPTION:
                self._set_result(reply)
            elif status is ReplyStatus.USER_EXCEPTION:
                self.fail(self.op.unpack_user_exception(reply.body, reply.body_offset, reply.little_endian))
            elif status is ReplyStatus.SYSTEM_EXCEPTION:
                self.fail(marshal.unpack_system_exception(reply.body, reply.body_offset, reply.little_endian))
            elif status in (ReplyStatus.LOCATION_FORWARD, ReplyStatus.LOCATION_FORWARD_PERM):
                self._forward(reply)
            else:  # NEEDS_ADDRESSING_MODE: we already send the simplest form
                self.fail(CORBA.NO_IMPLEMENT(0, CORBA.COMPLETED_NO))
        except CORBA.SystemException as exc:
            log.warning("reply to %s could not be decoded: %s", self.op.name, exc)
            self.fail(CORBA.MARSHAL(exc.minor, CORBA.COMPLETED_YES))

    def _set_result(self, reply: Reply) -> None:
        results = self.op.results
        values = results.unpack(reply.body, reply.body_offset, reply.little_endian, reply.fragment_starts)
        values = results.convert_objrefs(values, self.convert)
        self.future.set_result(self.op.result_value(values))

    def _forward(self, reply: Reply) -> None:
        try:
            target = IOR.decode(CDRReader(reply.body, reply.little_endian, base=reply.body_offset))
        except ProtocolError as exc:
            log.warning("bad LOCATION_FORWARD for %s: %s", self.op.name, exc.reason)
            self.fail(CORBA.MARSHAL(0, CORBA.COMPLETED_NO))
            return
        self.forwards += 1
        self.retarget(self, target)

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
