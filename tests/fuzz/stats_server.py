#!/usr/bin/env python3
"""A pyorb Bench::Echo server that reports on its own health, for the network fuzz test.

Prints the Echo IOR on its first stdout line.  It also serves
Hardening::Target (idl/hardening.idl, tests/peers/hardening_servant.py)
under the key ``Target``, for hostile values in an ``any``.  Then each ``stats`` line on
stdin is answered with one JSON line on stdout: the asyncio tasks alive on
the server's loop, the Python threads and the server's open connections
(the caller reads its memory and OS threads with psutil).  It stops at
stdin end of file.  Only the public server API is used, so what it reports
is what any pyorb server would show.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Sequence

import pyorb
from pyorb.idl import bench_idl
from pyorb.servers.echo import SERVANTS, make_servant

ROOT = Path(__file__).resolve().parents[2]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    parser.add_argument("--servant", choices=SERVANTS, default="coroutine")
    parser.add_argument("--max-message-size", type=int, default=64 * 1024)
    parser.add_argument("--read-timeout", type=float, default=1.0)
    return parser.parse_args(argv)


def stats(server: pyorb.Server) -> dict[str, int]:
    """Counts taken on the loop thread, so that they are consistent."""
    return {
        "tasks": len(asyncio.all_tasks()),
        "threads": threading.active_count(),
        "connections": len(server.connections),
    }


def answer_commands(loop: asyncio.AbstractEventLoop, server: pyorb.Server, stop: asyncio.Event) -> None:
    """Answer ``stats`` lines from stdin (a thread: stdin may be any file); EOF stops."""

    async def report() -> None:
        print(json.dumps(stats(server)), flush=True)

    for line in sys.stdin:
        if line.strip() == "stats":
            asyncio.run_coroutine_threadsafe(report(), loop).result(10)
    loop.call_soon_threadsafe(stop.set)


async def serve(ns: argparse.Namespace) -> None:
    config = pyorb.Config(max_message_size=ns.max_message_size, read_timeout=ns.read_timeout)
    idl = bench_idl()
    stop = asyncio.Event()
    async with pyorb.Server(config=config) as server:
        key = server.activate(make_servant(idl, ns.servant), "Echo")
        pyorb.load_idl(ROOT / "idl" / "hardening.idl")
        from tests.peers.hardening_servant import Target

        server.activate(Target(), "Target")
        print(server.ior(key), flush=True)
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=answer_commands, args=(loop, server, stop), daemon=True, name="stats"
        ).start()
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    if ns.loop == "uvloop":
        import uvloop

        uvloop.run(serve(ns))
    else:
        asyncio.run(serve(ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
