"""The servant of idl/values.idl (served by ``pyorb serve`` and by omniORBpy's
``pyorb.testing.omnipeer``), and the omniORBpy client calls of
tests/interop/test_values_interop.py."""

from __future__ import annotations

from typing import Any

import Values  # loaded by `--idl idl/values.idl`
import Values__POA
from omniORB import CORBA


class Echo(Values__POA.Echo):  # type: ignore[misc]
    """Every operation answers with what it was given."""

    def echo_point(self, p: Any) -> Any:
        return p

    def echo_points(self, ps: Any) -> Any:
        return ps

    def echo_triple(self, ps: Any) -> Any:
        return ps

    def echo_holder(self, h: Any) -> Any:
        return h

    def echo_choice(self, c: Any) -> Any:
        return c

    def echo_anything(self, a: Any) -> Any:
        return a

    def echo_chain(self, n: Any) -> Any:
        return n

    def echo_label(self, label: Any) -> Any:
        return label

    def echo_wlabel(self, label: Any) -> Any:
        return label

    def echo_longs(self, longs: Any) -> Any:
        return longs

    def echo_pair(self, pair: Any) -> Any:
        return pair

    def echo_secret(self, s: Any) -> Any:
        return s

    def echo_twice(self, p: Any) -> Any:
        return [p, p]

    def echo_labelled(self, labelled: Any) -> Any:
        return labelled

    def echo_bag(self, bag: Any) -> Any:
        return bag

    def refuse(self, p: Any) -> None:
        raise Values.Refused(p)


class Nested(Values__POA.Nested):  # type: ignore[misc]
    """Answers values nested in values with plain results."""

    def lose(self, n: Any) -> None:
        raise Values.Lost(n)

    def chain_length(self, n: Any) -> int:
        return len(_nodes(n))

    def describe(self, labelled: Any) -> str:
        ids = [node.id for node in _nodes(labelled.chain)]
        return f"{labelled.caption}@{labelled.at.name}:{ids}"

    def call_through(self, carrier: Any) -> str:
        return str(carrier.target.echo_label(f"through {carrier.n}"))

    def give_carrier(self) -> Any:
        poa = self._default_POA()  # the root POA, which the peer leaves holding requests
        poa._get_the_POAManager().activate()
        return Values.Carrier(Echo()._this(), 5)


def _nodes(n: Any) -> list[Any]:
    seen: list[Any] = []
    while n is not None and not any(n is m for m in seen):
        seen.append(n)
        n = n.next
    return seen


def nested_calls(nested: Any) -> dict[str, Any]:
    """Values inside values through ``nested`` (an omniORB or a pyorb blocking reference)."""
    chain = Values.Node(1, Values.Node(2, Values.Node(3, None)))
    cycle = Values.Node(7, None)
    cycle.next = Values.Node(8, cycle)
    p = Values.Point(1, 2, "at")
    return {
        "chain": nested.chain_length(chain),
        "cycle": nested.chain_length(cycle),
        "labelled": nested.describe(Values.Labelled("lábel", p, chain)),
        "null members": nested.describe(Values.Labelled(None, Values.Point3(0, 0, "p3", 0.5), None)),
    }


def reference_calls(nested: Any, echo: Any) -> dict[str, Any]:
    """References inside values through ``nested``: ``echo`` (a reference of the caller's) sent in
    a value, and a value holding the server's own reference called back."""
    got = nested.give_carrier()
    return {"sent": nested.call_through(Values.Carrier(echo, 3)), "received": [got.n, got.target.echo_label("back")]}


REFERENCE_EXPECTED = {"sent": "through 3", "received": [5, "back"]}
"""What :func:`reference_calls` returns against a correct peer."""


def nested_echoes(echo: Any) -> dict[str, Any]:
    """Values nested in values sent through ``echo`` and answered back: what came back, JSON-able."""
    out: dict[str, Any] = {}
    got = echo.echo_chain(Values.Node(1, Values.Node(2, Values.Node(3, None))))
    out["chain"] = [n.id for n in _nodes(got)]
    cycle = Values.Node(7, None)
    cycle.next = Values.Node(8, cycle)
    got = echo.echo_chain(cycle)
    out["cycle"] = [got.id, got.next.id, got.next.next is got]
    shared = Values.Node(5, None)
    got = echo.echo_labelled(Values.Labelled("lábel", Values.Point3(1, 2, "p3", 0.5), Values.Node(4, shared)))
    out["labelled"] = [got.caption, type(got.at).__name__, got.at.z, [n.id for n in _nodes(got.chain)]]
    got = echo.echo_labelled(Values.Labelled("t", Values.Tagged(1, 2, "t", "tag"), None))
    out["truncatable"] = [type(got.at).__name__, got.at.tag, got.chain]
    got = echo.echo_labelled(Values.Labelled(None, None, None))
    out["nulls"] = [got.caption, got.at, got.chain]
    p = Values.Point(3, 4, "in")
    got = echo.echo_bag(Values.Bag(Values.Holder(9, p, "l"), [p, None, Values.Point(5, 6, "o")]))
    out["bag"] = [got.held.flag, got.held.p.name, got.held.l, got.held.p is got.many[0], got.many[1],
                  got.many[2].name]
    out["in anys"] = _nested_in_anys(echo, cycle)
    return out


def _nested_in_anys(echo: Any, cycle: Any) -> list[Any]:
    """Values nested in values inside anys (as Java RMI-IIOP sends ``Object`` parameters): a
    chain and a cycle by the recursive TypeCode, a derived value in a value of its base's TypeCode,
    one inside an any inside an any, values in a value's struct and sequence, and a user exception."""
    chain = echo.echo_anything(CORBA.Any(Values._tc_Node, Values.Node(1, Values.Node(2, None)))).value()
    looped = echo.echo_anything(CORBA.Any(Values._tc_Node, cycle)).value()
    held = Values.Labelled("in any", Values.Point3(1, 2, "p3", 0.5), Values.Node(4, Values.Node(5, None)))
    labelled = echo.echo_anything(CORBA.Any(Values._tc_Labelled, held)).value()
    inner = CORBA.Any(Values._tc_Node, Values.Node(6, Values.Node(7, None)))
    twice = echo.echo_anything(CORBA.Any(CORBA._tc_any, inner)).value().value()
    shared = Values.Node(9, None)
    bag = Values.Bag(Values.Holder(1, Values.Point(1, 1, "h"), "l"), [Values.Point(2, 2, "m")])
    many = echo.echo_anything(CORBA.Any(Values._tc_Bag, bag)).value()
    pair = echo.echo_anything(CORBA.Any(Values._tc_Labelled, Values.Labelled(None, None, Values.Node(8, shared))))
    lost = echo.echo_anything(CORBA.Any(Values._tc_Lost, Values.Lost(Values.Node(10, Values.Node(11, None))))).value()
    return [[n.id for n in _nodes(chain)], [looped.id, looped.next.id, looped.next.next is looped],
            [labelled.caption, type(labelled.at).__name__, labelled.at.z, [n.id for n in _nodes(labelled.chain)]],
            [n.id for n in _nodes(twice)], [many.held.p.name, many.many[0].name],
            [n.id for n in _nodes(pair.value().chain)], [type(lost).__name__, [n.id for n in _nodes(lost.chain)]]]


NESTED_ECHOES = {
    "chain": [1, 2, 3], "cycle": [7, 8, True], "labelled": ["lábel", "Point3", 0.5, [4, 5]],
    "truncatable": ["Tagged", "tag", None], "nulls": [None, None, None], "bag": [9, "in", "l", True, None, "o"],
    "in anys": [[1, 2], [7, 8, True], ["in any", "Point3", 0.5, [4, 5]], [6, 7], ["h", "m"], [8, 9],
                ["Lost", [10, 11]]],
}
"""What :func:`nested_echoes` returns against a correct peer."""


def omni_nested_echoes(orb: Any, obj: Any) -> dict[str, Any]:
    """``omni_call`` entry: :func:`nested_echoes` from an omniORBpy client."""
    return nested_echoes(obj)


def omni_nested_calls(orb: Any, obj: Any) -> dict[str, Any]:
    """``omni_call`` entry: :func:`nested_calls` from an omniORBpy client."""
    return nested_calls(obj)


def lost_chain(nested: Any) -> list[Any]:
    """A chain ending in a cycle sent to ``nested.lose``, which raises it back in ``Values.Lost``:
    the ids that came back and whether the cycle held."""
    cycle = Values.Node(7, None)
    cycle.next = Values.Node(8, cycle)
    try:
        nested.lose(Values.Node(1, cycle))
    except Values.Lost as exc:
        chain = exc.chain
        return [chain.id, chain.next.id, chain.next.next.id, chain.next.next.next is chain.next]
    return ["not raised"]


LOST = [1, 7, 8, True]
"""What :func:`lost_chain` returns against a correct peer."""


def omni_lost_chain(orb: Any, obj: Any) -> list[Any]:
    """``omni_call`` entry: :func:`lost_chain` from an omniORBpy client."""
    return lost_chain(obj)


NESTED_EXPECTED = {"chain": 3, "cycle": 2, "labelled": "lábel@at:[1, 2, 3]", "null members": "None@p3:[]"}
"""What :func:`nested_calls` returns against a correct peer."""


def calls(echo: Any, exceptions: bool = True, wide: bool = True, large: bool = True) -> dict[str, Any]:
    """Every case through ``echo`` (an omniORB or a pyorb blocking reference): what came back, JSON-able.

    ``exceptions=False`` leaves out the user exception holding a value: an
    omniORBpy server cannot send one (its reply fails with
    MARSHAL_CannotReserveOutputSpace and it answers MessageError); ``wide=False``
    the boxed wstring (pyorb sends wide text inside values in the GIOP 1.2 form only); ``large=False``
    the sequence of values larger than omniORB's 8 KiB buffer (over GIOP 1.0, which has no fragments,
    omniORB cannot write one: MARSHAL_CannotReserveOutputSpace)."""
    p = Values.Point(1, -2, "név")
    out: dict[str, Any] = {}
    got = echo.echo_point(p)
    out["point"] = [type(got).__name__, got.x, got.y, got.name]
    got = echo.echo_point(Values.Point3(1, 2, "d", 3.5))
    out["derived"] = [type(got).__name__, got.z]
    got = echo.echo_point(Values.Tagged(1, 2, "t", "tag"))
    out["truncatable"] = [type(got).__name__, got.tag]
    got = echo.echo_point(None)
    out["null"] = got is None
    got = echo.echo_points([p, p, Values.Point(3, 4, "o")])
    out["shared"] = [got[0] is got[1], got[0] is got[2], got[2].name]
    got = echo.echo_twice(p)
    out["twice"] = got[0] is got[1]
    got = echo.echo_triple([p, None, p])
    out["array"] = [got[0] is got[2], got[1] is None]
    got = echo.echo_holder(Values.Holder(1, p, "l"))
    out["holder"] = [got.flag, got.p.name, got.l]
    got = echo.echo_choice(Values.Choice(p=p))
    out["union"] = got.p.name
    out["label"] = echo.echo_label("lábel")
    if wide:
        out["wlabel"] = echo.echo_wlabel("wide ∑")
    out["longs"] = echo.echo_longs([1, 2, 3])
    got = echo.echo_pair(Values.Pair(4, 5.5))
    out["pair"] = [got.a, got.b]
    got = echo.echo_secret(Values.Secret(1.5, 7))
    out["secret"] = [got.key, got.tag]
    got = echo.echo_chain(Values.Node(1, None))
    out["chain"] = [got.id, got.next is None]
    out["any"] = _in_anys(echo, p)
    if large:
        many = [p if k % 3 == 0 else Values.Point3(k, k, f"p{k}", 0.5) for k in range(600)]
        got = echo.echo_points(many)  # over omniORB's 8 KiB buffer: a fragment train each way
        out["large"] = [len(got), got[0] is got[597], type(got[1]).__name__, got[599].name]
    if not exceptions:
        return out
    try:
        echo.refuse(p)
        out["exception"] = "not raised"
    except Values.Refused as exc:
        out["exception"] = [type(exc.where).__name__, exc.where.name]
    return out


def _in_anys(echo: Any, p: Any) -> list[Any]:
    """Values inside anys: derived where the TypeCode names the base, shared, recursive TypeCode, boxed."""
    derived = echo.echo_anything(CORBA.Any(Values._tc_Point, Values.Point3(1, 2, "d", 3.5))).value()
    shared = echo.echo_anything(CORBA.Any(Values._tc_Points, [p, p])).value()
    node = echo.echo_anything(CORBA.Any(Values._tc_Node, Values.Node(4, None))).value()
    label = echo.echo_anything(CORBA.Any(Values._tc_Label, "lábel")).value()
    null = echo.echo_anything(CORBA.Any(Values._tc_Point, None)).value()
    return [type(derived).__name__, derived.z, shared[0] is shared[1], node.id, label, null is None]


EXPECTED = {
    "point": ["Point", 1, -2, "név"], "derived": ["Point3", 3.5], "truncatable": ["Tagged", "tag"], "null": True,
    "shared": [True, False, "o"], "twice": True, "array": [True, True], "holder": [1, "név", "l"], "union": "név",
    "label": "lábel", "wlabel": "wide ∑", "longs": [1, 2, 3], "pair": [4, 5.5], "secret": [1.5, 7],
    "chain": [1, True], "any": ["Point3", 3.5, True, 4, "lábel", True],
    "large": [600, True, "Point3", "p599"], "exception": ["Point", "név"],
}
"""What :func:`calls` returns against a correct peer."""


def omni_calls(orb: Any, obj: Any) -> dict[str, Any]:
    """``omni_call`` entry: the cases from an omniORBpy client."""
    return calls(obj)


def omni_calls_10(orb: Any, obj: Any) -> dict[str, Any]:
    """``omni_call`` entry over GIOP 1.0: the cases but the boxed wstring and the large sequence."""
    return calls(obj, wide=False, large=False)


class Truncating(Echo):
    """An Echo whose echo_labelled answers with its ``at`` an ``Elsewhere::Wrapped`` (idl/values_elsewhere.idl)
    holding the chain, and the chain again: a truncatable value whose own state holds values, and an
    indirection into that state, for a receiver that does not know ``Wrapped``."""

    def echo_labelled(self, labelled: Any) -> Any:
        import Elsewhere  # loaded with idl/values_elsewhere.idl, by this peer only

        return Values.Labelled(labelled.caption, Elsewhere.Wrapped(1, 2, "w", labelled.chain), labelled.chain)


def truncated_reply(echo: Any) -> list[Any]:
    """echo_labelled through a :class:`Truncating` peer: what the Wrapped and the chain arrived as."""
    got = echo.echo_labelled(Values.Labelled("t", None, Values.Node(1, Values.Node(2, None))))
    return [type(got.at).__name__, got.at.name, [n.id for n in _nodes(got.chain)], got.at.x]


def omni_truncated_request(orb: Any, obj: Any) -> list[Any]:
    """``omni_call`` entry (idl/values_elsewhere.idl loaded): a Wrapped holding a chain, and the chain
    again, sent to an Echo that does not know Wrapped; what it answered."""
    import Elsewhere

    chain = Values.Node(1, Values.Node(2, None))
    got = obj.echo_labelled(Values.Labelled("t", Elsewhere.Wrapped(1, 2, "w", chain), chain))
    return [type(got.at).__name__, got.at.name, [n.id for n in _nodes(got.chain)], got.at.x]


TRUNCATED = ["Point", "w", [1, 2], 1]
"""What :func:`truncated_reply` and :func:`omni_truncated_request` return against a correct peer."""


def large_nested(echo: Any) -> list[Any]:
    """A Bag holding 800 values in its state (about 20 KB, over omniORB's 8 KiB buffer, so omniORB
    sends it in fragments), echoed: how many came back, and whether sharing held across them."""
    shared = Values.Point(0, 0, "shared")
    many = [shared if k % 100 == 0 else Values.Point(k, -k, f"p{k}") for k in range(800)]
    got = echo.echo_bag(Values.Bag(Values.Holder(1, shared, "l"), many))
    return [len(got.many), got.many[0] is got.many[700] is got.held.p, got.many[799].name]


LARGE_NESTED = [800, True, "p799"]
"""What :func:`large_nested` returns against a correct peer."""
