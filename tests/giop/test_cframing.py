"""The C twins of the core's per-message functions (pyorb/giop/_cframing.pyx) agree with the Python ones.

Each twin must give exactly what its Python original gives (equal values of
the same types, the same bytes) or raise the same exception with the same
message, on generated messages, their mutations and arbitrary bytes.  The
tests run whenever the extension is built, whichever path the process uses
(the registry keeps the originals: ``pyorb._accelerator.TWINS``),
and ``GIOPConnection``'s per-read methods must give the same events and leave
the same state on any sequence of reads.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyorb import _accelerator
from pyorb.giop import (
    CLOSED, GIOP_1_2, NEED_DATA, GIOPConnection, ProtocolError, Reply, ReplyStatus, Request, Role, ServiceContext, codec,
    connection, encode,
)

cframing = pytest.importorskip("pyorb.giop._cframing", reason="the compiled accelerator is not built")

MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ulongs = st.integers(0, 2**32 - 1)
contexts = st.lists(st.builds(ServiceContext, ulongs, st.binary(max_size=12)), max_size=3).map(tuple)
requests = st.builds(
    Request, ulongs, st.integers(0, 255), st.binary(max_size=20), st.text(max_size=12), st.binary(max_size=24),
    contexts, st.just(GIOP_1_2), st.booleans(),
)
replies = st.builds(Reply, ulongs, st.sampled_from(list(ReplyStatus)), st.binary(max_size=24), contexts,
                    st.just(GIOP_1_2), st.booleans())


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What ``fn(*args)`` gives: ("value", value and its field types) or ("raises", type and message)."""
    try:
        value = fn(*args)
    except Exception as exc:  # the kind and message are what is compared
        return "raises", (type(exc), str(exc))
    if dataclasses.is_dataclass(value):
        return "value", (value, type(value), tuple(type(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, tuple):
        return "value", (value, type(value), tuple(type(v) for v in value))
    return "value", (value, type(value))


def original(name: str) -> Any:
    """The Python original of ``_cframing``'s twin ``name``, as the registry keeps every twin's."""
    (found,) = [t.original for t in _accelerator.TWINS.values()
                if t.native == "pyorb.giop._cframing" and t.name == name]
    return found


def same(name: str, *args: Any) -> None:
    python, compiled = original(name), getattr(cframing, name)
    assert outcome(compiled, *args) == outcome(python, *args), (name, args)


def mutate(data: bytes, where: int, value: int, cut: int) -> bytes:
    if data:
        data = data[:where % len(data)] + bytes((value,)) + data[where % len(data) + 1:]
    return data[:len(data) - cut] if cut else data


@MANY
@given(requests, st.integers(0, 200), st.integers(0, 255), st.integers(0, 8))
def test_request_decoding_agrees(msg: Request, where: int, value: int, cut: int) -> None:
    body = encode(msg)[12:]
    same("_decode_request_12_fast", body, msg.little_endian)
    same("_decode_request_12_fast", memoryview(mutate(body, where, value, cut)), msg.little_endian)
    same("_decode_request_12_fast", bytearray(mutate(body, where, value, 0)), not msg.little_endian)


@MANY
@given(replies, st.integers(0, 200), st.integers(0, 255), st.integers(0, 8))
def test_reply_decoding_agrees(msg: Reply, where: int, value: int, cut: int) -> None:
    body = encode(msg)[12:]
    same("_decode_reply_12_fast", body, msg.little_endian)
    same("_decode_reply_12_fast", memoryview(mutate(body, where, value, cut)), msg.little_endian)


@MANY
@given(st.binary(max_size=40), st.booleans())
def test_decoders_agree_on_arbitrary_bytes(data: bytes, little: bool) -> None:
    same("_decode_request_12_fast", data, little)
    same("_decode_reply_12_fast", data, little)


headers = st.builds(
    lambda magic, major, minor, flags, kind, size, tail: magic + bytes((major, minor, flags, kind)) + size + tail,
    st.sampled_from([b"GIOP", b"GIOQ", b"giop"]), st.sampled_from([0, 1, 2]), st.integers(0, 4),
    st.integers(0, 5), st.integers(0, 9), st.binary(min_size=4, max_size=4), st.binary(max_size=4),
)


@MANY
@given(headers, st.integers(-14, 6))
def test_header_parsing_agrees(data: bytes, offset: int) -> None:
    same("parse_header", data, offset)
    same("parse_header", bytearray(data), offset)
    same("parse_header", memoryview(data), max(offset, 0))


@MANY
@given(st.binary(max_size=16))
def test_header_parsing_agrees_on_arbitrary_bytes(data: bytes) -> None:
    same("parse_header", data)


def test_header_parsing_rejects_the_same_way() -> None:
    for data in (b"GIOP\x01\x02\x01\x00\x00\x00", b"GIOP\x02\x00\x00\x00\x00\x00\x00\x00", "GIOP" * 3):
        same("parse_header", data)
    with pytest.raises(ProtocolError, match="truncated"):
        cframing.parse_header(b"GIOP\x01\x02")


numbers = st.one_of(ulongs, st.integers(-3, -1), st.integers(2**32, 2**32 + 3), st.sampled_from(list(ReplyStatus)))


@MANY
@given(numbers, st.one_of(st.integers(-2, 8), st.sampled_from(list(ReplyStatus))), st.binary(max_size=24),
       st.sampled_from([True, False, 1, 0]))
def test_reply_encoding_agrees(request_id: int, status: int, body: bytes, little: Any) -> None:
    same("encode_reply_12", request_id, status, body, little)
    same("encode_reply_12", request_id, status, bytearray(body), little)


@MANY
@given(numbers, st.integers(-1, 257), st.binary(max_size=20), st.text(max_size=12), st.binary(max_size=24),
       st.booleans())
def test_request_encoding_agrees(request_id: int, flags: int, key: bytes, operation: str, body: bytes,
                                 little: bool) -> None:
    same("encode_request_12", request_id, flags, key, operation, body, little)


def test_request_encoding_of_an_unencodable_operation_agrees() -> None:
    same("encode_request_12", 1, 3, b"k", "\udcff", b"", True)


@MANY
@given(numbers, st.integers(-1, 257), st.binary(max_size=20), st.text(max_size=12),
       st.lists(st.builds(ServiceContext, st.integers(-1, 2**32), st.binary(max_size=30)), max_size=4),
       st.binary(max_size=24), st.booleans())
def test_request_encoding_with_contexts_agrees(request_id: int, flags: int, key: bytes, operation: str,
                                               contexts: list[ServiceContext], body: bytes, little: bool) -> None:
    same("encode_request_12_contexts", request_id, flags, key, operation, tuple(contexts), body, little)
    same("encode_request_12_contexts", request_id, flags, key, operation, contexts, body, little)  # not a tuple
    if contexts:  # data that is not bytes goes to the original too
        odd = (ServiceContext(contexts[0].context_id, bytearray(contexts[0].data)), *contexts[1:])
        same("encode_request_12_contexts", request_id, flags, key, operation, odd, body, little)
    if 0 <= request_id < 2**32 and 0 <= flags < 256 and all(0 <= c.context_id < 2**32 for c in contexts):
        # What the general writer makes of the same Request.
        request = Request(request_id, flags, key, operation, body, tuple(contexts), GIOP_1_2, little)
        assert cframing.encode_request_12_contexts(request_id, flags, key, operation, tuple(contexts), body,
                                                   little) == encode(request)


class Subclassed(GIOPConnection):
    """A connection of another class: the twins read its slots through getattr, not at their offsets."""

    __slots__ = ()


_MAX_SIZE_SLOT: Any = GIOPConnection.__dict__["max_message_size"]


class Narrowed(GIOPConnection):
    """A subclass that puts a property where a slot the twins read was (the slot still holds
    the limit given, the property says 40 octets): the twins must see the property."""

    __slots__ = ()

    @property
    def max_message_size(self) -> int:
        return 40

    @max_message_size.setter
    def max_message_size(self, value: int) -> None:
        _MAX_SIZE_SLOT.__set__(self, value)


def _connection_state(conn: GIOPConnection) -> tuple[object, ...]:
    return conn.peer_version, conn.peer_little_endian, conn._pos, conn._header, bytes(conn._buf)


def next_common_same(role: Role, data: bytes, code_sets_chosen: bool = True, max_size: int = 1 << 20,
                     cls: type[GIOPConnection] = GIOPConnection) -> None:
    """Both versions of ``_next_common`` on two connections (of class ``cls``) fed ``data``:
    the same message and state after."""
    python, compiled = original("_next_common"), cframing._next_common
    results = []
    for fn in (python, compiled):
        conn = cls(role, max_message_size=max_size)
        conn.code_sets_chosen = code_sets_chosen
        conn.receive_data(data)
        results.append((outcome(fn, conn), _connection_state(conn)))
    assert results[0] == results[1], data


@MANY
@given(st.one_of(requests, replies), st.integers(0, 200), st.integers(0, 255), st.integers(0, 8),
       st.sampled_from([Role.SERVER, Role.CLIENT]), st.booleans(), st.binary(max_size=16))
def test_next_common_agrees(msg: Request | Reply, where: int, value: int, cut: int, role: Role, chosen: bool,
                            tail: bytes) -> None:
    data = encode(msg)
    next_common_same(role, data + tail, chosen)
    next_common_same(role, mutate(data, where, value, cut) + tail, chosen)
    next_common_same(role, data, chosen, max_size=len(data) - 13)  # one octet over the limit
    next_common_same(role, data + tail, chosen, cls=Subclassed)
    next_common_same(role, data + tail, chosen, cls=Narrowed)


@MANY
@given(st.binary(max_size=48), st.sampled_from([Role.SERVER, Role.CLIENT]))
def test_next_common_agrees_on_arbitrary_bytes(data: bytes, role: Role) -> None:
    next_common_same(role, data)
    next_common_same(role, b"GIOP\x01\x02" + data, False)


def test_next_common_leaves_what_the_general_path_must_see() -> None:
    """A header already read, a fragment train open or a first Request with a CodeSets context: None."""
    request = encode(Request(1, 3, b"k", "op", b"", (ServiceContext(1, b"\x00" * 8),)))
    next_common_same(Role.SERVER, request, code_sets_chosen=False)
    conn = GIOPConnection(Role.SERVER)
    conn.receive_data(request[:20])
    assert conn.next_event() is NEED_DATA and conn._header is not None
    conn.receive_data(request[20:])
    assert cframing._next_common(conn) is None and original("_next_common")(conn) is None
    assert conn.next_event() == codec.decode(request[:12], request[12:])


def reads_same(role: Role, chunks: list[bytes | bytearray], eof: bool, max_size: int = 1 << 20,
               cls: type[GIOPConnection] = GIOPConnection) -> None:
    """The Python and the compiled ``receive_data``/``next_event`` on two connections
    (of class ``cls``) fed the same reads: the same events (or errors) and the same state after each."""
    results = []
    for receive, next_event in ((original("GIOPConnection.receive_data"),
                                 original("GIOPConnection.next_event")),
                                (cframing.receive_data, cframing.next_event)):
        conn = cls(role, max_message_size=max_size)
        conn.code_sets_chosen = True
        seen: list[object] = []
        for chunk in [*chunks, b""] if eof else chunks:
            seen.append(outcome(receive, conn, chunk))
            for _ in range(64):  # bounded: a read holds a few messages at most here
                event = outcome(next_event, conn)
                seen.append(event)
                if event[0] == "raises" or event[1][0] is NEED_DATA or event[1][0] is CLOSED:
                    break
            seen.append((_connection_state(conn), conn._eof, conn._error is None))
        results.append(seen)
    assert results[0] == results[1], chunks


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


@MANY
@given(st.lists(st.one_of(requests, replies), min_size=1, max_size=4), st.lists(st.integers(0, 400), max_size=4),
       st.integers(0, 400), st.integers(0, 255), st.integers(0, 8), st.sampled_from([Role.SERVER, Role.CLIENT]),
       st.booleans(), st.booleans())
def test_per_read_methods_agree(msgs: list[Request | Reply], cuts: list[int], where: int, value: int, cut: int,
                                role: Role, eof: bool, as_bytearray: bool) -> None:
    data = b"".join(encode(m) for m in msgs)
    chunks: list[bytes | bytearray] = list(_split(data, cuts))
    reads_same(role, chunks, eof)
    reads_same(role, _split(mutate(data, where, value, cut), cuts), eof)
    if as_bytearray:  # not bytes: the compiled twin hands the read to the original
        reads_same(role, [bytearray(c) for c in chunks], eof)
    reads_same(role, chunks, eof, max_size=max(0, min(len(encode(m)) for m in msgs) - 13))  # the shortest one octet over
    reads_same(role, chunks, eof, cls=Subclassed)
    reads_same(role, chunks, eof, cls=Narrowed)


@MANY
@given(st.lists(st.binary(max_size=40), max_size=4), st.sampled_from([Role.SERVER, Role.CLIENT]), st.booleans())
def test_per_read_methods_agree_on_arbitrary_bytes(chunks: list[bytes], role: Role, eof: bool) -> None:
    reads_same(role, chunks, eof)
    reads_same(role, [b"GIOP\x01\x02\x01\x00" + c for c in chunks], eof)


def test_the_compiled_per_read_methods_are_the_connections_when_the_accelerator_runs() -> None:
    from pyorb import _accelerator

    compiled = _accelerator.status().compiled
    assert (GIOPConnection.next_event is cframing.next_event) == compiled
    assert (GIOPConnection.receive_data is cframing.receive_data) == compiled


def test_a_connection_whose_slots_are_unset_raises_as_the_original_does() -> None:
    """A slot read at its offset may be empty (an instance made without ``__init__``):
    the twins then read it through getattr, and raise AttributeError as the originals do
    (naming the first empty slot each reads)."""
    for name, args in (("GIOPConnection.next_event", ()), ("GIOPConnection.receive_data", (b"GIOP",)),
                       ("_next_common", ())):
        compiled = getattr(cframing, name.rpartition(".")[2])
        results = [outcome(fn, GIOPConnection.__new__(GIOPConnection), *args) for fn in (original(name), compiled)]
        assert [(kind, error[0]) for kind, error in results] == [("raises", AttributeError)] * 2, name
