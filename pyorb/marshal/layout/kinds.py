"""What the layout walk knows of CDR: omniidl kind numbers, primitive sizes,
limits on untrusted data, and its errors."""

from __future__ import annotations

import struct
from typing import Any, NamedTuple



Descriptor = Any


TV_NULL, TV_VOID, TV_SHORT, TV_LONG, TV_USHORT, TV_ULONG, TV_FLOAT, TV_DOUBLE = range(8)


TV_BOOLEAN, TV_CHAR, TV_OCTET, TV_ANY, TV_TYPECODE, TV_PRINCIPAL, TV_OBJREF = range(8, 15)


TV_STRUCT, TV_UNION, TV_ENUM, TV_STRING, TV_SEQUENCE, TV_ARRAY, TV_ALIAS, TV_EXCEPT = range(15, 23)


TV_LONGLONG, TV_ULONGLONG, TV_LONGDOUBLE, TV_WCHAR, TV_WSTRING, TV_FIXED = range(23, 29)


TV_VALUE, TV_VALUE_BOX, TV_NATIVE, TV_ABSTRACT, TV_LOCAL, TV_COMPONENT, TV_HOME, TV_EVENT = range(29, 37)


TV_INDIRECT = -1


TC_INDIRECTION = 0xFFFFFFFF

# (size, alignment) of the kinds whose encoding is one fixed-size item.


_PRIMS = {
    TV_NULL: (0, 1), TV_VOID: (0, 1), TV_SHORT: (2, 2), TV_LONG: (4, 4), TV_USHORT: (2, 2),
    TV_ULONG: (4, 4), TV_FLOAT: (4, 4), TV_DOUBLE: (8, 8), TV_BOOLEAN: (1, 1), TV_CHAR: (1, 1),
    TV_OCTET: (1, 1), TV_LONGLONG: (8, 8), TV_ULONGLONG: (8, 8), TV_LONGDOUBLE: (16, 8),
}  # fmt: skip
# Union discriminators: kind -> (size, signed, flavour); enums are read as ulong.


_DISCS = {
    TV_SHORT: (2, True, ""), TV_LONG: (4, True, ""), TV_USHORT: (2, False, ""),
    TV_ULONG: (4, False, ""), TV_LONGLONG: (8, True, ""), TV_ULONGLONG: (8, False, ""),
    TV_BOOLEAN: (1, False, "bool"), TV_CHAR: (1, False, ""), TV_OCTET: (1, False, ""),
    TV_ENUM: (4, False, ""), TV_WCHAR: (2, False, "wchar"),
}  # fmt: skip


_UNSUPPORTED = {
    TV_VALUE: "value type", TV_VALUE_BOX: "value box", TV_NATIVE: "native type",
    TV_ABSTRACT: "abstract interface", TV_LOCAL: "local interface", TV_COMPONENT: "component",
    TV_HOME: "home", TV_EVENT: "event type",
}  # fmt: skip


_ZEROS = tuple(bytes(n) for n in range(8))


_U32 = (struct.Struct(">I").unpack_from, struct.Struct("<I").unpack_from)


_U16 = (struct.Struct(">H").unpack_from, struct.Struct("<H").unpack_from)


class Bounds(NamedTuple):
    """Limits checked while walking received data, before omniORB's unmarshaler sees it.

    omniORB's C unmarshaler recurses once per nesting level (a deep enough
    any-in-any or TypeCode chain overflows its stack) and allocates one Python
    object per element before it knows whether the data makes sense (2^31
    elements of a zero-size type cost nothing on the wire).  Bytes on the wire
    already bound everything else.
    """

    max_nesting_depth: int = 64
    """any values inside any values (and values of a recursive type, IDL's or a
    received TypeCode's, inside themselves), and TypeCodes inside TypeCodes."""
    max_typecode_size: int = 64 * 1024
    """Octets of one TypeCode's encapsulation."""
    max_empty_elements: int = 65536
    """Elements of types that take no octets, all sequences and arrays of one body together
    (nested ones multiply: each is counted)."""


DEFAULT_BOUNDS = Bounds()


Ops = tuple[tuple[int, int, int, bytes], ...]


Layout = tuple[int, Ops]


Repeat = tuple[int, "tuple[int, ...] | None"]


class CDRLayoutError(ValueError):
    """The bytes do not match the types they are said to encode.

    ``minor`` is the CORBA minor code the MARSHAL reporting it carries
    (omniORB's, where it has one for the case; else 0).
    """

    def __init__(self, message: str, minor: int = 0) -> None:
        super().__init__(message)
        self.minor = minor


class UnsupportedTypeError(NotImplementedError, ValueError):
    """A type this module cannot walk (value types, abstract interfaces).

    Also a ValueError, so a caller handling bad data handles an Any that
    carries such a type too.
    """


class NestedValueError(CDRLayoutError):
    """A chunked value inside a chunked value's state: well-formed, but a body
    omniORB's unmarshaler cannot read (pyorb's value reader reads it)."""


def _truncated(what: str) -> CDRLayoutError:
    return CDRLayoutError(f"CDR data ends inside {what}")
