#!/usr/bin/env python3
"""omniORBpy closed-loop benchmark client of Bench::Echo.

N threads each call ping(stamp) in a loop for --warmup then --seconds
seconds; only calls completing inside the measured window count.  Prints one
JSON line: {"threads", "calls", "seconds", "calls_per_s", "errors"}.

--sequential-latency N instead makes N calls one after another (after the
warm-up) and prints their latency in microseconds.

omniORB clients open at most 5 connections per server and send one call at
a time on each by default, which would silently cap concurrency at 5: the
ORB is started with -ORBmaxGIOPConnectionPerServer = --connections (default
--threads) and -ORBoneCallPerConnection 0, so calls beyond the connection
count share connections instead of queueing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from typing import Any, Sequence
from benchmarks.common import positive, Tally, Window
from pyorb.idl import BENCH_IDL

IDL = BENCH_IDL


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 on a bad option."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("ior", help="IOR or corbaloc of a Bench::Echo")
    p.add_argument("--threads", type=positive(int), default=1)
    p.add_argument("--seconds", type=positive(float), default=3.0)
    p.add_argument("--warmup", type=float, default=1.0, metavar="S")
    p.add_argument("--connections", type=positive(int), default=None,
                   help="maxGIOPConnectionPerServer (default: --threads)")
    p.add_argument("--timeout", type=positive(float), default=5.0,
                   help="per-call timeout in seconds (default 5)")
    p.add_argument("--sequential-latency", type=positive(int), default=None,
                   metavar="N", help="make N sequential calls, print latency")
    ns = p.parse_args(argv)
    if ns.warmup < 0:
        p.error("--warmup must not be negative")
    return ns


def orb_args(ns: argparse.Namespace) -> list[str]:
    """Client ORB options that let --threads calls really run at once."""
    connections = ns.connections or ns.threads
    return [sys.argv[0],
            "-ORBmaxGIOPConnectionPerServer", str(max(connections, 1)),
            "-ORBoneCallPerConnection", "0",
            "-ORBclientCallTimeOutPeriod", str(int(ns.timeout * 1000))]


def connect(ns: argparse.Namespace) -> tuple[Any, Any]:
    """Start the ORB and return (orb, Echo reference)."""
    from pyorb.idl import import_generated
    from omniORB import CORBA
    orb = CORBA.ORB_init(orb_args(ns), CORBA.ORB_ID)
    import_generated(str(IDL))  # omniORB.importIDL, minus its PATH lookup
    bench = sys.modules["Bench"]
    return orb, orb.string_to_object(ns.ior)._narrow(bench.Echo)


def ping_once(echo: Any) -> bool:
    """One ping; True if it came back with the stamp sent."""
    from omniORB import CORBA
    stamp = time.perf_counter_ns()
    try:
        return bool(echo.ping(stamp) == stamp)
    except CORBA.Exception:
        return False


def closed_loop(echo: Any, window: Window, barrier: threading.Barrier,
                tally: Tally) -> None:
    """Call ping back to back until the window ends; count inside it."""
    barrier.wait()
    while True:
        ok = ping_once(echo)
        done = time.perf_counter()
        if done >= window.end:
            return
        if done >= window.start:
            tally.calls += ok
            tally.errors += not ok


def run_load(ns: argparse.Namespace, echo: Any) -> dict[str, Any]:
    """N closed-loop threads; the JSON summary of the measured window."""
    tallies = [Tally() for _ in range(ns.threads)]
    barrier = threading.Barrier(ns.threads + 1)
    now = time.perf_counter()
    window = Window(now + ns.warmup, now + ns.warmup + ns.seconds)
    threads = [threading.Thread(target=closed_loop, daemon=True,
                                args=(echo, window, barrier, t))
               for t in tallies]
    for t in threads:
        t.start()
    barrier.wait()
    # A thread finishes its last call at most one timeout after the window.
    deadline = window.end + ns.timeout + 1.0
    for t in threads:
        t.join(max(0.0, deadline - time.perf_counter()))
    calls = sum(t.calls for t in tallies)
    errors = sum(t.errors for t in tallies)
    errors += sum(t.is_alive() for t in threads)  # stuck: count, move on
    return {"threads": ns.threads, "calls": calls, "seconds": ns.seconds,
            "calls_per_s": round(calls / ns.seconds, 1), "errors": errors}


def run_sequential(ns: argparse.Namespace, echo: Any) -> dict[str, Any]:
    """N sequential pings after the warm-up; latency statistics in us."""
    warm_until = time.perf_counter() + ns.warmup
    ping_once(echo)  # connects, even with --warmup 0
    while time.perf_counter() < warm_until:
        ping_once(echo)
    samples: list[float] = []
    errors = 0
    for _ in range(ns.sequential_latency):
        start = time.perf_counter_ns()
        ok = ping_once(echo)
        if ok:
            samples.append((time.perf_counter_ns() - start) / 1000.0)
        errors += not ok
    return {"calls": ns.sequential_latency, "errors": errors,
            **latency_stats(samples)}


def latency_stats(samples: list[float]) -> dict[str, float | None]:
    """min/mean/max/stdev (and median, p99) of the samples, in us."""
    if not samples:
        return dict.fromkeys(("min_us", "mean_us", "max_us", "stdev_us",
                              "p50_us", "p99_us"))
    ordered = sorted(samples)
    stdev = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
    return {"min_us": round(ordered[0], 1),
            "mean_us": round(statistics.fmean(ordered), 1),
            "max_us": round(ordered[-1], 1), "stdev_us": round(stdev, 1),
            "p50_us": round(ordered[len(ordered) // 2], 1),
            "p99_us": round(ordered[min(len(ordered) - 1,
                                        int(len(ordered) * 0.99))], 1)}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected mode and print its JSON line."""
    ns = parse_args(argv)
    orb, echo = connect(ns)
    if ns.sequential_latency:
        result = run_sequential(ns, echo)
    else:
        result = run_load(ns, echo)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    # Leave at once: a thread stuck in a call must not hold the process,
    # and the kernel closes the connections.
    sys.stdout.flush()
    os._exit(code)
