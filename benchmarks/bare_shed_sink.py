#!/usr/bin/env python3
"""The floor under a shedding thread sink: a bare uvloop server of Bench::Sink.work under overload.

Not an ORB and not for use.  Each connection has its own thread, as pyorb's
``thread_per_connection`` and ``threaded`` strategies do; ``--lock`` runs
every call under one server-wide lock, as ``threaded`` does.  A call
computes ``--cpu`` seconds of CPU in its connection's thread (the papers'
doSomeWork, as pyorb's sink computes it) and echoes its token.

Admission is the least a server that sheds can do, with knowledge no real
server has: the event loop admits a call while fewer than ``--target`` /
``--cpu`` calls are admitted and unanswered (the queue holds at most the
target's worth of work, timed by the exact cost of a call), and answers
every other call at once with a prebuilt TRANSIENT, completed NO, one
write per read.  No parsing beyond the request id and the token, no
dispatching, no marshaling, no timers.

Run under ``bench_overload.py`` (models ``bare thread/conn`` and ``bare
threaded``), it tells what share of the capacity a thread-per-connection
structure keeps at 10x on this machine when the work of reading, refusing
and handing calls to threads is as cheap as Python makes it: the share left
to pyorb's strategies of the same structure.

GIOP 1.2, little-endian requests only (what pyorb's clients send for
``work(unsigned long long)``); anything else closes the connection.  Prints
its IOR on the first stdout line and serves until stdin reaches end of
file, SIGTERM or SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import queue
import struct
import sys
import threading
from typing import Any, Sequence

from benchmarks.bare_echo_server import serve_bare
from benchmarks.bare_middle import REPLY_HEADER, Framed, reply

from pyorb.servers.workload import spin

TRANSIENT_ID = b"IDL:omg.org/CORBA/TRANSIENT:1.0\x00"
SHED_MINOR = 0x4F4D0001  # OMG's TRANSIENT minor 1: discarded for resource exhaustion, as pyorb's servers say
COMPLETED_NO = 1
SYSTEM_EXCEPTION = 2
# Request id, status, no service contexts; then the body (8-aligned at 24: no
# padding): the repository id, the minor code and the completion status.
_REFUSAL_TAIL = (struct.pack("<II", SYSTEM_EXCEPTION, 0) + struct.pack("<I", len(TRANSIENT_ID)) + TRANSIENT_ID
                 + struct.pack("<II", SHED_MINOR, COMPLETED_NO))
_REFUSAL_HEAD = REPLY_HEADER + struct.pack("<I", 4 + len(_REFUSAL_TAIL))


def refusal(request_id: bytes) -> bytes:
    """The TRANSIENT reply, completed NO, to the request ``request_id`` (its four bytes as received)."""
    return _REFUSAL_HEAD + request_id + _REFUSAL_TAIL


class Admission:
    """Calls admitted and not yet answered, server-wide: touched by the event loop's thread only."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.pending = 0
        self.admitted = 0
        self.refused = 0


class Connection(Framed):
    """One client connection and its thread."""

    def __init__(self, admission: Admission, lock: threading.Lock | None, cpu: float) -> None:
        super().__init__()
        self.admission = admission
        self.jobs: queue.SimpleQueue[tuple[bytes, bytes] | None] = queue.SimpleQueue()
        self.lock = lock
        self.cpu = cpu

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._serve, args=(loop,), daemon=True).start()

    def connection_lost(self, exc: Exception | None) -> None:
        self.jobs.put(None)

    def messages_received(self, received: list[bytes]) -> None:
        admission = self.admission
        refused = []
        for msg in received:
            if admission.pending < admission.most:
                admission.pending += 1
                admission.admitted += 1
                self.jobs.put((msg[12:16], msg[-8:]))
            else:
                refused.append(refusal(msg[12:16]))
        if refused:
            admission.refused += len(refused)
            self.transport.write(b"".join(refused))

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        lock = self.lock if self.lock is not None else contextlib.nullcontext()
        while (job := self.jobs.get()) is not None:
            request_id, token = job
            with lock:
                spin(self.cpu)
            try:
                loop.call_soon_threadsafe(self._answered, reply(request_id, token))
            except RuntimeError:  # the loop has closed: the server is stopping
                return

    def _answered(self, data: bytes) -> None:
        self.admission.pending -= 1
        if not self.transport.is_closing():
            self.transport.write(data)


async def serve(ns: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    admission = Admission(max(1, math.ceil(ns.target / ns.cpu)))
    lock = threading.Lock() if ns.lock else None
    server = await loop.create_server(lambda: Connection(admission, lock, ns.cpu), ns.host, ns.port)
    try:
        await serve_bare(server, "IDL:Bench/Sink:1.0", ns.host, b"Sink")
    finally:
        print(f"bare_shed_sink: {admission.admitted} calls admitted, {admission.refused} refused",
              file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", type=float, default=0.005, help="CPU seconds per call (default 0.005)")
    p.add_argument("--target", type=float, default=0.05,
                   help="seconds of work the queue may hold: calls past target/cpu are refused (default 0.05)")
    p.add_argument("--lock", action="store_true", help="run every call under one server-wide lock ('threaded')")
    p.add_argument("--host", default="127.0.0.1", help="loopback address (127.0.0.1 or ::1)")
    p.add_argument("--port", type=int, default=0, help="TCP port, 0 for an ephemeral one")
    ns = p.parse_args(argv)
    if not (0 < ns.cpu <= 1 and 0 < ns.target <= 60):
        p.error("--cpu must be in (0, 1] and --target in (0, 60] seconds")
    import uvloop

    uvloop.run(serve(ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
