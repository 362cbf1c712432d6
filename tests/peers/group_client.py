"""A closed-loop client of a Bench::Sink group, for tests that run it on another host.

    python tests/peers/group_client.py GROUP_IOR --seconds S --in-flight N
        [--idempotent] [--balancing round_robin|least_pending] [--metrics URL ...]

Calls ``work`` for S seconds with N calls in flight, then prints one JSON
line: calls completed, errors by (exception, completion status), the first
and last second in which an error happened (relative to the start), and
for each --metrics URL (a replica's Prometheus endpoint) the calls it says
it served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import urllib.request

import pyorb
from omniORB import CORBA
from pyorb.idl import bench_idl

Bench = bench_idl().Bench


def served(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return -1  # the replica is gone
    found = re.search(r'^pyorb_requests_total\{operation="Bench::Sink.work"\} (\S+)$', text, re.M)
    return int(float(found.group(1))) if found else 0


async def run(ns: argparse.Namespace) -> dict[str, object]:
    errors: dict[str, int] = {}
    error_times: list[float] = []
    done = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = start + ns.seconds
    async with pyorb.Client(pyorb.Config(call_timeout=ns.timeout), balancing=ns.balancing) as client:
        sink = client.resolve(ns.group, Bench.Sink, idempotent={"work"} if ns.idempotent else ())

        async def worker(n: int) -> None:
            nonlocal done
            token = n * 10_000_000
            while loop.time() < end:
                token += 1
                try:
                    assert await sink.work(token) == token
                    done += 1
                except CORBA.SystemException as exc:
                    key = f"{type(exc).__name__} {exc.completed}"
                    errors[key] = errors.get(key, 0) + 1
                    error_times.append(loop.time() - start)

        await asyncio.gather(*(worker(n) for n in range(ns.in_flight)))
    return {"calls": done, "errors": errors,
            "error_span": [min(error_times), max(error_times)] if error_times else None,
            "served": {url: served(url) for url in ns.metrics}, "elapsed": time.monotonic()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("group")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--in-flight", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--balancing", default="round_robin")
    parser.add_argument("--metrics", action="append", default=[])
    ns = parser.parse_args()
    print(json.dumps(asyncio.run(run(ns))), flush=True)


if __name__ == "__main__":
    main()
