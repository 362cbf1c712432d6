#!/usr/bin/env python3
"""The floor under the AMH paper's three tiers: a bare uvloop sink and middle tier.

Not an ORB and not for use.  ``sink --delay D`` answers each Bench::Sink.work
request D seconds after it arrives (one ``call_later`` per request, as a
sink that sleeps without holding a thread must), echoing its token.
``middle --sink REF`` answers Bench::Sink.work by forwarding each request to
the sink over one multiplexed connection (a fresh request id, the sink's
object key) and writing the sink's token back to the caller under the
caller's request id: what an AMH middle tier does, with no dispatching, no
marshaling, no futures and no bookkeeping beyond one dict of pending calls.

With ``bare_sink_client.py`` in front, the chain of three bare processes
tells what share of the ideal N/D this machine's loop turns, sockets and
scheduler leave to any asyncio middle tier, so that the middle tier's
figure in ``docs/benchmarks.md`` can be read against it.

GIOP 1.2, little-endian only (what pyorb's and the bare clients send for a
``work(unsigned long long)`` call); anything else closes the connection.
Prints its IOR on the first stdout line and serves until stdin reaches end
of file, SIGTERM or SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import struct
import sys
from typing import Any, Sequence

# The IOR helpers of this checkout, whatever the working directory.
from benchmarks.bare_echo_server import serve_bare
from benchmarks.bare_sink_client import request_template

from pyorb.giop.ior import parse_reference

REQUEST_HEADER = b"GIOP\x01\x02\x01\x00"  # GIOP 1.2, little-endian, Request
REPLY_HEADER = b"GIOP\x01\x02\x01\x01"
NO_EXCEPTION = b"\x00\x00\x00\x00\x00\x00\x00\x00"  # reply status, empty service contexts
# 12 + 12 bytes of reply header: the token is 8-aligned with no padding.
REPLY_SIZE = struct.pack("<I", 12 + 8)


def reply(request_id: bytes, token: bytes) -> bytes:
    return REPLY_HEADER + REPLY_SIZE + request_id + NO_EXCEPTION + token


def messages(buf: bytearray, header: bytes) -> list[bytes]:
    """The whole messages at the front of ``buf`` (removed from it); ValueError on a foreign one."""
    out = []
    while len(buf) >= 12:
        end = 12 + int.from_bytes(buf[8:12], "little")
        if len(buf) < end:
            break
        if buf[:8] != header:
            raise ValueError(f"not a GIOP 1.2 little-endian message of the expected type: {bytes(buf[:8])!r}")
        out.append(bytes(buf[:end]))
        del buf[:end]
    return out


class Framed(asyncio.Protocol):
    """A connection that takes whole messages of one type (``HEADER``) and closes on anything else."""

    HEADER = REQUEST_HEADER

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        try:
            received = messages(self.buf, self.HEADER)
        except ValueError:
            self.transport.close()
            return
        if received:
            self.messages_received(received)

    def messages_received(self, received: list[bytes]) -> None:
        raise NotImplementedError


class Sink(Framed):
    """Answers each request ``delay`` seconds after it arrives."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def messages_received(self, received: list[bytes]) -> None:
        later = asyncio.get_running_loop().call_later
        for msg in received:
            later(self.delay, self._answer, msg[12:16], msg[-8:])

    def _answer(self, request_id: bytes, token: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(reply(request_id, token))


class Upstream(Framed):
    """The middle tier's one connection to the sink: pending calls by request id."""

    HEADER = REPLY_HEADER

    def __init__(self, key: bytes) -> None:
        super().__init__()
        self.head, self.tail = request_template(key)
        self.pending: dict[int, tuple[Any, bytes]] = {}
        self.next_id = 0

    def forward(self, caller: Any, request_id: bytes, token: bytes) -> bytes:
        """The sink's request for one caller's call (the caller writes it, batched per read)."""
        self.next_id += 1
        self.pending[self.next_id] = (caller, request_id)
        return self.head + struct.pack("<I", self.next_id) + self.tail + token

    def messages_received(self, received: list[bytes]) -> None:
        # One write per caller per read: the replies a read brings for the same
        # connection go out together, as the callers' requests went up.
        out: dict[Any, list[bytes]] = {}
        for msg in received:
            caller, request_id = self.pending.pop(int.from_bytes(msg[12:16], "little"))
            out.setdefault(caller, []).append(reply(request_id, msg[24:32]))
        for caller, chunks in out.items():
            if not caller.transport.is_closing():
                caller.transport.write(b"".join(chunks))


class Middle(Framed):
    """One client's connection to the middle tier."""

    def __init__(self, upstream: Upstream) -> None:
        super().__init__()
        self.upstream = upstream

    def messages_received(self, received: list[bytes]) -> None:
        forward = self.upstream.forward
        self.upstream.transport.write(b"".join(forward(self, msg[12:16], msg[-8:]) for msg in received))


async def serve(ns: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    if ns.role == "sink":
        server = await loop.create_server(lambda: Sink(ns.delay), ns.host, ns.port)
    else:
        profile = parse_reference(ns.sink).iiop
        if profile is None:
            raise SystemExit("bare_middle: the sink's reference has no IIOP profile")
        _, upstream = await loop.create_connection(lambda: Upstream(profile.object_key), profile.host, profile.port)
        server = await loop.create_server(lambda: Middle(upstream), ns.host, ns.port)
    await serve_bare(server, "IDL:Bench/Sink:1.0", ns.host, b"Sink")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    roles = p.add_subparsers(dest="role", required=True)
    sink = roles.add_parser("sink", help="answer each work call after --delay seconds")
    sink.add_argument("--delay", type=float, default=0.04, help="seconds before each reply (default 0.04)")
    middle = roles.add_parser("middle", help="forward each work call to --sink over one connection")
    middle.add_argument("--sink", required=True, help="IOR or corbaloc URL of a Bench::Sink")
    for role in (sink, middle):
        role.add_argument("--host", default="127.0.0.1", help="loopback address (127.0.0.1 or ::1)")
        role.add_argument("--port", type=int, default=0, help="TCP port, 0 for an ephemeral one")
    ns = p.parse_args(argv)
    if ns.role == "sink" and not 0 <= ns.delay <= 60:
        p.error("--delay must be in [0, 60] seconds")
    import uvloop

    uvloop.run(serve(ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
