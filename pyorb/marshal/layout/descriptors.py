"""omniidl type descriptors compiled into nodes, once each (cached by ``id``;
the cache keeps the descriptor alive)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from pyorb.marshal.layout.kinds import (
    Descriptor, TC_INDIRECTION, TV_ALIAS, TV_ARRAY, TV_ENUM, TV_EXCEPT, TV_FIXED, TV_INDIRECT, TV_SEQUENCE, TV_STRING,
    TV_STRUCT, TV_UNION, TV_VALUE, TV_VALUE_BOX, TV_WSTRING, _DISCS,
)
from pyorb.marshal.layout.nodes import (
    _Counted, _Node, _Ref, _STRING, _ULONG, _Union, _array, _fixed_node, _sequence, _struct, _wide,
)
from pyorb.marshal.layout.typecodes import _simple_node
from pyorb.marshal.layout.valuetypes import _Value


class _Lazy(_Ref):
    """omniidl's ``(tv__indirect, [desc or repoId])``, compiled on first use."""

    __slots__ = ("holder", "minor")

    def __init__(self, holder: list[Any], minor: int) -> None:
        super().__init__()
        self.holder, self.minor = holder, minor

    def get(self) -> _Node:
        if self.target is None:
            self.target = _compile(_lazy_target(self.holder), self.minor)
        return self.target


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
    simple = None if kind in (TV_VALUE, TV_VALUE_BOX) else _simple_node(kind, minor)
    if simple is not None:
        return simple
    if not isinstance(desc, tuple):
        raise TypeError(f"descriptor kind {kind} needs parameters: {desc!r}")
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise TypeError(f"unknown descriptor kind {kind}: {desc!r}")
    return builder(desc, minor)


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


def _build_value(desc: tuple[Any, ...], minor: int) -> _Node:
    """omniidl's ``(tv_value, class, repoId, name, modifier, truncatable ids, base, (member, type, visibility)*)``
    or ``(tv_value_box, class, repoId, name, boxed type)``."""
    if desc[0] == TV_VALUE_BOX:
        return _Value(desc[2], True, lambda: _compile(desc[4], minor), _find_value(minor))
    return _Value(desc[2], False, lambda: _struct([_compile(m, minor) for _, m in value_members(desc)]),
                  _find_value(minor))


def value_members(desc: tuple[Any, ...]) -> list[tuple[str, Descriptor]]:
    """(name, type) of a value type's state members, its bases' first."""
    base = _strip_alias(desc[6])
    if isinstance(base, tuple) and base[0] in (TV_INDIRECT, TC_INDIRECTION):
        base = _lazy_target(base[1])
    inherited = value_members(base) if isinstance(base, tuple) and base[0] == TV_VALUE else []
    return inherited + list(zip(desc[7::3], desc[8::3]))


def _lazy_target(holder: list[Any]) -> Descriptor:
    desc = holder[0]
    if isinstance(desc, str):
        import omniORB  # the type registry, for IDL recursion by repository id

        found = omniORB.findType(desc)
        if found is None:
            raise TypeError(f"unknown recursive type {desc!r}")
        return found
    return desc


def _find_value(minor: int) -> Callable[[str], _Value | None]:
    """Looks up the node of a value type by repository id (a derived value sent as its base)."""

    def find(repo_id: str) -> _Value | None:
        import omniORB  # the type registry: the value types this process has loaded

        desc = omniORB.findType(repo_id)
        if not isinstance(desc, tuple) or desc[0] not in (TV_VALUE, TV_VALUE_BOX):
            return None
        node = _compile(desc, minor)
        return node if isinstance(node, _Value) else None

    return find


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
    TC_INDIRECTION: lambda d, mi: _Lazy(d[1], mi),  # (as omniORBpy builds it from a received TypeCode)
    TV_VALUE: _build_value,
    TV_VALUE_BOX: _build_value,
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
