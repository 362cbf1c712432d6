"""pyorb's value reader: bodies holding a chunked value inside a chunked value's state.

omniORB's in-memory unmarshaler aborts on those, so pyorb reads them itself
(pyorb/marshal/valuereader.py): whatever pyorb's value writer writes comes
back the same, shared and cyclic values as the same objects, and a body that
breaks a rule of the encoding gets MARSHAL saying which.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import omniORB
from omniORB import CORBA

import pyorb
from pyorb import marshal
from pyorb.client.calls import reply_result
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.messages import GIOP_1_1, Reply, Request
from pyorb.marshal.body import BodyCodec, operation_descriptors
from pyorb.marshal.layout import Bounds
from tests.attacks import hostile_values as hostile

ROOT = Path(__file__).resolve().parents[1]
Values = pyorb.load_idl(ROOT / "idl" / "values.idl").Values
Hardening = pyorb.load_idl(ROOT / "idl" / "hardening.idl").Hardening
TV_SEQUENCE = 19
NODES = (TV_SEQUENCE, Values._d_Node, 0)

VALUE_TAG, CHUNKED_TAG, INDIRECTION = 0x7FFFFF00, 0x7FFFFF08, 0xFFFFFFFF


def roundtrip(desc: Any, value: Any, align: int, le: bool) -> Any:
    codec = BodyCodec((desc,))
    (got,) = codec.unpack(codec.pack((value,), align, le), align, le)
    return got


def cycle() -> Any:
    first = Values.Node(7, None)
    first.next = Values.Node(8, Values.Node(9, first))
    return first


@pytest.mark.parametrize("align", range(8))
@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
def test_chains_and_cycles_come_back(le: bool, align: int) -> None:
    got = roundtrip(Values._d_Node, Values.Node(1, Values.Node(2, Values.Node(3, None))), align, le)
    assert (got.id, got.next.id, got.next.next.id, got.next.next.next) == (1, 2, 3, None)
    got = roundtrip(Values._d_Node, cycle(), align, le)
    assert [got.id, got.next.id, got.next.next.id] == [7, 8, 9] and got.next.next.next is got


@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
def test_boxes_derived_truncatable_and_nulls_nested(le: bool) -> None:
    tail = Values.Node(2, None)
    got = roundtrip(Values._d_Labelled, Values.Labelled("lábel", Values.Point3(1, 2, "p", 0.5), Values.Node(1, tail)),
                    3, le)
    assert type(got.at) is Values.Point3 and (got.caption, got.at.z, got.chain.next.id) == ("lábel", 0.5, 2)
    got = roundtrip(Values._d_Labelled, Values.Labelled(None, Values.Tagged(1, 2, "t", "tag"), None), 5, le)
    assert type(got.at) is Values.Tagged and (got.caption, got.at.tag, got.chain) == (None, "tag", None)


@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
def test_values_in_a_struct_and_a_sequence_of_a_value(le: bool) -> None:
    p = Values.Point(3, 4, "in")
    got = roundtrip(Values._d_Bag, Values.Bag(Values.Holder(9, p, "l"), [p, None, Values.Point(5, 6, "o")]), 1, le)
    assert (got.held.flag, got.held.p.name, got.held.l, got.many[1], got.many[2].name) == (9, "in", "l", None, "o")
    assert got.held.p is got.many[0]


def test_a_truncated_value_nested_skips_its_unknown_state() -> None:
    # A Labelled whose ``at`` is of a type unknown here, truncatable to Values::Point: its own
    # member (a string) is skipped by chunks, the Point part read.
    def v32(n: int) -> bytes:
        return struct.pack("<I", n)

    def text(s: str) -> bytes:
        raw = s.encode() + b"\0"
        return v32(len(raw)) + raw + bytes(-len(raw) % 4)

    body = v32(CHUNKED_TAG) + v32(4) + v32(0)  # Labelled, its caption null (in a chunk)
    ids = v32(2) + text("IDL:Elsewhere/Unknown:1.0") + text(Values._d_Point[2])
    state = v32(1) + v32(2) + text("pt")
    body += v32(CHUNKED_TAG | 6) + ids + v32(len(state)) + state + v32(12) + text("more")
    body += v32(0xFFFFFFFE)  # its end tag; the chain (a null) goes on in a new chunk of the Labelled
    body += v32(4) + v32(0) + v32(0xFFFFFFFF)
    (got,) = BodyCodec((Values._d_Labelled,)).unpack(body, 0, True)
    assert (type(got.at), got.at.x, got.at.y, got.at.name, got.caption, got.chain) == (Values.Point, 1, 2, "pt", None, None)


def node_graphs() -> Any:
    """Lists of nodes, each node's next any of them (chains, sharing, cycles) or null."""

    def build(ids: list[int], links: list[int], picks: list[int]) -> list[Any]:
        nodes = [Values.Node(k, None) for k in ids]
        for node, link in zip(nodes, links):
            node.next = None if link >= len(nodes) else nodes[link]
        return [nodes[k % len(nodes)] for k in picks] if nodes else []

    return st.builds(build, st.lists(st.integers(-2**31, 2**31 - 1), max_size=8),
                     st.lists(st.integers(0, 10), min_size=8, max_size=8), st.lists(st.integers(0, 20), max_size=10))


def graph_shape(items: list[Any]) -> list[Any]:
    """Each node reachable from ``items`` once, by first reach: its id and which node its next is."""
    order: list[Any] = []
    todo = list(items)
    while todo:
        node = todo.pop(0)
        if node is not None and not any(node is seen for seen in order):
            order.append(node)
            todo.append(node.next)

    def index(node: Any) -> int | None:
        return None if node is None else next(k for k, seen in enumerate(order) if seen is node)

    return [[index(n) for n in items], [(n.id, index(n.next)) for n in order]]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=node_graphs(), le=st.booleans(), align=st.integers(0, 7))
def test_reads_back_what_the_writer_writes(nodes: list[Any], le: bool, align: int) -> None:
    assert graph_shape(roundtrip(NODES, nodes, align, le)) == graph_shape(nodes)


def v32(n: int) -> bytes:
    return struct.pack("<I", n & 0xFFFFFFFF)


def link(k: int, chunk: int) -> bytes:
    """A Hardening::Link's tag and the chunk holding its id (``chunk`` octets long)."""
    return v32(CHUNKED_TAG) + v32(chunk) + v32(k)


HOSTILE = {
    "a forward indirection": (link(1, 4) + link(2, 4) + v32(INDIRECTION) + v32(8) + v32(-1) + bytes(8),
                              "indirection at offset 24 to offset 36, where no value started"),
    "an end tag deeper than the nesting": (link(1, 4) + link(2, 8) + v32(0) + v32(-3),
                                           "end tag -3 at offset 28 is deeper than the 2 values open there"),
    "a chunk past the body": (link(1, 4) + v32(CHUNKED_TAG) + v32(0x100000) + v32(2) + v32(0) + v32(-1),
                              "a chunk of 1048576 octets at offset 16 runs past the end of the data"),
    "a cycle of indirections": (link(1, 4) + link(2, 4) + v32(INDIRECTION) + v32(-4) + v32(-1),
                                "indirection at offset 24 to offset 24, where no value started"),
    "state after a shared end tag": (link(1, 4) + link(2, 8) + v32(0) + v32(-1) + v32(4) + v32(5) + v32(-1),
                                     "12 octets left over after the values"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_nested_bodies_get_marshal(case: str) -> None:
    body, why = HOSTILE[case]
    with pytest.raises(CORBA.MARSHAL, match=why):
        BodyCodec((Hardening._d_Link,)).unpack(body, 0, True)


def test_nesting_is_bounded() -> None:
    depth = 12
    body = b"".join(link(k, 4) for k in range(depth)) + v32(4) + v32(0) + v32(-1)
    (got,) = BodyCodec((Hardening._d_Link,)).unpack(body, 0, True, bounds=Bounds(max_nesting_depth=depth))
    assert got.next.next.id == 2
    with pytest.raises(CORBA.MARSHAL, match="values nested more than 11 deep"):
        BodyCodec((Hardening._d_Link,)).unpack(body, 0, True, bounds=Bounds(max_nesting_depth=depth - 1))


def test_unchunked_nesting_is_bounded_too() -> None:
    # Values without chunks (as omniORB writes a value in a GIOP 1.0 body) nest as deep as chunked ones:
    # the reader counts every value open, not only the chunked ones.
    from pyorb.marshal.valuereader import read_values

    def leaf(desc: Any, octets: bytes, align: int) -> Any:
        return BodyCodec((desc,)).unpack(octets, align, True)[0]

    depth = 12
    body = b"".join(v32(0x7FFFFF00) + v32(k) for k in range(depth)) + v32(0)
    (got,) = read_values((Hardening._d_Link,), body, 0, True, Bounds(max_nesting_depth=depth), leaf)
    assert got.next.next.id == 2
    with pytest.raises(ValueError, match="values nested more than 11 deep"):
        read_values((Hardening._d_Link,), body, 0, True, Bounds(max_nesting_depth=depth - 1), leaf)
    deep = b"".join(v32(0x7FFFFF00) + v32(k) for k in range(100_000)) + v32(0)
    with pytest.raises(ValueError, match="values nested more than 11 deep"):
        read_values((Hardening._d_Link,), deep, 0, True, Bounds(max_nesting_depth=depth - 1), leaf)


# -- values nested in values inside anys --------------------------------------------------------

ANY = 11


def in_any(tc: Any, value: Any, align: int, le: bool) -> Any:
    got = roundtrip(ANY, CORBA.Any(tc, value), align, le)
    assert got.typecode().equal(tc)
    return got.value()


@pytest.mark.parametrize("align", range(8))
@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
def test_values_nested_in_an_any_come_back(le: bool, align: int) -> None:
    got = in_any(Values._tc_Node, cycle(), align, le)
    assert [got.id, got.next.id, got.next.next.id] == [7, 8, 9] and got.next.next.next is got
    tail = Values.Node(2, None)
    got = in_any(Values._tc_Labelled, Values.Labelled("c", Values.Point3(1, 2, "p", 0.5), Values.Node(1, tail)), align, le)
    assert type(got.at) is Values.Point3 and (got.caption, got.at.z, got.chain.next.id) == ("c", 0.5, 2)
    inner = CORBA.Any(Values._tc_Node, Values.Node(1, Values.Node(2, None)))
    got = in_any(CORBA._tc_any, inner, align, le)
    assert got.value().next.id == 2


@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
def test_an_any_inside_a_value_inside_an_any(le: bool) -> None:
    # Bag's members hold values; an any of a sequence of anys holds a Bag and a chain.
    p = Values.Point(1, 1, "h")
    items = [CORBA.Any(Values._tc_Bag, Values.Bag(Values.Holder(1, p, "l"), [p])),
             CORBA.Any(Values._tc_Node, Values.Node(3, Values.Node(4, None)))]
    got = in_any(omniORB.tcInternal.createTypeCode(ANY_SEQUENCE), items, 3, le)
    bag, chain = (a.value() for a in got)
    assert bag.held.p is bag.many[0] and bag.held.p.name == "h" and chain.next.id == 4


ANY_SEQUENCE = (TV_SEQUENCE, ANY, 0)


def test_a_value_of_a_type_only_the_typecode_names_is_an_unknown_value() -> None:
    body = BodyCodec((ANY,)).pack((CORBA.Any(Values._tc_Node, Values.Node(1, Values.Node(2, None))),), 0, True)
    renamed = body.replace(b"IDL:Values/Node:1.0", b"IDL:Values/Nodx:1.0")  # a type nobody loaded
    (got,) = BodyCodec((ANY,)).unpack(renamed, 0, True)
    node = got.value()
    assert isinstance(node, omniORB.UnknownValueBase) and type(node.next) is type(node)
    assert (node.id, node.next.id, node.next.next) == (1, 2, None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=node_graphs(), le=st.booleans(), align=st.integers(0, 7))
def test_reads_back_what_the_writer_writes_in_an_any(nodes: list[Any], le: bool, align: int) -> None:
    got = in_any(omniORB.tcInternal.createTypeCode(NODES), nodes, align, le)
    assert graph_shape(got) == graph_shape(nodes)


def test_anys_after_a_nested_value_are_bounded() -> None:
    # The layout walk stops at the first value inside a value; what follows is bounded by the reader.
    chain = CORBA.Any(Values._tc_Node, Values.Node(1, Values.Node(2, None)))
    deep = CORBA.Any(CORBA.TC_long, 5)
    for _ in range(10):
        deep = CORBA.Any(CORBA._tc_any, deep)
    codec = BodyCodec((ANY_SEQUENCE,))
    body = codec.pack(([chain, deep],), 0, True)
    assert codec.unpack(body, 0, True)[0][1].value().value() is not None
    with pytest.raises(CORBA.MARSHAL, match="anys and values nested more than 8 deep"):
        codec.unpack(body, 0, True, bounds=Bounds(max_nesting_depth=8))


def test_a_bad_typecode_after_a_nested_value_gets_marshal() -> None:
    chain = CORBA.Any(Values._tc_Node, Values.Node(1, Values.Node(2, None)))
    codec = BodyCodec((ANY_SEQUENCE,))
    body = codec.pack(([chain, CORBA.Any(CORBA.TC_long, 5)],), 0, True)
    assert body[-8:-4] == struct.pack("<I", 3)  # the second any's TypeCode: tk_long
    with pytest.raises(CORBA.MARSHAL, match="unacceptable body"):
        codec.unpack(body[:-8] + struct.pack("<I", 0x99) + body[-4:], 0, True)


@pytest.mark.parametrize("align", [0, 3])
@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
def test_an_exception_in_an_any_starts_with_its_repository_id(le: bool, align: int) -> None:
    lost = Values.Lost(Values.Node(1, Values.Node(2, None)))
    body = BodyCodec((ANY,)).pack((CORBA.Any(Values._tc_Lost, lost),), align, le)
    rid = Values._d_Lost[2].encode() + b"\0"
    assert struct.pack("<I" if le else ">I", len(rid)) + rid in body
    got = in_any(Values._tc_Lost, lost, align, le)
    assert type(got) is Values.Lost and (got.chain.id, got.chain.next.id, got.chain.next.next) == (1, 2, None)


# -- values nested in the skipped state of a truncated value ------------------------------------


def text(s: str) -> bytes:
    raw = s.encode() + b"\0"
    return v32(len(raw)) + raw + bytes(-len(raw) % 4)


def truncated_holding(nested: bytes, rest: bool = True) -> bytes:
    """A Labelled whose ``at`` is of a type unknown here, truncatable to Values::Point, ``nested``
    (values) in its own state between two chunks of it; the Labelled's chain comes after."""
    body = v32(CHUNKED_TAG) + v32(4) + v32(0)  # Labelled, its caption null (in a chunk)
    body += v32(CHUNKED_TAG | 6) + v32(2) + text("IDL:Elsewhere/Unknown:1.0") + text(Values._d_Point[2])
    state = v32(1) + v32(2) + text("pt")
    return body + v32(len(state)) + state + nested + (v32(8) + text("ab") + v32(-2) if rest else b"")


def node(rid: str | None, k: int, level: int) -> bytes:
    """A chunked Node of repository id ``rid`` (None: none, as omniORB writes a value of its declared
    type) whose next is null, closed by its own end tag at ``level``."""
    head = v32(CHUNKED_TAG) if rid is None else v32(CHUNKED_TAG | 2) + text(rid)
    return head + v32(8) + v32(k) + v32(0) + v32(-level)


@pytest.mark.parametrize("rid", [Values._d_Node[2], "IDL:Elsewhere/Node:1.0"], ids=["known", "unknown"])
def test_a_truncated_value_skips_values_nested_in_its_state(rid: str) -> None:
    body = truncated_holding(node(rid, 5, 3)) + v32(4) + v32(0) + v32(-1)  # the chain: a null
    (got,) = BodyCodec((Values._d_Labelled,)).unpack(body, 0, True)
    assert (type(got.at), got.at.name, got.chain) == (Values.Point, "pt", None)


def pointing_back(nested: bytes) -> bytes:
    """:func:`truncated_holding` ``nested``, the Labelled's chain an indirection to the first value in it."""
    body = truncated_holding(nested)
    at = len(truncated_holding(b"", rest=False))
    return body + v32(4) + v32(INDIRECTION) + v32(at - (len(body) + 8)) + v32(-1)


@pytest.mark.parametrize("rid", [Values._d_Node[2], None], ids=["with its id", "of the declared type"])
def test_an_indirection_into_skipped_state_resolves(rid: str | None) -> None:
    # Read as the type declared where the indirection is, if the value did not name its own.
    (got,) = BodyCodec((Values._d_Labelled,)).unpack(pointing_back(node(rid, 5, 3)), 0, True)
    assert type(got.chain) is Values.Node and (got.chain.id, got.chain.next) == (5, None)
    assert (got.at.x, got.at.name) == (1, "pt")


def test_an_indirection_into_skipped_state_of_an_unknown_type_gets_marshal() -> None:
    with pytest.raises(CORBA.MARSHAL, match="no value type 'IDL:Elsewhere/Node:1.0' is known here"):
        BodyCodec((Values._d_Labelled,)).unpack(pointing_back(node("IDL:Elsewhere/Node:1.0", 5, 3)), 0, True)


def test_a_shared_end_tag_in_skipped_state_closes_the_truncated_value() -> None:
    # The nested Node's end tag -2 closes the truncated value too: the Labelled goes on after it.
    for rid in (Values._d_Node[2], "IDL:Elsewhere/Node:1.0"):
        body = truncated_holding(node(rid, 5, 2), rest=False) + v32(4) + v32(0) + v32(-1)
        (got,) = BodyCodec((Values._d_Labelled,)).unpack(body, 0, True)
        assert (got.at.name, got.chain) == ("pt", None)


SKIPPED_HOSTILE = {
    "an end tag deeper than the values open": (node("IDL:Elsewhere/Node:1.0", 5, 4),
                                               r"end tag -4 at offset \d+ is deeper than the 3 values open there"),
    "a chunk past the data": (v32(CHUNKED_TAG | 2) + text("IDL:Elsewhere/Node:1.0") + v32(0x100000),
                              r"a chunk of 1048576 octets at offset \d+ runs past the end of the data"),
    "an unchunked value": (v32(VALUE_TAG | 2) + text("IDL:Elsewhere/Node:1.0") + v32(5) + v32(0),
                           "an unchunked value inside a chunked one"),
    "values 100 deep": (b"".join(v32(CHUNKED_TAG) + v32(4) + v32(k) for k in range(100)),
                        "values nested more than 64 deep"),
}


@pytest.mark.parametrize("case", sorted(SKIPPED_HOSTILE))
def test_hostile_skipped_state_gets_marshal(case: str) -> None:
    nested, why = SKIPPED_HOSTILE[case]
    body = truncated_holding(nested) + v32(4) + v32(0) + v32(-1)
    with pytest.raises(CORBA.MARSHAL, match=why):
        BodyCodec((Values._d_Labelled,)).unpack(body, 0, True)


@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
def test_a_user_exception_of_nested_values_in_a_giop_1_1_fragment_train(le: bool) -> None:
    # Lost holding a chain that ends in a cycle, in a GIOP 1.1 USER_EXCEPTION Reply cut into a
    # Reply and a Fragment halfway (inside a nested value): raised with the cycle one object again.
    cycle = Values.Node(7, None)
    cycle.next = Values.Node(8, cycle)
    chain = Values.Node(1, Values.Node(2, cycle))
    whole = hostile.reply(lambda little_endian=True, base=0: BodyCodec((Values._d_Node,)).pack((chain,), base,
                                                                                               little_endian),
                          GIOP_1_1, le, exception_id=Values.Lost._NP_RepositoryId)
    conn = GIOPConnection(Role.CLIENT)
    conn.send(Request(request_id=1, response_flags=3, object_key=b"Nested", operation="lose", version=GIOP_1_1,
                      little_endian=le))
    conn.receive_data(hostile.fragments_11(whole, len(whole) // 2))
    reply = conn.next_event()
    assert isinstance(reply, Reply) and reply.fragment_starts
    op = marshal.Operation("lose", operation_descriptors(Values.Nested)["lose"])
    with pytest.raises(Values.Lost) as lost:
        reply_result(op, reply, lambda ref, _interface=None: ref, Bounds(), conn.char_set, conn.wide_giop11)
    got = lost.value.chain
    assert [got.id, got.next.id, got.next.next.id, got.next.next.next.id] == [1, 2, 7, 8]
    assert got.next.next.next.next is got.next.next
