"""Compiled types: one node class per shape of encoding, each able to scrub its
encoding in place (``zero``) or copy it realigned (``move``).

Fixed-size nodes precompute, for each of the eight possible start phases
(stream position mod 8), their encoded size and which bytes are padding, so a
run of fixed-size elements is scrubbed with a few extended-slice
assignments instead of a Python loop."""

from __future__ import annotations

import struct
from typing import Sequence

from pyorb.marshal.layout.kinds import CDRLayoutError, Layout, Ops, Repeat, TV_WCHAR, UnsupportedTypeError, _truncated
from pyorb.marshal.layout.cursors import _Bounded, _Frame, _Mover


class _Node:
    """A compiled type: walks its encoding to scrub it (``zero``) or to realign it (``move``)."""

    __slots__ = ()

    def zero(self, f: _Frame, i: int) -> int:
        """Scrub the value at ``f.data[i]``; return the index after it."""
        raise NotImplementedError

    def zero_many(self, f: _Frame, i: int, n: int) -> int:
        for _ in range(n):
            i = self.zero(f, i)
        return i

    def move(self, m: _Mover) -> None:
        """Copy one value from the fragment train to the output."""
        raise NotImplementedError


class _Fixed(_Node):
    """A type whose encoding has a size and padding fixed by its start phase.

    ``lay[phase]`` is its Layout when it starts at that stream phase;
    ``align`` its largest alignment (equal phases modulo it, equal layouts).
    """

    __slots__ = ("lay", "rep", "align")
    lay: tuple[Layout, ...]
    rep: tuple[Repeat, ...] | None
    align: int

    def sim(self, phase: int) -> tuple[int, list[tuple[int, int, int]]]:
        """Size and padding slices (a, b, step) of this item starting at ``phase``."""
        raise NotImplementedError

    def finish(self) -> None:
        """Precompute the per-phase layouts (call once the node is built)."""
        zeros: dict[int, bytes] = {}  # shared: a big array has many equal-length slices
        lay = []
        for size, ops in (self.sim(phase) for phase in range(8)):
            lens = [len(range(a, b, c)) for a, b, c in ops]
            lay.append((size, tuple((*op, zeros.setdefault(n, bytes(n))) for op, n in zip(ops, lens))))
        self.lay, self.rep = tuple(lay), None

    def repeat(self, phase: int) -> Repeat:
        """Stride and padding offsets of this element repeated from ``phase``.

        A repeated element settles after one copy (see _zero_run), so this
        describes every copy after the first.  Computed on first use: only
        elements of sequences and arrays need it.
        """
        if self.rep is None:
            self.rep = tuple(
                (size, tuple(o for a, b, c, _ in ops for o in range(a, b, c)) if _pad_count(ops) <= 64 else None)
                for size, ops in self.lay
            )
        return self.rep[phase]

    def zero(self, f: _Frame, i: int) -> int:
        size, ops = self.lay[(i + f.sh) & 7]
        end = i + size
        if end > f.end:
            raise _truncated("a fixed-size value")
        d = f.data
        for a, b, c, z in ops:
            d[i + a : i + b : c] = z
        return end

    def move(self, m: _Mover) -> None:
        size = self.lay[(m.p + m.ssh) & 7][0]
        if m.p + size <= m.fe and m.in_step(self.align):  # same layout on both sides: one block
            m.out += m.src[m.p : m.p + size]
            m.p += size
        else:  # it straddles a fragment or its padding changes: item by item
            self.move_parts(m)

    def move_parts(self, m: _Mover) -> None:
        raise NotImplementedError


class _Prim(_Fixed):
    """One primitive (or an octet-aligned block such as a fixed-point number)."""

    __slots__ = ("size",)

    def __init__(self, size: int, align: int) -> None:
        self.size, self.align = size, align
        self.finish()

    def sim(self, phase: int) -> tuple[int, list[tuple[int, int, int]]]:
        pad = (-phase) & (self.align - 1)
        return pad + self.size, [(0, pad, 1)] if pad else []

    def move_parts(self, m: _Mover) -> None:
        if self.align == 1:
            m.run(self.size)
        else:
            m.prim(self.size, self.align)


class _Group(_Fixed):
    """Fixed-size members one after another (a struct, or part of one)."""

    __slots__ = ("children",)

    def __init__(self, children: Sequence[_Fixed]) -> None:
        self.children = tuple(children)
        self.align = max((c.align for c in self.children), default=1)
        self.finish()

    def sim(self, phase: int) -> tuple[int, list[tuple[int, int, int]]]:
        pos, ops = 0, []
        for child in self.children:
            size, sub = child.sim((phase + pos) & 7)
            ops += [(a + pos, b + pos, c) for a, b, c in sub]
            pos += size
        return pos, ops

    def move_parts(self, m: _Mover) -> None:
        for child in self.children:
            child.move(m)


class _Array(_Fixed):
    """A fixed-length array of fixed-size elements."""

    __slots__ = ("elem", "n")

    def __init__(self, elem: _Fixed, n: int) -> None:
        self.elem, self.n, self.align = elem, n, elem.align
        self.finish()

    def sim(self, phase: int) -> tuple[int, list[tuple[int, int, int]]]:
        if not self.n:
            return 0, []
        first, ops = self.elem.sim(phase)
        stride, sub = self.elem.sim((phase + first) & 7)
        m = self.n - 1
        for a, b, c in sub if m else ():
            if c == 1 and m > 1:  # one strided slice per padding byte
                ops += [(first + o, first + o + (m - 1) * stride + 1, stride) for o in range(a, b)]
            else:
                ops += [(first + k * stride + a, first + k * stride + b, c) for k in range(m)]
        return first + m * stride, ops

    def move_parts(self, m: _Mover) -> None:
        _move_run(self.elem, m, self.n)


def _pad_count(ops: Ops) -> int:
    return sum(len(z) for _, _, _, z in ops)


def _zero_run(elem: _Fixed, f: _Frame, i: int, n: int) -> int:
    """Scrub ``n`` consecutive fixed-size elements.

    After the first element every element starts at the same phase modulo the
    element's largest alignment (its end is fixed by its last most-aligned
    primitive), so all the others share one layout: zero each padding offset
    with one extended-slice assignment.
    """
    if not n:
        return i
    i = elem.zero(f, i)
    m = n - 1
    if m:
        stride, offsets = elem.repeat((i + f.sh) & 7)
        end = i + m * stride
        if end > f.end:
            raise _truncated("a sequence or array")
        if offsets is None or (len(offsets) > 16 and len(offsets) > m):
            return elem.zero_many(f, i, m)
        if offsets:
            z, d = bytes(m), f.data
            for o in offsets:
                d[i + o : end : stride] = z
        i = end
    return i


def _move_run(elem: _Node, m: _Mover, n: int) -> None:
    """Copy ``n`` elements, in bulk while they stay inside one fragment."""
    if not isinstance(elem, _Fixed):
        for _ in range(n):
            elem.move(m)
        return
    done = 0
    while done < n:
        elem.move(m)
        done += 1
        stride = elem.lay[(m.p + m.ssh) & 7][0]
        if done < n and m.in_step(elem.align):
            count = n - done if not stride else min(n - done, (m.fe - m.p) // stride)
            m.out += m.src[m.p : m.p + count * stride]
            m.p += count * stride
            done += count


class _Counted(_Node):
    """Fixed-size members, then a ulong count, then count*unit octets (a string, a blob).

    Fusing the members before a string into one node makes a struct such
    as ``{double x; double y; string label;}`` one step per element.
    """

    __slots__ = ("prefix", "head", "unit", "nul", "bound", "limit")

    def __init__(self, prefix: Sequence[_Fixed], unit: int, nul: bool, bound: int) -> None:
        self.prefix = tuple(prefix)
        self.head = _Group((*self.prefix, _ULONG))
        self.unit, self.nul, self.bound = unit, nul, bound
        self.limit = bound + nul if bound else 0xFFFFFFFF  # a string's count includes its NUL

    def fused(self, before: Sequence[_Fixed]) -> _Counted:
        return _Counted((*before, *self.prefix), self.unit, self.nul, self.bound)

    def check(self, count: int, last: int) -> None:
        if count > self.limit:
            raise CDRLayoutError(f"length {count} exceeds the bound")
        if self.nul and (count == 0 or last):
            raise CDRLayoutError("string is not NUL-terminated")

    def zero(self, f: _Frame, i: int) -> int:
        return self.zero_many(f, i, 1)

    def zero_many(self, f: _Frame, i: int, n: int) -> int:
        # The hot loop of big sequences of structs with strings: kept flat.
        lay, d, sh, end, ul, unit = self.head.lay, f.data, f.sh, f.end, f.ul, self.unit
        limit, nul = self.limit, self.nul
        for _ in range(n):
            size, ops = lay[(i + sh) & 7]
            j = i + size
            if j > end:
                raise _truncated("a string or sequence")
            for a, b, c, z in ops:
                d[i + a : i + b : c] = z
            count = ul(d, j - 4)[0]
            i = j + count * unit
            if i > end:
                raise _truncated("a string or sequence")
            if count > limit or (nul and (not count or d[i - 1])):
                self.check(count, d[i - 1] if count else 0)
        return i

    def move(self, m: _Mover) -> None:
        self.head.move(m)
        count = m.ul(m.out, len(m.out) - 4)[0]
        n = count * self.unit
        start = len(m.out)
        if m.p + n <= m.fe:  # the usual case: inside this fragment
            m.out += m.src[m.p : m.p + n]
            m.p += n
        elif n > m.left():
            raise _truncated("a string or sequence")
        else:
            m.run(n)
        self.check(count, m.out[-1] if count else 0)
        if self.nul and m.text is not None and count > 1:
            text = m.text(bytes(m.out[start:-1]))
            m.out[start:-1] = text
            struct.pack_into("<I" if m.le else ">I", m.out, start - 4, len(text) + 1)


def _takes_nothing(node: _Node) -> bool:
    """Whether values of ``node`` take no octets on the wire (null, void, arrays and structs of them)."""
    if isinstance(node, _Fixed):
        return not node.lay[0][0]  # any primitive that takes octets takes them at phase 0 too
    if isinstance(node, _Seq):
        return node.length is not None and node.empty
    if isinstance(node, _Struct):
        return all(_takes_nothing(part) for part in node.parts)
    return False


class _Seq(_Node):
    """A sequence (ulong count, then the elements), or an array (``length`` elements) of variable
    size or of elements that take no octets."""

    __slots__ = ("elem", "bound", "length", "empty")

    def __init__(self, elem: _Node, bound: int, length: int | None = None) -> None:
        self.elem, self.bound, self.length = elem, bound, length
        self.empty = _takes_nothing(elem)

    def count(self, n: int, left: int, walk: _Bounded) -> int:
        if self.bound and n > self.bound:
            raise CDRLayoutError(f"sequence length {n} exceeds its bound {self.bound}")
        if self.empty:  # free on the wire, one object each once unmarshaled: only the bound stops them
            walk.take_empty(n)
        elif n > left and not isinstance(self.elem, _Fixed):  # a variable-size element takes at least one octet
            raise _truncated("a sequence or array")
        return n

    def zero(self, f: _Frame, i: int) -> int:
        n = self.length
        if n is None:
            n, i = f.ulong(i)
        n = self.count(n, f.end - i, f)
        if isinstance(self.elem, _Fixed):
            return _zero_run(self.elem, f, i, n)
        return self.elem.zero_many(f, i, n)

    def move(self, m: _Mover) -> None:
        n = m.ulong() if self.length is None else self.length
        _move_run(self.elem, m, self.count(n, m.left(), m))


class _Struct(_Node):
    """Members of which at least one has a variable size."""

    __slots__ = ("parts",)

    def __init__(self, parts: Sequence[_Node]) -> None:
        self.parts = tuple(parts)

    def zero(self, f: _Frame, i: int) -> int:
        for part in self.parts:
            i = part.zero(f, i)
        return i

    def move(self, m: _Mover) -> None:
        for part in self.parts:
            part.move(m)


class _WChar(_Node):
    """A GIOP 1.2 wchar: one length octet, then that many octets."""

    __slots__ = ()

    def zero(self, f: _Frame, i: int) -> int:
        if i >= f.end or i + 1 + f.data[i] > f.end:
            raise _truncated("a wchar")
        return i + 1 + f.data[i]

    def move(self, m: _Mover) -> None:
        m.run(m.prim(1, 1)[0])


class _Union(_Node):
    """A discriminant, then the member it selects (if any)."""

    __slots__ = ("size", "signed", "flavour", "cases", "default")

    def __init__(self, disc: tuple[int, bool, str], cases: dict[int, _Node], default: _Node | None) -> None:
        self.size, self.signed, self.flavour = disc
        self.cases, self.default = cases, default

    def member(self, key: int) -> _Node | None:
        return self.cases.get(key, self.default)

    def zero(self, f: _Frame, i: int) -> int:
        key, i = _read_disc(f, i, self.size, self.signed, self.flavour)
        node = self.member(key)
        return i if node is None else node.zero(f, i)

    def move(self, m: _Mover) -> None:
        if self.flavour == "wchar" and m.minor >= 2:
            n = m.prim(1, 1)[0]
            start = len(m.out)
            m.run(n)
            key = _wchar_key(bytes(m.out[start:]))
        else:
            size = 2 if self.flavour == "wchar" else self.size
            key = int.from_bytes(m.prim(size, size), "little" if m.le else "big", signed=self.signed)
            key = int(key != 0) if self.flavour == "bool" else key
        node = self.member(key)
        if node is not None:
            node.move(m)


class _Ref(_Node):
    """A recursive reference; the target is filled in once known."""

    __slots__ = ("target",)

    def __init__(self, target: _Node | None = None) -> None:
        self.target = target

    def get(self) -> _Node:
        if self.target is None:
            raise CDRLayoutError("TypeCode indirection to a TypeCode still being read")
        return self.target

    # A recursive type (read from the wire, or IDL's): each step into it is one level
    # of nesting, as an any inside an any is; omniORB's unmarshaler recurses on each.
    def zero(self, f: _Frame, i: int) -> int:
        f.enter("values of a recursive type")
        try:
            return self.get().zero(f, i)
        finally:
            f.nest -= 1

    def move(self, m: _Mover) -> None:
        m.enter("values of a recursive type")
        try:
            self.get().move(m)
        finally:
            m.nest -= 1


class _Unsupported(_Node):
    """A kind this module does not walk; fails only when a value of it is met."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def fail(self) -> UnsupportedTypeError:
        return UnsupportedTypeError(f"pyorb cannot walk a {self.what} (its CDR form is not supported)")

    def zero(self, f: _Frame, i: int) -> int:
        raise self.fail()

    def move(self, m: _Mover) -> None:
        raise self.fail()


_ULONG = _Prim(4, 4)


_STRING = _Counted((), 1, True, 0)


_OCTETS = _Counted((), 1, False, 0)


_PROFILE = _Counted((_ULONG,), 1, False, 0)  # IOR TaggedProfile: ulong tag, sequence<octet>
# IOR: type id string, sequence of tagged profiles (their bodies stay opaque octets).


_OBJREF = _Struct((_STRING, _Seq(_PROFILE, 0)))


def _struct(children: Sequence[_Node]) -> _Node:
    """Members in order, fixed-size runs grouped and fused into a following string."""
    parts: list[_Node] = []
    run: list[_Fixed] = []
    for child in children:
        if isinstance(child, _Fixed):
            run.append(child)
            continue
        if isinstance(child, _Counted) and run:
            child = child.fused(run)
        elif run:
            parts.append(run[0] if len(run) == 1 else _Group(run))
        run = []
        parts.append(child)
    if not parts:
        return run[0] if len(run) == 1 else _Group(run)
    if run:
        parts.append(run[0] if len(run) == 1 else _Group(run))
    return parts[0] if len(parts) == 1 else _Struct(parts)


def _sequence(elem: _Node, bound: int) -> _Node:
    # After the 4-aligned count, items aligned to at most 4 whose size is a
    # multiple of their alignment never need padding: count * size octets.
    if isinstance(elem, _Prim) and elem.size and elem.align <= 4 and elem.size % elem.align == 0:
        return _Counted((), elem.size, False, bound)
    return _Seq(elem, bound)


def _array(elem: _Node, n: int) -> _Node:
    # An array of elements that take no octets is walked as a sequence, so its length meets the bound.
    return _Array(elem, n) if isinstance(elem, _Fixed) and elem.lay[0][0] else _Seq(elem, 0, n)



def _wide(kind: int, minor: int) -> _Node:
    """wchar/wstring: GIOP 1.2 counts octets, GIOP 1.1 uses 2-octet units."""
    if kind == TV_WCHAR:
        return _WChar() if minor >= 2 else _Prim(2, 2)
    return _Counted((), 1 if minor >= 2 else 2, False, 0)


def _fixed_node(digits: int) -> _Node:
    """A fixed-point number: one nibble per digit plus a sign nibble, no alignment."""
    if not 0 < digits <= 31:
        raise CDRLayoutError(f"bad fixed-point TypeCode: {digits} digits")
    return _Prim(digits // 2 + 1, 1)


def _read_disc(f: _Frame, i: int, size: int, signed: bool, flavour: str) -> tuple[int, int]:
    """Read a union discriminant (or label) as the integer key of its case."""
    if flavour == "wchar":
        if f.minor < 2:
            j, i = f.prim(i, 2)
            return f.uh(f.data, j)[0], i
        if i >= f.end or i + 1 + f.data[i] > f.end:
            raise _truncated("a wchar")
        n = f.data[i]
        return _wchar_key(bytes(f.data[i + 1 : i + 1 + n])), i + 1 + n
    j, i = f.prim(i, size) if size > 1 else (i, i + 1)
    if i > f.end:
        raise _truncated("a discriminant")
    key = int.from_bytes(f.data[j:i], "little" if f.le else "big", signed=signed)
    return (int(key != 0) if flavour == "bool" else key), i


def _wchar_key(raw: bytes) -> int:
    """The code point of a GIOP 1.2 wchar (UTF-16, big-endian unless a BOM says otherwise)."""
    codec = "utf-16" if raw[:2] in (b"\xfe\xff", b"\xff\xfe") else "utf-16-be"
    text = raw.decode(codec, "surrogatepass") if len(raw) % 2 == 0 else ""
    if len(text) != 1:
        raise CDRLayoutError(f"bad wchar {raw.hex()}")
    return ord(text)
