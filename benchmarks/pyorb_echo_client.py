#!/usr/bin/env python3
"""pyorb closed-loop benchmark client of Bench::Echo, on uvloop.

N asyncio tasks each call ping(stamp) in a loop for --warmup then --seconds
seconds, the next call as soon as the reply came; only calls completing
inside the measured window count.  All tasks share the client's one
connection to the server, so N is also the number of requests outstanding
on it (AMI calls, pipelined on one socket: --pipelined names that reading
and changes nothing).  Prints one JSON line, the shape of
omni_echo_client.py's with "concurrency" for "threads":
{"concurrency", "calls", "seconds", "calls_per_s", "errors"}.

Exit status 0, or 1 if the first call (connection set-up) fails.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence
from benchmarks.common import positive, Tally, Window

# Benchmark this checkout's pyorb, whatever the working directory.

import pyorb
import pyorb.tls
from pyorb.idl import bench_idl
from omniORB import CORBA


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 on a bad option."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("ior", help="IOR or corbaloc of a Bench::Echo")
    p.add_argument("--concurrency", type=positive(int), default=1,
                   metavar="N", help="closed-loop tasks = calls in flight")
    p.add_argument("--seconds", type=positive(float), default=3.0)
    p.add_argument("--warmup", type=float, default=1.0, metavar="S")
    p.add_argument("--timeout", type=positive(float), default=5.0,
                   help="per-call timeout in seconds (default 5)")
    p.add_argument("--tls-ca", type=Path, metavar="PEM",
                   help="verify a TLS server against this CA (IORs that offer TLS are called over TLS)")
    p.add_argument("--pipelined", action="store_true",
                   help="same as the default: N outstanding AMI calls on "
                        "one connection")
    ns = p.parse_args(argv)
    if ns.warmup < 0:
        p.error("--warmup must not be negative")
    return ns


async def ping_once(echo: Any, timeout: float) -> bool:
    """One ping; True if it came back with the stamp sent."""
    stamp = time.perf_counter_ns()
    try:
        return bool(await echo.ping(stamp, timeout=timeout) == stamp)
    except CORBA.Exception:
        return False


async def closed_loop(echo: Any, window: Window, timeout: float,
                      tally: Tally) -> None:
    """Call ping back to back until the window ends; count inside it."""
    while True:
        ok = await ping_once(echo, timeout)
        done = time.perf_counter()
        if done >= window.end:
            return
        if done >= window.start:
            tally.calls += ok
            tally.errors += not ok


async def run_load(ns: argparse.Namespace, echo: Any) -> dict[str, Any]:
    """N closed-loop tasks; the JSON summary of the measured window."""
    tallies = [Tally() for _ in range(ns.concurrency)]
    now = time.perf_counter()
    window = Window(now + ns.warmup, now + ns.warmup + ns.seconds)
    tasks = [asyncio.ensure_future(closed_loop(echo, window, ns.timeout, t))
             for t in tallies]
    # A task finishes its last call at most one timeout after the window.
    deadline = window.end + ns.timeout + 1.0
    _, stuck = await asyncio.wait(
        tasks, timeout=max(0.0, deadline - time.perf_counter()))
    for task in stuck:
        task.cancel()
    calls = sum(t.calls for t in tallies)
    errors = sum(t.errors for t in tallies) + len(stuck)  # stuck: count
    return {"concurrency": ns.concurrency, "calls": calls,
            "seconds": ns.seconds,
            "calls_per_s": round(calls / ns.seconds, 1), "errors": errors}


async def run(ns: argparse.Namespace) -> int:
    """Connect with one call, run the load, print the JSON line."""
    idl = bench_idl()
    tls = pyorb.tls.client_context(ns.tls_ca) if ns.tls_ca else None
    async with pyorb.Client(tls=tls) as client:
        echo = client.resolve(ns.ior, idl.Bench.Echo)
        if not await ping_once(echo, ns.timeout):
            # Nothing to measure; still one JSON line for the driver.
            print(json.dumps({"concurrency": ns.concurrency, "calls": 0,
                              "seconds": ns.seconds, "calls_per_s": 0.0,
                              "errors": 1}), flush=True)
            return 1
        result = await run_load(ns, echo)
    print(json.dumps(result), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and run on uvloop."""
    ns = parse_args(argv)
    import uvloop
    return uvloop.run(run(ns))


if __name__ == "__main__":
    sys.exit(main())
