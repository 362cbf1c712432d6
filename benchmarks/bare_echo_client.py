#!/usr/bin/env python3
"""The floor under any asyncio caller that awaits one call at a time: a bare ``Bench::Echo`` client.

Not an ORB: one coroutine writes a hand-framed GIOP 1.2 ``ping`` request
(little-endian, the target's object key, one ``unsigned long long``), awaits
a future, and a raw uvloop protocol resolves that future from the reply's
request id and last 8 bytes.  No marshaling, no references, no
bookkeeping: one write, one future and one task wake-up per call, the least
that ``await proxy.ping(n)`` can cost in asyncio.  Beside
``pyorb.loadtest.generator --mode sequential`` and omniORBpy's one-thread
client it tells how much of a sequential caller's round trip is pyorb's
client and how much is the event loop's.

Prints one JSON line, the load generators' result
(:class:`pyorb.loadtest.stats.LoadResult`).  Bounded: it stops after
``--warmup`` plus ``--duration`` seconds.
"""
from __future__ import annotations

import argparse
import asyncio
import struct
import time
from typing import Any

from benchmarks.bare_sink_client import REPLY_HEADER, request_template, run_and_emit
from pyorb.giop.ior import parse_reference
from pyorb.loadtest.stats import LoadResult

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_ID_STATUS = struct.Struct("<II")


class EchoCaller(asyncio.Protocol):
    """One connection; :meth:`ping` returns a future of the echoed stamp."""

    def __init__(self, key: bytes) -> None:
        self.head, self.tail = request_template(key, "ping")
        self.loop = asyncio.get_running_loop()
        self.waiting: dict[int, asyncio.Future[int]] = {}
        self.next_id = 0
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.lost = self.loop.create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(ConnectionError(f"bare_echo_client: the connection closed ({exc})"))
        if not self.lost.done():
            self.lost.set_result(None)

    def ping(self, stamp: int) -> asyncio.Future[int]:
        assert self.transport is not None
        self.next_id += 1
        future: asyncio.Future[int] = self.loop.create_future()
        self.waiting[self.next_id] = future
        self.transport.write(self.head + _U32.pack(self.next_id) + self.tail + _U64.pack(stamp))
        return future

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        start = 0
        while len(buf) - start >= 12:
            end = start + 12 + _U32.unpack_from(buf, start + 8)[0]
            if len(buf) < end:
                break
            if buf[start:start + 8] != REPLY_HEADER:
                raise ValueError(f"not a GIOP 1.2 little-endian Reply: {bytes(buf[start:start + 8])!r}")
            request_id, status = _ID_STATUS.unpack_from(buf, start + 12)
            future = self.waiting.pop(request_id)
            if status:
                future.set_exception(RuntimeError(f"bare_echo_client: reply status {status} to request {request_id}"))
            else:
                future.set_result(_U64.unpack_from(buf, end - 8)[0])
            start = end
        del buf[:start]


async def run(ns: argparse.Namespace) -> LoadResult:
    profile = parse_reference(ns.ref).iiop
    if profile is None:
        raise SystemExit("bare_echo_client: the reference has no IIOP profile")
    loop = asyncio.get_running_loop()
    _, caller = await loop.create_connection(lambda: EchoCaller(profile.object_key), profile.host, profile.port)
    t0 = time.perf_counter()
    start, end = t0 + ns.warmup, t0 + ns.warmup + ns.duration
    latencies: list[float] = []
    calls = 0
    now = t0
    while now < end:
        sent = now
        if await caller.ping(calls) != calls:
            raise SystemExit(f"bare_echo_client: call {calls} was not echoed")
        now = time.perf_counter()
        if now >= start:
            latencies.append(now - sent)
        calls += 1
    assert caller.transport is not None
    caller.transport.close()
    await asyncio.wait_for(caller.lost, 10)
    return LoadResult.measured("bare-sequential", 1, len(latencies), 0, ns.duration, latencies,
                               time.process_time(), time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("ref", help="IOR or corbaloc URL of a Bench::Echo")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds before the window")
    p.add_argument("--duration", type=float, default=5.0, help="seconds in the window")
    ns = p.parse_args()
    if not (ns.warmup >= 0 and 0 < ns.duration <= 600):
        p.error("--warmup must be >= 0 and --duration in (0, 600]")
    run_and_emit(run, ns)


if __name__ == "__main__":
    main()
