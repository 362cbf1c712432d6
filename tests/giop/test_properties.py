"""Property tests: round trips of every message, and "parse or ProtocolError" fuzzing."""

from __future__ import annotations

import dataclasses
import struct
import tracemalloc
from typing import Any, Callable, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyorb.giop import (
    CLOSED,
    GIOP_1_0,
    GIOP_1_1,
    GIOP_1_2,
    NEED_DATA,
    SUPPORTED_VERSIONS,
    CancelRequest,
    CloseConnection,
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
    Version,
    body_offset,
    decode,
    encode,
)
from pyorb.giop import codec
from pyorb.giop.cdr import CDRReader, CDRWriter

Fragmenter = Callable[[bytes, int], "list[bytes]"]

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ulongs = st.integers(0, 2**32 - 1)
keys = st.binary(max_size=40)
bodies = st.binary(max_size=80)
operations = st.text(st.characters(codec="utf-8"), max_size=24)
contexts = st.lists(st.builds(ServiceContext, ulongs, st.binary(max_size=12)), max_size=3).map(
    tuple
)


@st.composite
def target_member(draw: st.DrawFn, disposition: int, little_endian: bool) -> bytes:
    """The raw CDR of a ProfileAddr or ReferenceAddr TargetAddress member."""
    w = CDRWriter(little_endian)
    profile = st.tuples(ulongs, st.binary(max_size=16))
    if disposition == 1:
        tag, data = draw(profile)
        w.ulong(tag)
        w.octets(data)
        return w.getvalue()
    w.ulong(draw(st.integers(0, 3)))
    w.string(draw(st.text("IDL:abc/1.0", max_size=12)))
    profiles = draw(st.lists(profile, max_size=2))
    w.ulong(len(profiles))
    for tag, data in profiles:
        w.ulong(tag)
        w.octets(data)
    return w.getvalue()


@st.composite
def requests(draw: st.DrawFn, version: Version, little_endian: bool) -> Request:
    disposition = draw(st.sampled_from([0, 1, 2])) if version == GIOP_1_2 else 0
    key = draw(keys) if disposition == 0 else draw(target_member(disposition, little_endian))
    return Request(
        request_id=draw(ulongs),
        response_flags=draw(st.sampled_from([0, 1, 3] if version == GIOP_1_2 else [0, 3])),
        object_key=key,
        operation=draw(operations),
        body=draw(bodies),
        service_contexts=draw(contexts),
        version=version,
        little_endian=little_endian,
        requesting_principal=b"" if version == GIOP_1_2 else draw(keys),
        addressing_disposition=disposition,
    )


@st.composite
def locate_requests(draw: st.DrawFn, version: Version, little_endian: bool) -> LocateRequest:
    request = draw(requests(version, little_endian))
    assert isinstance(request, Request)
    return LocateRequest(
        request.request_id, request.object_key, version, little_endian,
        request.addressing_disposition,
    )


def reply_statuses(version: Version) -> st.SearchStrategy[ReplyStatus]:
    members = list(ReplyStatus)
    return st.sampled_from(members if version == GIOP_1_2 else members[:4])


def locate_statuses(version: Version) -> st.SearchStrategy[LocateStatus]:
    members = list(LocateStatus)
    return st.sampled_from(members if version == GIOP_1_2 else members[:3])


@st.composite
def replies(draw: st.DrawFn, version: Version, little_endian: bool) -> Reply:
    return Reply(
        draw(ulongs),
        draw(reply_statuses(version)),
        draw(bodies),
        draw(contexts),
        version,
        little_endian,
    )


@st.composite
def locate_replies(draw: st.DrawFn, version: Version, little_endian: bool) -> LocateReply:
    return LocateReply(
        draw(ulongs),
        draw(locate_statuses(version)),
        draw(bodies),
        version,
        little_endian,
    )


def cancels(version: Version, little_endian: bool) -> st.SearchStrategy[CancelRequest]:
    return st.builds(CancelRequest, ulongs, st.just(version), st.just(little_endian))


def closes(version: Version, little_endian: bool) -> st.SearchStrategy[CloseConnection]:
    return st.just(CloseConnection(version, little_endian))


def errors(version: Version, little_endian: bool) -> st.SearchStrategy[MessageError]:
    return st.just(MessageError(version, little_endian))


KINDS: dict[Role, list[Callable[[Version, bool], st.SearchStrategy[Any]]]] = {
    Role.SERVER: [requests, cancels, locate_requests, closes, errors],
    Role.CLIENT: [replies, locate_replies, closes, errors],
}


@st.composite
def messages(draw: st.DrawFn, role: Role | None = None) -> Message:
    """Any message (or one that ``role`` may receive), in any version and byte order."""
    version: Version = draw(st.sampled_from(SUPPORTED_VERSIONS))
    little_endian: bool = draw(st.booleans())
    kinds = KINDS[role] if role else KINDS[Role.SERVER] + KINDS[Role.CLIENT]
    kind = draw(st.sampled_from(kinds))
    return cast(Message, draw(kind(version, little_endian)))


roles = st.sampled_from([Role.SERVER, Role.CLIENT])


def normalized(msg: Message) -> Message:
    if isinstance(msg, (Request, Reply, LocateReply)):
        return dataclasses.replace(msg, body_offset=body_offset(msg))
    return msg


def run(conn: GIOPConnection, chunks: list[bytes], eof: bool = True) -> list[Message]:
    """Feed chunks, collecting messages; ProtocolError propagates, as anything else would."""
    out: list[Message] = []
    for chunk in [*filter(None, chunks), b""] if eof else filter(None, chunks):
        conn.receive_data(chunk)
        while (event := conn.next_event()) not in (NEED_DATA, CLOSED):
            out.append(cast(Message, event))
    return out


# ------------------------------------------------------------------ round trips


@FAST
@given(messages())
def test_round_trip(msg: Message) -> None:
    data = encode(msg)
    assert struct.unpack_from("<I" if msg.little_endian else ">I", data, 8)[0] == len(data) - 12
    decoded = decode(data[:12], data[12:])
    assert decoded == normalized(msg)
    if isinstance(msg, (Request, Reply, LocateReply)) and msg.body:
        assert data[body_offset(msg) :] == msg.body


@FAST
@given(roles.flatmap(lambda r: st.tuples(st.just(r), st.lists(messages(r), max_size=6))),
       st.lists(st.integers(0, 10_000), max_size=8))
def test_stream_split_anywhere(case: tuple[Role, list[Message]], cuts: list[int]) -> None:
    role, msgs = case
    stream = b"".join(map(encode, msgs))
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    assert run(GIOPConnection(role), chunks) == [normalized(m) for m in msgs]


def fragmentable(role: Role) -> st.SearchStrategy[Message]:
    def ok(msg: Message) -> bool:
        if msg.version == GIOP_1_1:
            return isinstance(msg, (Request, Reply))
        return msg.version == GIOP_1_2 and isinstance(
            msg, (Request, Reply, LocateRequest, LocateReply)
        )

    return messages(role).filter(ok)


@FAST
@given(roles.flatmap(lambda r: st.tuples(st.just(r), fragmentable(r))), st.integers(24, 200))
def test_fragmented_round_trip(
    fragment: Fragmenter, case: tuple[Role, Message], max_size: int
) -> None:
    role, msg = case
    conn = GIOPConnection(role)
    got = run(conn, fragment(encode(msg), max_size))
    # 1.1 trains also carry their fragment boundaries (checked in test_connection).
    plain = [dataclasses.replace(m, fragment_starts=()) if isinstance(m, (Request, Reply)) else m for m in got]
    assert plain == [normalized(msg)]


# ------------------------------------------------------------------ fuzzing


@FUZZ
@given(roles, st.binary(max_size=200))
def test_arbitrary_bytes(role: Role, data: bytes) -> None:
    try:
        run(GIOPConnection(role, max_message_size=4096), [data])
    except ProtocolError:
        pass


@FUZZ
@given(st.binary(min_size=12, max_size=12), st.binary(max_size=120))
def test_decode_arbitrary_bytes(header: bytes, body: bytes) -> None:
    header = b"GIOP" + header[4:]  # get past the magic check most of the time
    try:
        decode(header, body)
    except ProtocolError:
        pass


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.integers(0, 255)),
)


def mutate(data: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for kind, where, arg in mutations:
        if not buf:
            break
        i = where % len(buf)
        if kind == "flip":
            buf[i] ^= 1 << arg
        elif kind == "truncate":
            del buf[i:]
        elif kind == "insert":
            buf.insert(i, arg)
        elif kind == "delete":
            del buf[i : i + arg]
        else:
            buf[i] = arg
    return bytes(buf)


@FUZZ
@given(
    roles.flatmap(lambda r: st.tuples(st.just(r), st.lists(messages(r), min_size=1, max_size=4))),
    st.lists(mutation, min_size=1, max_size=4),
    st.integers(24, 80),
)
def test_mutated_streams(
    fragment: Fragmenter,
    case: tuple[Role, list[Message]],
    mutations: list[tuple[str, int, int]],
    max_size: int,
) -> None:
    role, msgs = case
    parts = []
    for msg in msgs:
        data = encode(msg)
        fragmented = msg.version != GIOP_1_0 and isinstance(msg, (Request, Reply))
        parts += fragment(data, max_size) if fragmented else [data]
    stream = mutate(b"".join(parts), mutations)
    try:
        run(GIOPConnection(role, max_message_size=1024, max_fragment_trains=2), [stream])
    except ProtocolError:
        pass


@FUZZ
@given(
    st.booleans().flatmap(lambda le: requests(GIOP_1_2, le)),
    st.lists(mutation, max_size=3),
)
def test_fast_request_path_agrees_with_the_general_path(
    msg: Request, mutations: list[tuple[str, int, int]]
) -> None:
    """The struct-based GIOP 1.2 Request decoder says what the CDRReader one says."""
    body = mutate(encode(msg)[12:], mutations)
    fast = codec._decode_request_12_fast(body, msg.little_endian)
    try:
        general: Request | None = codec._decode_request(
            CDRReader(body, msg.little_endian, base=12), GIOP_1_2
        )
    except ProtocolError:
        general = None
    if fast is not None:
        assert fast == general
    else:  # the fast path only gives up on what is malformed or not KeyAddr
        assert general is None or general.addressing_disposition != 0


def test_fast_request_builder_is_in_use() -> None:
    """If Request's fields change, update codec._request_builder (or accept the cost)."""
    assert codec._build_request is not Request


# ------------------------------------------------------------------ allocation


def peak_allocation(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
    except ProtocolError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


@pytest.mark.parametrize("version", [GIOP_1_0, GIOP_1_1, GIOP_1_2])
def test_header_declaring_4_gib_allocates_nothing(version: Version) -> None:
    huge = b"GIOP" + bytes((*version, 1, 0)) + struct.pack("<I", 2**32 - 1)

    def action() -> None:
        conn = GIOPConnection(Role.SERVER, max_message_size=1 << 16)
        conn.receive_data(huge + b"\0" * 100)
        conn.next_event()

    assert peak_allocation(action) < 32 * 1024


def test_lengths_declaring_4_gib_allocate_nothing() -> None:
    """A small Request whose key, string and sequence lengths all claim 4 GiB."""
    bodies = [
        struct.pack("<IB3xh2xI", 1, 3, 0, 2**32 - 1) + b"k" * 64,
        struct.pack("<IB3xh2xI", 1, 3, 0, 1) + b"k\0\0\0" + struct.pack("<I", 2**32 - 1),
        struct.pack("<IB3xh2xI", 1, 3, 0, 1) + b"k\0\0\0" + struct.pack("<I", 2) + b"x\0\0\0"
        + struct.pack("<I", 2**32 - 1) + b"\0" * 64,
    ]
    for body in bodies:
        data = b"GIOP\x01\x02\x01\x00" + struct.pack("<I", len(body)) + body
        assert peak_allocation(lambda: run(GIOPConnection(Role.SERVER), [data])) < 32 * 1024
