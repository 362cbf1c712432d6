"""Value types and value boxes on the wire (CORBA 3.0 §15.3.4): a null, an
indirection to a value seen before, or a value tag with an optional codebase
URL, optional repository ids, then the state, in chunks or not.

The walk scrubs what omniORB writes (chunked values with the repository id
only when the value is not of its declared type) and bounds whatever a
sender chose: indirections must name a value or string that started
earlier in the same stream, chunk lengths must stay inside the data and
end where the state does, end tags must match the nesting, and values
nest at most ``Bounds.max_nesting_depth`` deep.
"""

from __future__ import annotations

from typing import Callable, Literal

from pyorb import _accelerator
from pyorb.marshal.layout.cursors import _Frame, _Mover
from pyorb.marshal.layout.kinds import CDRLayoutError, NestedValueError, _truncated
from pyorb.marshal.layout.nodes import (
    _Array, _Counted, _Fixed, _Group, _Node, _Prim, _Ref, _STRING, _Seq, _Struct, _Union, _WChar, _wchar_key,
)

# omniORB's minor code for a value whose repository id names no type known here.
MARSHAL_NO_VALUE_FACTORY = 0x4F4D0001

_NULL, _INDIRECTION = 0, 0xFFFFFFFF
_TAG_MIN, _TAG_MAX = 0x7FFFFF00, 0x7FFFFFFF
_CODEBASE, _TYPE_INFO, _ONE_ID, _ID_LIST, _CHUNKED = 1, 6, 2, 6, 8

# What an indirection may name: a value, a repository id string or list, a codebase URL.
_VALUE, _REPO_ID, _REPO_IDS, _CODEBASE_URL = "value", "repository id", "repository id list", "codebase URL"


class _Value(_Node):
    """A value type or value box of a declared type.

    ``state`` is the node of its members (base members first), built on
    first use (values may contain themselves); ``find`` gives the node of
    another value type by repository id (a derived value sent where its
    base is declared), or None if no such type is known here.
    """

    __slots__ = ("repo_id", "box", "build", "state_node", "find")

    def __init__(self, repo_id: str, box: bool, build: Callable[[], _Node],
                 find: Callable[[str], _Value | None]) -> None:
        self.repo_id, self.box, self.build, self.find = repo_id, box, build, find
        self.state_node: _Node | None = None

    def state(self) -> _Node:
        if self.state_node is None:
            self.state_node = self.build()
        return self.state_node

    def zero(self, f: _Frame, i: int) -> int:
        inner = f.end  # inside a chunked value: the end of the chunk being read
        f.end = f.full_end
        head, j = f.ulong(i)
        start = j - 4
        outside = f.chunked and start >= inner  # between its container's chunks
        if outside and 0 < head < _TAG_MIN:
            # A chunk opens first: a null or an indirection may sit inside one (omniORB
            # writes a null member of a value in an any in a chunk of its own).
            return self.zero(f, _next_chunk(f, start))
        if f.chunked and not outside and j > inner:
            raise CDRLayoutError(f"a value straddles the end of its container's chunk (offset {start})")
        if head == _NULL or head == _INDIRECTION:
            if head:
                if not outside:
                    f.end = inner
                j = _indirection(f, j, _VALUE)
            if outside:
                return _next_chunk(f, j)
            f.end = inner
            return j
        if not _TAG_MIN <= head <= _TAG_MAX or head & _TYPE_INFO == 4:
            raise CDRLayoutError(f"bad value tag {head:#010x} at offset {start}")
        if f.chunked and not outside:
            raise CDRLayoutError(f"a value starts inside its container's chunk (offset {start})")
        if f.chunked and not head & _CHUNKED:
            raise CDRLayoutError(f"an unchunked value inside a chunked one (offset {start})")
        if f.chunked:
            # omniORB's unmarshaler aborts the whole process on one (cdrValueChunkStream's assertions).
            raise NestedValueError(f"a chunked value inside a chunked value (offset {start}): "
                                   "omniORB's unmarshaler cannot read one")
        f.values[start] = _VALUE
        if head & _CODEBASE:
            j = _string_or_indirection(f, j, _CODEBASE_URL)
        node, truncated = self, False
        if head & _TYPE_INFO:
            ids, j = _repo_ids(f, j) if head & _TYPE_INFO == _ID_LIST else _one_repo_id(f, j)
            node, truncated = self._actual(ids, bool(head & _CHUNKED), start)
        f.enter("values")
        try:
            if not head & _CHUNKED:
                return node.state().zero(f, j)
            f.chunked += 1
            try:
                i = _end_of_value(f, _zero_chunked(node.state(), f, _next_chunk(f, j)), truncated)
            finally:
                f.chunked -= 1
        finally:
            f.nest -= 1
        if f.chunked:
            return _next_chunk(f, i)
        f.end = f.full_end
        return i

    def zero_many(self, f: _Frame, i: int, n: int) -> int:
        # A run of values (a sequence of them): the compiled twin walks the common forms in
        # one C loop; for the rest, or an error, it gives -1 and this walk runs from the same start.
        j = _zero_values(self, f, i, n)
        if j >= 0:
            return j
        for _ in range(n):
            i = self.zero(f, i)
        return i

    def _actual(self, ids: list[str], chunked: bool, start: int) -> tuple[_Value, bool]:
        """The node of the value the repository ids name, and whether it is a truncation
        (a known base of an unknown type, possible only with chunks to skip the rest)."""
        for k, rid in enumerate(ids if chunked else ids[:1]):
            node = self if rid == self.repo_id else None if self.box else self.find(rid)
            if node is not None:
                return node, k > 0
        raise CDRLayoutError(f"no value type {ids[0]!r} is known here (the value at offset {start})",
                             MARSHAL_NO_VALUE_FACTORY)

    def move(self, m: _Mover) -> None:
        """Copy a value whose strings may change length: the output chunks and
        indirections are its own, the state of a chunked value in one chunk."""
        if m.chunks is not None:
            _between_chunks(m)
        head = m.ulong()
        src, out = m.p - 4, len(m.out) - 4
        if head == _NULL:
            return
        if head == _INDIRECTION:
            _move_indirection(m, _VALUE)
            return
        if not _TAG_MIN <= head <= _TAG_MAX or head & _TYPE_INFO == 4:
            raise CDRLayoutError(f"bad value tag {head:#010x} at offset {src}")
        if m.chunks is not None:  # the in-place walk's texts
            if not head & _CHUNKED:
                raise CDRLayoutError(f"an unchunked value inside a chunked one (offset {src})")
            raise NestedValueError(f"a chunked value inside a chunked value (offset {src}): "
                                   "omniORB's unmarshaler cannot read one")
        m.values[src] = (out, _VALUE, ())
        if head & _CODEBASE:
            _move_string(m, _CODEBASE_URL)
        node, truncated = self, False
        if head & _TYPE_INFO:
            ids = _move_repo_ids(m) if head & _TYPE_INFO == _ID_LIST else _move_string(m, _REPO_ID)
            node, truncated = self._actual(list(ids), bool(head & _CHUNKED), src)
        m.enter("values")
        try:
            if head & _CHUNKED:
                _move_chunked(node.state(), m, truncated)
            else:
                node.state().move(m)
        finally:
            m.nest -= 1


def _zero_chunked(state: _Node, f: _Frame, i: int) -> int:
    """Scrub a chunked value's state: in one go if it fits its first chunk (what
    omniORB writes for a small value), else step by step across chunk boundaries."""
    end = f.end
    try:
        return state.zero(f, i)
    except CDRLayoutError:  # walk again, following the chunks (what the first walk recorded stays true)
        f.end = end
        return _split(state, f, i)


def _room(f: _Frame, i: int, size: int, align: int) -> int:
    """Where a primitive of ``size`` at or after ``i`` starts, crossing into the next
    chunk if this one ends first (the padding before it zeroed)."""
    j = i + ((-(i + f.sh)) & (align - 1))
    if j + size > f.end:
        if f.end > j:
            raise CDRLayoutError(f"a {size}-octet primitive straddles the end of a chunk (offset {j})")
        if f.end < i:
            raise _truncated("a value's state")
        if i < f.end:
            f.data[i:f.end] = bytes(f.end - i)
        k = _next_chunk(f, f.end)
        if k == f.end:  # no chunk follows: the state is cut short
            raise CDRLayoutError(f"a value's state ends before its members do (offset {k})")
        return _room(f, k, size, align)
    if j != i:
        f.data[i:j] = bytes(j - i)
    return j


def _octets(f: _Frame, i: int, n: int) -> tuple[int, int]:
    """Step over ``n`` octets that may continue in the following chunks: (end, last octet)."""
    if n > f.full_end - i:
        raise _truncated("a string or sequence")
    last = 0
    while n:
        if i >= f.end:
            k = _next_chunk(f, i)
            if k == i:
                raise CDRLayoutError(f"a value's state ends before its members do (offset {k})")
            i = k
        c = min(n, f.end - i)
        i += c
        n -= c
        last = f.data[i - 1]
    return i, last


def _split(node: _Node, f: _Frame, i: int) -> int:
    """``node.zero`` for a value's state whose chunks may end between any two primitives."""
    if isinstance(node, _Prim):
        return _room(f, i, node.size, node.align) + node.size if node.size else i
    if isinstance(node, _Group):
        for child in node.children:
            i = _split(child, f, i)
        return i
    if isinstance(node, _Array):
        if not node.lay[0][0]:
            f.take_empty(node.n)
        for _ in range(node.n):
            i = _split(node.elem, f, i)
        return i
    if isinstance(node, _Counted):
        for child in node.prefix:
            i = _split(child, f, i)
        j = _room(f, i, 4, 4)
        count = f.ul(f.data, j)[0]
        i, last = _octets(f, j + 4, count * node.unit)
        node.check(count, last)
        return i
    if isinstance(node, _Seq):
        n = node.length
        if n is None:
            j = _room(f, i, 4, 4)
            n, i = f.ul(f.data, j)[0], j + 4
        if node.bound and n > node.bound:
            raise CDRLayoutError(f"sequence length {n} exceeds its bound {node.bound}")
        if isinstance(node.elem, _Fixed) and not node.elem.lay[0][0]:
            f.take_empty(n)
        elif n > f.full_end - i:
            raise _truncated("a sequence or array")
        for _ in range(n):
            i = _split(node.elem, f, i)
        return i
    if isinstance(node, _Struct):
        for part in node.parts:
            i = _split(part, f, i)
        return i
    if isinstance(node, _WChar):
        j = _room(f, i, 1, 1)
        return _octets(f, j + 1, f.data[j])[0]
    if isinstance(node, _Union):
        if node.flavour == "wchar" and f.minor >= 2:
            j = _room(f, i, 1, 1)
            n = f.data[j]
            i = _room(f, j + 1, n, 1) + n if n else j + 1
            key = _wchar_key(bytes(f.data[i - n : i]))
        else:
            size = 2 if node.flavour == "wchar" else node.size
            j = _room(f, i, size, size)
            i = j + size
            key = int.from_bytes(f.data[j:i], "little" if f.le else "big", signed=node.signed)
            key = int(key != 0) if node.flavour == "bool" else key
        member = node.member(key)
        return i if member is None else _split(member, f, i)
    if isinstance(node, _Ref):
        return _split(node.get(), f, i)
    return node.zero(f, i)  # a value (it starts between chunks), an any or TypeCode (inside one chunk)


def _next_chunk(f: _Frame, i: int) -> int:
    """Inside a chunked value at ``i``: start the next chunk if one follows, else leave an
    empty one (a nested value or an end tag comes next); ``f.end`` becomes its end."""
    f.end = f.full_end
    j = i + ((-(i + f.sh)) & 3)
    if j + 4 <= f.full_end:
        length = f.ul(f.data, j)[0]
        if 0 < length < _TAG_MIN:
            if j + 4 + length > f.full_end:
                raise CDRLayoutError(f"a chunk of {length} octets at offset {j} runs past the end of the data")
            if j != i:
                f.data[i:j] = bytes(j - i)
            f.end = j + 4 + length
            return j + 4
    f.end = i
    return i


def _end_of_value(f: _Frame, i: int, truncated: bool) -> int:
    """After a chunked value's state: its end tag (skipping the chunks of a truncated value's rest)."""
    if i < f.end:
        if not truncated:
            raise CDRLayoutError(f"a chunk runs {f.end - i} octets past its value's state (offset {i})")
        i = f.end
    f.end = f.full_end
    while True:
        value, j = f.ulong(i)
        if value >= 0x80000000:
            break
        if truncated and _TAG_MIN <= value <= _TAG_MAX:
            raise NestedValueError(f"a chunked value inside a truncated value's skipped state (offset {j - 4}): "
                                   "omniORB's unmarshaler cannot read one")
        if not truncated or not 0 < value < _TAG_MIN:
            raise CDRLayoutError(f"a chunked value's state ends at offset {j - 4} but no end tag follows")
        if j + value > f.full_end:
            raise CDRLayoutError(f"a chunk of {value} octets at offset {j - 4} runs past the end of the data")
        i = j + value  # the rest of a truncated value: octets of a type unknown here
    level = 0x100000000 - value
    if level != f.chunked:
        raise CDRLayoutError(f"end tag -{level} at offset {j - 4} does not close the value "
                             f"open at nesting level {f.chunked}")
    return j


def _indirection(f: _Frame, i: int, what: str) -> int:
    """After an indirection marker at ``i - 4``: check its offset names an earlier ``what``."""
    offset, j = f.ulong(i)
    target = j - 4 + offset - ((offset >> 31) << 32)
    if f.values.get(target) != what or target >= i - 4:
        raise CDRLayoutError(f"indirection at offset {i - 4} to offset {target}, where no {what} started")
    return j


def _string_or_indirection(f: _Frame, i: int, what: str) -> int:
    head, j = f.ulong(i)
    if head == _INDIRECTION:
        return _indirection(f, j, what)
    f.values[j - 4] = what
    return _STRING.zero(f, j - 4)


def _one_repo_id(f: _Frame, i: int) -> tuple[list[str], int]:
    rid, j = _repo_id(f, i)
    return [rid], j


def _repo_id(f: _Frame, i: int) -> tuple[str, int]:
    """A repository id (or an indirection to one): its text and the index after it."""
    head, j = f.ulong(i)
    if head == _INDIRECTION:
        offset, k = f.ulong(j)
        target = k - 4 + offset - ((offset >> 31) << 32)
        if f.values.get(target) != _REPO_ID or target >= j - 4:
            raise CDRLayoutError(f"indirection at offset {j - 4} to offset {target}, where no repository id started")
        return _read_string(f, target), k
    f.values[j - 4] = _REPO_ID
    end = _STRING.zero(f, j - 4)
    return bytes(f.data[j : end - 1]).decode("latin-1"), end


def _read_string(f: _Frame, i: int) -> str:
    n = f.ul(f.data, i)[0]
    return bytes(f.data[i + 4 : i + 3 + n]).decode("latin-1")


def _repo_ids(f: _Frame, i: int) -> tuple[list[str], int]:
    """A list of repository ids (or an indirection to one seen before)."""
    count, j = f.ulong(i)
    if count == _INDIRECTION:
        offset, k = f.ulong(j)
        target = k - 4 + offset - ((offset >> 31) << 32)
        if f.values.get(target) != _REPO_IDS or target >= j - 4:
            raise CDRLayoutError(f"indirection at offset {j - 4} to offset {target}, "
                                 "where no repository id list started")
        return _repo_ids(f, target)[0], k
    if count == 0 or count > (f.end - j) // 5:
        raise _truncated("a repository id list")
    f.values[j - 4] = _REPO_IDS
    ids = []
    for _ in range(count):
        rid, j = _repo_id(f, j)
        ids.append(rid)
    return ids, j


def _move_chunked(state: _Node, m: _Mover, truncated: bool) -> None:
    """Copy a chunked value's state, its source chunks read as segments, into one output chunk; then its end tag."""
    main = _Chunks(m.segs)
    pad = (-(len(m.out) + m.dsh)) & 3
    m.out += bytes(pad + 4)
    head = len(m.out)  # the output chunk's length goes before here
    m.segs, m.chunks, main.home = [(m.p, m.p, m.ssh)], main, [m.k]
    m.k, m.fe = 0, m.p
    try:
        state.move(m)
        if (m.p < m.fe or m.k + 1 < len(m.segs)) and not truncated:
            left = m.fe - m.p + sum(b - a for a, b, _ in m.segs[m.k + 1 :])
            raise CDRLayoutError(f"a chunk runs {left} octets past its value's state (offset {m.p})")
        i, k = m.segs[-1][1], main.home[-1]
    finally:
        m.segs, m.chunks = main.main, None
    while True:  # the end tag, after the chunks of a truncated value's rest (octets of a type unknown here)
        value, j, k = main.token(m, i, k)
        if value >= 0x80000000 or not truncated or not 0 < value < _TAG_MIN:
            break
        i, k = main.span(j + 4, value, k, None)
    if truncated and _TAG_MIN <= value <= _TAG_MAX:
        raise NestedValueError(f"a chunked value inside a truncated value's skipped state (offset {j}): "
                               "omniORB's unmarshaler cannot read one")
    if value < 0x80000000:
        raise CDRLayoutError(f"a chunked value's state ends at offset {j} but no end tag follows")
    if value != 0xFFFFFFFF:
        raise CDRLayoutError(f"end tag -{0x100000000 - value} at offset {j} does not close the value "
                             "open at nesting level 1")
    m.k, m.p = k, j + 4
    _, m.fe, m.ssh = main.main[k]
    length = len(m.out) - head
    if length:
        m.out[head - 4 : head] = length.to_bytes(4, "little" if m.le else "big")
    else:  # no state: no chunk (a chunk holds at least one octet)
        del m.out[head - 4 - pad :]
    m.out += bytes((-(len(m.out) + m.dsh)) & 3) + b"\xff\xff\xff\xff"


class _Chunks:
    """A chunked value's source chunks as the mover's segments: called when they run
    out, it appends the next chunk (split where it crosses a GIOP 1.1 fragment).

    Positions are indices in the source, which are the sender's stream positions
    (the senders count the octets of a fragment train without its headers).
    """

    __slots__ = ("main", "home")

    def __init__(self, main: list[tuple[int, int, int]]) -> None:
        self.main = main  # the body's segments: message body, then each fragment payload
        self.home: list[int] = []  # for each chunk segment, the body segment it lies in

    def __call__(self, m: _Mover) -> None:
        length, j, k = self.token(m, m.segs[-1][1], self.home[-1])
        if not 0 < length < _TAG_MIN:
            raise CDRLayoutError(f"a value's state ends before its members do (offset {j})")
        if j + 4 + length > self.main[-1][1]:
            raise CDRLayoutError(f"a chunk of {length} octets at offset {j} runs past the end of the data")
        self.span(j + 4, length, k, m.segs)

    def token(self, m: _Mover, i: int, k: int) -> tuple[int, int, int]:
        """The aligned ulong at or after index ``i`` of body segment ``k`` or a later one: (value, index, segment)."""
        while True:
            a, b, ssh = self.main[k]
            j = max(i, a)
            j += (-(j + ssh)) & 3
            if j + 4 <= b:
                return int(m.ul(m.src, j)[0]), j, k
            if j < b:
                raise CDRLayoutError(f"a ulong is split across fragments (offset {j})")
            k += 1
            if k >= len(self.main):
                raise _truncated("a ulong")

    def span(self, i: int, n: int, k: int, out: list[tuple[int, int, int]] | None) -> tuple[int, int]:
        """Step over ``n`` octets from index ``i`` of body segment ``k`` (appending them to
        ``out`` as segments, if given): where they end, and in which body segment."""
        while True:
            a, b, ssh = self.main[k]
            i = max(i, a)
            c = min(n, b - i)
            if c > 0:
                if out is not None:
                    out.append((i, i + c, ssh))
                    self.home.append(k)
                i, n = i + c, n - c
            if not n:
                return i, k
            k += 1
            if k >= len(self.main):
                raise CDRLayoutError(f"a chunk runs {n} octets past the end of the data")


def _between_chunks(m: _Mover) -> None:
    """Before a value token in a chunked value's state: if the current chunk is used
    up and no chunk follows, the token (a null or an indirection) sits between chunks:
    make it the next segment."""
    j = m.p + ((-(m.p + m.ssh)) & 3)
    if j + 4 <= m.fe or m.k + 1 < len(m.segs):
        return
    main = m.chunks
    assert isinstance(main, _Chunks)
    value, j, k = main.token(m, m.fe, main.home[-1])
    if 0 < value < _TAG_MIN:
        return  # a chunk: the walk continues in it
    main.span(j, 4, k, m.segs)
    if value == _INDIRECTION:  # its offset may be in the next fragment
        _, j, k = main.token(m, j + 4, k)
        main.span(j, 4, k, m.segs)


def _move_indirection(m: _Mover, what: str) -> tuple[str, ...]:
    """Copy an indirection's offset (the marker is copied), pointed at the same target in the output."""
    order: Literal["little", "big"] = "little" if m.le else "big"
    offset = int.from_bytes(m.prim(4, 4), order, signed=True)
    hit = m.values.get(m.p - 4 + offset)
    if hit is None or hit[1] != what:
        raise CDRLayoutError(f"indirection at offset {m.p - 8} to offset {m.p - 4 + offset}, where no {what} started")
    m.out[-4:] = (hit[0] - (len(m.out) - 4)).to_bytes(4, order, signed=True)
    return hit[2]


def _move_string(m: _Mover, what: str) -> tuple[str, ...]:
    """Copy a repository id or codebase URL (or an indirection to one) unchanged: (its text,)."""
    n = m.ulong()
    src, out = m.p - 4, len(m.out) - 4
    if n == _INDIRECTION:
        return _move_indirection(m, what)
    if not 0 < n <= m.left():
        raise _truncated(f"a {what}")
    m.run(n)
    if m.out[-1]:
        raise CDRLayoutError(f"a {what} at offset {src} is not NUL-terminated")
    text = (bytes(m.out[-n:-1]).decode("latin-1"),)
    m.values[src] = (out, what, text)
    return text


def _move_repo_ids(m: _Mover) -> tuple[str, ...]:
    """Copy a list of repository ids (or an indirection to one seen before)."""
    count = m.ulong()
    src, out = m.p - 4, len(m.out) - 4
    if count == _INDIRECTION:
        return _move_indirection(m, _REPO_IDS)
    if count == 0 or count > m.left() // 5:
        raise _truncated("a repository id list")
    ids = tuple(rid for _ in range(count) for rid in _move_string(m, _REPO_ID))
    m.values[src] = (out, _REPO_IDS, ids)
    return ids


def _zero_values(node: _Value, f: _Frame, i: int, n: int) -> int:
    """Walk a run of ``n`` values of ``node`` from ``i`` in one loop: the end, or -1 to leave it to
    the per-value walk, which this original always does (its C twin walks the common forms)."""
    return -1


# With the compiled accelerator, runs of values are walked in C first (``_Value.zero_many``).
_accelerator.twin(__name__, "_zero_values", "pyorb.marshal.layout._cvalues")
