"""Client-side network fuzz: a hostile server must not hang or break a pyorb Client.

A fake server (raw asyncio, parsing with the GIOP core) answers each ping
with one of many bad replies: mutated Replies, garbage bodies of every
reply status, forwards to broken, unreachable or looping references,
replies to the wrong request id, Fragments without a start, half replies,
random bytes, MessageError, CloseConnection, or silence.  Each call must
end, within its timeout and a margin, in the right value or a CORBA
exception, and nothing else; afterwards the client calls a good server
correctly and holds no pending call.
"""

from __future__ import annotations

import asyncio
import random
import struct
from dataclasses import replace
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.servers.echo import make_servant
from pyorb.giop import (
    CloseConnection,
    GIOPConnection,
    MessageError,
    ProtocolError,
    Reply,
    ReplyStatus,
    Request,
    Role,
    encode,
)
from pyorb.giop.cdr import CDRWriter
from pyorb.giop.ior import IOR, TaggedProfile, build_ior
from tests.fuzz.malformed import header, mutate, with_size

pytestmark = pytest.mark.integration  # opens sockets or starts processes

IDL = bench_idl()
SEED = 20261123
CALLS = 150
CONCURRENCY = 3
CALL_TIMEOUT_S = 0.25
MARGIN_S = 5.0  # beyond the call timeout: more than that is a hang
MAX_FORWARDS = 2



def ior_body(ior: IOR, reply: Reply) -> bytes:
    """``ior`` marshaled as the body of ``reply`` (alignment from the message start)."""
    w = CDRWriter(reply.little_endian, base=reply.body_offset)
    ior.encode(w)
    return w.getvalue()


class HostileServer:
    """Answers every Request badly, in one of :attr:`answers`' ways, picked by a seeded RNG."""

    def __init__(self, seed: int, good: IOR) -> None:
        self.rng = random.Random(seed)
        self.good = good
        self.port = 0
        # Answers that leave the connection usable come more often than those
        # that end it (and with it every call it carries).
        self.answers: list[Callable[[Request], tuple[bytes, bool]]] = [
            *[self._garbage_body] * 4,
            *[self._forward] * 4,
            *[self._wrong_request_id] * 2,
            *[self._mutated_reply] * 2,
            self._silence,
            self._orphan_fragment,
            self._half_reply,
            self._random_bytes,
            self._message_error,
            self._close_connection,
        ]

    async def start(self) -> asyncio.base_events.Server:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        return server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        core = GIOPConnection(Role.SERVER)
        try:
            while data := await reader.read(65536):
                core.receive_data(data)
                while isinstance(msg := core.next_event(), (Request, CloseConnection, MessageError)):
                    if isinstance(msg, Request) and msg.response_expected:
                        out, close = self.rng.choice(self.answers)(msg)
                        writer.write(out)
                        if close:
                            return
        except (ProtocolError, ConnectionError):
            pass
        finally:
            writer.close()

    # -- answers: (bytes to write, close the connection afterwards) ------------------

    def _reply(self, req: Request, status: ReplyStatus, body: bytes = b"", rid: int | None = None) -> Reply:
        request_id = req.request_id if rid is None else rid
        return Reply(request_id, status, body, (), req.version, req.little_endian)

    def _good_reply(self, req: Request) -> bytes:
        value = req.body[-8:]  # the stamp, already aligned in the request
        return encode(self._reply(req, ReplyStatus.NO_EXCEPTION, value))

    def _mutated_reply(self, req: Request) -> tuple[bytes, bool]:
        data = self._good_reply(req)
        rng = self.rng
        mutations = [(rng.choice(["flip", "set", "insert", "delete", "truncate"]), rng.randrange(12, 64), rng.randrange(256))]
        return with_size(data[:12] + mutate(data[12:], mutations)), False

    def _garbage_body(self, req: Request) -> tuple[bytes, bool]:
        rng = self.rng
        status = rng.choice(list(ReplyStatus)[: 6 if req.version == (1, 2) else 4])
        body = rng.randbytes(rng.randrange(40))
        if rng.random() < 0.5 and status is ReplyStatus.SYSTEM_EXCEPTION:  # a plausible repository id
            w = CDRWriter(req.little_endian, base=24)
            w.string(rng.choice(["IDL:omg.org/CORBA/NO_MEMORY:1.0", "IDL:nonsense:1.0", ""]))
            body = w.getvalue() + body[:8]
        return encode(self._reply(req, status, body)), False

    def _forward(self, req: Request) -> tuple[bytes, bool]:
        rng = self.rng
        targets = [
            self.good,  # a correct forward: the call succeeds
            build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", self.port, b"again"),  # a loop
            build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", 1, b"x"),  # nobody listens
            IOR("IDL:Bench/Echo:1.0", ()),  # nil
            IOR("IDL:Bench/Echo:1.0", (TaggedProfile(99, b"?"),)),  # no IIOP profile
        ]
        status = ReplyStatus.LOCATION_FORWARD
        if req.version == (1, 2) and rng.random() < 0.5:
            status = ReplyStatus.LOCATION_FORWARD_PERM
        probe = self._reply(req, status)
        reply = replace(probe, body=ior_body(rng.choice(targets), replace(probe, body_offset=24)))
        data = encode(reply)
        if rng.random() < 0.3:  # and a broken one
            data = with_size(data[:12] + mutate(data[12:], [("flip", rng.randrange(24, len(data)), rng.randrange(8))]))
        return data, False

    def _wrong_request_id(self, req: Request) -> tuple[bytes, bool]:
        rid = (req.request_id + self.rng.randrange(1, 2**32)) % 2**32
        return encode(self._reply(req, ReplyStatus.NO_EXCEPTION, bytes(8), rid)), False

    def _orphan_fragment(self, req: Request) -> tuple[bytes, bool]:
        version = req.version if req.version != (1, 0) else (1, 1)
        return header(version, 1, 7, 8) + bytes(8), False

    def _half_reply(self, req: Request) -> tuple[bytes, bool]:
        data = self._good_reply(req)
        return data[: self.rng.randrange(1, len(data))], self.rng.random() < 0.5

    def _random_bytes(self, req: Request) -> tuple[bytes, bool]:
        return self.rng.randbytes(self.rng.randrange(1, 64)), False

    def _message_error(self, req: Request) -> tuple[bytes, bool]:
        return encode(MessageError(req.version, req.little_endian)), False

    def _close_connection(self, req: Request) -> tuple[bytes, bool]:
        return encode(CloseConnection(req.version, req.little_endian)), True

    def _silence(self, req: Request) -> tuple[bytes, bool]:
        return b"", False


@pytest_asyncio.fixture
async def good_server() -> AsyncIterator[pyorb.Server]:
    async with pyorb.Server() as server:
        server.activate(make_servant(IDL, "sync"), "Echo")
        yield server


@pytest.mark.asyncio
async def test_hostile_server_neither_hangs_nor_breaks_the_client(good_server: pyorb.Server) -> None:
    good = IOR.from_string(good_server.ior(b"Echo"))
    hostile = HostileServer(SEED, good)
    listener = await hostile.start()
    config = pyorb.Config(call_timeout=CALL_TIMEOUT_S, max_forwards=MAX_FORWARDS, read_timeout=1.0)
    outcomes: dict[str, int] = {}
    try:
        async with pyorb.Client(config) as client:
            echo = client.resolve(build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", hostile.port, b"Echo").to_string(), IDL.Bench.Echo)
            limit = asyncio.Semaphore(CONCURRENCY)

            async def call(n: int) -> None:
                async with limit:
                    try:
                        result = await asyncio.wait_for(echo.ping(n), CALL_TIMEOUT_S + MARGIN_S)
                    except CORBA.Exception as exc:
                        name = type(exc).__name__
                    except asyncio.TimeoutError:
                        raise AssertionError(f"ping({n}) hung past its {CALL_TIMEOUT_S} s timeout") from None
                    else:
                        # A mutation may garble the stamp; anything else is right.
                        name = "ok" if result == n else "garbled"
                    outcomes[name] = outcomes.get(name, 0) + 1

            await asyncio.gather(*(call(n) for n in range(CALLS)))
            good_echo = client.resolve(good_server.ior(b"Echo"), IDL.Bench.Echo)
            assert [await good_echo.ping(n) for n in range(5)] == list(range(5))
            # No public view of the pending calls: look at the connections.
            assert not any(conn.pending for conn in client._conns.values()), "calls left pending"
    finally:
        listener.close()
        await listener.wait_closed()
    assert sum(outcomes.values()) == CALLS
    assert len(outcomes) >= 4, f"too few kinds of outcome to have tested much: {outcomes}"
