"""Object references inside values: pyorb proxies in, omniORB references out, and back.

omniORB's marshaler only knows its own object references.  pyorb proxies
(and IOR strings) are turned into them before a body is marshaled, and the
references in an unmarshaled body are turned into the receiver's own
(proxies of the IDL type they arrive as), at every depth of a value.
"""

from __future__ import annotations

from typing import Any, Callable

from omniORB import CORBA

from pyorb.marshal.orb import Descriptor, ensure_orb
from pyorb.marshal.values import TV_INDIRECT, TV_VALUE, TV_VALUE_BOX, in_value_state, map_leaves, resolve

TV_OBJREF, TV_STRUCT, TV_UNION, TV_SEQUENCE, TV_ARRAY, TV_ALIAS, TV_EXCEPT = 14, 15, 16, 19, 20, 21, 22

ObjrefHook = Callable[[Any], Any]
ObjrefConverter = Callable[[Any, str], Any]
"""Turns a received omniORB reference into the receiver's own, given the
repository id of its static IDL type (the parameter's, result's or
member's): a reference's own type id may be empty (one made from a
corbaloc URL) or name a type unknown here."""
_to_omni_hook: ObjrefHook | None = None


def set_objref_hook(hook: ObjrefHook) -> None:
    """Install the function that turns a pyorb proxy into an omniORB objref."""
    global _to_omni_hook
    _to_omni_hook = hook


# Descriptors are long-lived module globals and may hold dicts (unions), so
# they are cached by identity; the cache keeps each one alive.
_objref_cache: dict[int, tuple[Descriptor, bool]] = {}

TV_ANY = 11


def _has_objref(desc: Descriptor) -> bool:
    """True if a value of ``desc`` can hold an object reference at any depth."""
    if not isinstance(desc, tuple):
        return bool(desc == TV_ANY)  # an any's content is known only per value
    hit = _objref_cache.get(id(desc))
    if hit is None:
        hit = _objref_cache[id(desc)] = (desc, _scan_objref(desc))
    return hit[1]


def _scan_objref(desc: tuple[Any, ...]) -> bool:
    kind = desc[0]
    if kind in (TV_OBJREF, TV_INDIRECT):  # a recursive type: the type around it is being scanned
        return True
    if kind in (TV_SEQUENCE, TV_ARRAY):
        return _has_objref(desc[1])
    if kind == TV_ALIAS:
        return _has_objref(desc[3])
    if kind in (TV_STRUCT, TV_EXCEPT):
        return any(_has_objref(d) for d in desc[5::2])
    if kind == TV_UNION:
        return any(_has_objref(arm[2]) for arm in desc[6])
    if kind in (TV_VALUE, TV_VALUE_BOX):
        return value_holds_objref(desc)
    return False


def value_holds_objref(desc: Descriptor) -> bool:
    """True if ``desc`` is (or holds) a value type whose state can hold an object reference
    (by the declared types, recursive ones included)."""
    return in_value_state((desc,), _is_objref)


def _is_objref(desc: Descriptor) -> bool:
    return isinstance(desc, tuple) and desc[0] == TV_OBJREF


Leaf = Callable[[Any, str], Any]


def _walk(desc: Descriptor, value: Any, leaf: Leaf, into_values: bool = False) -> Any:
    """``value`` (of IDL type ``desc``) with every object reference in it,
    at any depth, replaced by ``leaf(reference, static repository id)``
    (inside value types too if ``into_values``: they are changed in place)."""
    return map_leaves(desc, value, _has_objref, _is_objref, lambda d, ref: leaf(ref, d[1]), into_values=into_values)


def _omni_ref(value: Any, _static: str) -> Any:
    if isinstance(value, CORBA.Object):
        return value
    if isinstance(value, str):  # an IOR string or a corbaloc/corbaname URL
        return _string_to_object(value)
    if _to_omni_hook is None:
        return value
    return _to_omni_hook(value)


def to_omni(desc: Descriptor, value: Any) -> Any:
    """Replace pyorb proxies (and IOR strings) anywhere in ``value`` by omniORB object references."""
    return _walk(desc, value, _omni_ref)


def _string_to_object(text: str) -> Any:
    try:
        return ensure_orb().string_to_object(text)
    except CORBA.SystemException as exc:
        raise CORBA.BAD_PARAM(exc.minor, CORBA.COMPLETED_NO) from None


def from_omni(desc: Descriptor, value: Any, convert: ObjrefConverter) -> Any:
    """Replace the omniORB object references anywhere in ``value`` using ``convert``
    (the value types in a just unmarshaled ``value`` are changed in place)."""
    return _walk(desc, value, convert, into_values=True)
