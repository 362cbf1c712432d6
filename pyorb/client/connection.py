"""One multiplexed client connection: request ids to pending invocations."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from omniORB import CORBA

from pyorb.aio.protocol import GIOPProtocol
from pyorb.giop import codec
from pyorb.giop.connection import Role
from pyorb.giop.ior import CS_UTF8, CS_UTF16, code_sets_context
from pyorb.giop.messages import (
    GIOP_1_0,
    GIOP_1_2,
    SYNC_NONE,
    SYNC_WITH_TARGET,
    CancelRequest,
    CloseConnection,
    LocateReply,
    Message,
    MessageError,
    Reply,
    Request,
    ServiceContext,
    Version,
)

if TYPE_CHECKING:
    from pyorb.client.invocation import Invocation
    from pyorb.config import Config

log = logging.getLogger(__name__)

_CODE_SETS = (code_sets_context(CS_UTF8, CS_UTF16),)


class ClientConnection(GIOPProtocol):
    """Many calls share this connection; replies find their call by request id."""

    def __init__(self, config: Config, on_closed: Callable[[ClientConnection], None]) -> None:
        super().__init__(Role.CLIENT, config)
        self.pending: dict[int, Invocation] = {}
        self._next_id = 1
        self._code_sets_sent = False
        self._on_closed = on_closed

    def _request_id(self) -> int:
        rid = self._next_id
        self._next_id = (rid + 1) & 0xFFFFFFFF or 1
        return rid

    # -- sending ---------------------------------------------------------------
    def start(self, inv: Invocation, object_key: bytes, version: Version) -> None:
        """Send ``inv`` on this connection and register it for the reply."""
        if not self.is_open:
            inv.fail(CORBA.COMM_FAILURE(0, CORBA.COMPLETED_NO))
            return
        rid = self._request_id()
        le = self.config.little_endian
        op = inv.op
        contexts: tuple[ServiceContext, ...] = ()
        if not self._code_sets_sent and version != GIOP_1_0:
            # CORBA sends the negotiated code sets once, with the first request.
            contexts = _CODE_SETS
            self._code_sets_sent = True
        flags = SYNC_NONE if op.oneway else SYNC_WITH_TARGET
        try:
            if version == GIOP_1_2:
                body = op.args.pack(inv.args, 0, le)
                if contexts:
                    data = codec.encode(Request(rid, flags, object_key, op.name, body, contexts, version, le))
                else:  # the common case, without building a Request object
                    data = codec.encode_request_12(rid, flags, object_key, op.name, body, le)
            else:
                probe = Request(rid, flags, object_key, op.name, b"", contexts, version, le)
                body = op.args.pack(inv.args, codec.body_offset(probe), le)
                data = codec.encode(Request(rid, flags, object_key, op.name, body, contexts, version, le))
        except CORBA.SystemException as exc:
            inv.fail(exc)
            return
        if len(data) > self.config.max_message_size:
            inv.fail(CORBA.MARSHAL(0, CORBA.COMPLETED_NO))
            return
        if op.oneway:
            self.send(data)
            if not inv.future.done():
                inv.future.set_result(None)
            return
        inv.conn = self
        inv.request_id = rid
        self.pending[rid] = inv
        self.send(data)

    def cancel_request(self, request_id: int) -> None:
        if self.is_open:
            self.send(codec.encode(CancelRequest(request_id, little_endian=self.config.little_endian)))

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
            self._fail_all(CORBA.TRANSIENT(0, CORBA.COMPLETED_NO))
            self.close()
        elif type(message) is MessageError:
            log.warning("server %s reported a MessageError", self.peer)
            self._fail_all(CORBA.COMM_FAILURE(0, CORBA.COMPLETED_MAYBE))
            self.close()

    def _fail_all(self, exc: CORBA.SystemException) -> None:
        pending, self.pending = self.pending, {}
        for inv in pending.values():
            inv.fail(type(exc)(exc.minor, exc.completed))

    def closed(self, exc: BaseException | None) -> None:
        self._fail_all(CORBA.COMM_FAILURE(0, CORBA.COMPLETED_MAYBE))
        self._on_closed(self)
