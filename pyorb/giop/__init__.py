"""The sans-IO GIOP core: bytes in, message events out, and back.

Standard library only, and cheap to import: no asyncio, threads or omniORB.
"""

from __future__ import annotations

from pyorb.giop.codec import (
    Header,
    body_offset,
    decode,
    decode_body,
    encode,
    message_error,
    parse_header,
)
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import (
    CLOSED,
    GIOP_1_0,
    GIOP_1_1,
    GIOP_1_2,
    NEED_DATA,
    SC_CODE_SETS,
    SUPPORTED_VERSIONS,
    SYNC_NONE,
    SYNC_WITH_TARGET,
    CancelRequest,
    CloseConnection,
    Event,
    LocateReply,
    LocateRequest,
    LocateStatus,
    Message,
    MessageError,
    MsgType,
    Reply,
    ReplyStatus,
    Request,
    ServiceContext,
    Version,
)
from pyorb.giop.twins import install as _install_twins

_install_twins()

__all__ = [
    "CLOSED",
    "GIOP_1_0",
    "GIOP_1_1",
    "GIOP_1_2",
    "NEED_DATA",
    "SC_CODE_SETS",
    "SUPPORTED_VERSIONS",
    "SYNC_NONE",
    "SYNC_WITH_TARGET",
    "CancelRequest",
    "CloseConnection",
    "Event",
    "GIOPConnection",
    "Header",
    "LocateReply",
    "LocateRequest",
    "LocateStatus",
    "Message",
    "MessageError",
    "MsgType",
    "ProtocolError",
    "Reply",
    "ReplyStatus",
    "Request",
    "Role",
    "ServiceContext",
    "Version",
    "body_offset",
    "decode",
    "decode_body",
    "encode",
    "message_error",
    "parse_header",
]
