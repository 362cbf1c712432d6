"""Output batching of a connection: what is sent goes out in one write per batch.

A batch of messages handled in one read, or of replies made on threads and
drained together (``ReplyInbox``), is written once at its end; a lone send
is written by a flush scheduled for the next loop turn.  Real sockets, a
real client connection.
"""

from __future__ import annotations

import asyncio

import pytest

import pyorb
from pyorb.client.connection import ClientConnection


async def _connected() -> tuple[ClientConnection, bytearray, asyncio.AbstractServer]:
    received = bytearray()

    async def read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            received.extend(data)
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(read, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = ClientConnection(pyorb.Config(), lambda _: None)
    await asyncio.get_running_loop().create_connection(lambda: conn, "127.0.0.1", port)
    return conn, received, server


async def _close(conn: ClientConnection, server: asyncio.AbstractServer) -> None:
    conn.close()
    await conn.wait_closed()
    server.close()
    await server.wait_closed()


async def _until(predicate: object, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():  # type: ignore[operator]
        assert loop.time() < deadline, "not reached"
        await asyncio.sleep(0.005)


@pytest.mark.asyncio
async def test_held_output_waits_for_flush_and_goes_out_whole() -> None:
    conn, received, server = await _connected()
    try:
        conn.hold_output()
        assert conn.send(b"a" * 10) and conn.send(b"b" * 10)
        await asyncio.sleep(0.05)  # many loop turns: no flush was scheduled behind the batch's back
        assert received == b"" and conn.buffered_output() == 20
        conn.flush()
        assert conn.buffered_output() == 0  # handed to the socket at once
        await _until(lambda: len(received) == 20)
        assert received == b"a" * 10 + b"b" * 10
    finally:
        await _close(conn, server)


@pytest.mark.asyncio
async def test_a_lone_send_is_flushed_by_the_next_loop_turn() -> None:
    conn, received, server = await _connected()
    try:
        assert conn.send(b"c" * 10)
        assert conn.buffered_output() == 10  # queued: later sends of this turn join it
        await _until(lambda: received == b"c" * 10)
        assert conn.buffered_output() == 0
    finally:
        await _close(conn, server)
