"""Tests for pyorb.marshal.layout: padding scrubbing and GIOP 1.1 fragment realignment.

omniORB marshals every value; an independent reference writer (below; it
shares no code with the module under test) encodes the same values with
known padding bytes, optionally cut into fragments the way omniORB cuts a
GIOP 1.1 message, so results can be compared byte for byte.
"""

from __future__ import annotations

import collections
import decimal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import _omnipy
import omniORB
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omniORB import CORBA

import pyorb
from pyorb import _accelerator, marshal
from pyorb.marshal import wide
from pyorb.marshal import layout
from pyorb.marshal.layout import (
    CDRLayoutError, UnsupportedTypeError, realign_fragments, transcode_strings, zero_padding,
)
from pyorb.marshal.layout.descriptors import _top

ROOT = Path(__file__).resolve().parents[1]
ORB = marshal.ensure_orb()
IDL = pyorb.load_idl(ROOT / "idl" / "interop.idl")
Interop = IDL.Interop

TEST_IDL = """
module CdrScanT {
  enum Kind { ka, kb, kc };
  struct Tree;
  typedef sequence<Tree> TreeSeq;
  struct Tree { long v; TreeSeq kids; };
  struct Inner { octet o; double d; string s; };
  struct Outer { string name; sequence<Inner> inners; Inner one; short tail; };
  typedef sequence<Inner> InnerSeq;
  struct Deep { Outer top; sequence<InnerSeq> nested; octet last; };
  struct Pad { octet a; double b; octet c; long d; short e; };
  typedef Pad PadArr[3];
  typedef sequence<Pad> PadSeq;
  typedef double Grid[2][3];
  union ByEnum switch (Kind) { case ka: double d; case kb: string s; };
  union ByLL switch (long long) { case 1: octet o; case 5000000000: double d; default: string s; };
  union ByChar switch (char) { case 'a': short h; case 'b': string w; };
  union ByBool switch (boolean) { case TRUE: long long x; };
  union ByUShort switch (unsigned short) { case 7: Inner in7; default: Pad p; };
  typedef fixed<9,3> Money;
  struct Mix { octet o; Money m; wchar c; double d; wstring w; octet e; };
  struct WithAny { octet o; any a; sequence<any> many; };
  interface Node { };
  struct WithRef { octet o; Node n; double d; };
  exception Failure { long code; string why; sequence<double> details; };
};
"""
with tempfile.TemporaryDirectory() as _tmp:
    (Path(_tmp) / "cdrscan_t.idl").write_text(TEST_IDL)
    T = pyorb.load_idl(Path(_tmp) / "cdrscan_t.idl").CdrScanT

TC = omniORB.tcInternal.createTypeCode
OBJ = ORB.string_to_object("corbaloc::1.2@127.0.0.1:2809/Key")
POINT_SEQ = Interop.Types._d_echo_points[0][0]
MIXED = tuple(Interop.Types._d_mixed[0])  # string, double, octet, long long
HYP = settings(deadline=None, max_examples=12, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- omniORB marshaling at any offset, as pyorb does ---------------------------

_wrappers: dict[tuple[int, bool], type] = {}


def _wrapper(descs: Sequence[Any], pad: int) -> tuple[Any, ...]:
    """A struct of ``pad`` leading octets (none if pad is 0), then ``descs``."""
    names = [f"a{i}" for i in range(len(descs))]
    key = (len(descs), pad > 0)
    if key not in _wrappers:
        _wrappers[key] = collections.namedtuple("W", ["p"] * (pad > 0) + names)
    members: list[Any] = ["p", (20, 10, pad)] if pad else []
    for name, desc in zip(names, descs):
        members += [name, desc]
    return (15, _wrappers[key], "", "W", *members)


def omni_marshal(descs: Sequence[Any], values: Sequence[Any], pad: int, le: bool) -> bytearray:
    """omniORB's raw CDR of ``values`` as if they started at stream offset ``pad``."""
    wrap = _wrapper(descs, pad)
    raw = _omnipy.cdrMarshal(wrap, wrap[1](*[bytes(pad)] * (pad > 0), *values), le)
    return bytearray(raw[pad:])


def omni_unmarshal(descs: Sequence[Any], data: bytes | bytearray, pad: int, le: bool) -> list[Any]:
    """Read ``data`` (at stream offset ``pad``) back with omniORB; wchar through pyorb.marshal.wide."""
    wrap = _wrapper([wide.read_descriptor(d) for d in descs], pad)
    got = list(_omnipy.cdrUnmarshal(wrap, bytes(pad) + bytes(data), le))[pad > 0 :]
    return [wide.restore(d, v) for d, v in zip(descs, got)]


def same(a: Any, b: Any) -> bool:
    """Deep equality for omniORB values (its structs compare by identity)."""
    if isinstance(a, CORBA.TypeCode):
        return isinstance(b, CORBA.TypeCode) and bool(a.equal(b))
    if isinstance(a, CORBA.Object):
        return isinstance(b, CORBA.Object) and ORB.object_to_string(a) == ORB.object_to_string(b)
    if isinstance(a, float):
        return isinstance(b, float) and struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, omniORB.EnumItem) or not hasattr(a, "__dict__"):
        return bool(a == b)
    return type(a) is type(b) and vars(a).keys() == vars(b).keys() and all(same(v, vars(b)[k]) for k, v in vars(a).items())


# -- an independent reference writer -------------------------------------------


class Unsupported(Exception):
    """The reference writer does not encode this type."""


class Writer:
    """CDR writer with chosen padding bytes and optional GIOP 1.1 style fragmenting.

    Fragmenting models omniORB: the first segment holds ``first`` octets, each
    later one ``size``; a primitive that does not fit (with its padding)
    starts the next segment, whose alignment restarts at ``origin``; octet
    data fills a segment to the brim and continues.
    """

    def __init__(self, le: bool, base: int = 0, *, fill: int = 0, first: int = 1 << 62,
                 size: int = 1 << 62, origin: int = 12, minor: int = 2) -> None:  # fmt: skip
        self.le, self.fill, self.size, self.origin, self.minor = le, fill, size, origin, minor
        self.segs, self.origins, self.caps = [bytearray()], [base], [first]

    def _next(self) -> None:
        self.segs.append(bytearray())
        self.origins.append(self.origin)
        self.caps.append(self.size)

    def prim(self, fmt: str, value: Any) -> None:
        raw = struct.pack(("<" if self.le else ">") + fmt, value)
        while True:
            seg = self.segs[-1]
            pad = -(self.origins[-1] + len(seg)) % len(raw)
            if len(seg) + pad + len(raw) <= self.caps[-1]:
                break
            if not seg:
                raise ValueError("fragment size too small for a primitive")
            self._next()
        seg += bytes([self.fill]) * pad + raw

    def octets(self, data: bytes) -> None:
        while data:
            room = self.caps[-1] - len(self.segs[-1])
            if room <= 0:
                self._next()
                continue
            self.segs[-1] += data[:room]
            data = data[room:]

    def result(self) -> tuple[bytes, list[int]]:
        """The concatenated segments and where each segment after the first starts."""
        starts, pos = [], len(self.segs[0])
        for seg in self.segs[1:]:
            starts.append(pos)
            pos += len(seg)
        return b"".join(self.segs), starts

    def getvalue(self) -> bytes:
        return self.result()[0]


PRIM_FORMATS = {2: "h", 3: "i", 4: "H", 5: "I", 6: "f", 7: "d", 8: "?", 10: "B", 23: "q", 24: "Q"}


def resolve(desc: Any) -> Any:
    """Strip aliases and omniidl recursion placeholders."""
    while True:
        if isinstance(desc, tuple) and desc[0] == 21:
            desc = desc[3]
        elif isinstance(desc, tuple) and desc[0] == -1:
            desc = desc[1][0] if not isinstance(desc[1][0], str) else omniORB.findType(desc[1][0])
        else:
            return desc


def encode(w: Writer, desc: Any, v: Any) -> None:
    """Write ``v`` of type ``desc``; raises Unsupported for kinds it does not know."""
    desc = resolve(desc)
    kind = desc if isinstance(desc, int) else desc[0]
    if kind in PRIM_FORMATS:
        w.prim(PRIM_FORMATS[kind], v)
    elif kind in (9, 17):  # char, enum
        w.prim("B" if kind == 9 else "I", ord(v) if kind == 9 else v._v)
    elif kind in (18, 26, 27):
        encode_text(w, kind, v)
    elif kind in (19, 20):
        encode_list(w, desc, v)
    elif kind in (15, 22):
        if kind == 22:
            encode_text(w, 18, desc[2])
        for name, member in zip(desc[4::2], desc[5::2]):
            encode(w, member, getattr(v, name))
    elif kind == 16:
        encode(w, desc[4], v._d)
        cases = [c for i, c in enumerate(desc[6]) if i != desc[5] and c[0] == v._d]
        member = cases[0][2] if cases else desc[7][2] if desc[7] else None
        if member is not None:
            encode(w, member, v._v)
    elif kind == 28:
        w.octets(fixed_octets(desc[1], desc[2], v))
    elif kind == 11:
        encode_typecode(w, v._t._d)
        encode(w, v._t._d, v._v)
    elif kind == 12:
        encode_typecode(w, v._d)
    elif kind == 14:
        encode_objref(w, v)
    else:
        raise Unsupported(kind)


def encode_objref(w: Writer, obj: Any) -> None:
    """An IOR: type id, then (tag, profile octets) pairs, read off the stringified IOR."""
    if obj is None:
        encode_text(w, 18, "")
        w.prim("I", 0)
        return
    ior = bytes.fromhex(ORB.object_to_string(obj)[4:])
    order = "<" if ior[0] else ">"

    def ulong(pos: int) -> tuple[int, int]:
        pos += -pos % 4
        return struct.unpack_from(order + "I", ior, pos)[0], pos + 4

    n, pos = ulong(1)
    encode_text(w, 18, ior[pos : pos + n - 1].decode())
    count, pos = ulong(pos + n)
    w.prim("I", count)
    for _ in range(count):
        tag, pos = ulong(pos)
        n, pos = ulong(pos)
        w.prim("I", tag)
        w.prim("I", n)
        w.octets(ior[pos : pos + n])
        pos += n


def encode_text(w: Writer, kind: int, v: str) -> None:
    if kind == 26 and w.minor == 1:
        w.prim("H", ord(v))
    elif kind == 26:  # GIOP 1.2 wchar: length octet, UTF-16 big-endian
        w.prim("B", 2)
        w.octets(v.encode("utf-16-be"))
    elif kind == 27 and w.minor == 1:  # GIOP 1.1: count of units with the NUL, then the units
        units = struct.unpack(f"<{len(v.encode('utf-16-le')) // 2}H", v.encode("utf-16-le"))
        w.prim("I", len(units) + 1)
        for unit in (*units, 0):
            w.prim("H", unit)
    else:  # string; GIOP 1.2 wstring as omniORB writes it: a BOM, then UTF-16LE
        raw = v.encode() + b"\0" if kind == 18 else (b"\xff\xfe" + v.encode("utf-16-le") if v else b"")
        w.prim("I", len(raw))
        w.octets(raw)


def encode_list(w: Writer, desc: tuple[Any, ...], v: Any) -> None:
    if desc[0] == 19:
        w.prim("I", len(v))
    if resolve(desc[1]) in (9, 10) and isinstance(v, bytes):
        w.octets(v)
    else:
        for item in v:
            encode(w, desc[1], item)


def fixed_octets(digits: int, scale: int, v: Any) -> bytes:
    """Packed decimal: one nibble per digit, then a sign nibble (0xc or 0xd)."""
    number = decimal.Decimal(str(v)).scaleb(scale)
    text = str(abs(int(number))).rjust(digits, "0")
    nibbles = [int(ch) for ch in text] + [0xD if number < 0 else 0xC]
    nibbles = [0] * (len(nibbles) % 2) + nibbles
    return bytes(a << 4 | b for a, b in zip(nibbles[::2], nibbles[1::2]))


def encode_typecode(w: Writer, desc: Any) -> None:
    """TypeCodes of basic kinds, strings, structs, sequences, aliases and enums."""
    kind = desc if isinstance(desc, int) else desc[0]
    w.prim("I", kind)
    if isinstance(desc, int):
        return
    if kind == 18:
        w.prim("I", desc[1])
        return
    enc = Writer(True)  # omniORB writes encapsulations in its native (little-endian) order
    enc.prim("B", 1)
    if kind == 15:
        encode_names(enc, desc[2], desc[3])
        enc.prim("I", len(desc[4::2]))
        for name, member in zip(desc[4::2], desc[5::2]):
            encode_names(enc, name)
            encode_typecode(enc, member)
    elif kind == 19:
        encode_typecode(enc, desc[1])
        enc.prim("I", desc[2])
    elif kind == 21:
        encode_names(enc, desc[1], desc[2])
        encode_typecode(enc, desc[3])
    elif kind == 17:
        encode_names(enc, desc[1], desc[2], len(desc[3]), *(item._n for item in desc[3]))
    else:
        raise Unsupported(kind)
    w.prim("I", len(enc.getvalue()))
    w.octets(enc.getvalue())


def encode_names(w: Writer, *items: str | int) -> None:
    for item in items:
        if isinstance(item, int):
            w.prim("I", item)
        else:
            encode_text(w, 18, item)


def reference(descs: Sequence[Any], values: Sequence[Any], le: bool, base: int, **options: Any) -> Writer:
    w = Writer(le, base, **options)
    for desc, value in zip(descs, values):
        encode(w, desc, value)
    return w


# -- values for descriptors ------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=11)
WTEXT = st.text(st.characters(codec="utf-8", max_codepoint=0xFFFF, exclude_characters="\0"), max_size=5)
INTS = {2: 16, 3: 32, 23: 64}
UINTS = {4: 16, 5: 32, 24: 64, 10: 8}
ANY_TYPES = [3, 7, (18, 0), Interop._d_Point, Interop.Types._d_echo_points[0][0], Interop._d_Color, T._d_Inner]


def values(desc: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for values of an omniidl descriptor (depth bounds recursion)."""
    desc = resolve(desc)
    kind = desc if isinstance(desc, int) else desc[0]
    simple = _simple_values(kind)
    if simple is not None:
        return simple
    builder = _VALUE_BUILDERS.get(kind)
    if builder is None:
        raise Unsupported(kind)
    return builder(desc, depth)


def _simple_values(kind: int) -> st.SearchStrategy[Any] | None:
    if kind in INTS:
        return st.integers(-(1 << INTS[kind] - 1), (1 << INTS[kind] - 1) - 1)
    if kind in UINTS:
        return st.integers(0, (1 << UINTS[kind]) - 1)
    return SIMPLE.get(kind)


SIMPLE: dict[int, st.SearchStrategy[Any]] = {
    6: st.floats(width=32, allow_nan=False), 7: st.floats(allow_nan=False), 8: st.booleans(),
    9: st.characters(min_codepoint=1, max_codepoint=127),
    26: st.characters(codec="utf-8", min_codepoint=1, max_codepoint=0xFFFF),
    11: st.deferred(lambda: st.one_of([st.builds(CORBA.Any, st.just(TC(d)), values(d, 2)) for d in ANY_TYPES])),
    12: st.deferred(lambda: st.sampled_from([TC(d) for d in ANY_TYPES])), 14: st.sampled_from([None, OBJ]),
}  # fmt: skip


def _list_values(desc: tuple[Any, ...], depth: int) -> st.SearchStrategy[Any]:
    if desc[0] == 20:
        n = desc[2]
        if resolve(desc[1]) == 10:
            return st.binary(min_size=n, max_size=n)
        return st.lists(values(desc[1], depth + 1), min_size=n, max_size=n)
    top = desc[2] or (0 if depth >= 3 else 4 - depth)
    if resolve(desc[1]) == 10:
        return st.binary(max_size=24)
    if depth >= 3:  # also ends recursive types
        return st.just([])
    return st.lists(values(desc[1], depth + 1), max_size=top)


def _union_values(desc: tuple[Any, ...], depth: int) -> st.SearchStrategy[Any]:
    cls, default_index = desc[1], desc[5]
    labels = [c[0] for i, c in enumerate(desc[6]) if i != default_index]
    cases = [st.builds(cls, st.just(c[0]), values(c[2], depth + 1)) for i, c in enumerate(desc[6]) if i != default_index]
    disc = resolve(desc[4])
    if default_index >= 0:
        others = values(disc).filter(lambda d: d not in labels)
        cases.append(st.builds(cls, others, values(desc[7][2], depth + 1)))
    elif disc == 8 and len(labels) == 1:
        cases.append(st.just(cls(not labels[0], None)))  # no member selected
    return st.one_of(cases)


def _fixed_values(desc: tuple[Any, ...], depth: int) -> st.SearchStrategy[Any]:
    digits, scale = desc[1], desc[2]
    limit = 10**digits - 1
    return st.integers(-limit, limit).map(lambda n: CORBA.fixed(str(decimal.Decimal(n).scaleb(-scale))))


_VALUE_BUILDERS: dict[int, Callable[[tuple[Any, ...], int], st.SearchStrategy[Any]]] = {
    15: lambda d, depth: st.builds(d[1], *(values(m, depth + 1) for m in d[5::2])),
    22: lambda d, depth: st.builds(d[1], *(values(m, depth + 1) for m in d[5::2])),
    16: _union_values,
    17: lambda d, depth: st.sampled_from(d[3]),
    18: lambda d, depth: TEXT if not d[1] else TEXT.filter(lambda s: len(s.encode()) <= d[1]),  # omniORB bounds octets
    27: lambda d, depth: WTEXT,
    19: _list_values,
    20: _list_values,
    28: _fixed_values,
}

# Every kind, nested: name -> descriptors laid out one after another.
TABLE: dict[str, tuple[Any, ...]] = {
    "ulonglong": (24,), "short": (2,), "char": (9,), "boolean": (8,), "float": (6,), "ushort": (4,),
    "string": ((18, 0),), "bounded string": ((18, 5),), "wstring": ((27, 0),), "wchar": (26,),
    "mixed args": MIXED, "point": (Interop._d_Point,), "points": (POINT_SEQ,),
    "blob": (Interop.Types._d_echo_blob[0][0],), "matrix": (Interop.Types._d_echo_matrix[0][0],),
    "color": (Interop._d_Color,), "variant": (Interop._d_Variant,), "failure": (T._d_Failure,),
    "inner": (T._d_Inner,), "outer": (T._d_Outer,), "deep": (T._d_Deep,), "pad": (T._d_Pad,),
    "pad array": (T._d_PadArr,), "pad seq": (T._d_PadSeq,), "grid": (T._d_Grid,),
    "double seq": ((19, 7, 0),), "seq of double seq": ((19, (19, 7, 0), 0),),
    "by enum": (T._d_ByEnum,), "by long long": (T._d_ByLL,), "by char": (T._d_ByChar,),
    "by boolean": (T._d_ByBool,), "by ushort": (T._d_ByUShort,), "money": (T._d_Money,),
    "mix": (T._d_Mix,), "tree": (T._d_Tree,), "any": (11,), "with any": (T._d_WithAny,),
    "typecode": (12,), "objref": ((14, "IDL:CdrScanT/Node:1.0", "Node"),), "with ref": (T._d_WithRef,),
    "octet then any then double": (10, 11, 7), "string then union": ((18, 0), T._d_ByUShort),
}  # fmt: skip


def table_values(name: str) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(*(values(d) for d in TABLE[name]))


def try_reference(descs: Sequence[Any], vals: Sequence[Any], le: bool, base: int, **options: Any) -> Writer | None:
    try:
        return reference(descs, vals, le, base, **options)
    except Unsupported:
        return None


# -- zero_padding ------------------------------------------------------------------


def scrubbed(descs: Sequence[Any], vals: Sequence[Any], pad: int, le: bool) -> bytearray:
    data = omni_marshal(descs, vals, pad, le)
    zero_padding(descs, data, le, pad)
    return data


@pytest.mark.parametrize("name", list(TABLE))
@HYP
@given(data=st.data(), le=st.booleans())
def test_zero_padding_round_trips_and_matches_reference(name: str, data: st.DataObject, le: bool) -> None:
    """At every start offset: omniORB reads the scrubbed bytes back, and they equal a zero-padded encoding."""
    descs = TABLE[name]
    vals = data.draw(table_values(name))
    for pad in range(8):
        clean = scrubbed(descs, vals, pad, le)
        assert all(map(same, omni_unmarshal(descs, clean, pad, le), vals))
        again = bytearray(clean)
        zero_padding(descs, again, le, pad)
        assert again == clean, "scrubbing is idempotent"
        assert scrubbed(descs, vals, pad, le) == clean, "same value, same bytes"
        ref = try_reference(descs, vals, le, pad)
        if ref is not None:
            assert bytes(clean) == ref.getvalue()


@pytest.mark.parametrize("name", list(TABLE))
@HYP
@given(data=st.data(), le=st.booleans(), base=st.integers(0, 7), minor=st.sampled_from([1, 2]))
def test_zero_padding_clears_planted_garbage(name: str, data: st.DataObject, le: bool, base: int, minor: int) -> None:
    """Padding the reference writer fills with 0xA5 comes out zero (GIOP 1.1 and 1.2 wide forms)."""
    descs, vals = TABLE[name], data.draw(table_values(name))
    dirty = try_reference(descs, vals, le, base, fill=0xA5, minor=minor)
    if dirty is None:
        return
    got = bytearray(dirty.getvalue())
    zero_padding(descs, got, le, base, giop_minor=minor)
    assert bytes(got) == reference(descs, vals, le, base, minor=minor).getvalue()


def test_garbage_from_omniorb_is_gone() -> None:
    """The motivating case: omniORB leaves memory between a string and a double."""
    vals = ("x", 1.5, 7, -2)
    for pad in range(8):
        data = omni_marshal(MIXED, vals, pad, True)
        zero_padding(MIXED, data, True, pad)
        assert bytes(data) == reference(MIXED, vals, True, pad).getvalue()


def test_typecode_encapsulations_are_scrubbed() -> None:
    """Padding inside a TypeCode's encapsulation (after the byte-order octet, after names) is zeroed."""
    for desc in (T._d_ByLL, T._d_Tree, T._d_Failure, T._d_Mix, T._d_Kind, T._d_WithRef, T._d_ByEnum):
        for le in (True, False):
            data = omni_marshal((12,), (TC(desc),), 0, le)
            zero_padding((12,), data, le)
            assert omni_unmarshal((12,), data, 0, le)[0].equal(TC(desc))
            assert bytes(data[8:12]) in (b"\x01\0\0\0", b"\0\0\0\0"), "the octets after the byte-order octet"


def test_objref_padding_after_type_id() -> None:
    for pad in range(8):
        data = scrubbed((10, (14, "IDL:CdrScanT/Node:1.0", "Node")), (1, OBJ), pad, True)
        type_id_end = 1 + (-(pad + 1) % 4) + 4 + 1  # octet, padding, length, "" with its NUL
        assert data[type_id_end : type_id_end + (-(pad + type_id_end) % 4)] == bytes(-(pad + type_id_end) % 4)


def test_big_sequences_scrub_exactly() -> None:
    """20 000 structs with strings (one step each) and 20 000 fixed structs (strided slices)."""
    points = [Interop.Point(i + 0.5, -i / 4, "p" * (i % 7)) for i in range(20_000)]
    pads = [T.Pad(i % 256, i / 3, 1, -i, 2) for i in range(20_000)]
    for descs, vals in (((POINT_SEQ,), (points,)), ((10, T._d_PadSeq), (3, pads))):
        clean = scrubbed(descs, vals, 4, True)
        assert bytes(clean) == reference(descs, vals, True, 4).getvalue()


def test_exact_layout_is_checked() -> None:
    data = omni_marshal(MIXED, ("abc", 1.0, 2, 3), 0, True)
    with pytest.raises(CDRLayoutError, match="left over"):
        zero_padding(MIXED, data + b"\0", True)
    with pytest.raises(CDRLayoutError):
        zero_padding(MIXED, data[:-1], True)
    with pytest.raises(CDRLayoutError, match="take 8 octets"):
        zero_padding((24,), bytearray(9), True)
    bad = bytearray(data)
    bad[7] = 1  # the string's NUL
    with pytest.raises(CDRLayoutError, match="NUL"):
        zero_padding(MIXED, bad, True)


def test_bounds_are_checked() -> None:
    data = omni_marshal(((18, 0),), ("toolong",), 0, True)
    with pytest.raises(CDRLayoutError, match="bound"):
        zero_padding(((18, 5),), data, True)
    with pytest.raises(CDRLayoutError, match="bound"):  # three doubles in a sequence<double, 2>
        zero_padding(((19, 7, 2),), bytearray(struct.pack("<I", 3) + bytes(28)), True)


def test_what_is_not_walked_yet() -> None:
    # A value box from its descriptor is walked (a null box is one zero long), re-encoded and
    # realigned; an abstract interface is not.
    value_box = (30, None, "IDL:VB:1.0", "VB", 3)
    zero_padding((value_box,), bytearray(4), True)
    assert transcode_strings((value_box,), bytes(4), True, 0, bytes.upper) == bytes(4)
    assert realign_fragments((value_box,), bytes(4), True, 0, [4]) == bytes(4)
    with pytest.raises(NotImplementedError):
        realign_fragments(((32, "IDL:A:1.0", "A"),), bytes(8), True, 0, [])
    # An any holding a value box (of a long, here null) is walked; one holding an event type
    # is refused, with a ValueError too, for callers handling bad data.
    encap = b"\x01\0\0\0" + struct.pack("<I", 3) + b"id\0\0" + struct.pack("<I", 2) + b"v\0\0\0" + struct.pack("<I", 3)
    zero_padding((11,), bytearray(struct.pack("<II", 30, len(encap)) + encap + bytes(4)), True)
    encap = encap[:-6] + struct.pack("<hII", 0, 0, 0)  # after the name: modifier, concrete base tk_null, no members
    with pytest.raises(ValueError, match="event type"):
        zero_padding((11,), bytearray(struct.pack("<II", 36, len(encap)) + encap + bytes(4)), True)


def test_giop_1_1_wide_forms() -> None:
    vals = (1, "\u20acb", "z", 2.0)
    descs = (10, (27, 0), 26, 7)
    for base in range(8):
        clean = reference(descs, vals, True, base, minor=1).getvalue()
        got = bytearray(reference(descs, vals, True, base, minor=1, fill=0xFF).getvalue())
        zero_padding(descs, got, True, base, giop_minor=1)
        assert bytes(got) == clean
        train, starts = reference(descs, vals, True, base, minor=1, first=9, size=12).result()
        assert realign_fragments(descs, train, True, base, starts) == clean


@pytest.mark.parametrize("minor", [1, 2])
def test_wchar_discriminants(minor: int) -> None:
    """A union switching on wchar (omniORBpy cannot read one back, so compare with the reference)."""
    desc: tuple[Any, ...] = (16, None, "IDL:U:1.0", "U", 26, -1, (("a", "x", 3), ("\u20ac", "y", 7)), None, {})
    descs = (10, desc, 10)
    for disc, member in (("a", 5), ("\u20ac", 2.5), ("z", None)):
        vals = (1, SimpleNamespace(_d=disc, _v=member), 2)
        for base in range(8):
            clean = reference(descs, vals, True, base, minor=minor).getvalue()
            dirty = bytearray(reference(descs, vals, True, base, minor=minor, fill=0xEE).getvalue())
            zero_padding(descs, dirty, True, base, giop_minor=minor)
            assert bytes(dirty) == clean
            train, starts = reference(descs, vals, True, base, minor=minor, fill=0xEE, first=13, size=12).result()
            assert realign_fragments(descs, train, True, base, starts, giop_minor=minor) == clean


def test_kind_numbers_match_omniorb() -> None:
    from pyorb.marshal import layout as cdrscan

    renamed = {"tv__indirect": "TV_INDIRECT", "tv_abstract_interface": "TV_ABSTRACT", "tv_local_interface": "TV_LOCAL"}
    names = [n for n in dir(omniORB.tcInternal) if n.startswith("tv_")]
    assert len(names) > 30
    for name in names:
        assert getattr(cdrscan, renamed.get(name, name.upper())) == getattr(omniORB.tcInternal, name), name


@pytest.mark.integration  # a fresh interpreter
def test_importing_the_layout_walk_does_not_import_omniorb() -> None:
    """The GIOP layer may use realign_fragments without loading omniORB."""
    code = "import sys, pyorb.marshal.layout; assert 'omniORB' not in sys.modules and '_omnipy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_top_level_typecode_indirection() -> None:
    """An indirection to an earlier top-level TypeCode; realigning rewrites its offset."""
    tc = bytes(scrubbed((12,), (TC(Interop._d_Point),), 0, True))
    indirection = struct.pack("<I", 0xFFFFFFFF)
    data = bytearray(tc + indirection + struct.pack("<i", -len(tc) - 4))
    zero_padding((12, 12), data, True)
    with pytest.raises(CDRLayoutError, match="no TypeCode"):
        zero_padding((12, 12), data[:-4] + struct.pack("<i", -8), True)
    # Each TypeCode in its own fragment whose phase is 2: two padding octets before each.
    train = b"\x07" + b"\0\0" + tc + b"\0\0" + indirection + struct.pack("<i", 3 - (3 + len(tc) + 2 + 4))
    got = realign_fragments((10, 12, 12), train, True, 0, [1, 3 + len(tc)], fragment_origin=2)
    assert got == b"\x07\0\0\0" + tc + indirection + struct.pack("<i", 4 - (4 + len(tc) + 4))


def test_caches_keep_descriptors_alive() -> None:
    from pyorb.marshal.layout import descriptors

    desc = (19, (15, None, "", "S", "a", 10, "b", 7), 0)
    data = bytearray(struct.pack("<I", 2) + bytes(28))  # count, octet, 3 pad, double, octet, 7 pad, double
    zero_padding((desc,), data, True)
    assert any(entry[0] is desc for entry in descriptors._cache.values())


# -- realign_fragments ---------------------------------------------------------------


@pytest.mark.parametrize("name", list(TABLE))
@HYP
@given(
    data=st.data(), le=st.booleans(), base=st.integers(0, 7), first=st.integers(16, 48),
    size=st.integers(16, 40), origin=st.sampled_from([12, 0, 1, 6]),
)  # fmt: skip
def test_realign_simulated_fragments(
    name: str, data: st.DataObject, le: bool, base: int, first: int, size: int, origin: int
) -> None:
    """Cut as omniORB cuts (alignment restarting in each fragment): realigned bytes are the plain encoding."""
    descs, vals = TABLE[name], data.draw(table_values(name))
    train, starts = reference(descs, vals, le, base, fill=0xA5, first=first, size=size, origin=origin).result()
    got = realign_fragments(descs, train, le, base, starts, origin, giop_minor=2)
    assert got == reference(descs, vals, le, base).getvalue()
    assert all(map(same, omni_unmarshal(descs, got, base, le), vals))


@pytest.mark.parametrize("name", list(TABLE))
@settings(HYP, max_examples=4)
@given(data=st.data())
def test_realign_without_fragments_is_zero_padding(name: str, data: st.DataObject) -> None:
    """Covers objrefs and TypeCodes exactly as omniORB writes them."""
    descs, vals = TABLE[name], data.draw(table_values(name))
    for pad in range(8):
        raw = omni_marshal(descs, vals, pad, False)
        assert realign_fragments(descs, bytes(raw), False, pad, [], giop_minor=2) == scrubbed(descs, vals, pad, False)


def test_realign_20000_points_in_8180_octet_fragments() -> None:
    """omniORB's case: 8 KiB messages, 8180-octet Fragment payloads, alignment restarting at 12."""
    points = [Interop.Point(i + 0.5, -i / 4, "p" * (i % 7)) for i in range(20_000)]
    for base in (56, 52):  # the real Request header length, and one that is 4 mod 8
        train, starts = reference((POINT_SEQ,), (points,), True, base, first=8192 - base, size=8180).result()
        assert len(starts) > 50
        with pytest.raises(CORBA.MARSHAL):  # what plain concatenation gives
            same(omni_unmarshal((POINT_SEQ,), train, base % 8, True)[0], points)
        got = realign_fragments((POINT_SEQ,), train, True, base, starts)
        assert got == reference((POINT_SEQ,), (points,), True, base).getvalue()
        assert same(omni_unmarshal((POINT_SEQ,), got, base % 8, True)[0], points)


def test_realign_rejects_bad_fragment_starts() -> None:
    data = bytes(omni_marshal(MIXED, ("ab", 1.0, 2, 3), 0, True))
    for starts in ([5, 3], [-1], [len(data) + 1]):
        with pytest.raises(CDRLayoutError, match="do not fit"):
            realign_fragments(MIXED, data, True, 0, starts)
    with pytest.raises(CDRLayoutError, match="split across fragments"):
        realign_fragments((24,), bytes(8), True, 0, [4])
    with pytest.raises(CDRLayoutError, match="left over"):
        realign_fragments((24,), bytes(16), True, 0, [8])
    with pytest.raises(CDRLayoutError, match="no more fragments"):
        realign_fragments((24,), b"", True, 0, [])
    with pytest.raises(CDRLayoutError, match="ends inside a string"):
        realign_fragments(((18, 0),), struct.pack("<I", 9) + b"abc", True, 0, [])


# -- malformed input ---------------------------------------------------------------

def _check_only_value_error(descs: Sequence[Any], raw: bytes, le: bool, base: int, starts: list[int]) -> None:
    try:
        zero_padding(descs, bytearray(raw), le, base)
    except ValueError:
        pass
    try:
        realign_fragments(descs, raw, le, base, starts)
    except ValueError:
        pass


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(list(TABLE)), raw=st.binary(max_size=80), le=st.booleans(),
       base=st.integers(0, 7), data=st.data())  # fmt: skip
def test_random_bytes_raise_only_value_error(name: str, raw: bytes, le: bool, base: int, data: st.DataObject) -> None:
    starts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=3)))
    _check_only_value_error(TABLE[name], raw, le, base, starts)


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(list(TABLE)), le=st.booleans(), base=st.integers(0, 7), data=st.data())
def test_damaged_encodings_raise_only_value_error(name: str, le: bool, base: int, data: st.DataObject) -> None:
    """Valid encodings with octets overwritten, cut short or extended."""
    descs = TABLE[name]
    raw = bytearray(omni_marshal(descs, data.draw(table_values(name)), base, le))
    for _ in range(data.draw(st.integers(1, 3))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
    raw = raw[: data.draw(st.integers(0, len(raw) + 2))] + bytes(data.draw(st.integers(0, 3)))
    starts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=3)))
    _check_only_value_error(descs, bytes(raw), le, base, starts)


def test_hostile_typecodes() -> None:
    """Deep nesting, self-containing structs and huge arrays fail cleanly."""
    def encap(body: bytes) -> bytes:
        return struct.pack("<I", len(body) + 1) + b"\x01" + body

    nested = struct.pack("<I", 3)
    for _ in range(200):  # sequence<sequence<...<long>>>
        nested = struct.pack("<I", 19) + encap(b"\0\0\0" + nested + struct.pack("<I", 0))
    with pytest.raises(CDRLayoutError):
        zero_padding((11,), bytearray(nested + bytes(4)), True)
    # struct S { S s; }: a member that is an indirection to its own struct.
    names = struct.pack("<I", 1) + b"\0\0\0\0" + struct.pack("<I", 1) + b"\0\0\0\0"
    member = struct.pack("<I", 1) + b"\0\0\0\0" + struct.pack("<I", 0xFFFFFFFF)
    body = b"\0\0\0" + names + struct.pack("<I", 1) + member
    tc = struct.pack("<I", 15) + encap(body + struct.pack("<i", -(8 + len(body) + 1 + 4)))
    for fn in (lambda d: zero_padding((11,), bytearray(d), True), lambda d: realign_fragments((11,), d, True, 0, [])):
        with pytest.raises(CDRLayoutError):
            fn(tc + bytes(16))
    huge = struct.pack("<I", 20) + encap(b"\0\0\0" + struct.pack("<II", 7, 0xFFFFFFFF))
    with pytest.raises(CDRLayoutError):
        zero_padding((11,), bytearray(huge + bytes(64)), True)


# -- a real omniORB GIOP 1.1 fragment train --------------------------------------------

Message = tuple[bytes, bytes]  # 12-octet header, body


class RecordingServer:
    """A raw-socket GIOP 1.1 server for one omniORB client connection.

    It answers LocateRequest with OBJECT_HERE and echo_points by echoing the
    points (decoded with realign_fragments), and records every Request train.
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(60)
        self.trains: list[list[Message]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def corbaloc(self) -> str:
        return f"corbaloc::1.1@127.0.0.1:{self.listener.getsockname()[1]}/Types"

    def _run(self) -> None:
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(60)
                self._serve(conn)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.listener.close()

    def _serve(self, conn: socket.socket) -> None:
        train: list[Message] = []
        while (msg := read_message(conn)) is not None:
            header, body = msg
            order = "<" if header[6] & 1 else ">"
            if header[7] == 3:  # LocateRequest -> LocateReply OBJECT_HERE
                conn.sendall(giop_message(4, order, struct.pack(order + "II", struct.unpack_from(order + "I", body)[0], 1)))
                continue
            train.append(msg)
            if header[6] & 2:  # more fragments follow
                continue
            self.trains.append(train)
            request_id, points = decode_echo_points(train)
            train = []
            reply = bytearray(_omnipy.cdrMarshal(POINT_SEQ, points, order == "<"))
            zero_padding((POINT_SEQ,), reply, order == "<", 24)  # 1.1 Reply header: 12 + 12 octets
            conn.sendall(giop_message(1, order, struct.pack(order + "III", 0, request_id, 0) + bytes(reply)))


def read_message(conn: socket.socket) -> Message | None:
    header = _read_exactly(conn, 12)
    if header is None:
        return None
    assert header[:4] == b"GIOP" and header[4:6] == b"\x01\x01", header
    size = struct.unpack_from("<I" if header[6] & 1 else ">I", header, 8)[0]
    body = _read_exactly(conn, size)
    assert body is not None
    return header, body


def _read_exactly(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def giop_message(kind: int, order: str, body: bytes) -> bytes:
    return b"GIOP\x01\x01" + bytes([order == "<", kind]) + struct.pack(order + "I", len(body)) + body


def request_body_offset(body: bytes, order: str) -> tuple[int, int]:
    """(request id, body offset) of a GIOP 1.1 Request: contexts, id, flags, key, operation, principal."""
    def ulong(pos: int) -> tuple[int, int]:
        pos += -pos % 4
        return struct.unpack_from(order + "I", body, pos)[0], pos + 4

    count, pos = ulong(0)
    for _ in range(count):
        n, pos = ulong(ulong(pos)[1])
        pos += n
    request_id, pos = ulong(pos)
    pos += 4  # response_expected, 3 reserved octets
    for _ in range(3):  # object key, operation, principal
        n, pos = ulong(pos)
        pos += n
    return request_id, pos


def fragment_train(train: list[Message]) -> tuple[bytes, int, list[int], bool]:
    """The request's argument octets with the fragment payloads, its stream offset, payload starts, order."""
    (_, first), order = train[0], "<" if train[0][0][6] & 1 else ">"
    request_id, offset = request_body_offset(first, order)
    data, starts = bytearray(first[offset:]), []
    for _, payload in train[1:]:
        starts.append(len(data))
        data += payload
    return bytes(data), 12 + offset, starts, order == "<"


def decode_echo_points(train: list[Message]) -> tuple[int, Any]:
    data, base, starts, le = fragment_train(train)
    request_id = request_body_offset(train[0][1], "<" if le else ">")[0]
    return request_id, omni_unmarshal((POINT_SEQ,), realign_fragments((POINT_SEQ,), data, le, base, starts), base % 8, le)[0]


@pytest.mark.interop
def test_real_omniorb_giop_1_1_fragment_train() -> None:
    """omniORB (GIOP 1.1) sends 20 000 points in 8 KiB fragments; we decode and echo them."""
    server = RecordingServer()
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "peers" / "omni_client.py"), server.corbaloc,
         "--max-giop", "1.1", "--cases", "echo_points", "--timeout", "20"],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    server.thread.join(30)
    assert server.error is None, repr(server.error)
    assert '"ok": true' in done.stdout, done.stdout + done.stderr[-2000:]
    big = max(server.trains, key=len)
    assert len(big) > 50 and all(h[7] == 7 for h, _ in big[1:]), "a Request and its Fragments"
    data, base, starts, le = fragment_train(big)
    points = [Interop.Point(i + 0.5, -i / 4, "p" * (i % 7)) for i in range(20_000)]
    got = realign_fragments((POINT_SEQ,), data, le, base, starts)
    assert same(omni_unmarshal((POINT_SEQ,), got, base % 8, le)[0], points)
    assert got == reference((POINT_SEQ,), (points,), le, base).getvalue()
    try:  # plain concatenation: what a receiver that ignores the fragment alignment reads
        naive = omni_unmarshal((POINT_SEQ,), data, base % 8, le)[0]
    except CORBA.MARSHAL:
        naive = None
    assert naive is None or not same(naive, points)


# -- the flat walk and its C twin (pyorb/marshal/layout/_cwalk.pyx) ---------------------


FLAT = [name for name in TABLE if layout._flat_plan(_top(TABLE[name], 2)) is not None]


def flat_outcome(walk: Callable[..., int], plan: Any, data: bytes, sh: int, le: bool) -> tuple[Any, ...]:
    buf = bytearray(data)
    try:
        result: Any = walk(plan, buf, len(buf), sh, le)
    except Exception as exc:  # the kind and message are compared
        result = (type(exc), str(exc))
    return result, bytes(buf)


def test_most_structs_have_a_flat_plan() -> None:
    assert {"string", "bounded string", "mixed args", "point", "blob"} <= set(FLAT), FLAT


@pytest.mark.parametrize("name", FLAT)
@HYP
@given(data=st.data(), le=st.booleans(), base=st.integers(0, 7), cut=st.integers(0, 9), where=st.integers(0, 99),
       value=st.integers(0, 255), noise=st.binary(max_size=40))
def test_the_flat_walk_twins_agree(name: str, data: st.DataObject, le: bool, base: int, cut: int, where: int,
                                   value: int, noise: bytes) -> None:
    """On valid encodings, truncated or altered ones and noise: the same result or error, the same bytes after."""
    cwalk = pytest.importorskip("pyorb.marshal.layout._cwalk", reason="the compiled accelerator is not built")
    descs = TABLE[name]
    plan = layout._flat_plan(_top(descs, 2))
    dirty = try_reference(descs, data.draw(table_values(name)), le, base, fill=0xA5)
    encoded = dirty.getvalue() if dirty is not None else noise
    altered = bytearray(encoded)
    if altered:
        altered[where % len(altered)] = value
    for sample in (encoded, encoded[:max(len(encoded) - cut, 0)], bytes(altered), noise):
        assert flat_outcome(cwalk._zero_flat, plan, sample, base, le) == flat_outcome(
            _accelerator.original("pyorb.marshal.layout._zero_flat"), plan, sample, base, le), (name, sample)
