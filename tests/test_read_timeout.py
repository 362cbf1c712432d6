"""The server's read timeout drops a stalled peer, not a busy one.

Config.read_timeout is how long "a partly received message (or fragment
train) may stall".  A peer whose every write ends in the middle of a
message, but which completes that message a moment later, never stalls.
Found while fuzzing: pyorb/aio/protocol.py starts the timer at the first
read that ends mid-message and cancels it only when a read ends on a
message boundary, so such a peer is dropped after read_timeout however
fast its messages complete.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import AsyncIterator

import pytest
import pytest_asyncio

import pyorb
from pyorb.idl import bench_idl
from pyorb.servers.echo import make_servant
from pyorb.giop import GIOPConnection, Message, Role
from tests.fuzz.malformed import ping_request
from tests.giop.test_properties import run

pytestmark = pytest.mark.integration  # opens sockets or starts processes

IDL = bench_idl()
READ_TIMEOUT_S = 0.3
STEP_S = READ_TIMEOUT_S / 6  # each message completes this soon after it starts
STEPS = 18  # three read timeouts in all



@pytest_asyncio.fixture
async def server() -> AsyncIterator[pyorb.Server]:
    async with pyorb.Server(config=pyorb.Config(read_timeout=READ_TIMEOUT_S)) as server:
        server.activate(make_servant(IDL, "sync"), "Echo")
        yield server


async def read_replies(reader: asyncio.StreamReader, replies: list[Message]) -> None:
    core = GIOPConnection(Role.CLIENT)
    while data := await reader.read(65536):
        replies += run(core, [data], eof=False)


@pytest.mark.asyncio
async def test_steady_peer_ending_each_write_mid_message_is_not_dropped(server: pyorb.Server) -> None:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    replies: list[Message] = []
    reading = asyncio.create_task(read_replies(reader, replies))
    rest = b""
    try:
        for n in range(STEPS):
            msg = ping_request(n, n, b"Echo")
            writer.write(rest + msg[:30])  # the end of the last message, the start of this one
            rest = msg[30:]
            await asyncio.sleep(STEP_S)
            assert not reading.done(), f"dropped after {len(replies)} replies, though never idle"
        writer.write(rest)
        writer.write_eof()
        await asyncio.wait_for(reading, 5)
    finally:
        writer.close()
        reading.cancel()
    assert [getattr(m, "request_id", None) for m in replies] == list(range(STEPS))
