"""Value types (objects by value) through pyorb's body codec: omniidl's classes
in, the same classes out, padding scrubbed, hostile encodings refused."""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import omniORB
import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.ior import CS_ISO8859_1
from pyorb.marshal.body import BodyCodec
from pyorb.marshal.orb import cdr_marshal, ensure_orb

from tests.attacks import hostile_values as hostile

ROOT = Path(__file__).resolve().parents[1]
Values = pyorb.load_idl(ROOT / "idl" / "values.idl").Values
Hardening = pyorb.load_idl(ROOT / "idl" / "hardening.idl").Hardening
ensure_orb()

# (byte order, body start mod 8): GIOP 1.2 bodies start 8-aligned, 1.0/1.1 ones anywhere.
PLACES = [(le, align) for le in (True, False) for align in (0, 4, 1)]


def round_trip(descs: tuple[Any, ...], values: tuple[Any, ...], le: bool, align: int) -> tuple[Any, ...]:
    codec = BodyCodec(descs)
    return codec.unpack(codec.pack(values, align, le), align, le)


@pytest.mark.parametrize("le,align", PLACES)
def test_concrete_values_with_public_and_private_state(le: bool, align: int) -> None:
    point, secret = round_trip((Values._d_Point, Values._d_Secret),
                               (Values.Point(1, -2, "név"), Values.Secret(1.5, 7)), le, align)
    assert type(point) is Values.Point and (point.x, point.y, point.name) == (1, -2, "név")
    assert type(secret) is Values.Secret and (secret.key, secret.tag) == (1.5, 7)


@pytest.mark.parametrize("le,align", PLACES)
def test_a_derived_value_sent_as_its_base_arrives_derived(le: bool, align: int) -> None:
    (got,) = round_trip((Values._d_Point,), (Values.Point3(1, 2, "p", 3.5),), le, align)
    assert type(got) is Values.Point3 and (got.x, got.y, got.name, got.z) == (1, 2, "p", 3.5)
    (tagged,) = round_trip((Values._d_Point,), (Values.Tagged(1, 2, "p", "t"),), le, align)
    assert type(tagged) is Values.Tagged and tagged.tag == "t"


@pytest.mark.parametrize("le,align", PLACES)
def test_the_same_value_twice_arrives_as_one_object(le: bool, align: int) -> None:
    p = Values.Point(1, 2, "shared")
    (points,) = round_trip((Values._d_Points,), ([p, p, Values.Point(3, 4, "other"), p],), le, align)
    assert points[0] is points[1] is points[3] and points[2] is not points[0]
    (triple,) = round_trip((Values._d_PointArray,), ([p, None, p],), le, align)
    assert triple[0] is triple[2] and triple[1] is None


@pytest.mark.parametrize("le,align", PLACES)
def test_null_values_and_boxes(le: bool, align: int) -> None:
    descs = (Values._d_Point, Values._d_Label, Values._d_WLabel, Values._d_LongsBox, Values._d_PairBox,
             Values._d_Label)
    got = round_trip(descs, (None, "lábel", "wide ∑", [1, 2, 3], Values.Pair(4, 5.5), None), le, align)
    assert got[:4] == (None, "lábel", "wide ∑", [1, 2, 3]) and got[5] is None
    assert type(got[4]) is Values.Pair and (got[4].a, got[4].b) == (4, 5.5)


@pytest.mark.parametrize("le,align", PLACES)
def test_values_inside_structs_unions_sequences_and_arrays(le: bool, align: int) -> None:
    p = Values.Point(5, 6, "in")
    holder, choice, label_choice = round_trip(
        (Values._d_Holder, Values._d_Choice, Values._d_Choice),
        (Values.Holder(1, p, "l"), Values.Choice(p=p), Values.Choice(l="box")), le, align)
    assert (holder.flag, holder.p.name, holder.l) == (1, "in", "l")
    assert choice.p.x == 5 and label_choice.l == "box"


@pytest.mark.parametrize("le", [True, False])
def test_a_value_inside_a_value_is_written_as_omniorb_writes_it(le: bool) -> None:
    # omniORB's in-memory marshaler aborts the process on one (cdrValueChunkStream): pyorb writes
    # it, each nested value between its container's chunks, the innermost end tag closing them all.
    codec = BodyCodec((Values._d_Node,))
    order = "<" if le else ">"
    chain = codec.pack((Values.Node(1, Values.Node(2, Values.Node(3, None))),), 0, le)
    tag, length = 0x7FFFFF08, 4
    words = struct.unpack(f"{order}{len(chain) // 4}I", chain)
    assert words == (tag, length, 1, tag, length, 2, tag, 2 * length, 3, 0, 0xFFFFFFFF)
    first = Values.Node(1, None)
    first.next = Values.Node(2, first)  # a cycle: the second node's next points back at the first's tag
    cycle = struct.unpack(f"{order}9I", codec.pack((first,), 0, le))
    assert cycle == (tag, length, 1, tag, 3 * length, 2, 0xFFFFFFFF, (-28) & 0xFFFFFFFF, 0xFFFFFFFF)
    # A box, a value, then a null in the state of a chunked value: the box chunked too (its chunk
    # holds the string), a chunk again for the null after the point's end tag.
    words = struct.unpack(f"{order}16I", BodyCodec((Values._d_Labelled,)).pack(
        (Values.Labelled("l", Values.Point(1, 2, "p"), None),), 0, le))
    nested_end, end = 0xFFFFFFFE, 0xFFFFFFFF
    assert words[:4] + words[5:11] == (tag, tag, 6, 2, nested_end, tag, 14, 1, 2, 2)
    assert words[12:] == (nested_end, 4, 0, end)
    (alone,) = codec.unpack(codec.pack((Values.Node(3, None),), 0, le), 0, le)
    assert (alone.id, alone.next) == (3, None)


def test_a_chain_too_deep_to_write_is_marshal_saying_so() -> None:
    chain = None
    for k in range(sys.getrecursionlimit() * 2):
        chain = Values.Node(k, chain)
    with pytest.raises(CORBA.MARSHAL, match="cannot send values nested [0-9]+ deep or more"):
        BodyCodec((Values._d_Node,)).pack((chain,), 0, True)


def test_a_received_chain_and_cycle_decode() -> None:
    codec = BodyCodec((Hardening._d_Link,))
    (chain,) = codec.unpack(hostile.deep_links(5), 0, True)
    assert [chain.id, chain.next.id] == [1, 1] and chain.next.next.next.next.next is None
    # A cycle: a link whose next is an indirection back to itself.
    body = struct.pack("<IIIi", 0x7FFFFF00, 9, 0xFFFFFFFF, -12)
    (loop,) = codec.unpack(body, 0, True)
    assert loop.id == 9 and loop.next is loop


def test_padding_omniorb_leaves_is_zeroed() -> None:
    # A derived value sent as its base: its repository id string is followed by two
    # padding octets and its name by five before the double; omniORB leaves them as it found them.
    codec = BodyCodec((Values._d_Point,))
    value = Values.Point3(1, 2, "ab", 2.5)
    raw = cdr_marshal(Values._d_Point, value, False)
    # tag 0, id 4..29, chunk length 32, x 36, y 40, name 44..50, double 56, end tag 64
    padding = {30, 31, 51, 52, 53, 54, 55}
    for _ in range(20):
        sent = codec.pack((value,), 0, False)
        assert len(sent) == len(raw)
        assert all(sent[k] == 0 for k in padding), sent.hex()
        assert all(sent[k] == raw[k] for k in range(len(raw)) if k not in padding)


@pytest.mark.parametrize("attack", sorted(hostile.VALUE_ATTACKS))
def test_hostile_value_encodings_are_marshal(attack: str) -> None:
    with pytest.raises(CORBA.MARSHAL, match="unacceptable body"):
        BodyCodec((Hardening._d_Link,)).unpack(hostile.VALUE_ATTACKS[attack](), 0, True)


def test_an_unknown_repository_id_is_omniorbs_no_value_factory() -> None:
    with pytest.raises(CORBA.MARSHAL) as caught:
        BodyCodec((Hardening._d_Link,)).unpack(hostile.unknown_value(), 0, True)
    assert caught.value.minor == omniORB.MARSHAL_NoValueFactory
    assert "IDL:Nowhere/Thing:1.0" in str(caught.value)


def _id(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<I", len(raw)) + raw + bytes(-len(raw) % 4)


def test_a_truncatable_value_of_an_unknown_type_arrives_as_its_known_base() -> None:
    # Repository ids (an unknown derived type, then Point), Point's state in one
    # chunk, the unknown type's own state in another, skipped.
    state = struct.pack("<ii", 1, 2) + _id("ab")
    body = (struct.pack("<II", 0x7FFFFF0E, 2) + _id("IDL:Values/Unknown:1.0") + _id("IDL:Values/Point:1.0")
            + struct.pack("<I", len(state)) + state + struct.pack("<IIi", 4, 99, -1))
    (got,) = BodyCodec((Values._d_Point,)).unpack(body, 0, True)
    assert type(got) is Values.Point and (got.x, got.y, got.name) == (1, 2, "ab")


ANY = (omniORB.tcInternal.tv_any,)


@pytest.mark.parametrize("le,align", PLACES)
def test_values_inside_an_any_keep_their_class_sharing_and_boxes(le: bool, align: int) -> None:
    p = Values.Point(1, 2, "in any")
    sent = (CORBA.Any(Values._tc_Point, Values.Point3(1, 2, "d", 0.5)), CORBA.Any(Values._tc_Points, [p, p]),
            CORBA.Any(Values._tc_Node, Values.Node(7, None)), CORBA.Any(Values._tc_Label, "lábel"),
            CORBA.Any(Values._tc_PairBox, Values.Pair(4, 5.5)), CORBA.Any(Values._tc_Point, None),
            CORBA.Any(Values._tc_Holder, Values.Holder(1, p, None)))
    derived, shared, node, label, pair, null, holder = round_trip(ANY * len(sent), sent, le, align)
    assert derived.typecode().id() == "IDL:Values/Point:1.0"
    assert type(derived.value()) is Values.Point3 and derived.value().z == 0.5
    assert shared.value()[0] is shared.value()[1] and shared.value()[0].name == "in any"
    assert (node.value().id, node.value().next) == (7, None)  # a recursive TypeCode
    assert (label.value(), pair.value().b, null.value()) == ("lábel", 5.5, None)
    assert (holder.value().p.name, holder.value().l) == ("in any", None)


def test_a_value_inside_a_value_inside_an_any_is_written_by_pyorb() -> None:
    # omniORB's marshaler would abort on it: pyorb's value writer writes it, its reader reads it.
    chain = CORBA.Any(Values._tc_Node, Values.Node(1, Values.Node(2, None)))
    for value in (chain, CORBA.Any(CORBA.TC_any, chain)):
        (got,) = BodyCodec(ANY).unpack(BodyCodec(ANY).pack((value,), 0, True), 0, True)
        node = got.value() if got.typecode().kind() == CORBA.tk_value else got.value().value()
        assert (node.id, node.next.id, node.next.next) == (1, 2, None)


def _tc_body(kind: int, params: bytes) -> bytes:
    """An any's TypeCode of ``kind`` with little-endian ``params`` in its encapsulation (written at offset 0)."""
    encapsulation = b"\1" + params
    return struct.pack("<II", kind, len(encapsulation)) + encapsulation + bytes(-len(encapsulation) % 4)


def test_a_value_typecode_whose_base_is_no_value_type_is_marshal() -> None:
    # tk_value "IDL:X:1.0", name "XYZ", modifier 0, concrete base tk_long, no members.
    params = bytes(3) + _id("IDL:X:1.0") + _id("XYZ") + struct.pack("<HxxII", 0, 3, 0)
    with pytest.raises(CORBA.MARSHAL, match="concrete base of value type 'IDL:X:1.0' is a TypeCode of kind 3"):
        BodyCodec(ANY).unpack(_tc_body(29, params) + struct.pack("<I", 0), 0, True)


def test_an_unknown_derived_value_in_an_any_is_omniorbs_no_value_factory() -> None:
    body = BodyCodec(ANY).pack((CORBA.Any(Values._tc_Point, Values.Point3(1, 2, "x", 1.0)),), 0, True)
    with pytest.raises(CORBA.MARSHAL) as caught:
        BodyCodec(ANY).unpack(body.replace(b"Values/Point3:", b"Values/Poin33:"), 0, True)
    assert caught.value.minor == omniORB.MARSHAL_NoValueFactory and "IDL:Values/Poin33:1.0" in str(caught.value)


@pytest.mark.parametrize("le,align", PLACES)
def test_values_in_iso_8859_1_keep_sharing_derivation_and_anys(le: bool, align: int) -> None:
    # "név" is a byte shorter in ISO-8859-1: chunk lengths and indirection offsets after it change.
    p = Values.Point(1, 2, "név")
    descs = (Values._d_Points, Values._d_Point, Values._d_Holder, Values._d_Label) + ANY
    sent = ([p, p, Values.Point3(3, 4, "é", 1.5), p], Values.Tagged(1, 2, "é", "tàg"), Values.Holder(1, p, "lé"),
            "lábel", CORBA.Any(Values._tc_Points, [p, p]))
    codec = BodyCodec(descs)
    body = codec.pack(sent, align, le, char_set=CS_ISO8859_1)
    assert "név".encode("latin-1") in body and "név".encode() not in body
    points, tagged, holder, label, anything = codec.unpack(body, align, le, char_set=CS_ISO8859_1)
    assert points[0] is points[1] is points[3] and points[0].name == "név"
    assert type(points[2]) is Values.Point3 and (points[2].name, points[2].z) == ("é", 1.5)
    assert type(tagged) is Values.Tagged and (tagged.name, tagged.tag) == ("é", "tàg")
    assert (holder.p.name, holder.l, label) == ("név", "lé", "lábel")
    assert anything.value()[0] is anything.value()[1]


@pytest.mark.parametrize("le,align", PLACES)
def test_values_inside_values_in_iso_8859_1_are_written_with_their_strings_re_encoded(le: bool, align: int) -> None:
    # pyorb's value writer writes these bodies; each string is re-encoded as it goes in, so the
    # chunk lengths and indirections it writes after are those of the re-encoded body.
    p = Values.Point3(1, 2, "név", 0.5)
    cycle = Values.Node(7, None)
    cycle.next = Values.Node(8, cycle)
    descs = (Values._d_Labelled, Values._d_Labelled, Values._d_Node) + ANY
    sent = (Values.Labelled("lábel", p, cycle), Values.Labelled("é", p, None), cycle,
            CORBA.Any(Values._tc_Labelled, Values.Labelled("àny", p, Values.Node(1, None))))
    codec = BodyCodec(descs)
    body = codec.pack(sent, align, le, char_set=CS_ISO8859_1)
    assert "lábel".encode("latin-1") in body and "név".encode("latin-1") in body
    assert not any(text.encode() in body for text in ("lábel", "név", "é", "àny"))
    first, second, node, anything = codec.unpack(body, align, le, char_set=CS_ISO8859_1)
    assert (first.caption, first.at.name, second.caption, anything.value().caption) == ("lábel", "név", "é", "àny")
    assert first.at is second.at and type(first.at) is Values.Point3
    assert first.chain is node and node.next.next is node and (node.id, node.next.id) == (7, 8)


def test_chunks_of_any_shape_are_read_in_iso_8859_1() -> None:
    # A Point whose string is split across chunks, then an indirection to it; a Node whose null
    # next sits between its chunks; a truncatable value of an unknown type cut to its base.
    point = (struct.pack("<IIi", 0x7FFFFF08, 4, 1) + struct.pack("<Ii", 4, 2) + struct.pack("<II", 5, 4) + b"n"
             + bytes(3) + struct.pack("<I", 3) + b"\xe9v\0" + bytes(1) + struct.pack("<i", -1))
    points = struct.pack("<I", 2) + point + struct.pack("<Ii", 0xFFFFFFFF, -len(point) - 4)
    (got,) = BodyCodec((Values._d_Points,)).unpack(points, 0, True, char_set=CS_ISO8859_1)
    assert got[0] is got[1] and (got[0].x, got[0].y, got[0].name) == (1, 2, "név")
    node = struct.pack("<IIiIi", 0x7FFFFF08, 4, 5, 0, -1)
    (got,) = BodyCodec((Values._d_Node,)).unpack(node, 0, True, char_set=CS_ISO8859_1)
    assert (got.id, got.next) == (5, None)
    state = struct.pack("<ii", 1, 2) + struct.pack("<I", 3) + b"\xe9b\0"
    body = (struct.pack("<II", 0x7FFFFF0E, 2) + _id("IDL:Values/Unknown:1.0") + _id("IDL:Values/Point:1.0")
            + struct.pack("<I", len(state)) + state + bytes(1) + struct.pack("<IIi", 4, 99, -1))
    (got,) = BodyCodec((Values._d_Point,)).unpack(body, 0, True, char_set=CS_ISO8859_1)
    assert type(got) is Values.Point and (got.x, got.y, got.name) == (1, 2, "éb")


def test_values_across_giop_1_1_fragments_at_every_cut() -> None:
    # A fragment payload is aligned from its message's start (phase 12): a cut at a body
    # offset 4 mod 8 keeps every octet where it was, and puts the fragment boundary inside
    # chunks, strings, repository ids and between an indirection's marker and its offset
    # (a cut through a double is no train a sender can make: it says so).
    p = Values.Point(1, 2, "név")
    sent = ([p, Values.Point3(3, 4, "é", 1.5), p, Values.Tagged(5, 6, "t", "tàg"), p], Values.Node(8, None))
    codec = BodyCodec((Values._d_Points, Values._d_Node))
    for le in (True, False):
        body = codec.pack(sent, 0, le)
        decoded = 0
        for cut in range(4, len(body), 8):
            try:
                points, node = codec.unpack(body, 0, le, fragment_starts=(cut,))
            except CORBA.MARSHAL as exc:
                assert "8-byte primitive is split across fragments" in str(exc), (cut, exc)
                continue
            assert points[0] is points[2] is points[4] and points[0].name == "név", cut
            assert type(points[1]) is Values.Point3 and points[1].z == 1.5 and points[3].tag == "tàg", cut
            assert (node.id, node.next) == (8, None), cut
            decoded += 1
        assert decoded >= len(body) // 8 - 2  # two doubles in the body


def _units(text: str, le: bool) -> bytes:
    """A GIOP 1.1 wstring: a ulong count of UTF-16 code units, the null included, then the units."""
    units = text.encode("utf-16-le" if le else "utf-16-be") + bytes(2)
    return struct.pack("<I" if le else ">I", len(units) // 2) + units


@pytest.mark.parametrize("le,align", PLACES)
def test_a_boxed_wstring_goes_in_the_giop_1_1_form_to_a_peer_that_reads_it(le: bool, align: int) -> None:
    codec = BodyCodec((Values._d_WLabel,))
    body = codec.pack(("wé€ 中",), align, le, wide11=True)
    tag = struct.pack("<I" if le else ">I", 0x7FFFFF00)
    assert body == bytes(-align % 4) + tag + _units("wé€ 中", le)
    assert codec.unpack(body, align, le, wide11=True) == ("wé€ 中",)
    # The GIOP 1.2 form (what omniORB sends in GIOP 1.1 too) is another body.
    assert codec.pack(("wé€ 中",), align, le) != body


@pytest.mark.parametrize("le,align", PLACES)
def test_wide_text_in_a_values_state_and_in_an_any_beside_it_goes_in_the_giop_1_1_form(le: bool, align: int) -> None:
    note = Values.Note("tëxt", "€", "títle")
    descs = (Values._d_Note, Values._d_Note, ANY)
    codec = BodyCodec(descs)
    body = codec.pack((note, note, CORBA.Any(CORBA._tc_wstring, "ány")), align, le, wide11=True)
    for text in ("tëxt", "títle", "ány"):
        assert _units(text, le) in body, text
    assert "€".encode("utf-16-le" if le else "utf-16-be") in body
    first, again, anything = codec.unpack(body, align, le, wide11=True)
    assert first is again and (first.text, first.mark, first.title, anything.value()) == ("tëxt", "€", "títle", "ány")
    with pytest.raises(CORBA.MARSHAL):  # not a body of the GIOP 1.2 form
        codec.unpack(body, align, le)


def test_wide_text_in_values_in_giop_1_1_fragments_at_every_cut() -> None:
    notes = [Values.Note(f"nöte {k}", "ŵ", None if k % 2 else f"títle {k}") for k in range(3)]
    codec = BodyCodec((Values._d_Note, Values._d_Note, Values._d_Note))
    for le in (True, False):
        body = codec.pack(tuple(notes), 0, le, wide11=True)
        for cut in range(4, len(body), 8):
            got = codec.unpack(body, 0, le, fragment_starts=(cut,), wide11=True)
            assert [(n.text, n.mark, n.title) for n in got] == [(n.text, n.mark, n.title) for n in notes], cut


def test_a_giop_1_1_wstring_in_a_value_without_its_null_is_refused() -> None:
    tag, state = struct.pack("<I", 0x7FFFFF00), struct.pack("<I2H", 2, ord("a"), ord("b"))
    with pytest.raises(CORBA.MARSHAL, match="null"):
        BodyCodec((Values._d_WLabel,)).unpack(tag + state, 0, True, wide11=True)
