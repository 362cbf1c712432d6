"""Wide text: reading GIOP 1.2 wchar values, which omniORBpy 4.3.3 gets
wrong, and the GIOP 1.1 form of wchar and wstring, which it does not have.

GIOP 1.2 encodes a wchar as one length octet followed by that many octets
of the transmission code set (UTF-16, big-endian without a byte-order mark).
omniORBpy's unmarshaler reads only the length octet.  We therefore read each
wchar of a BMP character as ``octet[3]`` (length 2 plus two bytes) and turn
those bytes back into a one-character string afterwards (inside structs,
unions, sequences and arrays too; not as a union's discriminant, nor inside
an any).  A wchar sent with a byte-order mark is not handled and fails with
MARSHAL rather than giving a wrong value.  Writing needs no help: omniORB
writes wchar correctly.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from omniORB import CORBA

from pyorb.marshal.values import in_value_state, map_leaves

TV_USHORT, TV_UNION, TV_STRUCT, TV_SEQUENCE, TV_ARRAY, TV_ALIAS, TV_EXCEPT = 4, 16, 15, 19, 20, 21, 22
TV_OCTET, TV_WCHAR, TV_WSTRING = 10, 26, 27
_WCHAR_AS_OCTETS = (TV_ARRAY, TV_OCTET, 3)
_USHORTS = (TV_SEQUENCE, TV_USHORT, 0)

Rewrite = Callable[[Any], Any]
Leaf = Callable[[Any, Any], Any]


# -- one walk of descriptors and one of values, for both forms -------------------


def _rewrite(desc: tuple[Any, ...], rewrite: Rewrite) -> tuple[Any, ...]:
    """``desc`` with ``rewrite`` applied to the types inside it (``desc`` itself if none changes)."""
    kind = desc[0]
    if kind in (TV_SEQUENCE, TV_ARRAY):
        inner = rewrite(desc[1])
        return desc if inner is desc[1] else (kind, inner, *desc[2:])
    if kind == TV_ALIAS:
        inner = rewrite(desc[3])
        return desc if inner is desc[3] else (*desc[:3], inner)
    if kind in (TV_STRUCT, TV_EXCEPT):
        members = list(desc[4:])
        members[1::2] = [rewrite(d) for d in members[1::2]]
        changed = any(a is not b for a, b in zip(members[1::2], desc[5::2]))
        return (*desc[:4], *members) if changed else desc
    if kind == TV_UNION:
        cases = tuple((label, name, rewrite(d)) for label, name, d in desc[6])
        if all(new[2] is old[2] for new, old in zip(cases, desc[6])):
            return desc
        by_old = {id(old): new for old, new in zip(desc[6], cases)}
        default = None if desc[7] is None else by_old.get(id(desc[7]), desc[7])
        arms = {label: by_old.get(id(case), case) for label, case in desc[8].items()}
        return (*desc[:6], cases, default, arms)
    return desc


def _cached(cache: dict[int, tuple[Any, Any]], desc: tuple[Any, ...], rewrite: Rewrite) -> Any:
    hit = cache.get(id(desc))
    if hit is None:  # descriptors are long-lived module globals: cached by identity, kept alive
        hit = cache[id(desc)] = (desc, _rewrite(desc, rewrite))
    return hit[1]


def _convert(desc: Any, value: Any, rewritten: Rewrite, leaf: Leaf, build: bool) -> Any:
    """``value`` of ``desc`` with ``leaf(type, value)`` applied to each wchar and wstring
    that ``rewritten`` gives a stand-in type (a sequence<wchar> is walked: no null ends it)."""
    return map_leaves(desc, value, lambda d: rewritten(d) is not d,
                      lambda d: _is_wchar(d) or (isinstance(d, tuple) and d[0] == TV_WSTRING), leaf, rebuild=build)


# -- GIOP 1.2 wchar, read ---------------------------------------------------------

_cache: dict[int, tuple[Any, Any]] = {}


def read_descriptor(desc: Any) -> Any:
    """``desc`` with every wchar it contains replaced by ``octet[3]``."""
    if _is_wchar(desc):
        return _WCHAR_AS_OCTETS
    if not isinstance(desc, tuple):
        return desc
    return _cached(_cache, desc, read_descriptor)


def restore(desc: Any, value: Any) -> Any:
    """Turn the ``octet[3]`` stand-ins inside ``value`` back into characters."""
    return _convert(desc, value, read_descriptor, lambda _d, raw: _char(raw), build=False)


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

_cache11: dict[int, tuple[Any, Any]] = {}


def has_wide(desc: Any) -> bool:
    """Whether values of ``desc`` hold wide text where the GIOP 1.1 form differs."""
    return giop11_descriptor(desc) is not desc


def in_values(descs: tuple[Any, ...]) -> bool:
    """Whether the state of a value type inside ``descs`` (a box's content included) declares
    wide text, which :func:`giop11_descriptor` leaves in the GIOP 1.2 form: such bodies are
    written and read by pyorb's value writer and reader in the GIOP 1.1 form."""
    return in_value_state(descs, lambda d: _is_wchar(d) or (isinstance(d, tuple) and d[0] == TV_WSTRING))


def giop11_descriptor(desc: Any) -> Any:
    """``desc`` with wchar as ``unsigned short`` and wstring as ``sequence<unsigned short>``
    (anys and value types keep the GIOP 1.2 form: their types come from the wire)."""
    if _is_wchar(desc):
        return TV_USHORT
    if not isinstance(desc, tuple):
        return desc
    if desc[0] == TV_WSTRING:
        return _USHORTS
    return _cached(_cache11, desc, giop11_descriptor)


def to_giop11(desc: Any, value: Any) -> Any:
    """``value`` for :func:`giop11_descriptor` (``desc``): wide text as code units."""
    return _convert(desc, value, giop11_descriptor, _units, build=True)


def from_giop11(desc: Any, value: Any) -> Any:
    """The inverse of :func:`to_giop11`; MARSHAL for a wstring without its terminating null."""
    return _convert(desc, value, giop11_descriptor, _text, build=False)


def _is_wchar(desc: Any) -> bool:
    return bool(desc == TV_WCHAR or desc == (TV_WCHAR,))


def _units(desc: Any, value: Any) -> Any:
    if _is_wchar(desc):
        if not isinstance(value, str) or len(value) != 1 or ord(value) > 0xFFFF:
            raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, "a wchar is one character of the Basic Multilingual Plane")
        return ord(value)
    if not isinstance(value, str):
        raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, "a wstring is a str")
    data = value.encode("utf-16-le", "surrogatepass")
    return [*struct.unpack(f"<{len(data) // 2}H", data), 0]


def _text(desc: Any, value: Any) -> str:
    if _is_wchar(desc):
        return chr(value)
    if not value or value[-1] != 0:
        raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, "a GIOP 1.1 wstring must end with a null")
    try:
        return struct.pack(f"<{len(value) - 1}H", *value[:-1]).decode("utf-16-le")
    except UnicodeDecodeError:
        raise CORBA.DATA_CONVERSION(0, CORBA.COMPLETED_NO, "a wstring is not valid UTF-16") from None
