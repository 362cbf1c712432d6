"""Shared helpers for the GIOP core tests."""

from __future__ import annotations

import struct
from typing import Callable

import pytest

Fragmenter = Callable[[bytes, int], list[bytes]]


def split_into_fragments(message: bytes, max_size: int = 8192) -> list[bytes]:
    """Split one encoded GIOP 1.1/1.2 message into a train, as omniORB does.

    The initial message keeps its header with the more-fragments flag set;
    each Fragment message is at most ``max_size`` bytes.  A GIOP 1.2
    Fragment carries the request id (the first ulong of the initial body)
    before its share of the data.  With the default of 8192 the Fragment
    messages declare 8180 bytes, like omniORB's.
    """
    assert max_size >= 24, "room for a header, a request id and some data"
    header, body = message[:12], message[12:]
    major, minor, flags, msg_type = header[4:8]
    order = "<" if flags & 1 else ">"
    prefix = b""
    if (major, minor) == (1, 2):
        prefix = body[:4]
    first = body[: max_size - 12]
    step = max_size - 12 - len(prefix)
    rest = [body[i : i + step] for i in range(len(first), len(body), step)]
    more = 2 if rest else 0
    out = [header[:6] + bytes((flags | more, msg_type)) + struct.pack(order + "I", len(first)) + first]
    for i, chunk in enumerate(rest):
        more = 2 if i < len(rest) - 1 else 0
        data = prefix + chunk
        out.append(
            b"GIOP"
            + bytes((major, minor, (flags & 1) | more, 7))
            + struct.pack(order + "I", len(data))
            + data
        )
    return out


@pytest.fixture(scope="session")
def fragment() -> Fragmenter:
    """``fragment(message, max_size)``: see :func:`split_into_fragments`."""
    return split_into_fragments
