"""GIOP 1.0/1.1/1.2 message encoding and decoding: pure functions, no state.

``encode`` turns a message dataclass into the bytes of one complete GIOP
message; ``decode`` does the reverse for a complete, non-fragmented message
(framing and fragment reassembly live in :mod:`pyorb.giop.connection`).

Every malformation of the input raises :class:`ProtocolError` and nothing
else.  Misuse by the caller (encoding something the requested GIOP version
cannot express) raises :class:`ValueError`: that is a bug here, not a peer
breaking the protocol.

The hot paths, encoding and decoding GIOP 1.2 Requests addressed by object
key and GIOP 1.2 Replies, use precompiled :class:`struct.Struct` objects
directly.  They cover only the common shapes (no service contexts, except
when decoding a Request) and give up on anything else, returning ``None``
or never being chosen, so that the readable general path built on
:mod:`pyorb.giop.cdr` decides every unusual or malformed case.
"""

from __future__ import annotations

import struct
from typing import Callable, Literal, NamedTuple, Union

from pyorb import _accelerator
from pyorb.giop.cdr import CDRReader, CDRWriter
from pyorb.giop.errors import ProtocolError
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

Buffer = Union[bytes, bytearray, memoryview]

HEADER_SIZE = 12
MAGIC = b"GIOP"

# TargetAddress discriminators (GIOP 1.2).
KEY_ADDR = 0
PROFILE_ADDR = 1
REFERENCE_ADDR = 2

# Flag bits of the GIOP 1.1+ header (GIOP 1.0 has a plain byte_order boolean).
FLAG_LITTLE_ENDIAN = 0x01
FLAG_MORE_FRAGMENTS = 0x02

# Which messages may carry the more-fragments flag, per version.
_FRAGMENTABLE: dict[Version, frozenset[MsgType]] = {
    GIOP_1_0: frozenset(),
    GIOP_1_1: frozenset({MsgType.REQUEST, MsgType.REPLY, MsgType.FRAGMENT}),
    GIOP_1_2: frozenset(
        {
            MsgType.REQUEST,
            MsgType.REPLY,
            MsgType.LOCATE_REQUEST,
            MsgType.LOCATE_REPLY,
            MsgType.FRAGMENT,
        }
    ),
}
# Highest valid enum value per version (later values were added by GIOP 1.2).
_MAX_REPLY_STATUS = {GIOP_1_0: 3, GIOP_1_1: 3, GIOP_1_2: 5}
_MAX_LOCATE_STATUS = {GIOP_1_0: 2, GIOP_1_1: 2, GIOP_1_2: 5}
# Indexing a tuple is much cheaper than calling an enum class.
_REPLY_STATUSES = tuple(ReplyStatus)
_LOCATE_STATUSES = tuple(LocateStatus)
# Looking up an enum member on its class is slow (about 0.1 µs in 3.11).
_REQUEST = MsgType.REQUEST
_REPLY = MsgType.REPLY

# The 8 bytes the header table validates, and the message size in either order.
_PREFIX = struct.Struct("8s4s")
_U32 = {True: struct.Struct("<I"), False: struct.Struct(">I")}
_HEADER = {True: struct.Struct("<4s4BI"), False: struct.Struct(">4s4BI")}
# GIOP 1.2 Request up to the object key length: request_id, response_flags,
# reserved[3], TargetAddress discriminator, padding, sequence<octet> length.
_REQUEST_12 = {True: struct.Struct("<IB3xh2xI"), False: struct.Struct(">IB3xh2xI")}
# GIOP header + GIOP 1.2 Reply header with an empty ServiceContextList.
_REPLY_12 = {True: struct.Struct("<4s4BIIII"), False: struct.Struct(">4s4BIIII")}
# GIOP 1.2 Reply header as decoded: request_id, reply_status, context count.
_REPLY_12_IN = {True: struct.Struct("<III"), False: struct.Struct(">III")}
_CONTEXT = {True: struct.Struct("<II"), False: struct.Struct(">II")}
# GIOP header + GIOP 1.2 Request up to the object key length (28 bytes).
_REQUEST_12_OUT = {
    True: struct.Struct("<4s4BIIB3xh2xI"),
    False: struct.Struct(">4s4BIIB3xh2xI"),
}
# The operation's length, after the 0-3 zero bytes that 4-align it past the key.
_OPERATION_LENGTH = {
    little: tuple(struct.Struct(f"{'<' if little else '>'}{pad}xI") for pad in range(4))
    for little in (True, False)
}


def _request_tail_sizes(has_body: bool) -> tuple[int, ...]:
    """Bytes after an operation's characters ending at ``i`` (mod 8) in a Request 1.2.

    They are all zero: the NUL, padding to 4, an empty ServiceContextList
    and, before a non-empty body, padding to 8.
    """
    sizes = []
    for i in range(8):
        end = i + 1
        end += -end % 4
        end += 4
        if has_body:
            end += -end % 8
        sizes.append(end - i)
    return tuple(sizes)


_REQUEST_12_TAIL = {
    has_body: tuple(bytes(n) for n in _request_tail_sizes(has_body))
    for has_body in (True, False)
}


_REQUEST_FIELDS = (
    "request_id",
    "response_flags",
    "object_key",
    "operation",
    "body",
    "service_contexts",
    "version",
    "little_endian",
    "body_offset",
    "requesting_principal",
    "addressing_disposition",
    "fragment_starts",
)
_REPLY_FIELDS = (
    "request_id",
    "reply_status",
    "body",
    "service_contexts",
    "version",
    "little_endian",
    "body_offset",
    "fragment_starts",
)


def _mutable_twin(cls: type, fields: tuple[str, ...]) -> type | None:
    """A plain class with the slots of ``cls``, whose instances can become ``cls``'s.

    A frozen dataclass ``__init__`` calls ``object.__setattr__`` once per
    field, which was half the cost of decoding a small message.  Filling the
    same slots of a mutable twin with plain stores, then setting its
    ``__class__`` (allowed between classes with identical slot layouts), is
    about four times cheaper, and three times cheaper than calling each slot
    descriptor's ``__set__``.  It is only right while the fields are exactly
    these and nothing runs after ``__init__``; if ``cls`` changes, the
    decoder just uses ``cls``.
    """
    if getattr(cls, "__slots__", None) != fields or hasattr(cls, "__post_init__"):
        return None
    twin = type(f"_Mutable{cls.__name__}", (), {"__slots__": fields})
    try:
        twin().__class__ = cls
    except TypeError:  # layouts differ after all
        return None
    return twin


def _request_builder() -> Callable[..., Request]:
    """A faster ``Request(...)`` for GIOP 1.2 KeyAddr Requests (or ``Request`` itself)."""
    twin = _mutable_twin(Request, _REQUEST_FIELDS)
    if twin is None:
        return Request

    def build(
        request_id: int,
        response_flags: int,
        object_key: bytes,
        operation: str,
        body: bytes,
        service_contexts: tuple[ServiceContext, ...],
        version: Version,
        little_endian: bool,
        body_offset: int,
    ) -> Request:
        msg = twin()
        msg.request_id = request_id
        msg.response_flags = response_flags
        msg.object_key = object_key
        msg.operation = operation
        msg.body = body
        msg.service_contexts = service_contexts
        msg.version = version
        msg.little_endian = little_endian
        msg.body_offset = body_offset
        msg.requesting_principal = b""
        msg.addressing_disposition = KEY_ADDR
        msg.fragment_starts = ()
        msg.__class__ = Request
        request: Request = msg  # msg is Any to mypy: this says what it has become
        return request

    return build


def _reply_builder() -> Callable[..., Reply]:
    """A faster ``Reply(...)``, the same way (or ``Reply`` itself)."""
    twin = _mutable_twin(Reply, _REPLY_FIELDS)
    if twin is None:
        return Reply

    def build(
        request_id: int,
        reply_status: ReplyStatus,
        body: bytes,
        service_contexts: tuple[ServiceContext, ...],
        version: Version,
        little_endian: bool,
        body_offset: int,
    ) -> Reply:
        msg = twin()
        msg.request_id = request_id
        msg.reply_status = reply_status
        msg.body = body
        msg.service_contexts = service_contexts
        msg.version = version
        msg.little_endian = little_endian
        msg.body_offset = body_offset
        msg.fragment_starts = ()
        msg.__class__ = Reply
        reply: Reply = msg  # as in _request_builder
        return reply

    return build


_build_request = _request_builder()
_build_reply = _reply_builder()


class Header(NamedTuple):
    """The parsed 12-byte GIOP message header."""

    version: Version
    little_endian: bool
    more_fragments: bool
    msg_type: MsgType
    size: int  # bytes after the 12-byte header


_HeaderFields = tuple[Version, bool, bool, MsgType, Literal["little", "big"]]


def _header_table() -> dict[bytes, _HeaderFields]:
    """Every valid first 8 header bytes, so that one dict lookup validates them.

    Each maps to the header fields it fixes and the byte order of the size.
    """
    table: dict[bytes, _HeaderFields] = {}
    for version in SUPPORTED_VERSIONS:
        for msg_type in MsgType:
            if version == GIOP_1_0 and msg_type is MsgType.FRAGMENT:
                continue
            for little in (False, True):
                for more in (False, True):
                    if more and msg_type not in _FRAGMENTABLE[version]:
                        continue
                    flags = int(little) | (FLAG_MORE_FRAGMENTS if more else 0)
                    key = MAGIC + bytes((version[0], version[1], flags, msg_type))
                    table[key] = (version, little, more, msg_type, "little" if little else "big")
    return table


_HEADER_TABLE = _header_table()
# Header's NamedTuple __new__ is a Python function; tuple.__new__ does the same in C.
_new_tuple = tuple.__new__


# ---------------------------------------------------------------- header


def parse_header(data: Buffer, offset: int = 0) -> Header:
    """Parse and validate the 12-byte GIOP header at ``data[offset:]``."""
    if len(data) - offset < HEADER_SIZE:
        raise ProtocolError("truncated GIOP header")
    prefix, size = _PREFIX.unpack_from(data, offset)
    try:
        version, little, more, msg_type, order = _HEADER_TABLE[prefix]
    except KeyError:
        raise ProtocolError(_explain_bad_prefix(prefix)) from None
    return _new_tuple(Header, (version, little, more, msg_type, int.from_bytes(size, order)))


def _explain_bad_prefix(prefix: bytes) -> str:
    """Say which part of a header that failed the table lookup is wrong."""
    if prefix[:4] != MAGIC:
        return f"bad GIOP magic {prefix[:4]!r}"
    version = (prefix[4], prefix[5])
    if version not in SUPPORTED_VERSIONS:
        return f"unsupported GIOP version {version[0]}.{version[1]}"
    flags, msg_type = prefix[6], prefix[7]
    if flags & ~(FLAG_LITTLE_ENDIAN | FLAG_MORE_FRAGMENTS) or (
        version == GIOP_1_0 and flags > 1
    ):
        return f"invalid flags 0x{flags:02x} for GIOP {version[0]}.{version[1]}"
    if msg_type > MsgType.FRAGMENT or (
        version == GIOP_1_0 and msg_type == MsgType.FRAGMENT
    ):
        return f"unknown message type {msg_type} for GIOP {version[0]}.{version[1]}"
    return f"{MsgType(msg_type).name} cannot be fragmented in GIOP {version[0]}.{version[1]}"


def _pack_header(msg_type: MsgType, version: Version, little_endian: bool, size: int) -> bytes:
    # The flags octet is the same for 1.0 (byte_order boolean) and 1.1+ (bit
    # 0): encode never fragments, so the more-fragments bit stays clear.
    flags = FLAG_LITTLE_ENDIAN if little_endian else 0
    return _HEADER[little_endian].pack(MAGIC, version[0], version[1], flags, msg_type, size)


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


def _is_plain_request_12(msg: Request) -> bool:
    """A GIOP 1.2 Request the fast encoder covers (the general one checks the rest)."""
    return (
        msg.version == GIOP_1_2
        and msg.addressing_disposition == KEY_ADDR
        and not msg.service_contexts
        and not msg.requesting_principal
    )


def _encode_request_12(msg: Request) -> bytes:
    """Fast path: a GIOP 1.2 Request with KeyAddr and no service contexts."""
    return encode_request_12(
        msg.request_id, msg.response_flags, msg.object_key, msg.operation, msg.body, msg.little_endian
    )


def encode_request_12(
    request_id: int, response_flags: int, object_key: bytes, operation: str, body: bytes, little_endian: bool
) -> bytes:
    """``encode(Request(...))`` for a GIOP 1.2 Request with KeyAddr and no
    service contexts, without building the message object (a client sends
    one per call).  Raises struct.error for out-of-range numbers.

    Offsets are from the message start; the fixed part ends at 28 with the
    key length, so the key starts 4-aligned.
    """
    op = operation.encode("utf-8")
    pad = -len(object_key) & 3
    chars_end = 28 + len(object_key) + pad + 4 + len(op)
    tail = _REQUEST_12_TAIL[bool(body)][chars_end & 7]
    head = _REQUEST_12_OUT[little_endian].pack(
        MAGIC,
        1,
        2,
        FLAG_LITTLE_ENDIAN if little_endian else 0,
        _REQUEST,
        chars_end + len(tail) + len(body) - HEADER_SIZE,
        request_id,
        response_flags,
        KEY_ADDR,
        len(object_key),
    )
    length = _OPERATION_LENGTH[little_endian][pad].pack(len(op) + 1)
    return b"".join((head, object_key, length, op, tail, body))


def _encode_reply_12(msg: Reply) -> bytes:
    """Fast path: a GIOP 1.2 Reply without service contexts."""
    return encode_reply_12(msg.request_id, msg.reply_status, msg.body, msg.little_endian)


def encode_reply_12(request_id: int, status: int, body: bytes, little_endian: bool) -> bytes:
    """``encode(Reply(...))`` for a GIOP 1.2 Reply without service contexts,
    without building the message object (a server sends one per request).

    Its header ends at offset 24, already 8-aligned, so the body follows directly.
    """
    if not 0 <= status <= 5:
        raise ValueError(f"invalid reply status {status!r}")
    head = _REPLY_12[little_endian].pack(
        MAGIC,
        1,
        2,
        FLAG_LITTLE_ENDIAN if little_endian else 0,
        _REPLY,
        12 + len(body),
        request_id,
        status,
        0,
    )
    return head + body if body else head


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


def _decode_request_12_fast(b: memoryview | bytes, little: bool) -> Request | None:
    """GIOP 1.2 Request with KeyAddr, or None to fall back to the general path.

    Offsets in ``b`` are message offsets minus 12; 12 is a multiple of 4 so
    4-alignment can be computed on them directly.
    """
    n = len(b)
    if n < 16:
        return None
    request_id, flags, disposition, key_len = _REQUEST_12[little].unpack_from(b, 0)
    end = 16 + key_len
    p = (end + 3) & -4
    if disposition != KEY_ADDR or p + 4 > n:
        return None
    key = bytes(b[16:end])
    u32 = _U32[little]
    (op_len,) = u32.unpack_from(b, p)
    p += 4
    end = p + op_len
    if op_len == 0 or end + 4 > n or b[end - 1] != 0:
        return None
    try:
        operation = str(b[p : end - 1], "utf-8")
    except UnicodeDecodeError:
        return None
    p = (end + 3) & -4
    if p + 4 > n:
        return None
    (count,) = u32.unpack_from(b, p)
    p += 4
    contexts: tuple[ServiceContext, ...] = ()
    if count:
        if count * 8 > n - p:
            return None
        items = []
        context = _CONTEXT[little]
        for _ in range(count):
            if p + 8 > n:
                return None
            context_id, length = context.unpack_from(b, p)
            p += 8
            if p + length > n:
                return None
            items.append(ServiceContext(context_id, bytes(b[p : p + length])))
            p = (p + length + 3) & -4
        contexts = tuple(items)
    start = p + (-(p + HEADER_SIZE) & 7)
    return _build_request(
        request_id,
        flags,
        key,
        operation,
        bytes(b[start:]),
        contexts,
        GIOP_1_2,
        little,
        start + HEADER_SIZE,
    )


def _decode_reply_12_fast(b: memoryview | bytes, little: bool) -> Reply | None:
    """GIOP 1.2 Reply without service contexts, or None to fall back.

    Its header ends at message offset 24, already 8-aligned: the body follows.
    """
    if len(b) < 12:
        return None
    request_id, status, count = _REPLY_12_IN[little].unpack_from(b, 0)
    if count or status > 5:
        return None
    return _build_reply(
        request_id, _REPLY_STATUSES[status], bytes(b[12:]), (), GIOP_1_2, little, 24
    )


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


# The Python originals of the functions that have C twins (tests/giop/test_cframing.py compares them).
_PYTHON_TWINS: dict[str, Callable[..., object]] = {
    "parse_header": parse_header,
    "_decode_request_12_fast": _decode_request_12_fast,
    "_decode_reply_12_fast": _decode_reply_12_fast,
    "encode_reply_12": encode_reply_12,
    "encode_request_12": encode_request_12,
}
# With the compiled accelerator, the C twins take their place.
if _accelerator.status().compiled:
    from pyorb.giop._cframing import (  # noqa: E402  (they read this module's tables)
        _decode_reply_12_fast,
        _decode_request_12_fast,
        encode_reply_12,
        encode_request_12,
        parse_header,
    )
