"""Reading GIOP 1.2 wchar values, which omniORBpy 4.3.3 gets wrong.

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
