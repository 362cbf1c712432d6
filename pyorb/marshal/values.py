"""Walking a Python value by its omniidl descriptor, to change what sits at its leaves.

Object references (:mod:`pyorb.marshal.references`) and wide text
(:mod:`pyorb.marshal.wide`) both need values changed at every depth of a
struct, exception, union, sequence, array, alias or any: this is the one
walk they share.
"""

from __future__ import annotations

from typing import Any, Callable

import omniORB
from omniORB import CORBA

from pyorb.marshal.layout.descriptors import value_members
from pyorb.marshal.orb import Descriptor

TV_ANY, TV_STRUCT, TV_UNION, TV_SEQUENCE, TV_ARRAY, TV_ALIAS, TV_EXCEPT = 11, 15, 16, 19, 20, 21, 22
TV_INDIRECT = -1
TV_INDIRECT_RECEIVED = 0xFFFFFFFF  # the same, in the descriptors omniORBpy builds from a received TypeCode
TV_VALUE, TV_VALUE_BOX = 29, 30


def resolve(desc: Descriptor) -> Descriptor:
    """``desc`` without aliases and recursion placeholders."""
    while isinstance(desc, tuple):
        if desc[0] == TV_ALIAS:
            desc = desc[3]
        elif desc[0] == TV_INDIRECT or desc[0] == TV_INDIRECT_RECEIVED:
            target = desc[1][0]
            desc = omniORB.findType(target) if isinstance(target, str) else target
        else:
            break
    return desc


def map_leaves(
    desc: Descriptor, value: Any, inside: Callable[[Descriptor], bool], is_leaf: Callable[[Descriptor], bool],
    leaf: Callable[[Descriptor, Any], Any], *, rebuild: bool = True, seen: set[int] | None = None,
    into_values: bool = False,
) -> Any:
    """``value`` (of type ``desc``) with ``leaf(leaf type, value)`` applied at every
    depth where ``is_leaf`` holds; ``inside(desc)`` says whether a type can
    hold a leaf at all (the walk skips what cannot).

    ``rebuild`` makes new structs, exceptions and unions of their generated
    classes (values about to be marshaled must not be changed under their
    owner); otherwise they are changed in place (values just unmarshaled).
    An any is walked by its TypeCode and keeps it.  Value types are left as
    they are, or with ``into_values`` (values just unmarshaled, which nobody
    else holds) changed in place, each object once (``seen``: they may be
    shared or cyclic).
    """
    if value is None or not inside(desc):
        return value
    desc = resolve(desc)
    if is_leaf(desc):
        return leaf(desc, value)
    kind = desc[0] if isinstance(desc, tuple) else desc
    if kind in (TV_VALUE, TV_VALUE_BOX):
        if not into_values:
            return value
        if kind == TV_VALUE_BOX:
            return map_leaves(desc[4], value, inside, is_leaf, leaf, rebuild=rebuild, seen=seen, into_values=True)
        seen = set() if seen is None else seen
        if id(value) in seen:
            return value
        seen.add(id(value))
        actual = omniORB.findType(getattr(value, "_NP_RepositoryId", desc[2]))
        actual = actual if isinstance(actual, tuple) and actual[0] == TV_VALUE else desc
        for name, member in value_members(actual):
            setattr(value, name, map_leaves(member, getattr(value, name), inside, is_leaf, leaf, rebuild=rebuild,
                                            seen=seen, into_values=True))
        return value
    if kind in (TV_SEQUENCE, TV_ARRAY):
        return [map_leaves(desc[1], v, inside, is_leaf, leaf, rebuild=rebuild, seen=seen, into_values=into_values) for v in value]
    if kind in (TV_STRUCT, TV_EXCEPT):
        names, types = desc[4::2], desc[5::2]
        if rebuild:
            return desc[1](*(map_leaves(d, getattr(value, n), inside, is_leaf, leaf, rebuild=rebuild, seen=seen,
                                        into_values=into_values)
                             for n, d in zip(names, types)))
        for name, member in zip(names, types):
            setattr(value, name, map_leaves(member, getattr(value, name), inside, is_leaf, leaf, rebuild=rebuild,
                                            seen=seen, into_values=into_values))
        return value
    if kind == TV_UNION:
        arm = desc[8].get(value._d, desc[7])
        if arm is None:  # a discriminant with no member (an implicit default)
            return value
        inner = map_leaves(arm[2], value._v, inside, is_leaf, leaf, rebuild=rebuild, seen=seen, into_values=into_values)
        if rebuild:
            return desc[1](value._d, inner)
        value._v = inner
        return value
    if kind == TV_ANY:
        if not isinstance(value, CORBA.Any) or not inside(value._t._d):
            return value  # (not an any at all: omniORB says BAD_PARAM)
        return CORBA.Any(value._t, map_leaves(value._t._d, value._v, inside, is_leaf, leaf, rebuild=rebuild, seen=seen, into_values=into_values))
    return value


def children(desc: Descriptor) -> list[Descriptor]:
    """The types directly inside a type (members, elements, arms, a box's content)."""
    kind = desc[0] if isinstance(desc, tuple) else desc
    if kind in (TV_SEQUENCE, TV_ARRAY):
        return [desc[1]]
    if kind in (TV_STRUCT, TV_EXCEPT):
        return list(desc[5::2])
    if kind == TV_UNION:
        return [arm[2] for arm in desc[6]]
    if kind == TV_VALUE_BOX:
        return [desc[4]]
    if kind == TV_VALUE:
        return [t for _, t in value_members(desc)]
    return []


def in_value_state(descs: tuple[Descriptor, ...], found: Callable[[Descriptor], bool]) -> bool:
    """Whether a type for which ``found`` is true can sit in the state of a value type inside
    ``descs`` (a box's content included; by the declared types, recursive ones included)."""
    seen: set[int] = set()
    todo = [(d, False) for d in descs]
    while todo:
        desc, inside = todo.pop()
        desc = resolve(desc)
        if inside and found(desc):
            return True
        key = id(desc) * 2 + inside
        if key in seen:
            continue
        seen.add(key)
        kind = desc[0] if isinstance(desc, tuple) else desc
        inner = inside or kind in (TV_VALUE, TV_VALUE_BOX)
        todo.extend((child, inner) for child in children(desc))
    return False


def values_can_nest(descs: tuple[Descriptor, ...], inside: bool = False) -> bool:
    """Whether a value of ``descs`` (inside a value type's state if ``inside``) can hold a
    value type inside a value type's state (by the declared types; a derived value may
    add members of its own, and an any may hold anything)."""
    seen: set[int] = set()
    todo = [(d, inside) for d in descs]
    while todo:
        desc, inside = todo.pop()
        desc = resolve(desc)
        kind = desc[0] if isinstance(desc, tuple) else desc
        if kind == TV_ANY or (kind in (TV_VALUE, TV_VALUE_BOX) and inside):
            return True
        key = id(desc) * 2 + inside
        if key in seen:
            continue
        seen.add(key)
        inner = inside or kind in (TV_VALUE, TV_VALUE_BOX)
        todo.extend((child, inner) for child in children(desc))
    return False


def nested_value(desc: Descriptor, value: Any, inside: bool = False) -> bool:
    """Whether ``value`` (of type ``desc``) holds a value (not None) inside a value type's state
    (an any's content included)."""
    if value is None:
        return False
    desc = resolve(desc)
    kind = desc[0] if isinstance(desc, tuple) else desc
    if kind in (TV_VALUE, TV_VALUE_BOX):
        if inside:
            return True
        if kind == TV_VALUE:  # the value's own type: a derived one may hold more
            actual = omniORB.findType(getattr(value, "_NP_RepositoryId", desc[2]))
            desc = actual if isinstance(actual, tuple) and actual[0] == TV_VALUE else desc
            return any(nested_value(t, getattr(value, n, None), True) for n, t in value_members(desc))
        return nested_value(desc[4], value, True)
    if kind in (TV_SEQUENCE, TV_ARRAY):
        if isinstance(desc[1], int) and desc[1] != TV_ANY:  # primitives: no values inside (and octets come as bytes)
            return False
        return any(nested_value(desc[1], v, inside) for v in value)
    if kind in (TV_STRUCT, TV_EXCEPT):
        return any(nested_value(t, getattr(value, n, None), inside) for n, t in zip(desc[4::2], desc[5::2]))
    if kind == TV_UNION:
        arm = desc[8].get(value._d, desc[7])
        return arm is not None and nested_value(arm[2], value._v, inside)
    if kind == TV_ANY and isinstance(value, CORBA.Any):  # walked only where its TypeCode allows a value
        held = value._t._d
        if isinstance(held, int) and held != TV_ANY:  # a primitive
            return False
        return _can_nest(held, inside) and nested_value(held, value._v, inside)
    return False


_can_nest_cache: dict[tuple[int, bool], tuple[Descriptor, bool]] = {}


def _can_nest(desc: Descriptor, inside: bool) -> bool:
    """:func:`values_can_nest` for an any's type, cached by identity (the entry keeps the descriptor alive)."""
    hit = _can_nest_cache.get((id(desc), inside))
    if hit is None:
        if len(_can_nest_cache) > 4096:
            _can_nest_cache.clear()
        hit = _can_nest_cache[(id(desc), inside)] = (desc, values_can_nest((desc,), inside))
    return hit[1]
