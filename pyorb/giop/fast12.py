"""The fast paths of GIOP 1.2: Requests addressed by object key and Replies, in and out.

They use precompiled :class:`struct.Struct` objects directly and cover only
the common shapes (no service contexts, except when decoding a Request).
They give up on anything else, returning ``None`` or never being chosen, so
that the readable general path of :mod:`pyorb.giop.codec` decides every
unusual or malformed case.  With the compiled accelerator, their C twins
(:mod:`pyorb.giop._cframing`) take their places (:mod:`pyorb.giop.twins`).
"""

from __future__ import annotations

import struct
from typing import Callable

from pyorb.giop.header import _REPLY, _REQUEST, _U32, FLAG_LITTLE_ENDIAN, HEADER_SIZE, KEY_ADDR, MAGIC
from pyorb.giop.messages import GIOP_1_2, Reply, ReplyStatus, Request, ServiceContext, Version

# Indexing a tuple is much cheaper than calling an enum class.
_REPLY_STATUSES = tuple(ReplyStatus)
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


def encode_request_12_contexts(
    request_id: int, response_flags: int, object_key: bytes, operation: str,
    contexts: tuple[ServiceContext, ...], body: bytes, little_endian: bool,
) -> bytes:
    """:func:`encode_request_12` for a Request that carries service contexts
    (a call with a deadline carries one on every request): the same bytes as
    ``encode(Request(...))``, without the general writer.  Raises struct.error
    for out-of-range numbers."""
    op = operation.encode("utf-8")
    pad = -len(object_key) & 3
    u32 = _U32[little_endian]
    pos = 28 + len(object_key) + pad + 4 + len(op) + 1  # past the operation's NUL
    fill = -pos & 3
    parts = [op, bytes(1 + fill), u32.pack(len(contexts))]
    pos += fill + 4
    for context in contexts:
        fill = -pos & 3  # each context id is a 4-aligned ulong
        data = context.data
        parts.append(_CONTEXT[little_endian].pack(context.context_id, len(data)) if not fill
                     else bytes(fill) + _CONTEXT[little_endian].pack(context.context_id, len(data)))
        parts.append(data)
        pos += fill + 8 + len(data)
    if body:
        fill = -pos & 7
        parts.append(bytes(fill))
        pos += fill
        parts.append(body)
    head = _REQUEST_12_OUT[little_endian].pack(
        MAGIC,
        1,
        2,
        FLAG_LITTLE_ENDIAN if little_endian else 0,
        _REQUEST,
        pos + len(body) - HEADER_SIZE,
        request_id,
        response_flags,
        KEY_ADDR,
        len(object_key),
    )
    length = _OPERATION_LENGTH[little_endian][pad].pack(len(op) + 1)
    return b"".join((head, object_key, length, *parts))


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


def reply_12_to(reply: bytes, request_id: int, little_endian: bool) -> bytes:
    """A copy of ``reply``, one GIOP 1.2 Reply message in the byte order ``little_endian``,
    that answers ``request_id``: a reply whose body does not depend on the request is
    encoded once and sent again to others."""
    return reply[:HEADER_SIZE] + _U32[little_endian].pack(request_id) + reply[HEADER_SIZE + 4:]


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


__all__ = ["encode_reply_12", "encode_request_12", "encode_request_12_contexts", "reply_12_to"]
