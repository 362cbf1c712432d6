"""Walking state: a frame over contiguous CDR being scrubbed in place, and a
mover that copies an encoding into a new, realigned (or re-encoded) buffer."""

from __future__ import annotations

from typing import Callable, TYPE_CHECKING

from pyorb.marshal.layout.kinds import Bounds, CDRLayoutError, DEFAULT_BOUNDS, _U16, _U32, _ZEROS, _truncated

if TYPE_CHECKING:
    from pyorb.marshal.layout.typecodes import _TCMap


class _Bounded:
    """What one walk of received data has used of its :class:`Bounds`.

    Both walks (in place, and copying) keep their count here and check it
    with these methods, so a body meets the same limits whichever walk it takes.
    """

    __slots__ = ("bounds", "nest", "empty")

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.nest = 0  # any values (and steps into a recursive type) open around the value being walked
        self.empty = 0  # elements of zero-size types walked so far

    def enter(self, what: str) -> None:
        """One more level of ``what`` open (close it with ``self.nest -= 1``)."""
        if self.nest >= self.bounds.max_nesting_depth:
            raise CDRLayoutError(f"{what} nested more than {self.bounds.max_nesting_depth} deep")
        self.nest += 1

    def take_empty(self, n: int) -> None:
        """``n`` elements that take no octets on the wire, but one object each once unmarshaled."""
        self.empty += n
        if self.empty > self.bounds.max_empty_elements:
            raise CDRLayoutError(f"{self.empty} elements of types that take no octets "
                                 f"(the limit is {self.bounds.max_empty_elements} in one body)")

    def typecode_size(self, length: int) -> None:
        if length > self.bounds.max_typecode_size:
            raise CDRLayoutError(f"a TypeCode of {length} octets (the limit is {self.bounds.max_typecode_size})")


class _Frame(_Bounded):
    """Contiguous CDR being scrubbed in place: ``data[:end]``, phase of index i is ``(i + sh) & 7``.

    An encapsulation gets its own frame (own origin and byte order) over the
    same buffer, so TypeCode positions stay comparable across frames.
    """

    __slots__ = ("data", "end", "sh", "le", "ul", "uh", "minor", "tcs", "depth", "budget", "values", "chunked",
                 "full_end")

    def __init__(
        self, data: bytearray, end: int, sh: int, le: bool, minor: int, tcs: _TCMap, depth: int, budget: int,
        bounds: Bounds = DEFAULT_BOUNDS,
    ) -> None:
        self.data, self.end, self.sh, self.le, self.minor = data, end, sh, le, minor
        self.ul, self.uh = _U32[le], _U16[le]
        self.tcs, self.depth = tcs, depth
        self.budget = budget  # octets in the whole input: no array read from a TypeCode is larger
        _Bounded.__init__(self, bounds)
        # Value types: where each value and repository id string started (the
        # targets indirections may name), how many chunked values are open
        # around the walk, and the end of the data while ``end`` is a chunk's.
        self.values: dict[int, str] = {}
        self.chunked = 0
        self.full_end = end

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


class _Mover(_Bounded):
    """Copies a GIOP 1.1 fragment train into a normally aligned buffer.

    The source is cut into segments (message body, then each fragment
    payload); within segment k the phase of index p is ``(p + ssh) & 7``.
    Primitives are never split across segments; octet data may be.
    """

    __slots__ = ("src", "segs", "k", "p", "fe", "ssh", "out", "dsh", "le", "ul", "minor", "tcs", "tc_src", "text",
                 "chunks", "values")

    def __init__(
        self, src: bytes, segs: list[tuple[int, int, int]], base: int, le: bool, minor: int, bounds: Bounds,
        text: Callable[[bytes], bytes] | None = None,
    ) -> None:
        _Bounded.__init__(self, bounds)
        self.src, self.segs, self.k = src, segs, 0
        self.p, self.fe, self.ssh = segs[0]
        self.out, self.dsh, self.le, self.minor = bytearray(), base, le, minor
        self.ul = _U32[le]
        self.text = text  # re-encodes each string's octets (without its NUL) on the way
        self.tcs: _TCMap = {}
        self.tc_src: dict[int, int] = {}  # TypeCode start: source index -> output index
        # Value types: while a chunked value's state is copied, its chunks are the segments, and
        # ``chunks`` appends the next one when they run out; ``values`` maps where each value or
        # repository id started in the source to (output index, what it is, its repository ids).
        self.chunks: Callable[[_Mover], None] | None = None
        self.values: dict[int, tuple[int, str, tuple[str, ...]]] = {}

    def advance(self) -> None:
        """Continue in the next fragment payload (or the next chunk of a chunked value's state)."""
        if self.chunks is not None and self.k + 1 >= len(self.segs):
            self.chunks(self)
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
