"""A pyorb Bench::Sink that records when each call started, for the deadline tests.

``python -m tests.peers.deadline_sink --report FILE [--delay S] [--strategy SPEC]``

``work(token)`` appends one JSON line to FILE when its servant code starts
(``{"token", "started": time.time(), "deadline": pyorb.current().deadline}``,
the deadline in ``time.monotonic()`` seconds, comparable across the processes
of one host), sleeps ``--delay`` seconds on its dispatcher thread and returns
the token.  At exit it appends ``{"expired": n, "served": n}`` from the
server's statistics.  It prints its IOR and corbaloc URL, then serves until
stdin reaches end of file, SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from typing import Any, Sequence

import pyorb
from pyorb.idl import bench_idl
from pyorb.servers.runner import wait_for_stop


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", required=True, help="file the JSON lines are appended to")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each call sleeps (default 0)")
    parser.add_argument("--strategy", default="thread_pool(1)", help="dispatch strategy (default thread_pool(1))")
    return parser.parse_args(argv)


def make_servant(ns: argparse.Namespace) -> Any:
    lock = threading.Lock()
    # benchmarks/deadline_chain.py --tree runs this against checkouts that predate pyorb.current.
    current = getattr(pyorb, "current", lambda: None)

    class Sink(bench_idl().Bench__POA.Sink):  # type: ignore[misc,name-defined]
        def work(self, token: int) -> int:
            served = current()
            line = {"token": token, "started": time.time(), "deadline": served.deadline if served else None}
            with lock, open(ns.report, "a") as report:
                report.write(json.dumps(line) + "\n")
            time.sleep(ns.delay)
            return token

    return Sink()


async def serve(ns: argparse.Namespace) -> None:
    server = pyorb.Server(strategy=ns.strategy)
    await server.start()
    try:
        key = server.activate(make_servant(ns), "Sink")
        print(server.ior(key), server.corbaloc(key), sep="\n", flush=True)
        # Not runner.serve_until_stop: deadline_chain --tree runs this against older checkouts, which lack it.
        await wait_for_stop(True, lambda: None)
    finally:
        await server.close(grace=1.0)
    (op,) = server.stats().operations
    with open(ns.report, "a") as report:
        report.write(json.dumps({"expired": getattr(op, "expired", 0), "served": op.served}) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()
