"""GIOP 1.0/1.1/1.2 message encoding and decoding: pure functions, no state.

``encode`` turns a message dataclass into the bytes of one complete GIOP
message; ``decode`` does the reverse for a complete, non-fragmented message
(framing and fragment reassembly live in :mod:`pyorb.giop.connection`).

Every malformation of the input raises :class:`ProtocolError` and nothing
else.  Misuse by the caller (encoding something the requested GIOP version
cannot express) raises :class:`ValueError`: that is a bug here, not a peer
breaking the protocol.

The header is :mod:`pyorb.giop.header`'s; the hot paths, GIOP 1.2 Requests
addressed by object key and GIOP 1.2 Replies, are :mod:`pyorb.giop.fast12`'s,
tried first; the general path here, built on :mod:`pyorb.giop.cdr`, decides
every unusual or malformed case.
"""

from __future__ import annotations

import struct
from typing import Callable

from pyorb.giop.cdr import CDRReader, CDRWriter
from pyorb.giop.errors import ProtocolError
from pyorb.giop.fast12 import (
    _REPLY_STATUSES,
    _decode_reply_12_fast,
    _decode_request_12_fast,
    _encode_reply_12,
    _encode_request_12,
    _is_plain_request_12,
)
from pyorb.giop.header import (
    _HEADER,
    _REPLY,
    _REQUEST,
    HEADER_SIZE,
    KEY_ADDR,
    PROFILE_ADDR,
    REFERENCE_ADDR,
    Buffer,
    Header,
    _pack_header,
    parse_header,
)
from pyorb.giop.messages import (
    GIOP_1_0,
    GIOP_1_1,
    GIOP_1_2,
    SUPPORTED_VERSIONS,
    CancelRequest,
    CloseConnection,
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

# Highest valid enum value per version (later values were added by GIOP 1.2).
_MAX_REPLY_STATUS = {GIOP_1_0: 3, GIOP_1_1: 3, GIOP_1_2: 5}
_MAX_LOCATE_STATUS = {GIOP_1_0: 2, GIOP_1_1: 2, GIOP_1_2: 5}
_LOCATE_STATUSES = tuple(LocateStatus)


def message_error(version: Version = GIOP_1_2, little_endian: bool = True) -> bytes:
    """The bytes of a MessageError message (header only)."""
    _check_version(version)
    return _pack_header(MsgType.MESSAGE_ERROR, version, little_endian, 0)


# ---------------------------------------------------------------- encoding


def _check_version(version: Version) -> None:
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"unsupported GIOP version {version!r}")


def _write_contexts(w: CDRWriter, contexts: tuple[ServiceContext, ...]) -> None:
    w.ulong(len(contexts))
    for context in contexts:
        w.ulong(context.context_id)
        w.octets(context.data)


def _write_target(w: CDRWriter, disposition: int, object_key: bytes) -> None:
    """A GIOP 1.2 TargetAddress; for Profile/ReferenceAddr the key is the raw member."""
    if disposition == KEY_ADDR:
        w.short(KEY_ADDR)
        w.octets(object_key)
    elif disposition in (PROFILE_ADDR, REFERENCE_ADDR):
        w.short(disposition)
        w.align(4)
        w.raw(object_key)
    else:
        raise ValueError(f"invalid addressing_disposition {disposition}")


def _check_key_addr(version: Version, disposition: int) -> None:
    if disposition != KEY_ADDR:
        raise ValueError(f"GIOP {version[0]}.{version[1]} can only address by object key")


def _write_request(w: CDRWriter, msg: Request) -> None:
    if msg.version == GIOP_1_2:
        if msg.requesting_principal:
            raise ValueError("GIOP 1.2 has no requesting_principal")
        w.ulong(msg.request_id)
        w.octet(msg.response_flags)
        w.raw(b"\0\0\0")
        _write_target(w, msg.addressing_disposition, msg.object_key)
        w.string(msg.operation)
        _write_contexts(w, msg.service_contexts)
        return
    _check_key_addr(msg.version, msg.addressing_disposition)
    _write_contexts(w, msg.service_contexts)
    w.ulong(msg.request_id)
    w.boolean(msg.response_expected)
    if msg.version == GIOP_1_1:
        w.raw(b"\0\0\0")
    w.octets(msg.object_key)
    w.string(msg.operation)
    w.octets(msg.requesting_principal)


def _write_reply(w: CDRWriter, msg: Reply) -> None:
    if msg.reply_status > _MAX_REPLY_STATUS[msg.version]:
        raise ValueError(f"{msg.reply_status!r} does not exist in GIOP {msg.version}")
    if msg.version == GIOP_1_2:
        w.ulong(msg.request_id)
        w.ulong(msg.reply_status)
        _write_contexts(w, msg.service_contexts)
    else:
        _write_contexts(w, msg.service_contexts)
        w.ulong(msg.request_id)
        w.ulong(msg.reply_status)


def _write_cancel_request(w: CDRWriter, msg: CancelRequest) -> None:
    w.ulong(msg.request_id)


def _write_locate_request(w: CDRWriter, msg: LocateRequest) -> None:
    w.ulong(msg.request_id)
    if msg.version == GIOP_1_2:
        _write_target(w, msg.addressing_disposition, msg.object_key)
    else:
        _check_key_addr(msg.version, msg.addressing_disposition)
        w.octets(msg.object_key)


def _write_locate_reply(w: CDRWriter, msg: LocateReply) -> None:
    if msg.locate_status > _MAX_LOCATE_STATUS[msg.version]:
        raise ValueError(f"{msg.locate_status!r} does not exist in GIOP {msg.version}")
    w.ulong(msg.request_id)
    w.ulong(msg.locate_status)


_MESSAGE_CLASSES = (
    Request,
    Reply,
    CancelRequest,
    LocateRequest,
    LocateReply,
    CloseConnection,
    MessageError,
)


def _write_message_header(w: CDRWriter, msg: Message) -> MsgType:
    """Write everything between the GIOP header and the body; return the type."""
    if isinstance(msg, Request):
        _write_request(w, msg)
        return MsgType.REQUEST
    if isinstance(msg, Reply):
        _write_reply(w, msg)
        return MsgType.REPLY
    if isinstance(msg, CancelRequest):
        _write_cancel_request(w, msg)
        return MsgType.CANCEL_REQUEST
    if isinstance(msg, LocateRequest):
        _write_locate_request(w, msg)
        return MsgType.LOCATE_REQUEST
    if isinstance(msg, LocateReply):
        _write_locate_reply(w, msg)
        return MsgType.LOCATE_REPLY
    if isinstance(msg, CloseConnection):
        return MsgType.CLOSE_CONNECTION
    return MsgType.MESSAGE_ERROR


def _message_header(msg: Message) -> tuple[MsgType, CDRWriter]:
    """Write the message header, then the padding a GIOP 1.2 body needs."""
    if not isinstance(msg, _MESSAGE_CLASSES):
        raise TypeError(f"not a GIOP message: {msg!r}")
    _check_version(msg.version)
    w = CDRWriter(msg.little_endian, base=HEADER_SIZE)
    msg_type = _write_message_header(w, msg)
    if isinstance(msg, (Request, Reply)) and msg.version == GIOP_1_2:
        # GIOP 1.2 Request and Reply bodies start 8-aligned (relative to the
        # message start); a LocateReply body follows its header directly.
        if msg.body:
            w.align(8)
    return msg_type, w


def encode(msg: Message) -> bytes:
    """The complete GIOP message (12-byte header included) for ``msg``.

    Raises ValueError (TypeError for a non-message) if ``msg`` cannot be
    expressed: a field out of range, or something its GIOP version lacks.
    """
    try:
        if type(msg) is Request:
            if _is_plain_request_12(msg):
                return _encode_request_12(msg)
        elif type(msg) is Reply and msg.version == GIOP_1_2 and not msg.service_contexts:
            return _encode_reply_12(msg)
        return _encode(msg)
    except struct.error as exc:  # a ulong out of range, say
        raise ValueError(f"cannot encode {msg!r}: {exc}") from None


def _encode(msg: Message) -> bytes:
    msg_type, w = _message_header(msg)
    if isinstance(msg, (Request, Reply, LocateReply)):
        w.raw(msg.body)
    return _pack_header(msg_type, msg.version, msg.little_endian, len(w.buf)) + w.buf


def body_offset(msg: Request | Reply | LocateReply) -> int:
    """Where ``encode(msg)`` puts the body, counted from the message start.

    For a GIOP 1.2 Request or Reply this is the 8-aligned position even if
    the body is empty (an empty body is not padded, but the marshal layer
    asks before it has one).
    """
    _msg_type, w = _message_header(msg)
    offset = HEADER_SIZE + len(w.buf)
    if msg.version == GIOP_1_2 and not isinstance(msg, LocateReply):
        offset += -offset % 8
    return offset


# ---------------------------------------------------------------- decoding


def decode(header: Buffer, body: Buffer) -> Message:
    """Decode one complete, non-fragmented message from its header and body."""
    if len(header) != HEADER_SIZE:
        raise ProtocolError(f"GIOP header must be 12 bytes, got {len(header)}")
    hdr = parse_header(header)
    if hdr.msg_type is MsgType.FRAGMENT or hdr.more_fragments:
        raise ProtocolError("a fragment is not a complete message")
    if hdr.size != len(body):
        raise ProtocolError(f"header declares {hdr.size} bytes, body has {len(body)}")
    with memoryview(body) as view:
        return decode_body(hdr, view)


def decode_body(hdr: Header, body: memoryview | bytes) -> Message:
    """Decode the body of a message whose header was already parsed.

    ``body`` starts right after the 12-byte header; ``hdr.size`` and the
    more-fragments flag are not looked at (the connection calls this with
    reassembled fragment trains).  Every field is copied out of ``body``, so
    no view of it outlives the call.
    """
    if hdr.version == GIOP_1_2:
        fast: Message | None = None
        if hdr.msg_type is _REPLY:
            fast = _decode_reply_12_fast(body, hdr.little_endian)
        elif hdr.msg_type is _REQUEST:
            fast = _decode_request_12_fast(body, hdr.little_endian)
        if fast is not None:
            return fast
    try:
        decoder = _DECODERS[hdr.msg_type]
    except KeyError:
        raise ProtocolError(f"{hdr.msg_type.name} is not a complete message") from None
    return decoder(CDRReader(body, hdr.little_endian, base=HEADER_SIZE), hdr.version)


def _read_context(r: CDRReader) -> ServiceContext:
    return ServiceContext(r.ulong(), r.octets())


def _read_contexts(r: CDRReader) -> tuple[ServiceContext, ...]:
    # Each context takes at least 8 bytes: this bounds the list allocation.
    return tuple(r.sequence(_read_context, min_item_size=8))


def _skip_profile(r: CDRReader) -> None:
    r.ulong()  # profile tag
    r.raw(r.ulong())  # profile_data


def _read_target(r: CDRReader) -> tuple[int, bytes]:
    """A TargetAddress: (disposition, key or raw Profile/ReferenceAddr member)."""
    disposition = r.short()
    if disposition == KEY_ADDR:
        return KEY_ADDR, r.octets()
    if disposition not in (PROFILE_ADDR, REFERENCE_ADDR):
        raise ProtocolError(f"bad TargetAddress discriminator {disposition}")
    r.align(4)
    start = r.pos
    if disposition == PROFILE_ADDR:
        _skip_profile(r)
    else:
        r.ulong()  # selected_profile_index
        r.raw(r.ulong())  # IOR type_id, not interpreted
        r.sequence(_skip_profile, min_item_size=8)
    return disposition, bytes(r.data[start : r.pos])


def _body(r: CDRReader, version: Version, aligned: bool = True) -> tuple[int, bytes]:
    """(body_offset, body): GIOP 1.2 Request and Reply bodies start 8-aligned,
    earlier ones (and every LocateReply body, CORBA 3.0 15.4.6.2) directly."""
    start = r.pos
    if version == GIOP_1_2 and aligned:
        start += -(start + HEADER_SIZE) % 8
    return start + HEADER_SIZE, bytes(r.data[start:])


def _reply_status(value: int, version: Version) -> ReplyStatus:
    if value > _MAX_REPLY_STATUS[version]:
        raise ProtocolError(f"bad reply status {value} for GIOP {version[0]}.{version[1]}")
    return _REPLY_STATUSES[value]


def _locate_status(value: int, version: Version) -> LocateStatus:
    if value > _MAX_LOCATE_STATUS[version]:
        raise ProtocolError(f"bad locate status {value} for GIOP {version[0]}.{version[1]}")
    return _LOCATE_STATUSES[value]


def _decode_request(r: CDRReader, version: Version) -> Request:
    if version == GIOP_1_2:
        request_id = r.ulong()
        flags = r.octet()
        r.raw(3)  # reserved
        disposition, key = _read_target(r)
        operation = r.string()
        contexts = _read_contexts(r)
        principal = b""
    else:
        contexts = _read_contexts(r)
        request_id = r.ulong()
        flags = 3 if r.boolean() else 0
        if version == GIOP_1_1:
            r.raw(3)  # reserved
        disposition, key = KEY_ADDR, r.octets()
        operation = r.string()
        principal = r.octets()
    offset, body = _body(r, version)
    return Request(
        request_id,
        flags,
        key,
        operation,
        body,
        contexts,
        version,
        r.little_endian,
        offset,
        principal,
        disposition,
    )


def _decode_reply(r: CDRReader, version: Version) -> Reply:
    if version == GIOP_1_2:
        request_id = r.ulong()
        status = _reply_status(r.ulong(), version)
        contexts = _read_contexts(r)
    else:
        contexts = _read_contexts(r)
        request_id = r.ulong()
        status = _reply_status(r.ulong(), version)
    offset, body = _body(r, version)
    return Reply(request_id, status, body, contexts, version, r.little_endian, offset)


def _decode_cancel_request(r: CDRReader, version: Version) -> CancelRequest:
    return CancelRequest(r.ulong(), version, r.little_endian)


def _decode_locate_request(r: CDRReader, version: Version) -> LocateRequest:
    request_id = r.ulong()
    if version == GIOP_1_2:
        disposition, key = _read_target(r)
    else:
        disposition, key = KEY_ADDR, r.octets()
    return LocateRequest(request_id, key, version, r.little_endian, disposition)


def _decode_locate_reply(r: CDRReader, version: Version) -> LocateReply:
    request_id = r.ulong()
    status = _locate_status(r.ulong(), version)
    offset, body = _body(r, version, aligned=False)
    return LocateReply(request_id, status, body, version, r.little_endian, offset)


def _decode_close_connection(r: CDRReader, version: Version) -> CloseConnection:
    return CloseConnection(version, r.little_endian)


def _decode_message_error(r: CDRReader, version: Version) -> MessageError:
    return MessageError(version, r.little_endian)


_DECODERS: dict[MsgType, Callable[[CDRReader, Version], Message]] = {
    MsgType.REQUEST: _decode_request,
    MsgType.REPLY: _decode_reply,
    MsgType.CANCEL_REQUEST: _decode_cancel_request,
    MsgType.LOCATE_REQUEST: _decode_locate_request,
    MsgType.LOCATE_REPLY: _decode_locate_reply,
    MsgType.CLOSE_CONNECTION: _decode_close_connection,
    MsgType.MESSAGE_ERROR: _decode_message_error,
}


__all__ = [
    "HEADER_SIZE",
    "KEY_ADDR",
    "PROFILE_ADDR",
    "REFERENCE_ADDR",
    "Header",
    "body_offset",
    "decode",
    "decode_body",
    "encode",
    "message_error",
    "parse_header",
]
