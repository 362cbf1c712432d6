#!/usr/bin/env python3
"""The floor under any asyncio load generator: a bare client of Bench::Sink.work.

Not an ORB: it writes hand-framed GIOP 1.2 requests (little-endian, the
target's object key, one ``unsigned long long``) and reads back only each
reply's size and request id, on a raw uvloop protocol with no futures, no
tasks and no marshaling.  Beside ``pyorb.loadtest.generator`` it tells how
much of a closed-loop experiment's latency is the generator's and how much
the servers': ``--connections 400`` is the AMH paper's N = 400 clients, one
call each in flight; ``--connections 1 --in-flight 400`` is the same load
multiplexed on one connection, as a middle tier sends it to its sink.

Prints one JSON line, the load generators' result
(:class:`pyorb.loadtest.stats.LoadResult`: calls, throughput, latency
percentiles in ms).  Bounded: it stops after ``--warmup`` plus
``--duration`` seconds.
"""
from __future__ import annotations

import argparse
import asyncio
import struct
import time
from typing import Any, Callable, Coroutine

# The IOR reader and result format of this checkout, whatever the working directory.
from pyorb.giop.ior import parse_reference
from pyorb.loadtest.stats import LoadResult

HEADER = b"GIOP\x01\x02\x01\x00"  # GIOP 1.2, little-endian, Request
REPLY_HEADER = b"GIOP\x01\x02\x01\x01"


def _pad(body: bytearray, to: int, offset: int = 0) -> None:
    body.extend(bytes(-(len(body) + offset) % to))


def request_template(key: bytes, operation: str = "work") -> tuple[bytes, bytes]:
    """The bytes of a request of ``operation(unsigned long long)`` before and after its request id
    and argument."""
    body = bytearray(struct.pack("<B3x", 3))  # response flags: a reply is expected
    body += struct.pack("<H2xI", 0, len(key)) + key  # KeyAddr target
    _pad(body, 4, 4)
    name = operation.encode("ascii") + b"\0"
    body += struct.pack("<I", len(name)) + name
    _pad(body, 4, 4)
    body += struct.pack("<I", 0)  # no service contexts
    _pad(body, 8, 12 + 4)  # the argument is 8-aligned in the message
    size = 4 + len(body) + 8
    return HEADER + struct.pack("<I", size), bytes(body)


class Window:
    __slots__ = ("start", "end", "latencies", "calls", "errors")

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.latencies: list[float] = []
        self.calls = self.errors = 0


class SinkCaller(asyncio.Protocol):
    """One connection keeping ``in_flight`` calls outstanding until the window ends."""

    def __init__(self, key: bytes, in_flight: int, window: Window) -> None:
        self.head, self.tail = request_template(key)
        self.in_flight = in_flight
        self.window = window
        self.sent: dict[int, float] = {}
        self.next_id = 0
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    def _request(self, now: float) -> bytes:
        self.next_id += 1
        self.sent[self.next_id] = now
        return self.head + struct.pack("<I", self.next_id) + self.tail + struct.pack("<Q", self.next_id)

    def begin(self) -> None:
        assert self.transport is not None
        now = time.perf_counter()
        self.transport.write(b"".join(self._request(now) for _ in range(self.in_flight)))

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        out = []
        window = self.window
        while len(buf) >= 12:
            size = struct.unpack_from("<I", buf, 8)[0]
            if len(buf) < 12 + size:
                break
            if buf[:8] != REPLY_HEADER:
                raise ValueError(f"not a GIOP 1.2 little-endian Reply: {bytes(buf[:8])!r}")
            request_id, status = struct.unpack_from("<II", buf, 12)
            started = self.sent.pop(request_id)
            del buf[:12 + size]
            now = time.perf_counter()
            if window.start <= now < window.end:
                if status:  # an exception: counted, not timed
                    window.errors += 1
                else:
                    window.calls += 1
                    window.latencies.append(now - started)
            if now < window.end:
                out.append(self._request(now))
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def run(ns: argparse.Namespace) -> LoadResult:
    ior = parse_reference(ns.ref)
    profile = ior.iiop
    if profile is None:
        raise SystemExit("bare_sink_client: the reference has no IIOP profile")
    loop = asyncio.get_running_loop()
    window = Window(float("inf"), float("inf"))
    callers = []
    for _ in range(ns.connections):
        _, caller = await loop.create_connection(lambda: SinkCaller(profile.object_key, ns.in_flight, window),
                                                 profile.host, profile.port)
        callers.append(caller)
    t0 = time.perf_counter()
    window.start, window.end = t0 + ns.warmup, t0 + ns.warmup + ns.duration
    for caller in callers:
        caller.begin()
    await asyncio.sleep(ns.warmup + ns.duration)
    for caller in callers:
        assert caller.transport is not None
        caller.transport.close()
    await asyncio.wait_for(asyncio.gather(*(c.lost for c in callers)), 10)
    return LoadResult.measured("bare", ns.connections * ns.in_flight, window.calls, window.errors, ns.duration,
                               window.latencies, time.process_time(), time.perf_counter() - t0,
                               connections=ns.connections, in_flight=ns.in_flight)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("ref", help="IOR or corbaloc URL of a Bench::Sink")
    p.add_argument("--connections", type=int, default=1, help="connections, each its own closed loop")
    p.add_argument("--in-flight", type=int, default=1, help="calls outstanding per connection")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds before the window")
    p.add_argument("--duration", type=float, default=5.0, help="seconds in the window")
    ns = p.parse_args()
    for name in ("connections", "in_flight"):
        if getattr(ns, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if not (ns.warmup >= 0 and 0 < ns.duration <= 600):
        p.error("--warmup must be >= 0 and --duration in (0, 600]")
    run_and_emit(run, ns)


def run_and_emit(run: Callable[[argparse.Namespace], Coroutine[Any, Any, LoadResult]], ns: argparse.Namespace) -> None:
    """Run ``run(ns)`` on uvloop (asyncio's own loop without it) and print its result's JSON line."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(run(ns)).emit()
        return
    uvloop.run(run(ns)).emit()


if __name__ == "__main__":
    main()
