"""Reading value types in pyorb: the bodies omniORB's in-memory unmarshaler cannot read.

omniORB's ``cdrUnmarshal`` aborts the process on a chunked value inside a
chunked value's state (a linked list, a tree, a value holding a boxed
value), which every ORB sends chunked; so a body that holds one is read
here, by the omniidl descriptors, the mirror of
:mod:`pyorb.marshal.valuewriter`: value tags with an optional codebase URL
and repository id (or id list, or an indirection to either), chunks that
may end between any two members, a nested value ending its container's
chunk (the container resumes in a new one), an end tag closing its value
and every enclosing one down to the level it names, the unknown state of a
truncatable value skipped by chunks, boxes, nulls, and indirections to a
value read earlier in the body, which come back as the same object (so
sharing and cycles survive).

Value objects are made as omniORBpy's unmarshaler makes them: the value
factory registered for the repository id, called with no arguments, its
state members set as attributes; a box is its content.  Everything that
holds no value (numbers, strings, structs of them, object references) is
read by ``leaf`` (omniORB, through a one-type
:class:`~pyorb.marshal.body.BodyCodec`), once its extent is known from the
layout walk; such a member split across two chunks is read member by member.

A body that came in a GIOP 1.1 fragment train is read where it lies: each
aligned token in the phase of its own Fragment payload (omniORB aligns each
relative to its Fragment message), each leaf copied into one stream by the
layout's realigning walk (:func:`~pyorb.marshal.layout.realign_one`) before
``leaf`` reads it.  Offsets (chunk lengths, indirections) count the payloads'
octets without the Fragment headers, as omniORB counts them.

Every read is bounded: values nest at most ``Bounds.max_nesting_depth``
deep, lengths are checked against the data before anything is allocated,
and an indirection must point back to a value (or repository id) that
started earlier in the body.  Anything else raises ``CDRLayoutError`` (a
ValueError) saying what is wrong and at which offset.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from typing import Any, Callable

import omniORB
from omniORB import CORBA

from pyorb.marshal.layout import Bounds, CDRLayoutError, NestedValueError, fragment_segments, realign_one
from pyorb.marshal.layout.cursors import _Frame
from pyorb.marshal.layout.descriptors import _compile, value_members
from pyorb.marshal.layout.valuetypes import MARSHAL_NO_VALUE_FACTORY
from pyorb.marshal.orb import Descriptor
from pyorb.marshal.values import resolve, values_can_nest

TV_ANY, TV_TYPECODE, TV_STRUCT, TV_UNION, TV_SEQUENCE, TV_ARRAY, TV_EXCEPT = 11, 12, 15, 16, 19, 20, 22
TV_VALUE, TV_VALUE_BOX = 29, 30

_NULL, _INDIRECTION = 0, 0xFFFFFFFF
_TAG_MIN, _TAG_MAX = 0x7FFFFF00, 0x7FFFFFFF
_CODEBASE, _TYPE_INFO, _ID_LIST, _CHUNKED = 1, 6, 6, 8
_NONE_CLOSED = 1 << 30
_REPO_ID_STRING = (18, 0)

# leaf(type, octets, stream position of octets[0] mod 8): the value omniORB reads from exactly those octets.
Leaf = Callable[[Descriptor, bytes, int], Any]


class _InProgress:
    """Marks a box whose content is still being read: an indirection to it cannot be resolved."""


_IN_PROGRESS = _InProgress()


class _Skipped:
    """A value nested in the skipped state of a truncated value, and the level it was nested at:
    read when an indirection names it (by the type declared where the indirection is)."""

    __slots__ = ("level",)

    def __init__(self, level: int) -> None:
        self.level = level


def read_values(descs: tuple[Descriptor, ...], body: bytes, align: int, little_endian: bool, bounds: Bounds,
                leaf: Leaf, fragment_starts: tuple[int, ...] = (), *, giop_minor: int = 2) -> tuple[Any, ...]:
    """The values of ``descs`` in ``body`` (which starts at stream position ``align`` mod 8).

    ``fragment_starts`` (GIOP 1.1 only) are the offsets in ``body`` where
    Fragment payloads begin, each aligned relative to its own Fragment.
    ``giop_minor`` is the form of wide text the leaves are in (1: GIOP 1.1's
    two-octet units; ``leaf`` must read them in that form too).

    Raises CDRLayoutError for a body that does not decode as its types say
    or passes one of ``bounds``.
    """
    segments = fragment_segments(len(body), align % 8, fragment_starts) if fragment_starts else None
    reader = _In(body, align % 8, little_endian, bounds, leaf, segments, giop_minor)
    try:
        values = tuple(reader.any_type(desc) for desc in descs)
    except RecursionError:
        raise CDRLayoutError(f"values nested {reader.level} deep: deeper than pyorb's value reader can recurse") from None
    except (IndexError, struct.error, OverflowError) as exc:
        raise CDRLayoutError(f"malformed CDR data: {exc}") from None
    if reader.level or reader.p != len(body):
        raise CDRLayoutError(f"{len(body) - reader.p} octets left over after the values")
    return values


class _In:
    """One body being read: where the reader is, the chunk open now, what an indirection may name."""

    __slots__ = ("buf", "scratch", "base", "le", "fmt", "bounds", "leaf", "p", "end", "level", "closed", "values",
                 "ids", "anys", "depth", "segments", "starts", "minor")

    def __init__(self, buf: bytes, base: int, le: bool, bounds: Bounds, leaf: Leaf,
                 segments: list[tuple[int, int, int]] | None = None, minor: int = 2) -> None:
        self.buf, self.base, self.le, self.bounds, self.leaf, self.minor = buf, base, le, bounds, leaf, minor
        # A GIOP 1.1 fragment train's (start, end, phase shift) of each payload, or None for one stream.
        self.segments = segments
        self.starts = [a for a, _, _ in segments] if segments else []
        self.scratch = bytearray(buf)  # the layout walk zeroes padding as it goes: not in ``buf``
        self.fmt = struct.Struct("<I" if le else ">I")
        self.p = 0
        self.end = len(buf)  # the end of the open chunk (the data's end outside chunked values)
        self.level = 0  # chunked values open around the reader
        self.anys = 0  # anys open around the reader
        self.depth = 0  # values open around the reader, chunked or not
        self.closed = _NONE_CLOSED  # the lowest level the last end tag closed, while its containers finish
        self.values: dict[int, Any] = {}  # where a value's tag is -> the object read there
        self.ids: dict[int, Any] = {}  # where a repository id (str) or id list (tuple) is -> it

    # -- the stream ---------------------------------------------------------

    def aligned(self, i: int, n: int) -> int:
        """Where an ``n``-aligned primitive of ``n`` octets read at ``i`` starts."""
        segments = self.segments
        if segments is None:
            return i + ((-(i + self.base)) & (n - 1))
        k = bisect_right(self.starts, i) - 1
        _, end, shift = segments[k]
        j = i + ((-(i + shift)) & (n - 1))
        while j >= end and k + 1 < len(segments):  # only padding (or nothing) is left in this fragment
            k += 1
            start, end, shift = segments[k]
            j = start + ((-(start + shift)) & (n - 1))
        return j

    def token(self, limit: int) -> tuple[int, int]:
        """The aligned ulong at or after ``p`` and where it starts (before ``limit``)."""
        j = self.aligned(self.p, 4)
        if j + 4 > limit:
            raise CDRLayoutError(f"the data ends inside a ulong at offset {j}")
        if self.segments is not None and j + 4 > self.segments[bisect_right(self.starts, j) - 1][1]:
            raise CDRLayoutError(f"a ulong at offset {j} is split across GIOP 1.1 fragments")
        value: int = self.fmt.unpack_from(self.buf, j)[0]
        self.p = j + 4
        return value, j

    def open_chunk(self) -> None:
        """Inside a chunked value with its chunk used up: the next chunk must follow."""
        length, at = self.token(len(self.buf))
        if not 0 < length < _TAG_MIN:
            raise CDRLayoutError(f"a value's state ends before its members do (offset {at})")
        if self.p + length > len(self.buf):
            raise CDRLayoutError(f"a chunk of {length} octets at offset {at} runs past the end of the data")
        self.end = self.p + length

    def data(self) -> None:
        """State octets follow: inside a chunked value they are in a chunk."""
        if self.closed <= self.level:
            raise CDRLayoutError(f"a value's state goes on after the end tag that closed it (offset {self.p})")
        if self.level and self.p >= self.end:
            self.open_chunk()

    # -- types --------------------------------------------------------------

    def any_type(self, desc: Descriptor) -> Any:
        desc = resolve(desc)
        kind = desc[0] if isinstance(desc, tuple) else desc
        if kind in (TV_VALUE, TV_VALUE_BOX):
            return self.value(desc)
        if not values_can_nest((desc,), True):
            return self.leaf_value(desc)
        if kind in (TV_STRUCT, TV_EXCEPT):
            if kind == TV_EXCEPT:
                self.leaf_value(_REPO_ID_STRING)  # an exception's body starts with its repository id
            return desc[1](*(self.any_type(member) for member in desc[5::2]))
        if kind == TV_SEQUENCE:
            n = self.count()
            if desc[2] and n > desc[2]:
                raise CDRLayoutError(f"sequence length {n} exceeds its bound {desc[2]}")
            return [self.any_type(desc[1]) for _ in range(n)]
        if kind == TV_ARRAY:
            return [self.any_type(desc[1]) for _ in range(desc[2])]
        if kind == TV_UNION:
            disc = self.any_type(desc[5])
            arm = desc[8].get(disc, desc[7])
            return desc[1](disc, None if arm is None else self.any_type(arm[2]))
        if kind == TV_ANY:
            return self.any_value()
        raise NestedValueError("an abstract interface or an event type in a body that holds a value "
                               "inside another value's state: pyorb does not read one")

    def any_value(self) -> Any:
        """An any: its TypeCode read by omniORB (bounded by the layout walk), its content here."""
        if self.anys + self.depth >= self.bounds.max_nesting_depth:
            raise CDRLayoutError(f"anys and values nested more than {self.bounds.max_nesting_depth} deep "
                                 f"(offset {self.p})")
        tc = self.leaf_value(TV_TYPECODE)
        self.anys += 1
        try:
            return CORBA.Any(tc, self.any_type(tc._d))
        finally:
            self.anys -= 1

    def count(self) -> int:
        """A sequence's length, which each element takes at least one octet of (or, for values, four)."""
        self.data()
        n, at = self.token(self.end)
        if n > len(self.buf) - self.p:
            raise CDRLayoutError(f"a sequence of {n} elements at offset {at} is longer than the data left")
        return n

    def leaf_value(self, desc: Descriptor) -> Any:
        """A member holding no value: its extent by the layout walk, its value by ``leaf``."""
        self.data()
        i = self.p
        try:
            try:
                octets, phase, j = self.extent(desc, i)
            except CDRLayoutError:
                if not self.level or self.aligned(i, 8) < self.end:
                    raise
                # Only padding is left in this chunk (omniORB ends a chunk after a member's
                # padding): the member starts in the next chunk.
                self.p = self.end
                self.open_chunk()
                octets, phase, j = self.extent(desc, self.p)
        except CDRLayoutError:
            kind = desc[0] if isinstance(desc, tuple) else desc
            if not self.level or self.end == len(self.buf) or kind not in (TV_STRUCT, TV_EXCEPT, TV_SEQUENCE, TV_ARRAY):
                raise
            return self.split(desc, kind)  # a chunk ends inside it: member by member
        self.p = j
        return self.leaf(desc, octets, phase)

    def extent(self, desc: Descriptor, i: int) -> tuple[bytes, int, int]:
        """The member of type ``desc`` at ``i``, within the open chunk: its octets as one
        stream, their phase, and where it ends (found by the layout walk, which checks it)."""
        if self.segments is not None:
            return realign_one(desc, self.buf, self.le, i, self.end, self.segments, self.bounds, giop_minor=self.minor)
        frame = _Frame(self.scratch, self.end, self.base, self.le, self.minor, {}, 0, len(self.buf), self.bounds)
        frame.chunked = 1  # (a value inside an any here would be a value inside a value)
        j = _compile(desc, self.minor).zero(frame, i)
        return self.buf[i:j], (i + self.base) & 7, j

    def split(self, desc: tuple[Any, ...], kind: int) -> Any:
        if kind in (TV_STRUCT, TV_EXCEPT):
            return desc[1](*(self.leaf_value(resolve(member)) for member in desc[5::2]))
        n = self.count() if kind == TV_SEQUENCE else desc[2]
        items = [self.leaf_value(resolve(desc[1])) for _ in range(n)]
        if desc[1] in (10, 9) and kind == TV_SEQUENCE:  # octets and chars come as one bytes/str
            return bytes(items) if desc[1] == 10 else "".join(items)
        return items

    def value(self, desc: tuple[Any, ...]) -> Any:
        if self.level:
            if self.closed <= self.level:
                raise CDRLayoutError(f"a value's state goes on after the end tag that closed it (offset {self.p})")
            j = self.aligned(self.p, 4)
            if j + 4 > self.end:  # between chunks (a chunk may end in padding): a chunk or a value token follows
                if j < self.end:
                    raise CDRLayoutError(f"a value token straddles the end of a chunk (offset {j})")
                self.p, self.end = max(self.p, self.end), len(self.buf)
                head, at = self.token(self.end)
                if 0 < head < _TAG_MIN:
                    self.p = at
                    self.open_chunk()
                    head, at = self.token(self.end)
            else:
                head, at = self.token(self.end)
        else:
            head, at = self.token(self.end)
        if head == _NULL:
            return None
        if head == _INDIRECTION:
            return self.indirection(at, desc)
        if not _TAG_MIN <= head <= _TAG_MAX or head & _TYPE_INFO == 4:
            raise CDRLayoutError(f"bad value tag {head:#010x} at offset {at}")
        if self.level and self.end != len(self.buf) and self.p <= self.end and at < self.end:
            raise CDRLayoutError(f"a value starts inside its container's chunk (offset {at})")
        if self.level and not head & _CHUNKED:
            raise CDRLayoutError(f"an unchunked value inside a chunked one (offset {at})")
        self.end = len(self.buf)
        if head & _CODEBASE:
            self.string_or_indirection("codebase URL")
        actual, truncated = desc, False
        if head & _TYPE_INFO:
            ids = self.repo_ids() if head & _TYPE_INFO == _ID_LIST else (self.repo_id(),)
            actual, truncated = self.actual(desc, ids, bool(head & _CHUNKED), at)
        if self.depth + self.anys >= self.bounds.max_nesting_depth:
            raise CDRLayoutError(f"values nested more than {self.bounds.max_nesting_depth} deep (offset {at})")
        self.depth += 1
        try:
            obj = self.value_state(head, actual, truncated, at)
        finally:
            self.depth -= 1
        self.values[at] = obj
        return obj

    def value_state(self, head: int, actual: tuple[Any, ...], truncated: bool, at: int) -> Any:
        """The object of the value whose tag ``head`` is at ``at``, its type ``actual``, its state read."""
        if actual[0] == TV_VALUE_BOX:
            self.values[at] = _IN_PROGRESS
            obj = self.state(head, [actual[4]], truncated, at)[0]
        else:
            factory = omniORB.findValueFactory(actual[2])
            if factory is None and isinstance(actual[1], type) and issubclass(actual[1], omniORB.UnknownValueBase):
                factory = actual[1]  # a type only an any's TypeCode names: omniORBpy's stand-in class
            if factory is None:
                raise CDRLayoutError(f"no value factory for {actual[2]!r} (the value at offset {at})",
                                     MARSHAL_NO_VALUE_FACTORY)
            obj = factory()
            self.values[at] = obj
            members = value_members(actual)
            for (name, _), got in zip(members, self.state(head, [t for _, t in members], truncated, at)):
                setattr(obj, name, got)
        return obj

    def state(self, head: int, types: list[Descriptor], truncated: bool, at: int) -> list[Any]:
        if not head & _CHUNKED:
            return [self.any_type(t) for t in types]
        self.level += 1
        level = self.level
        self.end = self.p  # no chunk open yet
        try:
            got = [self.any_type(t) for t in types]
            if self.closed <= level:  # a nested value's end tag closed this one too
                if self.closed == level:
                    self.closed = _NONE_CLOSED
                return got
            self.end_tag(level, truncated)
        finally:
            self.level -= 1
            if not self.level:
                self.end = len(self.buf)
        return got

    def end_tag(self, level: int, truncated: bool) -> None:
        if self.aligned(self.p, 4) < self.end:  # (padding may end a chunk)
            if not truncated:
                raise CDRLayoutError(f"a chunk runs {self.end - self.p} octets past its value's state (offset {self.p})")
            self.p = self.end
        self.end = len(self.buf)
        if truncated:
            closes, at = self.skip_state(level)
        else:
            tag, at = self.token(self.end)
            if tag < 0x80000000:
                raise CDRLayoutError(f"a chunked value's state ends at offset {at} but no end tag follows")
            closes = 0x100000000 - tag
        if closes > level:
            raise CDRLayoutError(f"end tag -{closes} at offset {at} is deeper than the {level} values open there")
        if closes < level:
            self.closed = closes
        self.end = self.p

    def skip_state(self, level: int) -> tuple[int, int]:
        """Skip the rest of a truncated value's state (of a type unknown here) at ``level``: its
        chunks and the values nested between them, up to the end tag that closes it.  Returns
        the level that end tag closes down to and where it is."""
        while True:
            tag, at = self.token(len(self.buf))
            if tag >= 0x80000000:
                return 0x100000000 - tag, at
            if _TAG_MIN <= tag <= _TAG_MAX:
                closes, at = self.skip_value(tag, at, level + 1)
                if closes <= level:  # its end tag closed the truncated value too
                    if self.closed == closes:
                        self.closed = _NONE_CLOSED
                    return closes, at
            elif 0 < tag < _TAG_MIN:
                if self.p + tag > len(self.buf):
                    raise CDRLayoutError(f"a chunk of {tag} octets at offset {at} runs past the end of the data")
                self.p += tag
            elif tag:  # (a null between chunks has nothing to skip)
                raise CDRLayoutError(f"a chunked value's state ends at offset {at} but no end tag follows")

    def skip_value(self, head: int, at: int, level: int) -> tuple[int, int]:
        """Skip a value nested in skipped state: its ids are kept (later indirections may name
        them), the value itself cannot be made, so an indirection to it is refused."""
        if head & _TYPE_INFO == 4:
            raise CDRLayoutError(f"bad value tag {head:#010x} at offset {at}")
        if not head & _CHUNKED:
            raise CDRLayoutError(f"an unchunked value inside a chunked one (offset {at})")
        if level > self.bounds.max_nesting_depth:
            raise CDRLayoutError(f"values nested more than {self.bounds.max_nesting_depth} deep (offset {at})")
        if head & _CODEBASE:
            self.string_or_indirection("codebase URL")
        known = None
        if head & _TYPE_INFO:
            ids = self.repo_ids() if head & _TYPE_INFO == _ID_LIST else (self.repo_id(),)
            known = next((found for found in map(omniORB.findType, ids)
                          if isinstance(found, tuple) and found[0] in (TV_VALUE, TV_VALUE_BOX)), None)
        if known is not None:  # its ids name a type known here: read, so that indirections to it resolve
            self.p = at
            self.value(known)
            closes = self.closed if self.closed < level else level
            return closes, self.p - 4
        self.values[at] = _Skipped(level)
        closes, end = self.skip_state(level)
        if closes > level:
            raise CDRLayoutError(f"end tag -{closes} at offset {end} is deeper than the {level} values open there")
        return closes, end

    def skipped(self, at: int, level: int, desc: tuple[Any, ...]) -> Any:
        """The value at ``at``, skipped where it was nested ``level`` deep, read now as ``desc``
        (the reader's place restored after)."""
        where = self.p, self.end, self.level, self.closed
        self.p, self.end, self.level, self.closed = at, len(self.buf), level - 1, _NONE_CLOSED
        try:
            return self.value(desc)
        finally:
            self.p, self.end, self.level, self.closed = where

    def actual(self, desc: tuple[Any, ...], ids: tuple[str, ...], chunked: bool, at: int) -> tuple[tuple[Any, ...], bool]:
        """The type the repository ids name, and whether it is a truncation (to a known base)."""
        for k, rid in enumerate(ids if chunked else ids[:1]):
            if rid == desc[2]:
                return desc, k > 0
            found = None if desc[0] == TV_VALUE_BOX else omniORB.findType(rid)
            if isinstance(found, tuple) and found[0] == TV_VALUE:
                return found, k > 0
        raise CDRLayoutError(f"no value type {ids[0]!r} is known here (the value at offset {at})",
                             MARSHAL_NO_VALUE_FACTORY)

    def target(self, at: int) -> int:
        """After an indirection marker at ``at``: where its offset points."""
        offset, _ = self.token(len(self.buf))
        return at + 4 + offset - ((offset >> 31) << 32)

    def indirection(self, at: int, desc: tuple[Any, ...]) -> Any:
        target = self.target(at)
        got = self.values.get(target) if target < at else None  # only backwards: no loop of indirections
        if got is None:
            raise CDRLayoutError(f"indirection at offset {at} to offset {target}, where no value started")
        if isinstance(got, _Skipped):
            return self.skipped(target, got.level, desc)
        if got is _IN_PROGRESS:
            raise CDRLayoutError(f"indirection at offset {at} to the box at offset {target}, which holds it")
        return got

    def string(self, what: str) -> str:
        n, at = self.token(len(self.buf))
        if not 0 < n <= len(self.buf) - self.p:
            raise CDRLayoutError(f"a {what} of {n} octets at offset {at} does not fit the data")
        raw = self.buf[self.p : self.p + n]
        if raw[-1]:
            raise CDRLayoutError(f"a {what} at offset {at} is not NUL-terminated")
        self.p += n
        text = raw[:-1].decode("latin-1")
        self.ids[at] = text
        return text

    def string_or_indirection(self, what: str) -> str:
        head, at = self.token(len(self.buf))
        if head == _INDIRECTION:
            rid: str = self.earlier_id(at, str, what)
            return rid
        self.p = at
        return self.string(what)

    def earlier_id(self, at: int, kind: type, what: str) -> Any:
        """The repository id (a str) or id list (a tuple) an indirection at ``at`` names."""
        target = self.target(at)
        got = self.ids.get(target) if target < at else None
        if not isinstance(got, kind):
            raise CDRLayoutError(f"indirection at offset {at} to offset {target}, where no {what} started")
        return got

    def repo_id(self) -> str:
        return self.string_or_indirection("repository id")

    def repo_ids(self) -> tuple[str, ...]:
        count, at = self.token(len(self.buf))
        if count == _INDIRECTION:
            earlier: tuple[str, ...] = self.earlier_id(at, tuple, "repository id list")
            return earlier
        if count == 0 or count > (len(self.buf) - self.p) // 5:
            raise CDRLayoutError(f"a repository id list of {count} ids at offset {at} does not fit the data")
        ids = tuple(self.repo_id() for _ in range(count))
        self.ids[at] = ids
        return ids
