"""Property tests of the GIOP core.

Round trips of every message type in GIOP 1.0, 1.1 and 1.2 and both byte
orders, fragment trains included; "parse or ProtocolError" fuzzing of the
connection, the decoder, the CDR reader and the IOR parser with arbitrary
and mutated input; and no allocation sized by a length read from the peer.
"""

from __future__ import annotations

import dataclasses
import struct
import tracemalloc
from unittest import mock
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
from pyorb.giop import codec, fast12
from pyorb.giop import connection as giop_connection
from pyorb.giop.cdr import CDRReader, CDRWriter
from pyorb.giop.ior import IOR, TaggedProfile, alternate_address_component, build_ior
from tests.fuzz.malformed import mutate
from tests.fuzz.readers import CDR_READS, read_ior

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


@st.composite
def fragmented_streams(
    draw: st.DrawFn, fragment: Fragmenter, version: Version
) -> tuple[Role, list[bytes], list[Message]]:
    """Several messages, fragmented in ``version``, as a stream of GIOP messages.

    GIOP 1.2 trains (told apart by request id) are interleaved; GIOP 1.1
    allows one train at a time, so its trains follow each other.  A message
    too short to be fragmented stays whole.  Returns the role that receives
    them, the stream and the messages in the order they complete.
    """
    role = draw(roles)
    little_endian = draw(st.booleans())
    kinds = [requests, replies, locate_requests, locate_replies]
    kinds = [k for k in kinds[: 2 if version == GIOP_1_1 else 4] if k in KINDS[role]]
    kind = st.sampled_from(kinds).flatmap(lambda k: k(version, little_endian))
    # One train per request id.
    msgs: list[Message] = [
        dataclasses.replace(cast(Any, draw(kind)), request_id=i) for i in range(draw(st.integers(1, 5)))
    ]
    pieces = [fragment(encode(m), draw(st.integers(24, 64))) for m in msgs]
    if version == GIOP_1_1:
        return role, [p for train in pieces for p in train], msgs
    # Take the next piece of a random train until all are used up.
    queues = [list(range(len(train))) for train in pieces]
    stream: list[bytes] = []
    done: list[Message] = []
    while any(queues):
        i = draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        stream.append(pieces[i][queues[i].pop(0)])
        if not queues[i]:
            done.append(msgs[i])
    return role, stream, done


@FAST
@given(st.data(), st.sampled_from([GIOP_1_1, GIOP_1_2]), st.lists(st.integers(0, 10_000), max_size=8))
def test_fragment_trains_interleaved_and_split_anywhere(
    fragment: Fragmenter, data: st.DataObject, version: Version, cuts: list[int]
) -> None:
    role, pieces, expected = data.draw(fragmented_streams(fragment, version))
    stream = b"".join(pieces)
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    got = run(GIOPConnection(role), [stream[a:b] for a, b in zip(bounds, bounds[1:])])
    plain = [dataclasses.replace(m, fragment_starts=()) if isinstance(m, (Request, Reply)) else m for m in got]
    assert plain == [normalized(m) for m in expected]


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


def outcome(role: Role, stream: bytes, chunk: int) -> tuple[list[Message], str | None]:
    """Messages and the error (if any) of ``stream`` fed ``chunk`` bytes at a time.

    The receive buffer is compacted after every 8 consumed bytes rather than
    64 KiB, so that compaction happens between the chunks of short streams.
    """
    conn = GIOPConnection(role, max_message_size=1024, max_fragment_trains=2)
    got: list[Message] = []
    try:
        with mock.patch.object(giop_connection, "_COMPACT_AFTER", 8):
            for data in [*(stream[i : i + chunk] for i in range(0, len(stream), chunk)), b""]:
                conn.receive_data(data)
                while (event := conn.next_event()) not in (NEED_DATA, CLOSED):
                    got.append(cast(Message, event))
    except ProtocolError as exc:
        with pytest.raises(ProtocolError):  # a dead connection stays dead
            conn.next_event()
        return got, exc.reason
    return got, None


@FUZZ
@given(
    roles.flatmap(lambda r: st.tuples(st.just(r), st.lists(messages(r), min_size=1, max_size=4))),
    st.lists(mutation, min_size=1, max_size=4),
    st.integers(24, 80),
    st.integers(1, 13),
)
def test_mutated_streams(
    fragment: Fragmenter,
    case: tuple[Role, list[Message]],
    mutations: list[tuple[str, int, int]],
    max_size: int,
    chunk: int,
) -> None:
    """Parse or ProtocolError, with the same messages and the same error
    whether the bytes come at once or in pieces."""
    role, msgs = case
    parts = []
    for msg in msgs:
        data = encode(msg)
        fragmented = msg.version != GIOP_1_0 and isinstance(msg, (Request, Reply))
        parts += fragment(data, max_size) if fragmented else [data]
    stream = mutate(b"".join(parts), mutations)
    assert outcome(role, stream, chunk) == outcome(role, stream, max(len(stream), 1))


@FUZZ
@given(messages(), st.lists(mutation, min_size=1, max_size=4))
def test_decode_mutated_message(msg: Message, mutations: list[tuple[str, int, int]]) -> None:
    """A mutated message decodes to something that encodes back to itself, or fails cleanly."""
    data = mutate(encode(msg), mutations)
    try:
        decoded = decode(data[:12], data[12:])
    except ProtocolError:
        return
    again = encode(decoded)
    assert decode(again[:12], again[12:]) == decoded


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
    fast = fast12._decode_request_12_fast(body, msg.little_endian)
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
    """If Request's fields change, update fast12._request_builder (or accept the cost)."""
    assert fast12._build_request is not Request


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


@pytest.mark.parametrize("little_endian", [True, False])
@pytest.mark.parametrize("version", [GIOP_1_0, GIOP_1_1, GIOP_1_2])
def test_header_declaring_4_gib_allocates_nothing_in_either_byte_order(
    version: Version, little_endian: bool
) -> None:
    size = struct.pack("<I" if little_endian else ">I", 2**32 - 1)
    huge = b"GIOP" + bytes((*version, int(little_endian), 0)) + size

    def action() -> None:
        conn = GIOPConnection(Role.SERVER, max_message_size=1 << 16)
        conn.receive_data(huge + b"\0" * 100)
        conn.next_event()

    assert peak_allocation(action) < 32 * 1024


# Small inputs may allocate a little (copies, decoded fields, exceptions);
# anything sized from a forged length is megabytes at least.
ALLOCATION_BOUND = 64 * 1024
huge_lengths = st.one_of(st.just(2**32 - 1), st.integers(2**24, 2**32 - 1))


def with_huge_ulong(data: bytes, slot: int, value: int, little_endian: bool) -> bytes:
    """``data`` with the 4-aligned ulong at slot ``slot`` (wrapping around) set to ``value``."""
    slots = len(data) // 4
    if not slots:
        return data
    at = 4 * (slot % slots)
    return data[:at] + struct.pack("<I" if little_endian else ">I", value) + data[at + 4 :]


@FUZZ
@given(
    roles.flatmap(lambda r: st.tuples(st.just(r), fragmentable(r) | messages(r))),
    st.integers(24, 120),
    st.integers(0, 1000),
    st.integers(2, 1000),
    huge_lengths,
)
def test_a_forged_length_anywhere_allocates_little(
    fragment: Fragmenter, case: tuple[Role, Message], max_size: int, piece: int, slot: int, value: int
) -> None:
    """Any ulong of any message or fragment (header size, key, operation, context and
    principal lengths, sequence counts, request ids) set to a huge value."""
    role, msg = case
    data = encode(msg)
    pieces = fragment(data, max_size) if msg.version != GIOP_1_0 else [data]
    i = piece % len(pieces)
    # Slot 2 is the header's size field, the first one worth forging.
    forged = with_huge_ulong(pieces[i], max(slot, 2), value, msg.little_endian)
    stream = b"".join([*pieces[:i], forged, *pieces[i + 1 :]])
    peak = peak_allocation(lambda: run(GIOPConnection(role), [stream]))
    assert peak < ALLOCATION_BOUND
    body = forged[12:] if i == 0 else b""
    if i == 0 and len(pieces) == 1:
        assert peak_allocation(lambda: decode(forged[:12], body)) < ALLOCATION_BOUND


@pytest.mark.parametrize("little_endian", [True, False])
@pytest.mark.parametrize(
    "read",
    [
        CDRReader.octets,
        CDRReader.string,
        CDRReader.encapsulation,
        lambda r: r.sequence(CDRReader.ulong, min_item_size=4),
        lambda r: r.sequence(CDRReader.octet),
        IOR.decode,
    ],
    ids=["octets", "string", "encapsulation", "sequence<ulong>", "sequence<octet>", "IOR"],
)
def test_cdr_lengths_declaring_4_gib_allocate_nothing(read: Callable[[CDRReader], object], little_endian: bool) -> None:
    data = struct.pack("<I" if little_endian else ">I", 2**32 - 1) + b"\1" * 64
    assert peak_allocation(lambda: read(CDRReader(data, little_endian))) < 32 * 1024


@st.composite
def iors(draw: st.DrawFn) -> IOR:
    """An IOR with IIOP profiles carrying code-set, ORB type and address components."""
    little_endian = draw(st.booleans())
    ior = build_ior(
        draw(st.text("IDL:Bench/Echo:1.0", max_size=20)),
        draw(st.sampled_from(["127.0.0.1", "::1", "example.org"])),
        draw(st.integers(1, 65535)),
        draw(keys),
        version=draw(st.sampled_from([(1, 0), (1, 1), (1, 2)])),
        orb_type=draw(st.none() | ulongs),
        little_endian=little_endian,
    )
    profile = ior.iiop
    assert profile is not None
    extra = (alternate_address_component("10.0.0.1", 2809, not little_endian),)
    if profile.version != (1, 0):
        profile = dataclasses.replace(profile, components=profile.components + extra)
    other = TaggedProfile(draw(st.integers(1, 2**32 - 1)), draw(keys))  # not IIOP: kept verbatim
    return IOR(ior.type_id, (profile, other), little_endian)


@FUZZ
@given(iors(), st.integers(0, 1000), huge_lengths)
def test_ior_with_a_forged_length_allocates_little(ior: IOR, slot: int, value: int) -> None:
    """Type id, profile and component counts and lengths, nested encapsulations:
    nested encapsulations start 4-aligned, so every ulong sits in some slot."""
    for little_endian in (True, False):  # an encapsulation may hold either order
        forged = with_huge_ulong(ior.to_bytes(), slot, value, little_endian)
        assert peak_allocation(lambda: read_ior(forged)) < ALLOCATION_BOUND
        text = "IOR:" + forged.hex()
        assert peak_allocation(lambda: IOR.from_string(text)) < ALLOCATION_BOUND


@FAST
@given(iors())
def test_ior_round_trip_through_bytes_and_string(ior: IOR) -> None:
    assert IOR.from_bytes(ior.to_bytes()) == ior
    again = IOR.from_string(ior.to_string())
    assert again == ior and again.to_bytes() == ior.to_bytes()  # byte order kept too


# ------------------------------------------------------------------ CDR

primitives = st.one_of(
    st.tuples(st.just("octet"), st.integers(0, 255)),
    st.tuples(st.just("boolean"), st.booleans()),
    st.tuples(st.just("ushort"), st.integers(0, 2**16 - 1)),
    st.tuples(st.just("short"), st.integers(-(2**15), 2**15 - 1)),
    st.tuples(st.just("ulong"), ulongs),
    st.tuples(st.just("long"), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("ulonglong"), st.integers(0, 2**64 - 1)),
    st.tuples(st.just("octets"), st.binary(max_size=20)),
    st.tuples(st.just("string"), operations),
)


@FAST
@given(st.lists(primitives, max_size=12), st.booleans(), st.integers(0, 15))
def test_cdr_round_trip(values: list[tuple[str, Any]], little_endian: bool, base: int) -> None:
    """What the writer writes at any stream offset, the reader reads back."""
    w = CDRWriter(little_endian, base=base)
    for kind, value in values:
        getattr(w, kind)(value)
    r = CDRReader(w.getvalue(), little_endian, base=base)
    assert [getattr(r, kind)() for kind, _ in values] == [v for _, v in values]
    assert r.remaining == 0




@FUZZ
@given(st.binary(max_size=100), st.booleans(), st.integers(0, 15), st.lists(st.sampled_from(CDR_READS), max_size=6))
def test_cdr_reads_of_arbitrary_bytes(
    data: bytes, little_endian: bool, base: int, reads: list[Callable[[CDRReader], object]]
) -> None:
    """Each read returns a value and stays inside the data, or raises ProtocolError."""
    r = CDRReader(data, little_endian, base=base)
    try:
        for read in reads:
            read(r)
            assert 0 <= r.pos <= len(data)
    except ProtocolError:
        pass
