"""Walking CDR encodings by type, without omniORB: what omniORBpy's raw marshaler needs around it.

omniORBpy's raw marshaler (``_omnipy.cdrMarshal``) leaves alignment padding
uninitialised, so process memory would leak onto the wire; omniORB restarts
alignment at every GIOP 1.1 Fragment, so a plain concatenation of fragment
payloads is misaligned; a connection whose char code set is not UTF-8 needs
its strings re-encoded; and an untrusted body must be bounded before
omniORB's unmarshaler allocates for it.  All of these walk an encoding with
its omniidl type descriptors:

* :func:`zero_padding` zeroes every alignment-padding byte in place (and
  checks a body against :class:`Bounds`).
* :func:`realign_fragments` rewrites a GIOP 1.1 fragment train as one
  normally aligned stream that ``_omnipy.cdrUnmarshal`` can read.
* :func:`transcode_strings` re-encodes every ``string`` in a body.
* :func:`received` is the one walk of a received body: whichever of these
  it needs, always with the :class:`Bounds`.

The parts: :mod:`.kinds` (kind numbers, limits, errors), :mod:`.cursors`
(the walking state), :mod:`.nodes` (compiled types), :mod:`.typecodes`
(types read from the data: anys, TypeCodes), :mod:`.descriptors` (omniidl
descriptors compiled into nodes).  Only the standard library; no I/O.
"""

from __future__ import annotations

import struct
from typing import Callable, Sequence

from pyorb import _accelerator
from pyorb.marshal.layout.cursors import _Frame, _Mover
from pyorb.marshal.layout.descriptors import _compile, _top
from pyorb.marshal.layout.kinds import (
    Bounds, CDRLayoutError, DEFAULT_BOUNDS, Descriptor, UnsupportedTypeError, TC_INDIRECTION, TV_ABSTRACT,
    TV_ALIAS, TV_ANY, TV_ARRAY, TV_BOOLEAN, TV_CHAR, TV_COMPONENT, TV_DOUBLE, TV_ENUM, TV_EVENT, TV_EXCEPT,
    TV_FIXED, TV_FLOAT, TV_HOME, TV_INDIRECT, TV_LOCAL, TV_LONG, TV_LONGDOUBLE, TV_LONGLONG, TV_NATIVE, TV_NULL,
    TV_OBJREF, TV_OCTET, TV_PRINCIPAL, TV_SEQUENCE, TV_SHORT, TV_STRING, TV_STRUCT, TV_TYPECODE, TV_ULONG,
    TV_ULONGLONG, TV_UNION, TV_USHORT, TV_VALUE, TV_VALUE_BOX, TV_VOID, TV_WCHAR, TV_WSTRING, Layout, _U32,
    NestedValueError, _truncated,
)
from pyorb.marshal.layout.nodes import _Counted, _Fixed, _Node, _Ref, _Seq, _Struct, _Union, _Unsupported
from pyorb.marshal.layout.typecodes import _Any, _TypeCodeValue
from pyorb.marshal.layout.valuetypes import _Value

__all__ = [
    "Bounds", "CDRLayoutError", "DEFAULT_BOUNDS", "Descriptor", "NestedValueError", "UnsupportedTypeError", "has_strings",
    "fragment_segments", "needs_bounds", "realign_fragments", "realign_one", "received", "transcode_strings", "zero_padding", "TC_INDIRECTION", "TV_ABSTRACT",
    "TV_ALIAS", "TV_ANY", "TV_ARRAY", "TV_BOOLEAN", "TV_CHAR", "TV_COMPONENT", "TV_DOUBLE", "TV_ENUM",
    "TV_EVENT", "TV_EXCEPT", "TV_FIXED", "TV_FLOAT", "TV_HOME", "TV_INDIRECT", "TV_LOCAL", "TV_LONG",
    "TV_LONGDOUBLE", "TV_LONGLONG", "TV_NATIVE", "TV_NULL", "TV_OBJREF", "TV_OCTET", "TV_PRINCIPAL",
    "TV_SEQUENCE", "TV_SHORT", "TV_STRING", "TV_STRUCT", "TV_TYPECODE", "TV_ULONG", "TV_ULONGLONG",
    "TV_UNION", "TV_USHORT", "TV_VALUE", "TV_VALUE_BOX", "TV_VOID", "TV_WCHAR", "TV_WSTRING",
]


def zero_padding(
    descs: Sequence[Descriptor], data: bytearray, little_endian: bool, base: int = 0, *, giop_minor: int = 2,
    bounds: Bounds = DEFAULT_BOUNDS,
) -> None:
    """Zero, in place, every alignment-padding byte of values of types ``descs``.

    ``data`` holds the values one after another; ``data[0]`` is at stream
    position ``base`` (alignment is relative to stream position 0).  Padding
    inside TypeCode encapsulations is zeroed too; IOR profile bodies are
    left as they are.  ``giop_minor`` selects the wchar/wstring form: 2 (the
    form ``_omnipy.cdrMarshal`` writes) or 1 (GIOP 1.1's two-octet units).

    Raises CDRLayoutError (a ValueError) if the bytes do not match the types
    or pass one of ``bounds`` (its ``minor`` is omniORB's MARSHAL_NoValueFactory
    for a value whose repository id names no type loaded here),
    UnsupportedTypeError for abstract interfaces.
    """
    node = _top(descs, giop_minor)
    n = len(data)
    try:
        if isinstance(node, _Fixed):  # fast path: one fixed layout, no frame needed
            size, ops = node.lay[base & 7]
            if size != n:
                raise CDRLayoutError(f"fixed-size values take {size} octets, got {n}")
            for a, b, c, z in ops:
                data[a:b:c] = z
            return
        plan = _flat_plan(node)
        if plan is not None:  # fixed runs and strings only (most structs): one loop, no frame
            end = _zero_flat(plan, data, n, base, little_endian)
        else:
            end = node.zero(_Frame(data, n, base, little_endian, giop_minor, {}, 0, n, bounds), 0)
    except (RecursionError, IndexError, struct.error, OverflowError) as exc:
        raise CDRLayoutError(f"malformed CDR data: {exc}") from None
    if end != n:
        raise CDRLayoutError(f"{n - end} octets left over after the values")


# A flat plan: for each part of a node made only of fixed-size runs and counted octets (strings,
# sequences of octets), (counted?, layout per phase, unit, NUL-terminated?, count limit, the node).
_FlatPart = tuple[bool, tuple[Layout, ...], int, bool, int, _Node]
_flat_plans: dict[int, tuple[_Node, tuple[_FlatPart, ...] | None]] = {}


def _flat_plan(node: _Node) -> tuple[_FlatPart, ...] | None:
    """The flat plan of ``node``, or None if it holds anything else (cached; the entry keeps the node alive)."""
    hit = _flat_plans.get(id(node))
    if hit is None:
        if len(_flat_plans) > 4096:
            _flat_plans.clear()
        parts = node.parts if isinstance(node, _Struct) else (node,)
        plan: list[_FlatPart] = []
        for part in parts:
            if isinstance(part, _Fixed):
                plan.append((False, part.lay, 0, False, 0, part))
            elif isinstance(part, _Counted):
                plan.append((True, part.head.lay, part.unit, part.nul, part.limit, part))
            else:
                plan = []
                break
        hit = _flat_plans[id(node)] = (node, tuple(plan) or None)
    return hit[1]


def _zero_flat(plan: tuple[_FlatPart, ...], d: bytearray, end: int, sh: int, le: bool) -> int:
    """``node.zero`` for a node with a flat plan: zero the padding of ``d[:end]``, return where the values end.

    The same steps and errors as ``_Fixed.zero`` and ``_Counted.zero_many``, in one loop.
    """
    i = 0
    ul = _U32[le]
    for counted, lay, unit, nul, limit, node in plan:
        size, ops = lay[(i + sh) & 7]
        j = i + size
        if j > end:
            raise _truncated("a string or sequence" if counted else "a fixed-size value")
        for a, b, c, z in ops:
            d[i + a : i + b : c] = z
        if not counted:
            i = j
            continue
        count = ul(d, j - 4)[0]
        i = j + count * unit
        if i > end:
            raise _truncated("a string or sequence")
        if count > limit or (nul and (not count or d[i - 1])):
            assert isinstance(node, _Counted)
            node.check(count, d[i - 1] if count else 0)
    return i


def realign_fragments(
    descs: Sequence[Descriptor],
    data: bytes,
    little_endian: bool,
    base: int,
    fragment_starts: Sequence[int],
    fragment_origin: int = 12,
    *,
    giop_minor: int = 1,
    bounds: Bounds = DEFAULT_BOUNDS,
) -> bytes:
    """Lay out a GIOP 1.1 fragment train with the alignment of one unbroken stream.

    ``data`` is a message body (at stream position ``base``) followed by the
    payloads of its Fragments, which start at the offsets ``fragment_starts``
    in ``data``.  omniORB aligns each fragment's data relative to that
    Fragment message's own start, so payload offset 0 has phase
    ``fragment_origin``; primitives never straddle a fragment, octet data
    may.  Returns the same values with alignment relative to the original
    stream (padding zeroed), as ``_omnipy.cdrUnmarshal`` expects.
    ``giop_minor`` selects the wchar/wstring form (default GIOP 1.1), which
    is copied unchanged.

    Raises CDRLayoutError (a ValueError) for malformed data or data past one of ``bounds``.
    """
    out = bytearray(_move(descs, data, little_endian, base, fragment_starts, fragment_origin, giop_minor, bounds, None))
    # Blocks copied whole keep the sender's padding octets: zeroed here (a received body needs no scrub, see received).
    zero_padding(descs, out, little_endian, base, giop_minor=giop_minor, bounds=bounds)
    return bytes(out)


def transcode_strings(
    descs: Sequence[Descriptor], data: bytes, little_endian: bool, base: int, text: Callable[[bytes], bytes],
    *, giop_minor: int = 2, bounds: Bounds = DEFAULT_BOUNDS,
) -> bytes:
    """Values of types ``descs`` with the octets of every ``string`` in them
    (any values included) replaced by ``text(octets)``: a change of char code
    set.  Lengths and the alignment of everything after a string follow;
    padding comes out zeroed.  ``text`` may raise (a character the target
    code set lacks); CDRLayoutError (a ValueError) for malformed data or data
    past one of ``bounds``.  Value types come out with chunks and indirections of
    their own: each chunked value's state in one chunk, each indirection pointing
    where its target now is.
    """
    return _move(descs, data, little_endian, base, (), 0, giop_minor, bounds, text)


def received(
    descs: Sequence[Descriptor], data: bytes, little_endian: bool, base: int, bounds: Bounds, *,
    fragment_starts: Sequence[int] = (), text: Callable[[bytes], bytes] | None = None, giop_minor: int = 2,
) -> bytes:
    """A received body of types ``descs`` (at stream position ``base``) as
    ``_omnipy.cdrUnmarshal`` may read it, checked against every one of ``bounds``.

    The one walk for every received body that needs one: a GIOP 1.1
    fragment train (``fragment_starts``, as :func:`realign_fragments`) or
    strings in another char code set (``text``, as :func:`transcode_strings`)
    are copied, realigned and re-encoded, in one pass; otherwise the body is
    only checked and comes back as it is.  Either way the same bounds hold:
    nesting, TypeCode size and elements of zero-size types, whichever walk.

    Raises CDRLayoutError (a ValueError) for malformed data or data past a
    bound, UnsupportedTypeError for abstract interfaces.
    """
    if fragment_starts or text is not None:
        if not fragment_starts and _reaches(descs, lambda node: isinstance(node, (_Value, _Any))):
            # The copying walk relies on the in-place walk's checks of value types (end tags,
            # nesting, where indirections point), which an any may hold too: bound it in place first.
            zero_padding(descs, bytearray(data), little_endian, base, giop_minor=giop_minor, bounds=bounds)
        out = _move(descs, data, little_endian, base, fragment_starts, 12, giop_minor, bounds, text)
        if fragment_starts and _reaches(descs, lambda node: isinstance(node, (_Value, _Any))):
            # The in-place walk's checks of value types, on the realigned body.
            zero_padding(descs, bytearray(out), little_endian, base, giop_minor=giop_minor, bounds=bounds)
        return out
    zero_padding(descs, bytearray(data), little_endian, base, giop_minor=giop_minor, bounds=bounds)
    return data


def _move(
    descs: Sequence[Descriptor], data: bytes, little_endian: bool, base: int, fragment_starts: Sequence[int],
    fragment_origin: int, giop_minor: int, bounds: Bounds, text: Callable[[bytes], bytes] | None,
) -> bytes:
    """The copying walk: ``data`` realigned across fragments and re-encoded by ``text``, within ``bounds``."""
    segs = _segments(len(data), base, fragment_starts, fragment_origin)
    node = _top(descs, giop_minor)
    try:
        mover = _Mover(bytes(data), segs, base, little_endian, giop_minor, bounds, text)
        node.move(mover)
        return bytes(mover.finish())
    except (RecursionError, IndexError, struct.error, OverflowError) as exc:
        raise CDRLayoutError(f"malformed CDR data: {exc}") from None


def has_strings(descs: Sequence[Descriptor]) -> bool:
    """Whether values of ``descs`` can hold a ``string`` (an any or a value type may hold anything):
    only such bodies change with the char code set."""
    return _reaches(descs, lambda node: isinstance(node, (_Any, _Value)) or (isinstance(node, _Counted) and node.nul))


def needs_bounds(descs: Sequence[Descriptor]) -> bool:
    """Whether values of ``descs`` can hold what :class:`Bounds` limits (an any, a
    TypeCode, a recursive type nested in itself), value types (indirections,
    chunks, nesting) or what this module cannot walk: only such bodies need a
    walk before they are unmarshaled; for the rest the octets bound all."""
    return _reaches(descs, lambda node: isinstance(node, (_Any, _TypeCodeValue, _Unsupported, _Ref, _Value)))


def _reaches(descs: Sequence[Descriptor], found: Callable[[_Node], bool]) -> bool:
    """Whether a value of ``descs`` contains a node for which ``found`` holds."""
    seen: set[int] = set()
    todo = [_top(descs, 2)]
    while todo:
        node = todo.pop()
        if id(node) in seen or isinstance(node, _Fixed):
            continue
        seen.add(id(node))
        if found(node):
            return True
        if isinstance(node, _Struct):
            todo.extend(node.parts)
        elif isinstance(node, _Seq):
            todo.append(node.elem)
        elif isinstance(node, _Union):
            todo.extend(node.cases.values())
            if node.default is not None:
                todo.append(node.default)
        elif isinstance(node, _Ref):
            todo.append(node.get())
    return False


def fragment_segments(n: int, base: int, fragment_starts: Sequence[int]) -> list[tuple[int, int, int]]:
    """(start, end, phase shift) of the body and of each Fragment payload of an ``n``-octet GIOP 1.1
    train (body at stream position ``base``): within a segment the phase of index p is
    ``(p + shift) & 7``, as omniORB aligns each payload relative to its own Fragment message."""
    return _segments(n, base, fragment_starts, 12)


def realign_one(
    desc: Descriptor, data: bytes, little_endian: bool, start: int, end: int, segments: Sequence[tuple[int, int, int]],
    bounds: Bounds = DEFAULT_BOUNDS, *, giop_minor: int = 2,
) -> tuple[bytes, int, int]:
    """One value of type ``desc`` at ``data[start]`` in a fragment train cut into ``segments`` (as
    :func:`fragment_segments`), read no further than ``end``: its octets as one stream, that
    stream's phase (mod 8), and where the value ended in ``data``.  The copying walk of
    :func:`realign_fragments`, for one member: :mod:`pyorb.marshal.valuereader` reads the
    members between the chunks and tags of nested values with it.

    Raises CDRLayoutError (a ValueError) for malformed data, data running past ``end`` or past
    one of ``bounds``.
    """
    cut = [(max(a, start), min(b, end), shift) for a, b, shift in segments if b > start and a < end]
    if not cut:  # at the very end: only a member of no octets fits
        shift = next((sh for a, b, sh in reversed(segments) if a <= start), segments[0][2])
        cut = [(start, start, shift)]
    phase = (cut[0][0] + cut[0][2]) & 7
    try:
        mover = _Mover(data, cut, phase, little_endian, giop_minor, bounds, None)
        _compile(desc, giop_minor).move(mover)
    except (RecursionError, IndexError, struct.error, OverflowError) as exc:
        raise CDRLayoutError(f"malformed CDR data: {exc}") from None
    return bytes(mover.out), phase, mover.p


def _segments(n: int, base: int, starts: Sequence[int], origin: int) -> list[tuple[int, int, int]]:
    """(start, end, phase shift) of the body and of each fragment payload."""
    bounds = [0, *starts, n]
    if any(not 0 <= a <= b <= n for a, b in zip(bounds, bounds[1:])):
        raise CDRLayoutError(f"fragment starts {list(starts)} do not fit {n} octets")
    segs = [(0, bounds[1], base)]
    segs += [(a, b, origin - a) for a, b in zip(bounds[1:], bounds[2:])]
    return segs


# With the compiled accelerator, the C twin takes its place.
_accelerator.twin(__name__, "_zero_flat", "pyorb.marshal.layout._cwalk")
