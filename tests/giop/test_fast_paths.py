"""The struct-based fast paths of the codec agree, byte for byte, with the general ones.

The general paths (``codec._encode`` and the ``CDRReader``-based decoders)
are the readable reference; every fast path must either give exactly what
they give or step aside for them.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyorb.giop import (
    CLOSED,
    GIOP_1_2,
    NEED_DATA,
    GIOPConnection,
    Header,
    Message,
    MsgType,
    ProtocolError,
    Reply,
    ReplyStatus,
    Request,
    Role,
    ServiceContext,
    body_offset,
    decode,
    decode_body,
    encode,
    parse_header,
)
from pyorb.giop import codec, fast12
from pyorb.giop.cdr import CDRReader

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ulongs = st.integers(0, 2**32 - 1)
contexts = st.lists(st.builds(ServiceContext, ulongs, st.binary(max_size=12)), max_size=3).map(
    tuple
)


def general_decode(data: bytes) -> Message:
    """Decode a whole message with the CDRReader decoders only."""
    hdr = parse_header(data)
    decoder = codec._DECODERS[hdr.msg_type]
    return decoder(CDRReader(data[12:], hdr.little_endian, base=12), hdr.version)


def with_offset(msg: Request | Reply) -> Request | Reply:
    return dataclasses.replace(msg, body_offset=body_offset(msg))


# ------------------------------------------------------------------ tables

KEYS = [b"", b"K", b"Ec", b"Ech", b"Echo", b"Echo5", b"\x00" * 7, bytes(range(9)), b"k" * 64]
OPERATIONS = ["", "a", "ab", "abc", "ping", "_is_a", "get_value", "\u00e9cho", "x" * 31]
BODIES = [b"", b"\x01", b"\x01" * 8, b"\xff" * 13]

PLAIN_REQUESTS = [
    Request(request_id, flags, key, operation, body, little_endian=little)
    for (request_id, flags), key, operation, body, little in itertools.product(
        [(0, 0), (5, 3), (2**32 - 1, 1), (7, 255)], KEYS, OPERATIONS, BODIES, [True, False]
    )
]
# Requests the fast encoder leaves to the general one.
OTHER_REQUESTS = [
    Request(1, 3, b"Echo", "ping", b"\x01" * 8, (ServiceContext(1, b"\x01" * 12),)),
    Request(1, 3, b"Echo", "ping", b"", (ServiceContext(1, b""),), little_endian=False),
    Request(1, 3, b"\x00\x00\x00\x00\x00\x00\x00\x00", "op", b"x", addressing_disposition=1),
    Request(1, 3, b"ab", "op", b"x", version=(1, 1), requesting_principal=b"me"),
    Request(1, 3, b"ab", "op", b"x", version=(1, 0), little_endian=False),
]
REPLIES = [
    Reply(request_id, status, body, service_contexts, little_endian=little)
    for request_id, status, body, service_contexts, little in itertools.product(
        [0, 7, 2**32 - 1],
        list(ReplyStatus),
        BODIES,
        [(), (ServiceContext(1, b"\x01\x02\x03"),), (ServiceContext(9, b""),) * 2],
        [True, False],
    )
]


def test_tables_use_the_fast_paths() -> None:
    """Otherwise the comparisons below would compare the general path with itself."""
    assert all(fast12._is_plain_request_12(msg) for msg in PLAIN_REQUESTS)
    assert not any(fast12._is_plain_request_12(msg) for msg in OTHER_REQUESTS)
    for msg in REPLIES:
        fast = fast12._decode_reply_12_fast(codec._encode(msg)[12:], msg.little_endian)
        assert (fast is not None) == (not msg.service_contexts)


def test_request_encoding_matches_the_general_path() -> None:
    for msg in PLAIN_REQUESTS + OTHER_REQUESTS:
        data = encode(msg)
        assert data == codec._encode(msg), msg
        assert decode(data[:12], data[12:]) == general_decode(data) == with_offset(msg)


def test_request_body_is_8_aligned_and_padding_is_zero() -> None:
    for msg in PLAIN_REQUESTS:
        data = encode(dataclasses.replace(msg, body=b"\xff" * 3))
        start = body_offset(msg)
        assert start % 8 == 0 and data[start:] == b"\xff" * 3
        # Past the operation's characters, up to the body, everything is
        # zero: the NUL, padding, the empty context count, padding again.
        key_end = 28 + len(msg.object_key)
        operation_end = key_end + (-key_end % 4) + 4 + len(msg.operation.encode())
        assert data[operation_end:start] == bytes(start - operation_end), msg


def test_reply_decoding_matches_the_general_path() -> None:
    for msg in REPLIES:
        data = encode(msg)
        assert data == codec._encode(msg)
        hdr = parse_header(data)
        with memoryview(data) as view, view[12:] as body:
            fast = decode_body(hdr, body)
        assert fast == general_decode(data) == with_offset(msg), msg
        assert type(fast) is Reply and type(fast.reply_status) is ReplyStatus


@pytest.mark.parametrize(
    "msg",
    [
        Request(2**32, 3, b"k", "op"),
        Request(-1, 3, b"k", "op"),
        Request(1, 256, b"k", "op"),
        Request(1, -1, b"k", "op"),
        Request(1, 3, b"k", "\ud800"),  # a lone surrogate has no UTF-8
    ],
)
def test_request_misuse_raises_value_error_on_both_paths(msg: Request) -> None:
    assert fast12._is_plain_request_12(msg)
    with pytest.raises(ValueError):
        encode(msg)
    with pytest.raises((ValueError, struct.error)):  # encode turns struct.error into ValueError
        codec._encode(msg)


def test_request_12_with_a_principal_is_refused() -> None:
    """GIOP 1.2 has no requesting_principal: the fast path must not drop it silently."""
    with pytest.raises(ValueError):
        encode(Request(1, 3, b"k", "op", requesting_principal=b"me"))


def test_request_encoding_accepts_bytes_like_key_and_body() -> None:
    msg = Request(1, 3, bytearray(b"key"), "op", memoryview(b"body"))  # type: ignore[arg-type]
    assert encode(msg) == codec._encode(msg) == encode(Request(1, 3, b"key", "op", b"body"))


# ------------------------------------------------------------------ builders


@pytest.mark.parametrize(
    ("build", "args", "expected"),
    [
        (
            fast12._build_request,
            (5, 3, b"K", "ping", b"\x01", (), GIOP_1_2, False, 48),
            Request(5, 3, b"K", "ping", b"\x01", (), GIOP_1_2, False, 48, b"", 0),
        ),
        (
            fast12._build_reply,
            (5, ReplyStatus.USER_EXCEPTION, b"\x01", (), GIOP_1_2, True, 24),
            Reply(5, ReplyStatus.USER_EXCEPTION, b"\x01", (), GIOP_1_2, True, 24),
        ),
    ],
)
def test_builders_make_real_frozen_messages(
    build: Callable[..., Message], args: tuple[object, ...], expected: Message
) -> None:
    assert build is not type(expected), "the dataclass changed: update codec's builders"
    msg = build(*args)
    assert type(msg) is type(expected)
    assert msg == expected and hash(msg) == hash(expected) and repr(msg) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.version = (1, 0)  # type: ignore[misc]
    assert dataclasses.replace(msg) == expected


def test_mutable_twin_refuses_a_different_layout() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Other:
        a: int
        b: int

    assert fast12._mutable_twin(Other, ("a", "b")) is not None
    assert fast12._mutable_twin(Other, ("b", "a")) is None
    assert fast12._mutable_twin(Other, ("a",)) is None


# ------------------------------------------------------------------ header


def reference_parse_header(data: bytes) -> Header:
    """parse_header as the GIOP spec words it, without the lookup table."""
    magic, major, minor, flags, msg_type = struct.unpack_from("4s4B", data)
    if magic != b"GIOP" or (major, minor) not in ((1, 0), (1, 1), (1, 2)):
        raise ProtocolError("bad magic or version")
    if flags & ~3 or (minor == 0 and flags > 1) or msg_type > 7 or (minor == 0 and msg_type == 7):
        raise ProtocolError("bad flags or type")
    more = bool(flags & 2)
    fragmentable = {1: {0, 1, 7}, 2: {0, 1, 3, 4, 7}}.get(minor, set())
    if more and msg_type not in fragmentable:
        raise ProtocolError("cannot be fragmented")
    (size,) = struct.unpack_from("<I" if flags & 1 else ">I", data, 8)
    return Header((major, minor), bool(flags & 1), more, MsgType(msg_type), size)


@FUZZ
@given(
    st.tuples(st.integers(0, 3), st.integers(0, 7), st.integers(0, 8)),
    st.binary(min_size=4, max_size=4),
    st.sampled_from([b"GIOP\x01", b"GIOP\x00", b"GIOQ\x01"]),
)
def test_parse_header_agrees_with_the_spec(
    fields: tuple[int, int, int], size: bytes, start: bytes
) -> None:
    minor, flags, msg_type = fields
    data = start + bytes((minor, flags, msg_type)) + size
    try:
        expected: Header | None = reference_parse_header(data)
    except ProtocolError:
        expected = None
    try:
        got: Header | None = parse_header(bytearray(b"xx" + data), 2)
    except ProtocolError:
        got = None
    assert got == expected
    assert got is None or type(got) is Header


# ------------------------------------------------------------------ properties


@st.composite
def plain_requests(draw: st.DrawFn, little_endian: bool) -> Request:
    return Request(
        request_id=draw(ulongs),
        response_flags=draw(st.integers(0, 255)),
        object_key=draw(st.binary(max_size=40)),
        operation=draw(st.text(st.characters(codec="utf-8"), max_size=24)),
        body=draw(st.binary(max_size=80)),
        service_contexts=draw(st.one_of(st.just(()), contexts)),
        little_endian=little_endian,
    )


@st.composite
def replies_12(draw: st.DrawFn, little_endian: bool) -> Reply:
    return Reply(
        draw(ulongs),
        draw(st.sampled_from(list(ReplyStatus))),
        draw(st.binary(max_size=80)),
        draw(st.one_of(st.just(()), contexts)),
        GIOP_1_2,
        little_endian,
    )


requests_12 = st.booleans().flatmap(plain_requests)
any_replies_12 = st.booleans().flatmap(replies_12)


@FAST
@given(requests_12)
def test_request_12_round_trip(msg: Request) -> None:
    data = encode(msg)
    assert data == codec._encode(msg)
    assert decode(data[:12], data[12:]) == general_decode(data) == with_offset(msg)


@FAST
@given(any_replies_12)
def test_reply_12_round_trip(msg: Reply) -> None:
    data = encode(msg)
    assert data == codec._encode(msg)
    assert decode(data[:12], data[12:]) == general_decode(data) == with_offset(msg)


@FAST
@given(st.lists(st.one_of(requests_12, any_replies_12), max_size=5), st.data())
def test_connection_round_trip(msgs: list[Request | Reply], data: st.DataObject) -> None:
    """Both roles, split at arbitrary points: the connection's views are all released."""
    for role, kind in ((Role.SERVER, Request), (Role.CLIENT, Reply)):
        mine = [m for m in msgs if isinstance(m, kind)]
        stream = b"".join(map(encode, mine))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
        conn = GIOPConnection(role)
        got: list[Message] = []
        for a, b in zip([0, *cuts], [*cuts, len(stream)]):
            if a == b:
                continue  # b"" would mean EOF
            conn.receive_data(stream[a:b])  # would raise BufferError if a view leaked
            while (event := conn.next_event()) is not NEED_DATA:
                assert isinstance(event, (Request, Reply))
                got.append(event)
        assert got == [with_offset(m) for m in mine]


def mutate(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for where, value in flips:
        if buf:
            buf[where % len(buf)] = value
    return bytes(buf[:cut] if cut is not None else buf)


mutations = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3)
cuts = st.one_of(st.none(), st.integers(0, 120))


def general_reply(body: bytes, little: bool) -> Reply | None:
    try:
        return codec._decode_reply(CDRReader(body, little, base=12), GIOP_1_2)
    except ProtocolError:
        return None


def reply_edge_cases() -> list[tuple[bytes, bool]]:
    """Reply 1.2 bodies around every limit the fast decoder checks."""
    cases = []
    for little, status, count, extra in itertools.product(
        [True, False], [0, 5, 6, 7, 2**31, 2**32 - 1], [0, 1, 2**32 - 1], [b"", b"\0" * 8]
    ):
        body = struct.pack("<III" if little else ">III", 9, status, count) + extra
        cases += [(body[:n], little) for n in range(len(body) + 1)]
    return cases


def test_fast_reply_path_at_the_limits() -> None:
    for body, little in reply_edge_cases():
        fast = fast12._decode_reply_12_fast(body, little)
        general = general_reply(body, little)
        assert fast == general if fast is not None else general is None or general.service_contexts


@FUZZ
@given(any_replies_12, mutations, cuts)
def test_fast_reply_path_agrees_with_the_general_path(
    msg: Reply, flips: list[tuple[int, int]], cut: int | None
) -> None:
    body = mutate(encode(msg)[12:], flips, cut)
    fast = fast12._decode_reply_12_fast(body, msg.little_endian)
    general = general_reply(body, msg.little_endian)
    if fast is not None:
        assert fast == general
    else:  # the fast path only gives up on what is malformed or has contexts
        assert general is None or general.service_contexts


@FUZZ
@given(st.one_of(requests_12, any_replies_12), mutations, cuts)
def test_mutated_12_messages_raise_only_protocol_error(
    msg: Request | Reply, flips: list[tuple[int, int]], cut: int | None
) -> None:
    data = encode(msg)
    body = mutate(data[12:], flips, cut)
    header = data[:8] + struct.pack("<I" if msg.little_endian else ">I", len(body))
    try:
        decode(header, body)
    except ProtocolError:
        pass
    role = Role.SERVER if isinstance(msg, Request) else Role.CLIENT
    conn = GIOPConnection(role, max_message_size=1024)
    conn.receive_data(mutate(data, flips, cut))
    conn.receive_data(b"")  # EOF: a cut message must raise, not wait
    try:
        while conn.next_event() is not CLOSED:
            pass
    except ProtocolError:
        pass


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.booleans(), st.binary(max_size=64),
       st.lists(st.binary(max_size=16), max_size=2))
def test_a_reply_sent_again_to_another_request_is_that_request_s_reply(
    first: int, other: int, little: bool, body: bytes, contexts: list[bytes]
) -> None:
    def reply(request_id: int) -> bytes:
        sent = tuple(ServiceContext(0x4F4D0000 + n, data) for n, data in enumerate(contexts))
        return encode(Reply(request_id, ReplyStatus.SYSTEM_EXCEPTION, body, sent, GIOP_1_2, little))

    again = fast12.reply_12_to(reply(first), other, little)
    assert again == reply(other)
    assert decode(again[:12], again[12:]).request_id == other  # type: ignore[union-attr]


@FAST
@given(requests_12)
def test_a_request_with_contexts_is_the_general_writers_request(msg: Request) -> None:
    """The contexts writer gives ``codec._encode``'s bytes for any contexts (none included),
    whatever the key, operation and body leave as the contexts' alignment."""
    got = fast12.encode_request_12_contexts(msg.request_id, msg.response_flags, msg.object_key, msg.operation,
                                           msg.service_contexts, msg.body, msg.little_endian)
    assert got == codec._encode(msg)
    assert decode(got[:12], got[12:]) == with_offset(msg)
