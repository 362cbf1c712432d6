"""Malformed input on one connection: MessageError, close, and nobody else notices.

Each case writes raw bytes to a live pyorb server, expects a GIOP
MessageError (where GIOP calls for one) followed by the server closing that
connection, and checks that a well-behaved client on another connection is
served before and after.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

import pyorb
from pyorb.giop import codec
from pyorb.giop.messages import Request

pytestmark = pytest.mark.integration  # opens sockets or starts processes

IDL = pyorb.load_idl("idl/stock.idl")
Stock, Stock__POA = IDL.Stock, IDL.Stock__POA
MAX = 64 * 1024


class Quoter(Stock__POA.Quoter):
    def get_quote(self, name: str) -> int:
        return len(name)


def header(msg_type: int, size: int, version: tuple[int, int] = (1, 2), flags: int = 1) -> bytes:
    return b"GIOP" + bytes([*version, flags, msg_type]) + struct.pack("<I", size)


def request(**kw: Any) -> bytes:
    args = dict(request_id=1, response_flags=3, object_key=b"Q", operation="get_quote", body=b"\x04\x00\x00\x00IBM\x00")
    args.update(kw)
    return codec.encode(Request(**args))  # type: ignore[arg-type]


def fragment_start(total_body: bytes, first: int) -> bytes:
    whole = request(body=total_body)
    part = bytearray(whole[: 12 + first])
    part[6] |= 2  # more fragments follow
    struct.pack_into("<I", part, 8, first)
    return bytes(part)


def fragment(request_id: int, data: bytes, more: bool) -> bytes:
    return header(7, 4 + len(data), flags=1 | (2 if more else 0)) + struct.pack("<I", request_id) + data


CASES = {
    "truncated header": (b"GIOP\x01\x02", False),
    "wrong magic": (b"GIOX\x01\x02\x01\x00" + struct.pack("<I", 0), True),
    "unknown version 1.3": (header(0, 0, (1, 3)), True),
    "unknown version 2.0": (header(0, 0, (2, 0)), True),
    "unknown message type": (header(9, 0), True),
    "size over the maximum": (header(0, MAX + 1), True),
    "garbage after a valid header": (header(0, 16) + b"\x01\x00\x00\x00\x03\x00\x00\x00\xff\xff\xff\x7fzzzz", True),
    "fragment with no start": (fragment(7, b"\x00" * 8, more=True), True),
    "fragment train over the maximum": (
        fragment_start(b"\x00" * 16, 40) + b"".join(fragment(1, b"\x00" * 8192, True) for _ in range(10)), True),
}


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[pyorb.Server, Any]]:
    config = pyorb.Config(max_message_size=MAX, read_timeout=0.3)
    async with pyorb.Server(config=config) as server, pyorb.Client() as client:
        key = server.activate(Quoter(), "Q")
        yield server, client.resolve(server.ior(key), Stock.Quoter)


async def exchange(server: pyorb.Server, data: bytes, half_close: bool = True) -> bytes:
    """Send ``data`` on a fresh connection; return everything read until the server closes it."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(data)
    await writer.drain()
    if half_close:
        writer.write_eof()
    try:
        return await asyncio.wait_for(reader.read(-1), 5)
    finally:
        writer.close()


def is_message_error(reply: bytes) -> bool:
    return len(reply) >= 12 and reply[:4] == b"GIOP" and reply[7] == 6


@pytest.mark.asyncio
@pytest.mark.parametrize("case", list(CASES))
async def test_bad_input_gets_message_error_and_close(server: Any, case: str) -> None:
    srv, good = server
    data, wants_error = CASES[case]
    assert await good.get_quote("IBM") == 3
    reply = await exchange(srv, data, half_close=not wants_error)
    if wants_error:
        assert is_message_error(reply), reply[:32]
    else:
        assert reply == b""
    assert await good.get_quote("ACME") == 4  # the other connection never noticed


@pytest.mark.asyncio
async def test_fragment_train_that_never_ends_is_timed_out(server: Any) -> None:
    srv, good = server
    # omniORB stops sending mid-train when its own size limit trips.
    stalled = fragment_start(b"\x00" * 64, 40) + fragment(1, b"\x00" * 8, more=True)
    reply = await exchange(srv, stalled, half_close=False)  # returns only because the server closed
    assert is_message_error(reply)
    assert await good.get_quote("X") == 1


@pytest.mark.asyncio
async def test_half_message_then_silence_is_timed_out(server: Any) -> None:
    srv, good = server
    reply = await exchange(srv, request()[:20], half_close=False)
    assert is_message_error(reply)
    assert await good.get_quote("XY") == 2


@pytest.mark.asyncio
async def test_nothing_is_allocated_from_an_untrusted_size(server: Any) -> None:
    srv, _ = server
    import tracemalloc

    tracemalloc.start()
    try:
        await exchange(srv, header(0, 0xFFFFFFF0), half_close=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


@pytest.mark.asyncio
async def test_valid_fragmented_request_is_reassembled(server: Any) -> None:
    srv, _ = server
    name = "N" * 20000
    body = struct.pack("<I", len(name) + 1) + name.encode() + b"\x00"
    whole = request(body=body)
    first = 12 + 40  # the first part ends on an 8-byte boundary, as GIOP 1.2 requires
    head = bytearray(whole[:first])
    head[6] |= 2
    struct.pack_into("<I", head, 8, first - 12)
    rest = whole[first:]
    chunks = [rest[i : i + 8000] for i in range(0, len(rest), 8000)]
    data = bytes(head) + b"".join(fragment(1, c, more=i < len(chunks) - 1) for i, c in enumerate(chunks))
    reply = await exchange(srv, data)
    decoded = codec.decode(reply[:12], reply[12:])
    assert decoded.request_id == 1 and decoded.reply_status == 0  # type: ignore[union-attr]
    assert struct.unpack("<i", decoded.body)[0] == 20000  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_request_for_unknown_key_and_undeclared_exception_keep_serving(server: Any) -> None:
    srv, good = server
    reply = await exchange(srv, request(object_key=b"nope"))
    decoded = codec.decode(reply[:12], reply[12:])
    assert decoded.reply_status == 2  # type: ignore[union-attr]
    assert b"OBJECT_NOT_EXIST" in decoded.body  # type: ignore[union-attr]
    assert await good.get_quote("IBM") == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [(1, 0), (1, 1), (1, 2)])
async def test_locate_request_answers_here_unknown_or_forward(server: Any, version: tuple[int, int]) -> None:
    from pyorb.giop.ior import IOR
    from pyorb.giop.messages import LocateRequest, LocateStatus

    from pyorb.giop.cdr import CDRReader

    srv, _ = server
    srv.adapter.forward("Moved", IOR.from_string(srv.ior("Q")))
    keys = [b"Q", b"nope", b"Moved", b"Q"]
    data = b"".join(codec.encode(LocateRequest(i, key, version=version)) for i, key in enumerate(keys, 1))
    reply = await exchange(srv, data)
    statuses, targets, pos = {}, {}, 0
    while pos < len(reply):
        size = struct.unpack_from("<I", reply, pos + 8)[0]
        msg = codec.decode(reply[pos : pos + 12], reply[pos + 12 : pos + 12 + size])
        statuses[msg.request_id] = msg.locate_status  # type: ignore[union-attr]
        if msg.body:  # type: ignore[union-attr]
            targets[msg.request_id] = IOR.decode(CDRReader(msg.body, msg.little_endian, base=msg.body_offset))  # type: ignore[union-attr]
        pos += 12 + size
    # A client that has named no code sets may hold a corbaloc reference (no code sets in it): from
    # GIOP 1.1 on it is forwarded once to the full IOR, which has them; after that the object is here.
    first = LocateStatus.OBJECT_HERE if version == (1, 0) else LocateStatus.OBJECT_FORWARD
    assert statuses == {1: first, 2: LocateStatus.UNKNOWN_OBJECT, 3: LocateStatus.OBJECT_FORWARD,
                        4: LocateStatus.OBJECT_HERE}
    assert targets[3] == IOR.from_string(srv.ior("Q"))
    if version != (1, 0):
        assert targets[1] == IOR.from_string(srv.ior("Q")) and targets[1].iiop.code_sets is not None  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_request_without_response_expected_gets_no_reply(server: Any) -> None:
    srv, _ = server
    # Two-way operation sent with response flags 0, then a normal request: only the second is answered.
    reply = await exchange(srv, request(request_id=1, response_flags=0) + request(request_id=2))
    decoded = codec.decode(reply[:12], reply[12:])
    assert decoded.request_id == 2  # type: ignore[union-attr]
    assert len(reply) == 12 + struct.unpack_from("<I", reply, 8)[0]


@pytest.mark.asyncio
async def test_client_that_never_reads_replies_is_paused(server: Any) -> None:
    from tests.interop.servants import TypesSync

    srv, good = server
    srv.activate(TypesSync(), "T")
    reader, writer = await asyncio.open_connection(srv.host, srv.port)
    text = b"x" * 50000  # echo_string: each reply is as big as its request
    big = request(object_key=b"T", operation="echo_string", body=struct.pack("<I", len(text) + 1) + text + b"\x00")
    try:
        for _ in range(2000):  # up to 100 MB of requests whose replies we never read
            writer.write(big)
            try:
                await asyncio.wait_for(writer.drain(), 0.5)
            except asyncio.TimeoutError:
                break  # the server stopped reading from us: backpressure works
        else:
            pytest.fail("the server kept reading although we never read its replies")
        assert await good.get_quote("IBM") == 3  # others are still served
    finally:
        writer.transport.abort()
