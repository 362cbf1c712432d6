"""Writing value types in pyorb: the bodies omniORB's in-memory marshaler cannot write.

omniORB's ``cdrMarshal`` aborts the process on a value inside a value's
state (a linked list, a tree, a value holding a boxed value) and takes only
its own object references, which pyorb cannot put into a value its caller
owns; so a body that holds a value inside a value, or a value type whose
state can hold a reference, is written here, by the omniidl descriptors, in the form omniORB
writes on the wire: every value type chunked, with its repository id only
when its class is not the declared one (a truncatable one with its list of
truncatable ids), boxes unchunked (but inside a chunked value), nulls as a zero long, and a value,
repository id or id list met again in the same body as an indirection.  A
value nested in a chunked value ends its container's chunk; the container
goes on in a new chunk after the nested value's end tag, and a value whose
state ends with a nested value shares its end tag (the nested one's is
rewritten to close both, as omniORB does).

Everything in a value's state that holds no value (numbers, strings,
structs of them, object references, pyorb proxies included) is marshaled by ``leaf`` (omniORB,
through a one-type :class:`~pyorb.marshal.body.BodyCodec`, padding zeroed),
so only the value encoding itself is pyorb's.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

import omniORB
from omniORB import CORBA

from pyorb.marshal.layout.descriptors import value_members
from pyorb.marshal.orb import Descriptor
from pyorb.marshal.values import nested_value, resolve, values_can_nest

TV_ANY, TV_TYPECODE, TV_STRUCT, TV_UNION, TV_SEQUENCE, TV_ARRAY, TV_EXCEPT = 11, 12, 15, 16, 19, 20, 22
TV_VALUE, TV_VALUE_BOX, TV_ABSTRACT, TV_EVENT = 29, 30, 32, 36
VM_TRUNCATABLE = 3

_TAG, _ONE_ID, _ID_LIST, _CHUNKED = 0x7FFFFF00, 2, 6, 8
_INDIRECTION = 0xFFFFFFFF
_REPO_ID_STRING = (18, 0)

# leaf(type, value, stream position mod 8, little endian): its CDR from that position, padding zeroed.
Leaf = Callable[[Descriptor, Any, int, bool], bytes]


def write_values(descs: tuple[Descriptor, ...], values: tuple[Any, ...], align: int, little_endian: bool,
                 leaf: Leaf, *, open_anys: bool = False) -> bytes:
    """The body of ``values`` (of ``descs``) starting at stream position ``align`` (mod 8).

    An any's content goes to ``leaf`` with its TypeCode unless it holds a value inside a value,
    or ``open_anys``: then the content is written here, its leaves by ``leaf`` (as pyorb's value
    reader reads every any, so a ``leaf`` of another wide-text form reaches into anys too)."""
    out = _Out(align % 8, little_endian, leaf, open_anys)
    try:
        for desc, value in zip(descs, values):
            out.any_type(desc, value)
    except RecursionError:
        raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, f"cannot send values nested {out.level} deep or more: "
                            "deeper than pyorb's value writer can recurse") from None
    return bytes(out.buf)


class _Out:
    """One body being written: its bytes, what an indirection may name, the chunk open now."""

    __slots__ = ("buf", "base", "le", "fmt", "leaf", "seen", "keep", "ids", "level", "chunk", "ended", "open_anys")

    def __init__(self, base: int, le: bool, leaf: Leaf, open_anys: bool = False) -> None:
        self.buf = bytearray()
        self.open_anys = open_anys
        self.base, self.le, self.leaf = base, le, leaf
        self.fmt = "<I" if le else ">I"
        self.seen: dict[int, int] = {}  # id of a value (or box content) written -> where its tag is
        self.keep: list[Any] = []  # those objects, alive while their ids are keys
        self.ids: dict[str | tuple[str, ...], int] = {}  # repository id or id list -> where it is
        self.level = 0  # chunked values open around the writer
        self.chunk: int | None = None  # where the open chunk's length goes
        self.ended = -1  # the body's length just after the last end tag written

    # -- the stream ---------------------------------------------------------

    def ulong(self, value: int) -> int:
        """Write an aligned ulong; return where it starts."""
        pad = (-(self.base + len(self.buf))) & 3
        self.buf += bytes(pad)
        at = len(self.buf)
        self.buf += struct.pack(self.fmt, value & 0xFFFFFFFF)
        return at

    def data(self) -> None:
        """State octets follow: inside a chunked value they go in a chunk (opened if none is)."""
        if self.level and self.chunk is None:
            self.chunk = self.ulong(0) + 4

    def end_chunk(self) -> None:
        if self.chunk is not None:
            struct.pack_into(self.fmt, self.buf, self.chunk - 4, len(self.buf) - self.chunk)
            self.chunk = None

    def indirection(self, target: int) -> None:
        at = self.ulong(_INDIRECTION) + 4
        self.ulong(target - at)

    # -- types --------------------------------------------------------------

    def any_type(self, desc: Descriptor, value: Any) -> None:
        """Write ``value`` of ``desc``: values here, containers of values member by member, the rest by ``leaf``."""
        desc = resolve(desc)
        kind = desc[0] if isinstance(desc, tuple) else desc
        if kind in (TV_VALUE, TV_VALUE_BOX):
            self.value(desc, value)
        elif kind in (TV_ABSTRACT, TV_EVENT):
            what = "an abstract interface" if kind == TV_ABSTRACT else "an event type"
            raise CORBA.MARSHAL(0, CORBA.COMPLETED_NO, f"cannot send {what} in a body that holds a value inside "
                                "another value's state: pyorb does not write one")
        elif not values_can_nest((desc,), True) or (
                kind == TV_ANY and not self.open_anys and not nested_value(desc, value, self.level > 0)):
            self.data()
            self.buf += self.leaf(desc, value, (self.base + len(self.buf)) & 7, self.le)
        elif kind in (TV_STRUCT, TV_EXCEPT):
            if kind == TV_EXCEPT:  # an exception's body starts with its repository id
                self.data()
                self.buf += self.leaf(_REPO_ID_STRING, desc[2], (self.base + len(self.buf)) & 7, self.le)
            for name, member in zip(desc[4::2], desc[5::2]):
                self.any_type(member, getattr(value, name))
        elif kind in (TV_SEQUENCE, TV_ARRAY):
            if kind == TV_SEQUENCE:
                if desc[2] and len(value) > desc[2]:
                    raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, f"a sequence of {len(value)} exceeds its bound {desc[2]}")
                self.data()
                self.ulong(len(value))
            elif len(value) != desc[2]:
                raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, f"an array of {desc[2]} given {len(value)} elements")
            for item in value:
                self.any_type(desc[1], item)
        elif kind == TV_UNION:
            self.any_type(desc[5], value._d)
            arm = desc[8].get(value._d, desc[7])
            if arm is not None:
                self.any_type(arm[2], value._v)
        else:  # an any holding a value inside a value: its TypeCode by omniORB, its content here
            if not isinstance(value, CORBA.Any):
                raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, f"an any given a {type(value).__name__}")
            self.data()
            self.buf += self.leaf(TV_TYPECODE, value._t, (self.base + len(self.buf)) & 7, self.le)
            self.any_type(value._t._d, value._v)

    def value(self, desc: tuple[Any, ...], value: Any) -> None:
        if value is None:
            self.data()
            self.ulong(0)
            return
        earlier = self.seen.get(id(value))
        if earlier is not None:
            self.data()
            self.indirection(earlier)
            return
        self.end_chunk()  # a value starts between its container's chunks
        actual = desc
        if desc[0] == TV_VALUE:
            rid = getattr(value, "_NP_RepositoryId", desc[2])
            if rid != desc[2]:
                found = omniORB.findType(rid)
                if not (isinstance(found, tuple) and found[0] == TV_VALUE):
                    raise CORBA.BAD_PARAM(0, CORBA.COMPLETED_NO, f"no value type {rid!r} is loaded to send")
                actual = found
        start = self.ulong(_TAG)
        self.seen[id(value)] = start
        self.keep.append(value)
        if desc[0] == TV_VALUE_BOX:  # a box's state is its content; chunked only inside a chunked value
            members: list[tuple[Any, Descriptor]] = [(None, desc[4])]
            tag = _TAG | (_CHUNKED if self.level else 0)
        else:
            members = value_members(actual)
            tag = _TAG | _CHUNKED
        if actual is not desc:
            truncatable = actual[4] == VM_TRUNCATABLE and actual[5]
            tag |= _ID_LIST if truncatable else _ONE_ID
            self.repo_ids(tuple(actual[5]) if truncatable else actual[2])
        struct.pack_into(self.fmt, self.buf, start, tag)
        if not tag & _CHUNKED:
            self.any_type(desc[4], value)
            return
        self.level += 1
        try:
            for name, member in members:
                self.any_type(member, value if name is None else getattr(value, name))
            self.end_chunk()
            if self.ended == len(self.buf):
                # A nested value's end tag comes last: it closes this value too (as omniORB writes).
                struct.pack_into(self.fmt, self.buf, self.ended - 4, -self.level & 0xFFFFFFFF)
            else:
                self.ulong(-self.level)
            self.ended = len(self.buf)
        finally:
            self.level -= 1

    def repo_ids(self, ids: str | tuple[str, ...]) -> None:
        earlier = self.ids.get(ids)
        if earlier is not None:
            self.indirection(earlier)
            return
        if isinstance(ids, tuple):
            self.ids[ids] = self.ulong(len(ids))
            for rid in ids:
                self.repo_ids(rid)
            return
        text = ids.encode("latin-1") + b"\0"
        self.ids[ids] = self.ulong(len(text))
        self.buf += text
