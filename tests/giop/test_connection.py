"""GIOPConnection tests: framing, roles, fragments, limits, EOF and errors."""

from __future__ import annotations

import dataclasses
import struct
from typing import Callable

import pytest

from pyorb.giop import (
    CLOSED,
    GIOP_1_0,
    GIOP_1_1,
    GIOP_1_2,
    NEED_DATA,
    CancelRequest,
    CloseConnection,
    Event,
    GIOPConnection,
    LocateReply,
    LocateRequest,
    LocateStatus,
    Message,
    MessageError,
    ProtocolError,
    Reply,
    ReplyStatus,
    Request,
    Role,
    ServiceContext,
    decode,
    encode,
    message_error,
)

Fragmenter = Callable[[bytes, int], "list[bytes]"]

# Messages each role receives, in every version and both byte orders.
TO_SERVER: list[Message] = [
    Request(1, 3, b"key", "op", b"\x01\x02\x03", (ServiceContext(1, b"cs"),)),
    Request(2, 0, b"key", "oneway", version=GIOP_1_0, little_endian=False),
    Request(3, 3, b"k" * 40, "big", b"b" * 1000, version=GIOP_1_1, requesting_principal=b"p"),
    CancelRequest(1, little_endian=False),
    LocateRequest(4, b"key", GIOP_1_1),
    CloseConnection(GIOP_1_2),
    MessageError(GIOP_1_0),
]
TO_CLIENT: list[Message] = [
    Reply(1, ReplyStatus.NO_EXCEPTION, b"\x00" * 16),
    Reply(2, ReplyStatus.SYSTEM_EXCEPTION, b"IDL:x:1.0\x00", version=GIOP_1_0, little_endian=False),
    LocateReply(3, LocateStatus.OBJECT_HERE, version=GIOP_1_1),
    LocateReply(4, LocateStatus.OBJECT_FORWARD, b"IOR", little_endian=False),
    CloseConnection(GIOP_1_1, little_endian=False),
    MessageError(),
]
CASES = [(Role.SERVER, TO_SERVER), (Role.CLIENT, TO_CLIENT)]
CASE_IDS = ["server", "client"]


def normalized(msg: Message) -> Message:
    """``msg`` as the decoder returns it (with its body_offset filled in)."""
    data = encode(msg)
    return decode(data[:12], data[12:])


def drain(conn: GIOPConnection) -> list[Event]:
    """Every event available now, up to and including NEED_DATA or CLOSED."""
    events: list[Event] = []
    while not events or events[-1] not in (NEED_DATA, CLOSED):
        events.append(conn.next_event())
    return events


def feed(conn: GIOPConnection, *chunks: bytes) -> list[Event]:
    """Feed each chunk in turn and collect the messages that come out."""
    events: list[Event] = []
    for chunk in chunks:
        conn.receive_data(chunk)
        events += drain(conn)
    return [e for e in events if e not in (NEED_DATA, CLOSED)]


@pytest.mark.parametrize(("role", "messages"), CASES, ids=CASE_IDS)
def test_whole_stream_in_one_chunk(role: Role, messages: list[Message]) -> None:
    conn = GIOPConnection(role)
    conn.receive_data(b"".join(map(encode, messages)))
    conn.receive_data(b"")
    assert drain(conn) == [*map(normalized, messages), CLOSED]
    assert conn.next_event() is CLOSED  # repeatedly
    assert not conn.in_progress


@pytest.mark.parametrize(("role", "messages"), CASES, ids=CASE_IDS)
def test_byte_at_a_time(role: Role, messages: list[Message]) -> None:
    stream = b"".join(map(encode, messages))
    conn = GIOPConnection(role)
    assert conn.next_event() is NEED_DATA
    events = feed(conn, *(stream[i : i + 1] for i in range(len(stream))))
    assert events == list(map(normalized, messages))


def test_next_event_returns_one_message_per_call() -> None:
    conn = GIOPConnection(Role.SERVER)
    conn.receive_data(encode(CancelRequest(1)) + encode(CancelRequest(2)))
    assert conn.next_event() == CancelRequest(1)
    assert conn.next_event() == CancelRequest(2)
    assert conn.next_event() is NEED_DATA


def test_long_stream_compacts_the_buffer() -> None:
    request = Request(7, 3, b"key", "op", b"x" * 100)
    stream = encode(request) * 3000  # about 450 KB, fed in chunks that split messages
    conn = GIOPConnection(Role.SERVER)
    count, peak = 0, 0
    for i in range(0, len(stream), 1000):
        count += len(feed(conn, stream[i : i + 1000]))
        peak = max(peak, len(conn._buf))
    assert count == 3000
    assert peak < 70 * 1024  # compacted once 64 KiB were consumed
    assert not conn.in_progress


def test_eof_with_nothing_buffered_is_closed() -> None:
    conn = GIOPConnection(Role.CLIENT)
    conn.receive_data(b"")
    assert conn.next_event() is CLOSED
    assert conn.next_event() is CLOSED
    with pytest.raises(RuntimeError):
        conn.receive_data(b"more")


@pytest.mark.parametrize("length", [1, 11, 12, 20])
def test_eof_in_the_middle_of_a_message(length: int) -> None:
    conn = GIOPConnection(Role.SERVER)
    conn.receive_data(encode(Request(1, 3, b"key", "op"))[:length])
    assert conn.next_event() is NEED_DATA
    assert conn.in_progress
    conn.receive_data(b"")
    with pytest.raises(ProtocolError) as info:
        conn.next_event()
    assert not info.value.send_message_error


def test_eof_in_the_middle_of_a_fragment_train(fragment: Fragmenter) -> None:
    conn = GIOPConnection(Role.SERVER)
    first, *_rest = fragment(encode(Request(1, 3, b"key", "op", b"x" * 100)), 64)
    assert feed(conn, first) == []
    assert conn.in_progress
    conn.receive_data(b"")
    with pytest.raises(ProtocolError) as info:
        conn.next_event()
    assert not info.value.send_message_error


# ------------------------------------------------------------------ fragments


@pytest.mark.parametrize("version", [GIOP_1_1, GIOP_1_2])
@pytest.mark.parametrize("little_endian", [True, False])
def test_fragmented_request(fragment: Fragmenter, version: tuple[int, int], little_endian: bool) -> None:
    msg = Request(9, 3, b"key", "op", bytes(range(256)) * 4, version=version,
                  little_endian=little_endian)
    parts = fragment(encode(msg), 128)
    assert len(parts) > 5
    conn = GIOPConnection(Role.SERVER)
    events = feed(conn, *parts[:-1])
    assert events == []
    assert conn.in_progress
    (got,) = feed(conn, parts[-1])
    assert not conn.in_progress
    assert isinstance(got, Request)
    assert dataclasses.replace(got, fragment_starts=()) == normalized(msg)
    if version == GIOP_1_1:
        # GIOP 1.1 trains remember where each Fragment's payload began, relative to
        # the body, because omniORB restarts CDR alignment in every fragment.
        payload = 128 - 12
        first = payload - (got.body_offset - 12)
        assert got.fragment_starts == tuple(first + k * payload for k in range(len(parts) - 1))
    else:
        assert got.fragment_starts == ()


@pytest.mark.parametrize("version", [GIOP_1_1, GIOP_1_2])
def test_large_reply_in_omniorb_sized_fragments(fragment: Fragmenter, version: tuple[int, int]) -> None:
    body = bytes(i % 251 for i in range(200_000))  # well over 64 KiB
    msg = Reply(3, ReplyStatus.NO_EXCEPTION, body, version=version)
    parts = fragment(encode(msg), 8192)
    assert {len(p) for p in parts[1:-1]} == {8192}
    assert all(struct.unpack_from("<I", p, 8)[0] == 8180 for p in parts[:-1])
    conn = GIOPConnection(Role.CLIENT)
    (reply,) = feed(conn, b"".join(parts))
    assert isinstance(reply, Reply)
    assert reply.body == body


def test_interleaved_trains_1_2(fragment: Fragmenter) -> None:
    a = Request(1, 3, b"key", "a", b"A" * 300)
    b = Request(2, 3, b"key", "b", b"B" * 500, little_endian=False)
    pa, pb = fragment(encode(a), 64), fragment(encode(b), 64)
    assert len(pb) > len(pa) > 3
    stream = [pb[0], pa[0], *[p for pair in zip(pb[1:], pa[1:]) for p in pair], *pb[len(pa):]]
    stream.insert(3, encode(CancelRequest(5)))  # other messages may come in between
    conn = GIOPConnection(Role.SERVER)
    assert feed(conn, *stream) == [CancelRequest(5), normalized(a), normalized(b)]
    assert not conn.in_progress


def test_fragmented_locate_request_1_2(fragment: Fragmenter) -> None:
    msg = LocateRequest(8, b"k" * 100)
    conn = GIOPConnection(Role.SERVER)
    assert feed(conn, *fragment(encode(msg), 40)) == [msg]


def test_fragment_byte_order_may_differ_from_the_train(fragment: Fragmenter) -> None:
    msg = Request(0x01020304, 3, b"key", "op", b"x" * 100)
    first, second = fragment(encode(msg), 100)
    flipped = second[:6] + bytes((second[6] & ~1, 7)) + second[8:12][::-1] + second[12:16][::-1]
    conn = GIOPConnection(Role.SERVER)
    assert feed(conn, first, flipped + second[16:]) == [normalized(msg)]


# ------------------------------------------------------------------ errors


def header(version: tuple[int, int], flags: int, msg_type: int, size: int) -> bytes:
    order = "<" if flags & 1 else ">"
    return b"GIOP" + bytes((*version, flags, msg_type)) + struct.pack(order + "I", size)


def fragment_1_2(request_id: int, data: bytes, more: bool = False) -> bytes:
    return header(GIOP_1_2, 1 | (2 if more else 0), 7, 4 + len(data)) + struct.pack(
        "<I", request_id
    ) + data


def train_start(request_id: int, version: tuple[int, int] = GIOP_1_2) -> bytes:
    data = encode(Request(request_id, 3, b"key", "op", version=version))
    return data[:6] + bytes((data[6] | 2,)) + data[7:]


ERRORS: list[tuple[str, Role, bytes]] = [
    ("wrong-magic", Role.SERVER, b"GIOX" + encode(CloseConnection())[4:]),
    ("version-1.3", Role.SERVER, header((1, 3), 1, 5, 0)),
    ("version-2.0", Role.CLIENT, header((2, 0), 1, 5, 0)),
    ("unknown-type", Role.SERVER, header(GIOP_1_2, 1, 8, 0)),
    ("fragment-in-1.0", Role.SERVER, header(GIOP_1_0, 1, 7, 0)),
    ("reply-to-server", Role.SERVER, encode(Reply(1, ReplyStatus.NO_EXCEPTION))),
    ("request-to-client", Role.CLIENT, encode(Request(1, 3, b"k", "op"))),
    ("locate-request-to-client", Role.CLIENT, encode(LocateRequest(1, b"k"))),
    ("cancel-to-client", Role.CLIENT, encode(CancelRequest(1))),
    ("locate-reply-to-server", Role.SERVER, encode(LocateReply(1, LocateStatus.OBJECT_HERE))),
    ("request-strings-past-end", Role.SERVER,
     header(GIOP_1_2, 1, 0, 16) + struct.pack("<IB3xh2xI", 1, 3, 0, 1000)),
    ("fragment-without-train", Role.SERVER, fragment_1_2(1, b"data")),
    ("fragment-1.1-without-train", Role.CLIENT, header(GIOP_1_1, 1, 7, 4) + b"data"),
    ("fragment-unknown-request-id", Role.SERVER, train_start(1) + fragment_1_2(2, b"x")),
    ("fragment-1.1-for-1.2-train", Role.SERVER,
     train_start(1) + header(GIOP_1_1, 1, 7, 4) + b"data"),
    ("fragment-1.2-for-1.1-train", Role.SERVER,
     train_start(1, GIOP_1_1) + fragment_1_2(1, b"data")),
    ("second-train-1.1", Role.SERVER, train_start(1, GIOP_1_1) + train_start(2, GIOP_1_1)),
    ("same-request-id-twice-1.2", Role.SERVER, train_start(1) + train_start(1)),
    ("fragment-1.2-shorter-than-request-id", Role.SERVER,
     train_start(1) + header(GIOP_1_2, 1, 7, 2) + b"\x01\x00"),
    ("train-start-shorter-than-request-id", Role.CLIENT, header(GIOP_1_2, 3, 1, 2) + b"\x01\x00"),
    ("reassembled-message-malformed", Role.SERVER,
     header(GIOP_1_2, 3, 0, 8) + struct.pack("<IB3x", 1, 3) + fragment_1_2(1, b"\xff" * 8)),
]


@pytest.mark.parametrize(("role", "data"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_protocol_errors(role: Role, data: bytes) -> None:
    conn = GIOPConnection(role)
    conn.receive_data(data)
    with pytest.raises(ProtocolError) as info:
        drain(conn)
    assert info.value.send_message_error
    # The connection is dead from now on.
    with pytest.raises(ProtocolError):
        conn.next_event()
    conn.receive_data(encode(MessageError()))
    with pytest.raises(ProtocolError):
        conn.next_event()


@pytest.mark.parametrize(("role", "data"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_protocol_errors_byte_at_a_time(role: Role, data: bytes) -> None:
    conn = GIOPConnection(role)
    with pytest.raises(ProtocolError):
        feed(conn, *(data[i : i + 1] for i in range(len(data))))


def test_size_limit_is_checked_on_the_header_alone() -> None:
    conn = GIOPConnection(Role.SERVER, max_message_size=1000)
    conn.receive_data(header(GIOP_1_2, 1, 0, 1001))
    with pytest.raises(ProtocolError, match="exceeds"):
        conn.next_event()  # no NEED_DATA first: the body is never waited for
    conn.receive_data(b"\0" * 100_000)  # discarded: nothing is buffered any more
    assert not conn.in_progress
    assert len(conn._buf) == 0


def test_size_limit_allows_the_maximum() -> None:
    conn = GIOPConnection(Role.SERVER, max_message_size=8)
    assert feed(conn, encode(LocateRequest(1, b"", GIOP_1_0))) == [
        LocateRequest(1, b"", GIOP_1_0)
    ]


def test_train_limit_is_checked_on_each_fragment_header(fragment: Fragmenter) -> None:
    conn = GIOPConnection(Role.SERVER, max_message_size=200)
    parts = fragment(encode(Request(1, 3, b"key", "op", b"x" * 400)), 64)
    consumed = 0
    with pytest.raises(ProtocolError, match="exceeds"):
        for part in parts:
            # Only the 16-byte fragment header (with its request id) goes in
            # first: the limit must trip on it, before any body is buffered.
            feed(conn, part[:16])
            consumed += 1
            feed(conn, part[16:])
    assert 0 < consumed < len(parts)


def test_train_limit_1_1(fragment: Fragmenter) -> None:
    conn = GIOPConnection(Role.SERVER, max_message_size=200)
    parts = fragment(encode(Request(1, 3, b"key", "op", b"x" * 400, version=GIOP_1_1)), 64)
    with pytest.raises(ProtocolError, match="exceeds"):
        feed(conn, *parts)


def test_too_many_trains() -> None:
    conn = GIOPConnection(Role.SERVER, max_fragment_trains=3)
    feed(conn, train_start(1), train_start(2), train_start(3))
    assert conn.in_progress
    with pytest.raises(ProtocolError, match="trains"):
        feed(conn, train_start(4))


def test_trains_limit_counts_open_trains_only() -> None:
    conn = GIOPConnection(Role.SERVER, max_fragment_trains=1)
    for request_id in range(5):
        events = feed(conn, train_start(request_id), fragment_1_2(request_id, b""))
        assert [e.request_id for e in events] == [request_id]  # type: ignore[union-attr]


# ------------------------------------------------------------------ sending


def test_send_encodes() -> None:
    reply = Reply(1, ReplyStatus.NO_EXCEPTION, b"body")
    assert GIOPConnection(Role.SERVER).send(reply) == encode(reply)
    request = Request(1, 3, b"k", "op")
    assert GIOPConnection(Role.CLIENT).send(request) == encode(request)


@pytest.mark.parametrize(
    ("role", "msg"),
    [
        (Role.CLIENT, Reply(1, ReplyStatus.NO_EXCEPTION)),
        (Role.CLIENT, LocateReply(1, LocateStatus.OBJECT_HERE)),
        (Role.SERVER, Request(1, 3, b"k", "op")),
        (Role.SERVER, LocateRequest(1, b"k")),
        (Role.SERVER, CancelRequest(1)),
    ],
)
def test_send_role_checks(role: Role, msg: Message) -> None:
    with pytest.raises(ValueError):
        GIOPConnection(role).send(msg)


def test_message_error_in_the_peer_version() -> None:
    conn = GIOPConnection(Role.SERVER)
    assert conn.peer_version == GIOP_1_2
    assert conn.message_error_bytes() == message_error(GIOP_1_2)
    feed(conn, encode(CancelRequest(1, GIOP_1_0, little_endian=False)))
    assert conn.peer_version == GIOP_1_0
    assert conn.message_error_bytes() == message_error(GIOP_1_0, little_endian=False)
    conn.receive_data(header((1, 7), 1, 0, 0))  # an unknown version leaves it alone
    with pytest.raises(ProtocolError):
        conn.next_event()
    assert conn.message_error_bytes() == message_error(GIOP_1_0, little_endian=False)
