"""Output batching of a connection: what is sent goes out in one write per batch.

A batch of messages handled in one read, or of replies made on threads and
drained together (``ReplyInbox``), is written once at its end.  Outside a
batch, a send goes to the socket at once (a lone request or a reply made
by a timer waits for nothing) and schedules nothing; the sends that follow
it before the next read or flush are written together by a flush at the
next loop turn.
Real sockets, a real client connection.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import pyorb
from pyorb import _accelerator
from pyorb.aio.protocol import GIOPProtocol
from pyorb.client.connection import ClientConnection
from pyorb.testing.waiting import wait_until

pytestmark = pytest.mark.integration  # opens sockets or starts processes


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
        await wait_until(lambda: len(received) == 20)
        assert received == b"a" * 10 + b"b" * 10
    finally:
        await _close(conn, server)


@pytest.mark.asyncio
async def test_a_lone_send_goes_out_at_once_and_the_rest_of_its_turn_together() -> None:
    conn, received, server = await _connected()
    try:
        assert conn.send(b"c" * 10)
        assert conn.buffered_output() == 0  # written now: nothing to wait for
        assert conn.send(b"d" * 10) and conn.send(b"e" * 10)
        assert conn.buffered_output() == 20  # queued: one write at the next turn
        await asyncio.sleep(0)
        assert conn.buffered_output() == 0
        await wait_until(lambda: len(received) == 30)
        assert received == b"c" * 10 + b"d" * 10 + b"e" * 10
        await asyncio.sleep(0.01)  # a later turn: its first send goes at once again
        assert conn.send(b"f" * 10)
        assert conn.buffered_output() == 0
        await wait_until(lambda: len(received) == 40)
    finally:
        await _close(conn, server)


@pytest.mark.asyncio
async def test_a_lone_send_costs_the_loop_no_callback() -> None:
    """A caller awaiting one call at a time sends one message per turn: it is
    written at once and no flush is scheduled behind it; only a second
    message queues, with one flush for it and what follows."""
    conn, received, server = await _connected()
    loop = conn.loop
    scheduled: list[Any] = []

    class Watched:  # the connection's loop, noting what it is asked to run later
        def __getattr__(self, name: str) -> Any:
            return getattr(loop, name)

        def call_soon(self, callback: Any, *args: Any) -> asyncio.Handle:
            scheduled.append(callback)
            return loop.call_soon(callback, *args)

    conn.loop = Watched()  # type: ignore[assignment]
    try:
        assert conn.send(b"c" * 10)
        assert conn.buffered_output() == 0 and scheduled == []
        assert conn.send(b"d" * 10) and conn.send(b"e" * 10)
        assert conn.buffered_output() == 20 and len(scheduled) == 1
        await wait_until(lambda: len(received) == 30)
        assert received == b"c" * 10 + b"d" * 10 + b"e" * 10
    finally:
        conn.loop = loop
        await _close(conn, server)


@pytest.mark.parametrize("name", ["data_received", "_process", "send", "_flush"])
def test_a_client_connection_runs_the_transports_per_message_code_in_a_copy_of_its_own(name: str) -> None:
    """Server transports and client connections (in one process, a middle tier)
    each specialise their own copy of the per-read and per-write methods: the
    same code, in a code object the other class never runs."""
    mine, base = getattr(ClientConnection, name), getattr(GIOPProtocol, name)
    if _accelerator.TWINS[f"pyorb.aio.protocol.GIOPProtocol.{name}"].in_place:
        assert mine is base  # one compiled twin: it has no interpreter caches to keep apart
        return
    assert mine.__code__ is not base.__code__
    assert (mine.__code__.co_code, mine.__code__.co_consts, mine.__code__.co_names) == \
        (base.__code__.co_code, base.__code__.co_consts, base.__code__.co_names)
    assert mine.__defaults__ == base.__defaults__ and mine.__globals__ is base.__globals__
