"""GIOP messages as small frozen dataclasses (the events of the sans-IO core).

A message carries its GIOP ``version`` and byte order.  Bodies (operation
arguments, results, exception members) are opaque bytes here: they are
produced and consumed by :mod:`pyorb.marshal`.  ``body_offset`` is the
position of the body within the whole message (GIOP header included); CDR
alignment inside the body is relative to the message start, so the marshal
layer needs ``body_offset % 8``.  For GIOP 1.2 bodies it is always 0 mod 8.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

Version = tuple[int, int]
GIOP_1_0: Version = (1, 0)
GIOP_1_1: Version = (1, 1)
GIOP_1_2: Version = (1, 2)
SUPPORTED_VERSIONS = (GIOP_1_0, GIOP_1_1, GIOP_1_2)


class MsgType(enum.IntEnum):
    REQUEST = 0
    REPLY = 1
    CANCEL_REQUEST = 2
    LOCATE_REQUEST = 3
    LOCATE_REPLY = 4
    CLOSE_CONNECTION = 5
    MESSAGE_ERROR = 6
    FRAGMENT = 7


class ReplyStatus(enum.IntEnum):
    NO_EXCEPTION = 0
    USER_EXCEPTION = 1
    SYSTEM_EXCEPTION = 2
    LOCATION_FORWARD = 3
    LOCATION_FORWARD_PERM = 4  # GIOP 1.2
    NEEDS_ADDRESSING_MODE = 5  # GIOP 1.2


class LocateStatus(enum.IntEnum):
    UNKNOWN_OBJECT = 0
    OBJECT_HERE = 1
    OBJECT_FORWARD = 2
    OBJECT_FORWARD_PERM = 3  # GIOP 1.2
    LOC_SYSTEM_EXCEPTION = 4  # GIOP 1.2
    LOC_NEEDS_ADDRESSING_MODE = 5  # GIOP 1.2


# Response flags of a GIOP 1.2 Request (1.0/1.1 only have response_expected).
SYNC_NONE = 0  # oneway: no reply
SYNC_WITH_TARGET = 3  # two-way: a reply is expected
# Service context ids pyorb understands.
SC_CODE_SETS = 1
SC_INVOCATION_POLICIES = 7  # CORBA Messaging: a call's timing policies (pyorb.giop.policies)


@dataclass(frozen=True, slots=True)
class ServiceContext:
    context_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Request:
    request_id: int
    response_flags: int  # 0 = no reply wanted; 1.0/1.1 response_expected maps to 0 or 3
    object_key: bytes
    operation: str
    body: bytes = b""
    service_contexts: tuple[ServiceContext, ...] = ()
    version: Version = GIOP_1_2
    little_endian: bool = True
    body_offset: int = 0  # set by the decoder; ignored when encoding
    requesting_principal: bytes = b""  # GIOP 1.0/1.1 only
    # GIOP 1.2 TargetAddress discriminator: 0 KeyAddr, 1 ProfileAddr, 2 ReferenceAddr.
    # For 1 and 2 ``object_key`` holds the raw, uninterpreted CDR of the union member.
    addressing_disposition: int = 0
    # Offsets in ``body`` where GIOP 1.1 Fragment payloads began: omniORB
    # restarts CDR alignment in each, so the marshal layer must realign.
    fragment_starts: tuple[int, ...] = ()

    @property
    def response_expected(self) -> bool:
        return bool(self.response_flags & 1)


@dataclass(frozen=True, slots=True)
class Reply:
    request_id: int
    reply_status: ReplyStatus
    body: bytes = b""
    service_contexts: tuple[ServiceContext, ...] = ()
    version: Version = GIOP_1_2
    little_endian: bool = True
    body_offset: int = 0
    fragment_starts: tuple[int, ...] = ()  # as for Request


@dataclass(frozen=True, slots=True)
class CancelRequest:
    request_id: int
    version: Version = GIOP_1_2
    little_endian: bool = True


@dataclass(frozen=True, slots=True)
class LocateRequest:
    request_id: int
    object_key: bytes
    version: Version = GIOP_1_2
    little_endian: bool = True
    addressing_disposition: int = 0  # as in Request


@dataclass(frozen=True, slots=True)
class LocateReply:
    request_id: int
    locate_status: LocateStatus
    body: bytes = b""  # an IOR for OBJECT_FORWARD, a system exception for LOC_SYSTEM_EXCEPTION
    version: Version = GIOP_1_2
    little_endian: bool = True
    body_offset: int = 0


@dataclass(frozen=True, slots=True)
class CloseConnection:
    version: Version = GIOP_1_2
    little_endian: bool = True


@dataclass(frozen=True, slots=True)
class MessageError:
    version: Version = GIOP_1_2
    little_endian: bool = True


Message = Union[
    Request, Reply, CancelRequest, LocateRequest, LocateReply, CloseConnection, MessageError
]


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"
    CLOSED = "CLOSED"


NEED_DATA = _Sentinel.NEED_DATA
"""``next_event()`` needs more bytes before it can return a message."""
CLOSED = _Sentinel.CLOSED
"""The peer closed its side (``receive_data(b"")``) and every message was read."""

Event = Union[Message, _Sentinel]

__all__ = [
    "CLOSED",
    "GIOP_1_0",
    "GIOP_1_1",
    "GIOP_1_2",
    "NEED_DATA",
    "SC_CODE_SETS",
    "SC_INVOCATION_POLICIES",
    "SUPPORTED_VERSIONS",
    "SYNC_NONE",
    "SYNC_WITH_TARGET",
    "CancelRequest",
    "CloseConnection",
    "Event",
    "LocateReply",
    "LocateRequest",
    "LocateStatus",
    "Message",
    "MessageError",
    "MsgType",
    "Reply",
    "ReplyStatus",
    "Request",
    "ServiceContext",
    "Version",
]
