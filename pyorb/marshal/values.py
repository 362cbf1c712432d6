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

from pyorb.marshal.orb import Descriptor

TV_ANY, TV_STRUCT, TV_UNION, TV_SEQUENCE, TV_ARRAY, TV_ALIAS, TV_EXCEPT = 11, 15, 16, 19, 20, 21, 22
TV_INDIRECT = -1


def resolve(desc: Descriptor) -> Descriptor:
    """``desc`` without aliases and recursion placeholders."""
    while isinstance(desc, tuple):
        if desc[0] == TV_ALIAS:
            desc = desc[3]
        elif desc[0] == TV_INDIRECT:
            target = desc[1][0]
            desc = omniORB.findType(target) if isinstance(target, str) else target
        else:
            break
    return desc


def map_leaves(
    desc: Descriptor, value: Any, inside: Callable[[Descriptor], bool], is_leaf: Callable[[Descriptor], bool],
    leaf: Callable[[Descriptor, Any], Any], *, rebuild: bool = True,
) -> Any:
    """``value`` (of type ``desc``) with ``leaf(leaf type, value)`` applied at every
    depth where ``is_leaf`` holds; ``inside(desc)`` says whether a type can
    hold a leaf at all (the walk skips what cannot).

    ``rebuild`` makes new structs, exceptions and unions of their generated
    classes (values about to be marshaled must not be changed under their
    owner); otherwise they are changed in place (values just unmarshaled).
    An any is walked by its TypeCode and keeps it; value types are left as
    they are (pyorb does not send them).
    """
    if value is None or not inside(desc):
        return value
    desc = resolve(desc)
    if is_leaf(desc):
        return leaf(desc, value)
    kind = desc[0] if isinstance(desc, tuple) else desc
    if kind in (TV_SEQUENCE, TV_ARRAY):
        return [map_leaves(desc[1], v, inside, is_leaf, leaf, rebuild=rebuild) for v in value]
    if kind in (TV_STRUCT, TV_EXCEPT):
        names, types = desc[4::2], desc[5::2]
        if rebuild:
            return desc[1](*(map_leaves(d, getattr(value, n), inside, is_leaf, leaf, rebuild=rebuild)
                             for n, d in zip(names, types)))
        for name, member in zip(names, types):
            setattr(value, name, map_leaves(member, getattr(value, name), inside, is_leaf, leaf, rebuild=rebuild))
        return value
    if kind == TV_UNION:
        arm = desc[8].get(value._d, desc[7])
        if arm is None:  # a discriminant with no member (an implicit default)
            return value
        inner = map_leaves(arm[2], value._v, inside, is_leaf, leaf, rebuild=rebuild)
        if rebuild:
            return desc[1](value._d, inner)
        value._v = inner
        return value
    if kind == TV_ANY:
        if not isinstance(value, CORBA.Any) or not inside(value._t._d):
            return value  # (not an any at all: omniORB says BAD_PARAM)
        return CORBA.Any(value._t, map_leaves(value._t._d, value._v, inside, is_leaf, leaf, rebuild=rebuild))
    return value
