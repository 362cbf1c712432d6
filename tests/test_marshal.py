"""The marshal layer: body alignment per GIOP version, zeroed padding, wchar,
exceptions and the omniORBpy result mapping."""

from __future__ import annotations

import pytest
from omniORB import CORBA

import pyorb
from pyorb import marshal
from pyorb.marshal import body

IDL = pyorb.load_idl("idl/interop.idl")
Interop = IDL.Interop
T = Interop.Types


def op(name: str) -> marshal.Operation:
    return marshal.Operation(name, getattr(T, "_d_" + name))


@pytest.mark.parametrize("align", range(8))
@pytest.mark.parametrize("little_endian", [True, False])
def test_padding_is_zero_and_values_round_trip(align: int, little_endian: bool) -> None:
    mixed = op("mixed")
    for n in range(12):
        values = ("s" * n, 1.25, 7, -(2**40))
        body = mixed.args.pack(values, align, little_endian)
        assert mixed.args.unpack(body, align, little_endian) == values
        # string at the first 4-aligned position, then the double at the next 8-aligned one
        start = -align % 4
        end = start + 4 + n + 1
        gap = body[end : end + (-(end + align) % 8)]
        assert gap == bytes(len(gap)), (n, gap)


def test_padding_free_bodies_skip_the_scrubber() -> None:
    assert body._padding_free([24], 0)  # one ulonglong at offset 0
    assert body._padding_free([3, 3, (18, 0)], 0)  # longs then a trailing string
    assert not body._padding_free([(18, 0), 7], 0)  # a double after a string
    assert not body._padding_free([24], 4)  # misaligned start


def test_points_with_strings_have_zero_padding() -> None:
    points = [Interop.Point(float(i), -float(i), "p" * (i % 5)) for i in range(200)]
    codec = op("echo_points").args
    for align in (0, 4):
        body = codec.pack((points,), align, True)
        got = codec.unpack(body, align, True)[0]
        assert [(p.x, p.y, p.label) for p in got] == [(p.x, p.y, p.label) for p in points]
        again = codec.pack((points,), align, True)
        assert body == again  # deterministic: no stray memory in padding


@pytest.mark.parametrize("align", [0, 3, 6])
def test_wchar_round_trip(align: int) -> None:
    wchar = op("echo_wchar")
    for ch in ("a", "é", "€", "\u4e2d"):
        body = wchar.args.pack((ch,), align, True)
        assert body[:1] == b"\x02"  # GIOP 1.2: length octet, then UTF-16BE
        assert wchar.args.unpack(body, align, True) == (ch,)


def test_user_exception_round_trip_at_odd_alignment() -> None:
    failing = op("raise_failure")
    exc = Interop.Failure(5, "why", [1, 2, 3])
    for align in (0, 4, 5):
        body = failing.pack_user_exception(exc, align, False)
        got = failing.unpack_user_exception(body, align, False)
        assert isinstance(got, Interop.Failure) and (got.code, got.why, got.details) == (5, "why", [1, 2, 3])


def test_undeclared_user_exception_becomes_unknown() -> None:
    with pytest.raises(CORBA.UNKNOWN):
        op("raise_empty").pack_user_exception(Interop.Failure(1, "", []), 0, True)


def test_system_exception_round_trip() -> None:
    for align in (0, 4):
        body = marshal.pack_system_exception(CORBA.BAD_PARAM(42, CORBA.COMPLETED_MAYBE), align, True)
        got = marshal.unpack_system_exception(body, align, True)
        assert isinstance(got, CORBA.BAD_PARAM) and got.minor == 42 and got.completed == CORBA.COMPLETED_MAYBE
    assert isinstance(marshal.unpack_system_exception(b"\x01", 0, True), CORBA.MARSHAL)


def test_result_mapping_and_wrong_values() -> None:
    directions = op("directions")
    assert directions.result_value((3, 4, 5)) == (3, 4, 5)
    assert op("echo_long").result_value((3,)) == 3
    assert op("raise_empty").result_value(()) is None
    with pytest.raises(CORBA.BAD_PARAM):
        directions.result_tuple((1, 2))
    with pytest.raises(CORBA.BAD_PARAM):
        op("echo_long").args.pack(("not a long",), 0, True)
    with pytest.raises(CORBA.MARSHAL):
        op("echo_string").args.unpack(b"\xff\xff\xff\x7f", 0, True)


RECURSIVE_IDL = """
module DeepRefs {
  interface Leaf { string name (); };
  struct Tree;
  typedef sequence<Tree> Forest;
  struct Tree { string label; Leaf item; Forest kids; };
  interface Grower { Tree grow (in Tree t); };
};
"""


def test_references_at_every_depth_of_a_recursive_type(tmp_path: object) -> None:
    """IOR strings nested in a recursive struct are sent as references, and the
    references received are converted with the member's static type, not the IOR's (empty) one."""
    from pathlib import Path

    from pyorb.giop.ior import build_ior

    idl = Path(str(tmp_path)) / "deep.idl"
    idl.write_text(RECURSIVE_IDL)
    deep = pyorb.load_idl(idl).DeepRefs
    grow = marshal.Operation("grow", deep.Grower._d_grow)
    assert grow.args.has_objrefs

    def ior(key: bytes) -> str:
        return build_ior("", "127.0.0.1", 2809, key).to_string()

    tree = deep.Tree("root", ior(b"r"), [deep.Tree("kid", ior(b"k"), [deep.Tree("grandkid", ior(b"g"), [])])])
    body = grow.args.pack((tree,), 0, True)
    (back,) = grow.args.unpack(body, 0, True)
    seen: list[tuple[str, str]] = []

    def convert(ref: object, static: str) -> str:
        text = marshal.ensure_orb().object_to_string(ref)
        seen.append((static, text))
        return f"proxy:{len(seen)}"

    (converted,) = grow.args.convert_objrefs((back,), convert)
    assert [static for static, _ in seen] == ["IDL:DeepRefs/Leaf:1.0"] * 3
    assert converted.item == "proxy:1"
    assert converted.kids[0].item == "proxy:2"
    assert converted.kids[0].kids[0].item == "proxy:3"
    assert converted.kids[0].kids[0].label == "grandkid"


def test_a_wrong_value_inside_a_struct_with_references_is_bad_param() -> None:
    label = op("label_holder")
    with pytest.raises(CORBA.BAD_PARAM):
        label.args.pack((Interop.Point(1.0, 2.0, "no target member"),), 0, True)
    with pytest.raises(CORBA.BAD_PARAM):
        label.args.pack((Interop.Holder("x", 42),), 0, True)


def test_operations_of_an_interface_with_a_type_declared_inside(tmp_path: object) -> None:
    """A struct declared inside an interface gives the stub class a ``_d_<Type>`` too:
    the client, its proxies and the CLI list only operations, not the type's descriptor."""
    from pathlib import Path

    from pyorb.cli.call import operations
    from pyorb.client.calls import interface_operations
    from pyorb.client.proxy import proxy_class

    idl = Path(str(tmp_path)) / "nested.idl"
    idl.write_text("module NestedOps { interface I { struct S { long a; }; S get (); oneway void ping (); }; };")
    iface = pyorb.load_idl(idl).NestedOps.I
    assert sorted(body.operation_descriptors(iface)) == ["get", "ping"]
    assert sorted(interface_operations(iface)) == ["get", "ping"]
    assert sorted(operations(iface)) == ["get", "ping"]
    assert callable(proxy_class(iface).get)
    hardening = pyorb.load_idl("idl/hardening.idl").Hardening
    assert {"make_point", "give_point"} <= set(body.operation_descriptors(hardening.Target))  # value types: 5 items


@pytest.mark.parametrize("le", [True, False])
def test_a_user_exception_in_giop_1_1_fragments_is_realigned(le: bool) -> None:
    # omniORB restarts alignment in each GIOP 1.1 Fragment: the double after the cut
    # has 4 more padding octets there than in one unbroken stream.
    import struct

    from pyorb.client.calls import reply_result
    from pyorb.giop import codec
    from pyorb.giop.cdr import CDRWriter
    from pyorb.giop.connection import GIOPConnection, Role
    from pyorb.giop.messages import GIOP_1_1, Reply, ReplyStatus, Request, ServiceContext

    hardening = pyorb.load_idl("idl/hardening.idl").Hardening
    refuse = marshal.Operation("refuse", hardening.Target._d_refuse)
    # One context of one octet puts the body where the double after the any's TypeCode is 8-aligned.
    reply = Reply(7, ReplyStatus.USER_EXCEPTION, b"", (ServiceContext(99, b"x"),), GIOP_1_1, le)
    base = codec.body_offset(reply)
    w = CDRWriter(le, base)
    w.string(hardening.Refused._NP_RepositoryId)
    w.ulong(7)  # tk_double
    w.align(8)
    cut = base + len(w.buf)
    assert cut % 8 == 0
    whole = codec.encode(Reply(7, ReplyStatus.USER_EXCEPTION, w.getvalue(), reply.service_contexts, GIOP_1_1, le))
    order = "little" if le else "big"
    first = bytearray(whole)
    first[6] |= 2  # more fragments follow
    first[8:12] = (len(whole) - 12).to_bytes(4, order)
    payload = bytes(4) + struct.pack("<d" if le else ">d", 1.5)  # at Fragment offset 12: 4 octets to the double
    fragment = b"GIOP\x01\x01" + bytes((int(le), 7)) + len(payload).to_bytes(4, order) + payload
    conn = GIOPConnection(Role.CLIENT)
    conn.send(Request(7, 3, b"Target", "refuse", version=GIOP_1_1, little_endian=le))
    conn.receive_data(bytes(first) + fragment)
    got = conn.next_event()
    assert isinstance(got, Reply) and got.fragment_starts
    with pytest.raises(hardening.Refused) as info:
        reply_result(refuse, got, lambda ref, _interface=None: ref)
    assert info.value.why.value() == 1.5
