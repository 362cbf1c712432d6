#!/usr/bin/env python3
"""The floor under any asyncio ORB: a bare uvloop server answering Bench::Echo.

Not an ORB and not for use: it reads only what an echo reply needs (the
request id at offset 12 and the last 8 bytes, the argument of
``ping(unsigned long long)``), answers ``_is_a`` and LocateRequest with
"yes", and does no dispatching, no marshaling and no bookkeeping.  It tells
how fast the event loop, the loopback socket and the omniORBpy client are on
their own, so that ``bench_echo.py`` can show how much of the distance to
omniORB's server is pyorb's and how much is the architecture's.

``--handoff`` sends each request through a worker thread and back to the
loop (one ``SimpleQueue`` put, one ``call_soon_threadsafe``), the least that
a thread-pool strategy in CPython must do.  ``--per-connection`` does the
same with one worker thread per connection, the least a thread-per-connection
strategy must do: every request wakes its connection's own thread.

GIOP 1.2, little-endian only (what the omniORBpy benchmark client sends);
anything else closes the connection.  Prints its IOR on the first stdout
line and serves until stdin reaches end of file, SIGTERM or SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import queue
import struct
import sys
import threading
from typing import Any, Sequence

# The IOR builder of this checkout, whatever the working directory.
from pyorb.giop.ior import build_ior

HEADER = b"GIOP\x01\x02\x01"          # GIOP 1.2, little-endian
REPLY, LOCATE_REPLY = 1, 4
REQUEST, LOCATE_REQUEST = 0, 3
NO_EXCEPTION = b"\x00\x00\x00\x00\x00\x00\x00\x00"  # reply status, empty service contexts
OBJECT_HERE = b"\x01\x00\x00\x00"
TRUE = b"\x01"


def message(kind: int, body: bytes) -> bytes:
    return HEADER + bytes((kind,)) + len(body).to_bytes(4, "little") + body


# The echo reply, all but its request id and stamp fixed: one pack per reply.
# 12 + 12 bytes of reply header: the body is 8-aligned with no padding.
ECHO_REPLY = struct.Struct("<12sI8sQ")
ECHO_HEAD = message(REPLY, bytes(20))[:12]
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


def answer(msg: bytes, start: int = 0, end: int | None = None) -> bytes:
    """The reply to the complete request ``msg[start:end]`` (raises ValueError on anything else).
    Reads the request in place: nothing is sliced out of ``msg`` for an echo."""
    if end is None:
        end = len(msg)
    if not msg.startswith(HEADER, start):
        raise ValueError("not GIOP 1.2 little-endian")
    kind = msg[start + 7]
    if kind == LOCATE_REQUEST:
        return message(LOCATE_REPLY, msg[start + 12:start + 16] + OBJECT_HERE)
    if kind != REQUEST:
        raise ValueError(f"message type {kind}")
    if msg.find(b"_is_a", start, min(end, start + 64)) >= 0:
        return message(REPLY, msg[start + 12:start + 16] + NO_EXCEPTION + TRUE)
    return ECHO_REPLY.pack(ECHO_HEAD, _U32(msg, start + 12)[0], NO_EXCEPTION, _U64(msg, end - 8)[0])


class Bare(asyncio.Protocol):
    """Frames 12-byte headers in place: a chunk of whole messages (the common case) is
    answered without copying; only a message split across reads is kept, as its own bytes."""

    def __init__(self, workers: queue.SimpleQueue[Any] | None, per_connection: bool = False) -> None:
        self.workers = workers
        self.per_connection = per_connection
        self.buf = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self.per_connection:  # this connection's own worker, until it closes
            self.workers = queue.SimpleQueue()
            threading.Thread(target=worker, args=(self.workers, asyncio.get_running_loop()), daemon=True).start()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.per_connection and self.workers is not None:
            self.workers.put(None)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        size = len(buf)
        start = 0
        while size - start >= 12:
            end = start + 12 + _U32(buf, start + 8)[0]
            if size < end:
                break
            if self.workers is not None:
                self.workers.put((self, buf[start:end]))  # the worker's own copy
            else:
                try:
                    self.transport.write(answer(buf, start, end))
                except ValueError:
                    self.transport.close()
                    return
            start = end
        self.buf = buf[start:] if start < size else b""


def worker(jobs: queue.SimpleQueue[Any], loop: asyncio.AbstractEventLoop) -> None:
    while (job := jobs.get()) is not None:
        proto, msg = job
        try:
            reply = answer(msg)
        except ValueError:
            loop.call_soon_threadsafe(proto.transport.close)
            continue
        loop.call_soon_threadsafe(proto.transport.write, reply)


async def serve(ns: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    jobs: queue.SimpleQueue[Any] | None = None
    if ns.handoff:
        jobs = queue.SimpleQueue()
        for _ in range(ns.threads):
            threading.Thread(target=worker, args=(jobs, loop), daemon=True).start()
    server = await loop.create_server(lambda: Bare(jobs, ns.per_connection), ns.host, ns.port)
    await serve_bare(server, "IDL:Bench/Echo:1.0", ns.host, b"Echo")


async def serve_bare(server: asyncio.Server, type_id: str, host: str, key: bytes) -> None:
    """Print ``server``'s IOR on stdout's first line, then serve until stdin end of file, SIGTERM or SIGINT."""
    from pyorb.servers import runner  # here: the instruction counter imports this module for its protocol only

    port = server.sockets[0].getsockname()[1]

    async def close() -> None:
        server.close()
        await server.wait_closed()

    await runner.serve_until_stop([build_ior(type_id, host, port, key).to_string()], close)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1", help="loopback address (127.0.0.1 or ::1)")
    p.add_argument("--port", type=int, default=0, help="TCP port, 0 for an ephemeral one")
    p.add_argument("--handoff", action="store_true", help="answer each request from a worker thread")
    p.add_argument("--threads", type=int, default=8, help="worker threads with --handoff (default 8)")
    p.add_argument("--per-connection", action="store_true",
                   help="answer each request from its connection's own worker thread")
    ns = p.parse_args(argv)
    if ns.threads < 1:
        p.error("--threads must be at least 1")
    import uvloop
    uvloop.run(serve(ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
