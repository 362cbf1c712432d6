"""One multiplexed client connection: request ids to pending invocations."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from omniORB import CORBA

from pyorb.aio.protocol import GIOPProtocol
from pyorb.client.calls import RequestWriter, Route
from pyorb.giop.connection import Role
from pyorb.giop.messages import CloseConnection, LocateReply, Message, MessageError, Reply

if TYPE_CHECKING:
    from pyorb.client.invocation import Invocation
    from pyorb.config import Config

log = logging.getLogger(__name__)


class ClientConnection(GIOPProtocol):
    """Many calls share this connection; replies find their call by request id."""

    def __init__(self, config: Config, on_closed: Callable[[ClientConnection], None]) -> None:
        super().__init__(Role.CLIENT, config)
        self.pending: dict[int, Invocation] = {}
        self.writer = RequestWriter(config, self.core)
        self._on_closed = on_closed

    # -- sending ---------------------------------------------------------------
    def start(self, inv: Invocation, route: Route) -> None:
        """Send ``inv`` on this connection (to ``route``'s object) and register it for the reply."""
        if not self.is_open:
            inv.fail(CORBA.COMM_FAILURE(0, CORBA.COMPLETED_NO))
            return
        if len(self.pending) >= self.config.max_pending_calls:
            # Bounded memory: the caller learns at once instead of queueing without end.
            inv.fail(CORBA.IMP_LIMIT(0, CORBA.COMPLETED_NO))
            return
        try:
            intercepted = inv.intercepted
            rid, data = self.writer.request(inv.op, inv.args, route.key, route.version, route.code_sets, route.orb_type,
                                            intercepted.contexts if intercepted is not None else ())
        except CORBA.SystemException as exc:
            inv.fail(exc)
            return
        if inv.op.oneway:
            self.send(data)
            inv.succeed(None)
            return
        inv.conn = self
        inv.request_id = rid
        self.pending[rid] = inv
        self.send(data)

    def cancel_request(self, request_id: int) -> None:
        if self.is_open:
            self.send(self.writer.cancel(request_id))

    # -- receiving -------------------------------------------------------------
    def message_received(self, message: Message) -> None:
        if type(message) is Reply:
            inv = self.pending.pop(message.request_id, None)
            if inv is None:
                log.debug("late or unknown reply %d dropped", message.request_id)
                return
            inv.complete(message)
        elif type(message) is LocateReply:
            log.debug("unexpected LocateReply %d dropped", message.request_id)
        elif type(message) is CloseConnection:
            # The server processed none of the pending requests: safe to retry.
            pending, self.pending = self.pending, {}
            self.close()  # first, so that a retry opens a new connection
            for inv in pending.values():
                inv.connection_closed_unanswered()
        elif type(message) is MessageError:
            log.warning("server %s reported a MessageError", self.peer)
            self._fail_all(CORBA.COMM_FAILURE(0, CORBA.COMPLETED_MAYBE))
            self.close()

    def _fail_all(self, exc: CORBA.SystemException) -> None:
        pending, self.pending = self.pending, {}
        for inv in pending.values():
            inv.lost(type(exc)(exc.minor, exc.completed))

    def closed(self, exc: BaseException | None) -> None:
        self._fail_all(CORBA.COMM_FAILURE(0, CORBA.COMPLETED_MAYBE))
        self._on_closed(self)
