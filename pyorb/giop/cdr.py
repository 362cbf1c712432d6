"""Minimal CDR encoding for GIOP headers, IORs and service contexts.

Operation bodies are marshaled by omniORBpy (see :mod:`pyorb.marshal`); this
module only covers the handful of types the protocol itself needs.  Every read
checks the remaining length *before* allocating, so an untrusted length field
can never make us allocate more than the bytes we actually hold.
"""

from __future__ import annotations

import struct
from typing import Callable, TypeVar

from pyorb.giop.errors import ProtocolError

T = TypeVar("T")

_LE = {
    "H": struct.Struct("<H"),
    "h": struct.Struct("<h"),
    "I": struct.Struct("<I"),
    "i": struct.Struct("<i"),
    "Q": struct.Struct("<Q"),
}
_BE = {
    "H": struct.Struct(">H"),
    "h": struct.Struct(">h"),
    "I": struct.Struct(">I"),
    "i": struct.Struct(">i"),
    "Q": struct.Struct(">Q"),
}


class CDRReader:
    """Reads CDR primitives from ``data``; alignment is relative to ``base``.

    ``base`` is the stream position of ``data[0]`` (for example 12 when reading
    a GIOP message body that follows the 12-byte header).
    """

    __slots__ = ("data", "pos", "base", "little_endian", "_s")

    def __init__(
        self, data: bytes | memoryview, little_endian: bool, pos: int = 0, base: int = 0
    ) -> None:
        self.data = data
        self.pos = pos
        self.base = base
        self.little_endian = little_endian
        self._s = _LE if little_endian else _BE

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def align(self, n: int) -> None:
        self.pos += -(self.pos + self.base) % n
        if self.pos > len(self.data):
            raise ProtocolError("truncated: alignment past end of data")

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError(f"truncated: need {n} bytes, {self.remaining} left")

    def _unpack(self, code: str, size: int) -> int:
        self.align(size)
        self._need(size)
        (value,) = self._s[code].unpack_from(self.data, self.pos)
        self.pos += size
        return int(value)

    def octet(self) -> int:
        self._need(1)
        value = self.data[self.pos]
        self.pos += 1
        return value

    def boolean(self) -> bool:
        return self.octet() != 0

    def ushort(self) -> int:
        return self._unpack("H", 2)

    def short(self) -> int:
        return self._unpack("h", 2)

    def ulong(self) -> int:
        return self._unpack("I", 4)

    def long(self) -> int:
        return self._unpack("i", 4)

    def ulonglong(self) -> int:
        return self._unpack("Q", 8)

    def raw(self, n: int) -> bytes:
        self._need(n)
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def octets(self) -> bytes:
        """A ``sequence<octet>``: ulong length then the bytes."""
        return self.raw(self.ulong())

    def string(self) -> str:
        """A CDR string: ulong length including the terminating NUL."""
        n = self.ulong()
        if n == 0:
            raise ProtocolError("string with length 0 (no terminating NUL)")
        raw = self.raw(n)
        if raw[-1] != 0:
            raise ProtocolError("string is not NUL-terminated")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string is not valid UTF-8: {exc}") from None

    def sequence(self, item: Callable[[CDRReader], T], min_item_size: int = 1) -> list[T]:
        """A sequence whose length is checked against the bytes left."""
        n = self.ulong()
        if n * min_item_size > self.remaining:
            raise ProtocolError(f"sequence of {n} items longer than the {self.remaining} bytes left")
        return [item(self) for _ in range(n)]

    def encapsulation(self) -> CDRReader:
        """Open a nested encapsulation (``sequence<octet>`` with a byte-order flag)."""
        data = self.octets()
        if not data:
            raise ProtocolError("empty encapsulation")
        return CDRReader(data, little_endian=bool(data[0] & 1), pos=1)


class CDRWriter:
    """Builds a CDR stream; alignment is relative to ``base``."""

    __slots__ = ("buf", "base", "little_endian", "_s")

    def __init__(self, little_endian: bool, base: int = 0) -> None:
        self.buf = bytearray()
        self.base = base
        self.little_endian = little_endian
        self._s = _LE if little_endian else _BE

    def align(self, n: int) -> None:
        pad = -(len(self.buf) + self.base) % n
        if pad:
            self.buf += bytes(pad)

    def _pack(self, code: str, size: int, value: int) -> None:
        self.align(size)
        self.buf += self._s[code].pack(value)

    def octet(self, value: int) -> None:
        self.buf.append(value)

    def boolean(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def ushort(self, value: int) -> None:
        self._pack("H", 2, value)

    def short(self, value: int) -> None:
        self._pack("h", 2, value)

    def ulong(self, value: int) -> None:
        self._pack("I", 4, value)

    def long(self, value: int) -> None:
        self._pack("i", 4, value)

    def ulonglong(self, value: int) -> None:
        self._pack("Q", 8, value)

    def raw(self, data: bytes) -> None:
        self.buf += data

    def octets(self, data: bytes) -> None:
        self.ulong(len(data))
        self.buf += data

    def string(self, value: str) -> None:
        data = value.encode("utf-8")
        self.ulong(len(data) + 1)
        self.buf += data
        self.buf.append(0)

    def encapsulation(self, fill: Callable[[CDRWriter], None]) -> None:
        """Write a nested encapsulation built by ``fill`` in our byte order."""
        inner = CDRWriter(self.little_endian)
        inner.octet(1 if self.little_endian else 0)
        fill(inner)
        self.octets(bytes(inner.buf))

    def getvalue(self) -> bytes:
        return bytes(self.buf)


def open_encapsulation(data: bytes, what: str) -> CDRReader:
    """A reader over an encapsulation's content, in its declared byte order
    (:class:`ProtocolError` naming ``what`` if it is empty or its flag is bad)."""
    if not data:
        raise ProtocolError(f"{what}: empty encapsulation")
    if data[0] > 1:
        raise ProtocolError(f"{what}: bad byte-order flag {data[0]}")
    return CDRReader(data, little_endian=data[0] == 1, pos=1)


def new_encapsulation(little_endian: bool) -> CDRWriter:
    """A writer whose first byte is already the byte-order flag."""
    w = CDRWriter(little_endian)
    w.octet(1 if little_endian else 0)
    return w
