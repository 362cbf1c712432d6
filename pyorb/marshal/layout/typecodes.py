"""TypeCodes on the wire: anys and TypeCode values, whose types are read from
the data itself (with indirections, encapsulations and bounds on both)."""

from __future__ import annotations

from typing import Callable, Literal

from pyorb.marshal.layout.kinds import (
    CDRLayoutError, TC_INDIRECTION, TV_ABSTRACT, TV_ALIAS, TV_ANY, TV_ARRAY, TV_COMPONENT, TV_ENUM, TV_EVENT,
    TV_EXCEPT, TV_FIXED, TV_HOME, TV_LOCAL, TV_NATIVE, TV_NULL, TV_OBJREF, TV_PRINCIPAL, TV_SEQUENCE, TV_STRING,
    TV_STRUCT, TV_TYPECODE, TV_UNION, TV_VALUE, TV_VALUE_BOX, TV_WCHAR, TV_WSTRING, _DISCS, _PRIMS, _U16,
    _UNSUPPORTED, _truncated,
)
from pyorb.marshal.layout.cursors import _Frame, _Mover
from pyorb.marshal.layout.nodes import (
    _Fixed, _Node, _OBJREF, _OCTETS, _Prim, _Ref, _STRING, _ULONG, _Union, _Unsupported, _array, _fixed_node,
    _read_disc, _sequence, _struct, _wide,
)
from pyorb.marshal.layout.valuetypes import _Value


class _Any(_Node):
    """A TypeCode, then a value of that type."""

    __slots__ = ()

    def zero(self, f: _Frame, i: int) -> int:
        f.enter("any values")
        try:
            node, _, i = _zero_typecode(f, i)
            return node.zero(f, i)
        finally:
            f.nest -= 1

    def move(self, m: _Mover) -> None:
        m.enter("any values")
        try:
            _move_typecode(m)[0].move(m)
        finally:
            m.nest -= 1


class _TypeCodeValue(_Node):
    """A TypeCode as a value."""

    __slots__ = ()

    def zero(self, f: _Frame, i: int) -> int:
        return _zero_typecode(f, i)[2]

    def move(self, m: _Mover) -> None:
        _move_typecode(m)


_SHARED: dict[int, _Node] = {
    **{kind: _Prim(*size_align) for kind, size_align in _PRIMS.items()},
    TV_ANY: _Any(), TV_TYPECODE: _TypeCodeValue(), TV_PRINCIPAL: _OCTETS, TV_OBJREF: _OBJREF,
}  # fmt: skip


def _simple_node(kind: int, minor: int) -> _Node | None:
    """Nodes for kinds with no parameters (None for the others)."""
    if kind == TV_WCHAR:
        return _wide(kind, minor)
    if kind in _UNSUPPORTED:
        return _Unsupported(_UNSUPPORTED[kind])
    return _SHARED.get(kind)


TCInfo = tuple[_Node, int]


_TCMap = dict[int, TCInfo]


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
    f.typecode_size(length)
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


def _tc_string(f: _Frame, i: int) -> tuple[str, int]:
    """A string parameter of a TypeCode (a repository id): its text and the index after it."""
    j = f.ulong(i)[1]
    end = _STRING.zero(f, i)
    return bytes(f.data[j : end - 1]).decode("latin-1"), end


def _tc_value_box(f: _Frame, i: int) -> tuple[TCInfo, int]:
    """Repository id, name, the boxed type."""
    repo_id, i = _tc_string(f, i)
    content, _, i = _zero_typecode(f, _STRING.zero(f, i))
    return (_Value(repo_id, True, lambda: content, _registry(f.minor)), TV_VALUE_BOX), i


def _tc_value(f: _Frame, i: int, kind: int = TV_VALUE) -> tuple[TCInfo, int]:
    """Repository id, name, modifier, concrete base (tk_null if none), then
    (name, type, visibility) per member: the state is the base's members, then these."""
    repo_id, i = _tc_string(f, i)
    i = f.prim(_STRING.zero(f, i), 2)[1]
    base, base_kind, i = _zero_typecode(f, i)
    if base_kind not in (TV_NULL, kind):
        raise CDRLayoutError(f"the concrete base of value type {repo_id!r} is a TypeCode of kind {base_kind}")
    members, i = _tc_members(f, i, True)

    def state() -> _Node:
        if base_kind == TV_NULL:
            return _struct(members)
        inherited = base.get() if isinstance(base, _Ref) else base
        assert isinstance(inherited, _Value)  # a tk_value TypeCode's node
        return _struct([inherited.state(), *members])

    return (_Value(repo_id, False, state, _registry(f.minor)), TV_VALUE), i


def _tc_event(f: _Frame, i: int) -> tuple[TCInfo, int]:
    """Event types are parsed (so their TypeCodes get scrubbed) but not walkable."""
    return (_Unsupported(_UNSUPPORTED[TV_EVENT]), TV_EVENT), _tc_value(f, i, TV_EVENT)[1]


def _registry(minor: int) -> Callable[[str], _Value | None]:
    """The value types this process has loaded, by repository id (a derived value in an any of its base)."""
    from pyorb.marshal.layout.descriptors import _find_value  # compiles descriptors, so it imports this module

    return _find_value(minor)


_TC_PARSERS: dict[int, Callable[[_Frame, int], tuple[TCInfo, int]]] = {
    TV_STRUCT: _tc_struct(TV_STRUCT), TV_EXCEPT: _tc_struct(TV_EXCEPT), TV_UNION: _tc_union, TV_ENUM: _tc_enum,
    TV_SEQUENCE: _tc_sequence, TV_ARRAY: _tc_array, TV_ALIAS: _tc_alias,
    TV_VALUE: _tc_value, TV_VALUE_BOX: _tc_value_box, TV_EVENT: _tc_event,
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
    m.typecode_size(length)
    start = len(m.out)
    m.run(length)
    outer = _Frame(m.out, start + length, m.dsh, m.le, m.minor, m.tcs, 0, len(m.src), m.bounds)
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
