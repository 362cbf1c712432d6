"""Wide text: reading GIOP 1.2 wchar values, which omniORBpy 4.3.3 gets
wrong, and the GIOP 1.1 form of wchar and wstring, which it does not have.

GIOP 1.2 encodes a wchar as one length octet followed by that many octets
of the transmission code set (UTF-16, big-endian without a byte-order mark).
omniORBpy's unmarshaler reads only the length octet.  We therefore read each
wchar of a BMP character as ``octet[3]`` (length 2 plus two bytes) and turn
those bytes back into a one-character string afterwards.  A wchar inside a
union, or one sent with a byte-order mark, is not handled and fails with
MARSHAL rather than giving a wrong value.  Writing needs no help: omniORB
writes wchar correctly.
"""

from __future__ import annotations

import struct
from typing import Any

from omniORB import CORBA

TV_STRUCT, TV_SEQUENCE, TV_ARRAY, TV_ALIAS, TV_EXCEPT, TV_WCHAR, TV_OCTET = 15, 19, 20, 21, 22, 26, 10
_WCHAR_AS_OCTETS = (TV_ARRAY, TV_OCTET, 3)

_cache: dict[int, tuple[Any, Any]] = {}  # id(descriptor) -> (descriptor, rewritten); keeps both alive


def read_descriptor(desc: Any) -> Any:
    """``desc`` with every wchar it contains replaced by ``octet[3]``."""
    if desc == TV_WCHAR or desc == (TV_WCHAR,):
        return _WCHAR_AS_OCTETS
    if not isinstance(desc, tuple):
        return desc
    hit = _cache.get(id(desc))
    if hit is None:
        hit = _cache[id(desc)] = (desc, _rewrite(desc))
    return hit[1]


def _rewrite(desc: tuple[Any, ...]) -> tuple[Any, ...]:
    kind = desc[0]
    if kind in (TV_SEQUENCE, TV_ARRAY):
        inner = read_descriptor(desc[1])
        return desc if inner is desc[1] else (kind, inner, *desc[2:])
    if kind == TV_ALIAS:
        inner = read_descriptor(desc[3])
        return desc if inner is desc[3] else (*desc[:3], inner)
    if kind in (TV_STRUCT, TV_EXCEPT):
        members = list(desc[4:])
        members[1::2] = [read_descriptor(d) for d in members[1::2]]
        changed = any(a is not b for a, b in zip(members[1::2], desc[5::2]))
        return (*desc[:4], *members) if changed else desc
    return desc


def restore(desc: Any, value: Any) -> Any:
    """Turn the ``octet[3]`` stand-ins inside ``value`` back into characters."""
    if desc == TV_WCHAR or desc == (TV_WCHAR,):
        return _char(value)
    if not isinstance(desc, tuple) or read_descriptor(desc) is desc:
        return value
    kind = desc[0]
    if kind in (TV_SEQUENCE, TV_ARRAY):
        return [restore(desc[1], v) for v in value]
    if kind == TV_ALIAS:
        return restore(desc[3], value)
    if kind in (TV_STRUCT, TV_EXCEPT):
        for name, member in zip(desc[4::2], desc[5::2]):
            setattr(value, name, restore(member, getattr(value, name)))
    return value


def _char(raw: bytes) -> str:
    if len(raw) != 3 or raw[0] != 2:
        raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO)
    return raw[1:].decode("utf-16-be")


# -- the GIOP 1.1 form of wide text --------------------------------------------
# GIOP 1.1 writes a wchar as one 2-octet code unit in the stream's byte order
# and a wstring as a ulong count of code units, the terminating null
# included, then the units: exactly the CDR of ``unsigned short`` and
# ``sequence<unsigned short>``.  omniORB's marshaler only knows the GIOP 1.2
# form, so a GIOP 1.1 body is marshaled with those stand-in types and the
# values converted around it.  (omniORB itself sends the 1.2 form over GIOP
# 1.1; JacORB and the standard use this one.)

TV_USHORT, TV_WSTRING, TV_UNION = 4, 27, 16
_USHORTS = (TV_SEQUENCE, TV_USHORT, 0)
_cache11: dict[int, tuple[Any, Any]] = {}


def has_wide(desc: Any) -> bool:
    """Whether values of ``desc`` hold wide text where the GIOP 1.1 form differs."""
    return giop11_descriptor(desc) is not desc


def giop11_descriptor(desc: Any) -> Any:
    """``desc`` with wchar as ``unsigned short`` and wstring as ``sequence<unsigned short>``
    (anys and value types keep the GIOP 1.2 form: their types come from the wire)."""
    if desc == TV_WCHAR or desc == (TV_WCHAR,):
        return TV_USHORT
    if not isinstance(desc, tuple):
        return desc
    if desc[0] == TV_WSTRING:
        return _USHORTS
    hit = _cache11.get(id(desc))
    if hit is None:
        hit = _cache11[id(desc)] = (desc, _rewrite11(desc))
    return hit[1]


def _rewrite11(desc: tuple[Any, ...]) -> tuple[Any, ...]:
    kind = desc[0]
    if kind in (TV_SEQUENCE, TV_ARRAY):
        inner = giop11_descriptor(desc[1])
        return desc if inner is desc[1] else (kind, inner, *desc[2:])
    if kind == TV_ALIAS:
        inner = giop11_descriptor(desc[3])
        return desc if inner is desc[3] else (*desc[:3], inner)
    if kind in (TV_STRUCT, TV_EXCEPT):
        members = list(desc[4:])
        members[1::2] = [giop11_descriptor(d) for d in members[1::2]]
        changed = any(a is not b for a, b in zip(members[1::2], desc[5::2]))
        return (*desc[:4], *members) if changed else desc
    if kind == TV_UNION:
        cases = tuple((label, name, giop11_descriptor(d)) for label, name, d in desc[6])
        if all(new[2] is old[2] for new, old in zip(cases, desc[6])):
            return desc
        by_old = {id(old): new for old, new in zip(desc[6], cases)}
        default = None if desc[7] is None else by_old.get(id(desc[7]), desc[7])
        arms = {label: by_old.get(id(case), case) for label, case in desc[8].items()}
        return (*desc[:6], cases, default, arms)
    return desc


def to_giop11(desc: Any, value: Any) -> Any:
    """``value`` for :func:`giop11_descriptor` (``desc``): wide text as code units."""
    new = giop11_descriptor(desc)
    if new is desc:
        return value
    if new == TV_USHORT:
        return _unit(value)
    if new is _USHORTS:
        if not isinstance(value, str):
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, "a wstring is a str")
        data = value.encode("utf-16-le", "surrogatepass")
        return [*struct.unpack(f"<{len(data) // 2}H", data), 0]
    kind = desc[0]
    if kind in (TV_SEQUENCE, TV_ARRAY):
        return [to_giop11(desc[1], v) for v in value]
    if kind == TV_ALIAS:
        return to_giop11(desc[3], value)
    if kind in (TV_STRUCT, TV_EXCEPT):
        return desc[1](*(to_giop11(d, getattr(value, n)) for n, d in zip(desc[4::2], desc[5::2])))
    if kind == TV_UNION:
        arm = desc[8].get(value._d, desc[7])
        return value if arm is None else desc[1](value._d, to_giop11(arm[2], value._v))
    return value


def from_giop11(desc: Any, value: Any) -> Any:
    """The inverse of :func:`to_giop11`; MARSHAL for a wstring without its terminating null."""
    new = giop11_descriptor(desc)
    if new is desc:
        return value
    if new == TV_USHORT:
        return chr(value)
    if new is _USHORTS:
        if not value or value[-1] != 0:
            raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, "a GIOP 1.1 wstring must end with a null")
        try:
            return _units_to_text(value[:-1])
        except UnicodeDecodeError:
            raise CORBA.DATA_CONVERSION(0, CORBA.COMPLETED_NO, "a wstring is not valid UTF-16") from None
    kind = desc[0]
    if kind in (TV_SEQUENCE, TV_ARRAY):
        return [from_giop11(desc[1], v) for v in value]
    if kind == TV_ALIAS:
        return from_giop11(desc[3], value)
    if kind in (TV_STRUCT, TV_EXCEPT):
        for name, member in zip(desc[4::2], desc[5::2]):
            setattr(value, name, from_giop11(member, getattr(value, name)))
        return value
    if kind == TV_UNION:
        arm = desc[8].get(value._d, desc[7])
        if arm is not None:
            value._v = from_giop11(arm[2], value._v)
        return value
    return value


def _unit(char: Any) -> int:
    if not isinstance(char, str) or len(char) != 1 or ord(char) > 0xFFFF:
        raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, "a wchar is one character of the Basic Multilingual Plane")
    return ord(char)


def _units_to_text(units: list[int]) -> str:
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le")
