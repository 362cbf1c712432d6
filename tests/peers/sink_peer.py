"""A pyorb server of Bench::Sink for the blocking client and Locust tests.

``work(token)`` waits ``--delay`` seconds, then returns ``token``; with
``--odd wrong`` it returns ``token + 1`` for odd tokens, with ``--odd raise``
it raises CORBA.NO_RESOURCES for them.  The object is reachable as
``corbaloc::1.2@HOST:PORT/Sink``.

    python -m tests.peers.sink_peer [--delay S] [--odd ok|wrong|raise]

Its lifetime is :mod:`pyorb.servers.runner`'s: the IOR and the corbaloc URL
on stdout, then it serves until SIGTERM/SIGINT or stdin end of file.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, Sequence

from omniORB import CORBA

from pyorb.idl import bench_idl
from pyorb.servers import runner


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = runner.OneLineParser(prog="sink_peer", description=__doc__.split("\n")[0])
    runner.add_server_options(parser, "Sink")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds work() waits (default 0)")
    parser.add_argument("--odd", choices=("ok", "wrong", "raise"), default="ok",
                        help="what work() does with an odd token (default ok)")
    ns = parser.parse_args(argv)
    ns.reuse_port = False
    return ns


def make_servant(ns: argparse.Namespace) -> Any:
    class Sink(bench_idl().Bench__POA.Sink):  # type: ignore[misc,name-defined]
        async def work(self, token: int) -> int:
            if ns.delay:
                await asyncio.sleep(ns.delay)
            if token % 2 and ns.odd == "wrong":
                return token + 1
            if token % 2 and ns.odd == "raise":
                raise CORBA.NO_RESOURCES(7, CORBA.COMPLETED_YES)
            return token

    return Sink()


async def serve(ns: argparse.Namespace) -> int:
    server = await runner.start_server("sink_peer", ns, "reactive")
    if server is None:
        return 1
    await runner.serve_until_stopped(server, make_servant(ns), ns, "sink_peer")
    return 0


if __name__ == "__main__":
    options = parse_args(None)
    sys.exit(runner.run(lambda: serve(options)))
