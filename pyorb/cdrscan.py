"""Walking CDR encodings by type: zeroing padding, undoing GIOP 1.1 fragment alignment.

omniORBpy's raw marshaler (``_omnipy.cdrMarshal``) leaves alignment padding
uninitialised, so process memory would leak onto the wire, and omniORB
restarts alignment at every GIOP 1.1 Fragment, so a plain concatenation of
fragment payloads is misaligned.  Both problems need the same thing: walking
an encoding with its omniidl type descriptors.

* :func:`zero_padding` zeroes every alignment-padding byte in place.
* :func:`realign_fragments` rewrites a GIOP 1.1 fragment train as one
  normally aligned stream that ``_omnipy.cdrUnmarshal`` can read.

Each descriptor is compiled once into a tree of small node objects (cached by
``id``; the cache keeps the descriptor alive).  Fixed-size nodes precompute,
for each of the eight possible start phases (stream position mod 8), their
encoded size and which bytes are padding, so a run of fixed-size elements is
scrubbed with a few extended-slice assignments instead of a Python loop.

Only the standard library and omniORB's type registry are used; no I/O.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Literal, NamedTuple, Sequence

Descriptor = Any
"""An omniidl type descriptor: an int for basic types, a tuple otherwise."""

__all__ = ["Bounds", "CDRLayoutError", "UnsupportedTypeError", "has_strings", "needs_bounds", "zero_padding",
           "realign_fragments", "transcode_strings"]

# omniidl descriptor kinds (omniORB.tcInternal.tv_*); TypeCode kinds (TCKind) use the same numbers.
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
    """any values inside any values, and TypeCodes inside TypeCodes."""
    max_typecode_size: int = 64 * 1024
    """Octets of one TypeCode's encapsulation."""
    max_empty_elements: int = 65536
    """Elements of one sequence or array whose elements take no octets."""


DEFAULT_BOUNDS = Bounds()

Ops = tuple[tuple[int, int, int, bytes], ...]
"""Padding of a fixed layout: ``data[i+a:i+b:c] = z`` for each (a, b, c, z)."""
Layout = tuple[int, Ops]
"""A fixed node's encoded size (leading padding included) and its padding."""
Repeat = tuple[int, "tuple[int, ...] | None"]
"""Stride of a repeated fixed element and the offsets of its padding bytes (None: too many)."""


class CDRLayoutError(ValueError):
    """The bytes do not match the types they are said to encode."""


class UnsupportedTypeError(NotImplementedError, ValueError):
    """A type this module cannot walk (value types, abstract interfaces).

    Also a ValueError, so a caller handling bad data handles an Any that
    carries such a type too.
    """


def _truncated(what: str) -> CDRLayoutError:
    return CDRLayoutError(f"CDR data ends inside {what}")


# -- walking state ------------------------------------------------------------


class _Frame:
    """Contiguous CDR being scrubbed in place: ``data[:end]``, phase of index i is ``(i + sh) & 7``.

    An encapsulation gets its own frame (own origin and byte order) over the
    same buffer, so TypeCode positions stay comparable across frames.
    """

    __slots__ = ("data", "end", "sh", "le", "ul", "uh", "minor", "tcs", "depth", "budget", "bounds", "nest")

    def __init__(
        self, data: bytearray, end: int, sh: int, le: bool, minor: int, tcs: _TCMap, depth: int, budget: int,
        bounds: Bounds = DEFAULT_BOUNDS,
    ) -> None:
        self.data, self.end, self.sh, self.le, self.minor = data, end, sh, le, minor
        self.ul, self.uh = _U32[le], _U16[le]
        self.tcs, self.depth = tcs, depth
        self.budget = budget  # octets in the whole input: no array read from a TypeCode is larger
        self.bounds = bounds
        self.nest = 0  # any values open around the one being walked

    def ulong(self, i: int) -> tuple[int, int]:
        """Read an aligned ulong at or after ``i``, zeroing the padding before it."""
        j = i + ((-(i + self.sh)) & 3)
        if j + 4 > self.end:
            raise _truncated("a ulong")
        if j != i:
            self.data[i:j] = _ZEROS[j - i]
        return self.ul(self.data, j)[0], j + 4

    def prim(self, i: int, size: int) -> tuple[int, int]:
        """Start and end of an aligned primitive of ``size`` (2, 4 or 8) at or after ``i``."""
        j = i + ((-(i + self.sh)) & (size - 1))
        if j + size > self.end:
            raise _truncated("a primitive")
        if j != i:
            self.data[i:j] = _ZEROS[j - i]
        return j, j + size


class _Mover:
    """Copies a GIOP 1.1 fragment train into a normally aligned buffer.

    The source is cut into segments (message body, then each fragment
    payload); within segment k the phase of index p is ``(p + ssh) & 7``.
    Primitives are never split across segments; octet data may be.
    """

    __slots__ = ("src", "segs", "k", "p", "fe", "ssh", "out", "dsh", "le", "ul", "minor", "tcs", "tc_src", "text")

    def __init__(
        self, src: bytes, segs: list[tuple[int, int, int]], base: int, le: bool, minor: int,
        text: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.src, self.segs, self.k = src, segs, 0
        self.p, self.fe, self.ssh = segs[0]
        self.out, self.dsh, self.le, self.minor = bytearray(), base, le, minor
        self.ul = _U32[le]
        self.text = text  # re-encodes each string's octets (without its NUL) on the way
        self.tcs: _TCMap = {}
        self.tc_src: dict[int, int] = {}  # TypeCode start: source index -> output index

    def advance(self) -> None:
        """Continue in the next fragment payload."""
        self.k += 1
        if self.k >= len(self.segs):
            raise _truncated("a value (no more fragments)")
        self.p, self.fe, self.ssh = self.segs[self.k]

    def prim(self, size: int, align: int) -> bytes:
        """Copy one aligned primitive, realigning it; returns its bytes."""
        while True:
            sp = self.p + ((-(self.p + self.ssh)) & (align - 1))
            if sp + size <= self.fe:
                break
            if sp < self.fe:
                raise CDRLayoutError(f"a {size}-byte primitive is split across fragments")
            self.advance()  # only padding (or nothing) was left in this fragment
        out = self.out
        pad = (-(len(out) + self.dsh)) & (align - 1)
        if pad:
            out += _ZEROS[pad]
        raw = self.src[sp : sp + size]
        out += raw
        self.p = sp + size
        return raw

    def ulong(self) -> int:
        """Copy an aligned ulong; returns its value."""
        return int(self.ul(self.prim(4, 4))[0])

    def run(self, n: int) -> None:
        """Copy ``n`` octets, which may continue into the following fragments."""
        while n:
            if self.p >= self.fe:
                self.advance()
                continue
            c = min(n, self.fe - self.p)
            self.out += self.src[self.p : self.p + c]
            self.p += c
            n -= c

    def in_step(self, align: int) -> bool:
        """True if source and output have the same phase modulo ``align``."""
        return (self.p + self.ssh - len(self.out) - self.dsh) % align == 0

    def left(self) -> int:
        return len(self.src) - self.p

    def finish(self) -> bytearray:
        while self.p >= self.fe and self.k + 1 < len(self.segs):
            self.advance()
        if self.p != self.fe or self.k + 1 != len(self.segs):
            raise CDRLayoutError("bytes left over after the values")
        return self.out


# -- nodes ---------------------------------------------------------------------


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
        if not stride and n > f.bounds.max_empty_elements:
            raise CDRLayoutError(f"{n} elements of a type that takes no octets "
                                 f"(the limit is {f.bounds.max_empty_elements})")
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


class _Seq(_Node):
    """A sequence (ulong count, then the elements), or an array (``length`` elements) of variable size."""

    __slots__ = ("elem", "bound", "length")

    def __init__(self, elem: _Node, bound: int, length: int | None = None) -> None:
        self.elem, self.bound, self.length = elem, bound, length

    def count(self, n: int, left: int) -> int:
        if self.bound and n > self.bound:
            raise CDRLayoutError(f"sequence length {n} exceeds its bound {self.bound}")
        if n > left and not isinstance(self.elem, _Fixed):  # a variable-size element takes at least one octet
            raise _truncated("a sequence or array")
        return n

    def zero(self, f: _Frame, i: int) -> int:
        n = self.length
        if n is None:
            n, i = f.ulong(i)
        n = self.count(n, f.end - i)
        if isinstance(self.elem, _Fixed):
            return _zero_run(self.elem, f, i, n)
        return self.elem.zero_many(f, i, n)

    def move(self, m: _Mover) -> None:
        n = m.ulong() if self.length is None else self.length
        _move_run(self.elem, m, self.count(n, m.left()))


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

    def zero(self, f: _Frame, i: int) -> int:
        return self.get().zero(f, i)

    def move(self, m: _Mover) -> None:
        self.get().move(m)


class _Lazy(_Ref):
    """omniidl's ``(tv__indirect, [desc or repoId])``, compiled on first use."""

    __slots__ = ("holder", "minor")

    def __init__(self, holder: list[Any], minor: int) -> None:
        super().__init__()
        self.holder, self.minor = holder, minor

    def get(self) -> _Node:
        if self.target is None:
            desc = self.holder[0]
            if isinstance(desc, str):
                import omniORB  # the type registry, for IDL recursion by repository id

                desc = omniORB.findType(desc)
                if desc is None:
                    raise TypeError(f"unknown recursive type {self.holder[0]!r}")
            self.target = _compile(desc, self.minor)
        return self.target


class _Any(_Node):
    """A TypeCode, then a value of that type."""

    __slots__ = ()

    def zero(self, f: _Frame, i: int) -> int:
        if f.nest >= f.bounds.max_nesting_depth:
            raise CDRLayoutError(f"any values nested more than {f.bounds.max_nesting_depth} deep")
        node, _, i = _zero_typecode(f, i)
        f.nest += 1
        try:
            return node.zero(f, i)
        finally:
            f.nest -= 1

    def move(self, m: _Mover) -> None:
        _move_typecode(m)[0].move(m)


class _TypeCodeValue(_Node):
    """A TypeCode as a value."""

    __slots__ = ()

    def zero(self, f: _Frame, i: int) -> int:
        return _zero_typecode(f, i)[2]

    def move(self, m: _Mover) -> None:
        _move_typecode(m)


class _Unsupported(_Node):
    """A kind this module does not walk; fails only when a value of it is met."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def fail(self) -> UnsupportedTypeError:
        return UnsupportedTypeError(f"cdrscan cannot walk a {self.what} (its CDR form is not supported)")

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
_SHARED: dict[int, _Node] = {
    **{kind: _Prim(*size_align) for kind, size_align in _PRIMS.items()},
    TV_ANY: _Any(), TV_TYPECODE: _TypeCodeValue(), TV_PRINCIPAL: _OCTETS, TV_OBJREF: _OBJREF,
}  # fmt: skip


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
    return _Array(elem, n) if isinstance(elem, _Fixed) else _Seq(elem, 0, n)


def _wide(kind: int, minor: int) -> _Node:
    """wchar/wstring: GIOP 1.2 counts octets, GIOP 1.1 uses 2-octet units."""
    if kind == TV_WCHAR:
        return _WChar() if minor >= 2 else _Prim(2, 2)
    return _Counted((), 1 if minor >= 2 else 2, False, 0)


# -- compiling descriptors --------------------------------------------------------

_cache: dict[tuple[int, int], tuple[Descriptor, _Node]] = {}
_top_cache: dict[tuple[int, ...], tuple[Sequence[Descriptor], _Node]] = {}
_CACHE_LIMIT = 4096


def _compile(desc: Descriptor, minor: int) -> _Node:
    """The node for an omniidl descriptor (cached by identity)."""
    key = (id(desc), minor)
    hit = _cache.get(key)
    if hit is None:
        if len(_cache) > _CACHE_LIMIT:
            _cache.clear()
        hit = _cache[key] = (desc, _build(desc, minor))
    return hit[1]


def _build(desc: Descriptor, minor: int) -> _Node:
    kind = desc if isinstance(desc, int) else desc[0] if isinstance(desc, tuple) and desc else None
    if not isinstance(kind, int):
        raise TypeError(f"not an omniidl type descriptor: {desc!r}")
    simple = _simple_node(kind, minor)
    if simple is not None:
        return simple
    if not isinstance(desc, tuple):
        raise TypeError(f"descriptor kind {kind} needs parameters: {desc!r}")
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise TypeError(f"unknown descriptor kind {kind}: {desc!r}")
    return builder(desc, minor)


def _simple_node(kind: int, minor: int) -> _Node | None:
    """Nodes for kinds with no parameters (None for the others)."""
    if kind == TV_WCHAR:
        return _wide(kind, minor)
    if kind in _UNSUPPORTED:
        return _Unsupported(_UNSUPPORTED[kind])
    return _SHARED.get(kind)


def _fixed_node(digits: int) -> _Node:
    """A fixed-point number: one nibble per digit plus a sign nibble, no alignment."""
    if not 0 < digits <= 31:
        raise CDRLayoutError(f"bad fixed-point TypeCode: {digits} digits")
    return _Prim(digits // 2 + 1, 1)


def _build_union(desc: tuple[Any, ...], minor: int) -> _Node:
    disc = _strip_alias(desc[4])
    dkind = disc if isinstance(disc, int) else disc[0]
    if dkind not in _DISCS:
        raise TypeError(f"bad union discriminator {desc[4]!r}")
    default_index, default = desc[5], None
    cases: dict[int, _Node] = {}
    for index, (label, _, mdesc) in enumerate(desc[6]):
        if index == default_index:
            default = _compile(mdesc, minor)
        else:
            cases[_label_key(label)] = _compile(mdesc, minor)
    return _Union(_DISCS[dkind], cases, default)


def _label_key(label: Any) -> int:
    """A union label as the integer read from the wire (enum items, chars, booleans)."""
    if isinstance(label, str):
        return ord(label)
    return int(getattr(label, "_v", label))


def _strip_alias(desc: Descriptor) -> Descriptor:
    while isinstance(desc, tuple) and desc[0] == TV_ALIAS:
        desc = desc[3]
    return desc


_BUILDERS: dict[int, Callable[[tuple[Any, ...], int], _Node]] = {
    TV_STRUCT: lambda d, mi: _struct([_compile(m, mi) for m in d[5::2]]),
    TV_EXCEPT: lambda d, mi: _struct([_STRING, *(_compile(m, mi) for m in d[5::2])]),
    TV_UNION: _build_union,
    TV_ENUM: lambda d, mi: _ULONG,
    TV_STRING: lambda d, mi: _Counted((), 1, True, d[1]),
    TV_WSTRING: lambda d, mi: _wide(TV_WSTRING, mi),
    TV_SEQUENCE: lambda d, mi: _sequence(_compile(d[1], mi), d[2]),
    TV_ARRAY: lambda d, mi: _array(_compile(d[1], mi), d[2]),
    TV_ALIAS: lambda d, mi: _compile(d[3], mi),
    TV_FIXED: lambda d, mi: _fixed_node(d[1]),
    TV_INDIRECT: lambda d, mi: _Lazy(d[1], mi),
}


def _top(descs: Sequence[Descriptor], minor: int) -> _Node:
    """The node for values of ``descs`` laid out one after another."""
    key = (minor, *map(id, descs))
    hit = _top_cache.get(key)
    if hit is None:
        if len(_top_cache) > _CACHE_LIMIT:
            _top_cache.clear()
        node = _struct([_compile(d, minor) for d in descs])
        hit = _top_cache[key] = (tuple(descs), node)
    return hit[1]


# -- TypeCodes -------------------------------------------------------------------

TCInfo = tuple[_Node, int]
"""A TypeCode read from the wire: its node and its kind (aliases resolved)."""
_TCMap = dict[int, TCInfo]


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


def _zero_typecode(f: _Frame, i: int) -> tuple[_Node, int, int]:
    """Read (and scrub) a TypeCode at ``f.data[i]``: (node, kind, end)."""
    kind, i = f.ulong(i)
    if kind == TC_INDIRECTION:
        offset, end = f.ulong(i)
        hit = f.tcs.get(end - 4 + offset - ((offset >> 31) << 32))  # signed, from the offset itself
        if hit is None:
            raise CDRLayoutError("TypeCode indirection to no TypeCode")
        return hit[0], hit[1], end
    if kind == TV_FIXED:
        j, i = f.prim(i, 2)
        return _fixed_node(f.uh(f.data, j)[0]), kind, f.prim(i, 2)[1]  # the scale does not change the size
    if kind in (TV_STRING, TV_WSTRING):
        i = f.ulong(i)[1]  # the bound
    if kind in _BASIC_TC:
        return _basic_node(kind, f.minor), kind, i
    length, i = f.ulong(i)
    if i + length > f.end:
        raise _truncated("a TypeCode encapsulation")
    if length > f.bounds.max_typecode_size:
        raise CDRLayoutError(f"a TypeCode of {length} octets (the limit is {f.bounds.max_typecode_size})")
    node, kind = _parse_encapsulation(f, kind, i - 8, i, i + length)
    return node, kind, i + length


def _basic_node(kind: int, minor: int) -> _Node:
    """The node of a TypeCode kind without an encapsulation."""
    if kind == TV_STRING:
        return _STRING
    if kind == TV_WSTRING:
        return _wide(kind, minor)
    node = _simple_node(kind, minor)
    assert node is not None  # _BASIC_TC lists only such kinds
    return node


_BASIC_TC = frozenset((*_PRIMS, TV_ANY, TV_TYPECODE, TV_PRINCIPAL, TV_WCHAR, TV_STRING, TV_WSTRING))


def _parse_encapsulation(outer: _Frame, kind: int, tc_start: int, start: int, end: int) -> TCInfo:
    """The node for a complex TypeCode at ``tc_start`` whose parameters are in ``data[start:end]``."""
    if start >= end or outer.data[start] > 1:
        raise CDRLayoutError("bad TypeCode encapsulation")
    if outer.depth >= outer.bounds.max_nesting_depth:
        raise CDRLayoutError(f"TypeCodes nested more than {outer.bounds.max_nesting_depth} deep")
    parser = _TC_PARSERS.get(kind)
    if parser is None:
        raise CDRLayoutError(f"unknown TypeCode kind {kind}")
    ref = _Ref()
    outer.tcs[tc_start] = (ref, kind)  # members may point back here (recursive types)
    f = _Frame(outer.data, end, -start, bool(outer.data[start]), outer.minor, outer.tcs, outer.depth + 1, outer.budget,
               outer.bounds)
    info, i = parser(f, start + 1)
    ref.target = info[0]
    outer.tcs[tc_start] = info
    if i < end:  # no meaning; zeroed so nothing stale can hide there
        f.data[i:end] = bytes(end - i)
    return info


def _skip_strings(f: _Frame, i: int, n: int) -> int:
    for _ in range(n):
        i = _STRING.zero(f, i)
    return i


def _tc_members(f: _Frame, i: int, visibility: bool) -> tuple[list[_Node], int]:
    """ulong count, then (string name, TypeCode[, short visibility]) per member."""
    count, i = f.ulong(i)
    if count > f.end - i:
        raise _truncated("a TypeCode member list")
    nodes = []
    for _ in range(count):
        node, _, i = _zero_typecode(f, _STRING.zero(f, i))
        if visibility:
            i = f.prim(i, 2)[1]
        nodes.append(node)
    return nodes, i


def _tc_struct(kind: int) -> Callable[[_Frame, int], tuple[TCInfo, int]]:
    """Structs and exceptions (whose values start with their repository id)."""

    def parse(f: _Frame, i: int) -> tuple[TCInfo, int]:
        nodes, i = _tc_members(f, _skip_strings(f, i, 2), False)
        return (_struct([_STRING, *nodes] if kind == TV_EXCEPT else nodes), kind), i

    return parse


def _tc_union(f: _Frame, i: int) -> tuple[TCInfo, int]:
    _, dkind, i = _zero_typecode(f, _skip_strings(f, i, 2))
    if dkind not in _DISCS:
        raise CDRLayoutError(f"bad union discriminator kind {dkind}")
    disc = _DISCS[dkind]
    default_index, i = f.ulong(i)
    count, i = f.ulong(i)
    if count > f.end - i:
        raise _truncated("a union TypeCode")
    cases: dict[int, _Node] = {}
    default = None
    for index in range(count):
        key, i = _read_disc(f, i, *disc)
        node, _, i = _zero_typecode(f, _STRING.zero(f, i))
        if index == default_index:
            default = node
        else:
            cases[key] = node
    return (_Union(disc, cases, default), TV_UNION), i


def _tc_enum(f: _Frame, i: int) -> tuple[TCInfo, int]:
    count, i = f.ulong(_skip_strings(f, i, 2))
    if count > f.end - i:
        raise _truncated("an enum TypeCode")
    return (_ULONG, TV_ENUM), _skip_strings(f, i, count)


def _tc_sequence(f: _Frame, i: int) -> tuple[TCInfo, int]:
    node, _, i = _zero_typecode(f, i)
    bound, i = f.ulong(i)
    return (_sequence(node, bound), TV_SEQUENCE), i


def _tc_array(f: _Frame, i: int) -> tuple[TCInfo, int]:
    node, _, i = _zero_typecode(f, i)
    length, i = f.ulong(i)
    # Fixed arrays precompute their layout: refuse one larger than the input.
    if isinstance(node, _Fixed) and length * node.lay[0][0] > f.budget:
        raise _truncated("an array")
    return (_array(node, length), TV_ARRAY), i


def _tc_alias(f: _Frame, i: int) -> tuple[TCInfo, int]:
    node, kind, i = _zero_typecode(f, _skip_strings(f, i, 2))
    return (node, kind), i


def _tc_interface(kind: int) -> Callable[[_Frame, int], tuple[TCInfo, int]]:
    node = _OBJREF if kind == TV_OBJREF else _Unsupported(_UNSUPPORTED[kind])
    return lambda f, i: ((node, kind), _skip_strings(f, i, 2))


def _tc_value(kind: int) -> Callable[[_Frame, int], tuple[TCInfo, int]]:
    """Value types are parsed (so their TypeCodes get scrubbed) but not walkable."""

    def parse(f: _Frame, i: int) -> tuple[TCInfo, int]:
        i = _skip_strings(f, i, 2)
        if kind == TV_VALUE_BOX:
            i = _zero_typecode(f, i)[2]
        else:
            i = _tc_members(f, _zero_typecode(f, f.prim(i, 2)[1])[2], True)[1]
        return (_Unsupported(_UNSUPPORTED[kind]), kind), i

    return parse


_TC_PARSERS: dict[int, Callable[[_Frame, int], tuple[TCInfo, int]]] = {
    TV_STRUCT: _tc_struct(TV_STRUCT), TV_EXCEPT: _tc_struct(TV_EXCEPT), TV_UNION: _tc_union, TV_ENUM: _tc_enum,
    TV_SEQUENCE: _tc_sequence, TV_ARRAY: _tc_array, TV_ALIAS: _tc_alias,
    TV_VALUE: _tc_value(TV_VALUE), TV_VALUE_BOX: _tc_value(TV_VALUE_BOX), TV_EVENT: _tc_value(TV_EVENT),
    **{k: _tc_interface(k) for k in (TV_OBJREF, TV_ABSTRACT, TV_LOCAL, TV_NATIVE, TV_COMPONENT, TV_HOME)},
}  # fmt: skip


def _move_typecode(m: _Mover) -> TCInfo:
    """Copy a TypeCode from the fragment train; an encapsulation is copied as octets, then parsed."""
    kind = m.ulong()
    src_start, dst_start = m.p - 4, len(m.out) - 4
    if kind == TC_INDIRECTION:
        return _move_indirection(m)
    m.tc_src[src_start] = dst_start
    if kind == TV_FIXED:
        digits = int(_U16[m.le](m.prim(2, 2))[0])
        m.prim(2, 2)
        return _fixed_node(digits), kind
    if kind in (TV_STRING, TV_WSTRING):
        m.prim(4, 4)
    if kind in _BASIC_TC:
        return _basic_node(kind, m.minor), kind
    length = m.ulong()
    if length > m.left():
        raise _truncated("a TypeCode encapsulation")
    start = len(m.out)
    m.run(length)
    outer = _Frame(m.out, start + length, m.dsh, m.le, m.minor, m.tcs, 0, len(m.src))
    return _parse_encapsulation(outer, kind, dst_start, start, start + length)


def _move_indirection(m: _Mover) -> TCInfo:
    """Copy an indirection, recomputing its offset: the padding between may have changed."""
    order: Literal["little", "big"] = "little" if m.le else "big"
    offset = int.from_bytes(m.prim(4, 4), order, signed=True)
    target = m.tc_src.get(m.p - 4 + offset)
    if target is None or target not in m.tcs:
        raise CDRLayoutError("TypeCode indirection to no TypeCode")
    m.out[-4:] = (target - (len(m.out) - 4)).to_bytes(4, order, signed=True)
    return m.tcs[target]


# -- the API -----------------------------------------------------------------------


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
    or pass one of ``bounds``, UnsupportedTypeError for value types and
    abstract interfaces.
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
        end = node.zero(_Frame(data, n, base, little_endian, giop_minor, {}, 0, n, bounds), 0)
    except (RecursionError, IndexError, struct.error, OverflowError) as exc:
        raise CDRLayoutError(f"malformed CDR data: {exc}") from None
    if end != n:
        raise CDRLayoutError(f"{n - end} octets left over after the values")


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

    Raises CDRLayoutError (a ValueError) for malformed data.
    """
    segs = _segments(len(data), base, fragment_starts, fragment_origin)
    node = _top(descs, giop_minor)
    try:
        mover = _Mover(bytes(data), segs, base, little_endian, giop_minor)
        node.move(mover)
        out = mover.finish()
    except (RecursionError, IndexError, struct.error, OverflowError) as exc:
        raise CDRLayoutError(f"malformed CDR data: {exc}") from None
    zero_padding(descs, out, little_endian, base, giop_minor=giop_minor, bounds=bounds)
    return bytes(out)


def transcode_strings(
    descs: Sequence[Descriptor], data: bytes, little_endian: bool, base: int, text: Callable[[bytes], bytes],
    *, giop_minor: int = 2,
) -> bytes:
    """Values of types ``descs`` with the octets of every ``string`` in them
    (any values included) replaced by ``text(octets)``: a change of char code
    set.  Lengths and the alignment of everything after a string follow;
    padding comes out zeroed.  ``text`` may raise (a character the target
    code set lacks); CDRLayoutError (a ValueError) for malformed data,
    UnsupportedTypeError for value types.
    """
    node = _top(descs, giop_minor)
    try:
        mover = _Mover(bytes(data), _segments(len(data), base, (), 0), base, little_endian, giop_minor, text)
        node.move(mover)
        return bytes(mover.finish())
    except (RecursionError, IndexError, struct.error, OverflowError) as exc:
        raise CDRLayoutError(f"malformed CDR data: {exc}") from None


def has_strings(descs: Sequence[Descriptor]) -> bool:
    """Whether values of ``descs`` can hold a ``string`` (an any may hold anything):
    only such bodies change with the char code set."""
    return _reaches(descs, lambda node: isinstance(node, _Any) or (isinstance(node, _Counted) and node.nul))


def needs_bounds(descs: Sequence[Descriptor]) -> bool:
    """Whether values of ``descs`` can hold what :class:`Bounds` limits (an any, a
    TypeCode) or what this module cannot walk (value types): only such bodies
    need a walk before they are unmarshaled; for the rest the octets bound all."""
    return _reaches(descs, lambda node: isinstance(node, (_Any, _TypeCodeValue, _Unsupported)))


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


def _segments(n: int, base: int, starts: Sequence[int], origin: int) -> list[tuple[int, int, int]]:
    """(start, end, phase shift) of the body and of each fragment payload."""
    bounds = [0, *starts, n]
    if any(not 0 <= a <= b <= n for a, b in zip(bounds, bounds[1:])):
        raise CDRLayoutError(f"fragment starts {list(starts)} do not fit {n} octets")
    segs = [(0, bounds[1], base)]
    segs += [(a, b, origin - a) for a, b in zip(bounds[1:], bounds[2:])]
    return segs
