"""The 12-byte GIOP message header: its constants, its table of valid prefixes, and its parser.

Shared by the general codec (:mod:`pyorb.giop.codec`) and the fast GIOP 1.2
paths (:mod:`pyorb.giop.fast12`).  ``parse_header`` raises only
:class:`ProtocolError`, with a message that says which part is wrong.
"""

from __future__ import annotations

import struct
from typing import Literal, NamedTuple, Union

from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import GIOP_1_0, GIOP_1_1, GIOP_1_2, SUPPORTED_VERSIONS, MsgType, Version

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
# Looking up an enum member on its class is slow (about 0.1 µs in 3.11).
_REQUEST = MsgType.REQUEST
_REPLY = MsgType.REPLY

# The 8 bytes the header table validates, and the message size in either order.
_PREFIX = struct.Struct("8s4s")
_U32 = {True: struct.Struct("<I"), False: struct.Struct(">I")}
_HEADER = {True: struct.Struct("<4s4BI"), False: struct.Struct(">4s4BI")}

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


__all__ = [
    "FLAG_LITTLE_ENDIAN",
    "FLAG_MORE_FRAGMENTS",
    "HEADER_SIZE",
    "KEY_ADDR",
    "MAGIC",
    "PROFILE_ADDR",
    "REFERENCE_ADDR",
    "Buffer",
    "Header",
    "parse_header",
]
