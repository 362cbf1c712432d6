#!/usr/bin/env python3
"""A pyorb server of Bench::Sink for the blocking client and Locust tests.

``work(token)`` waits ``--delay`` seconds, then returns ``token``; with
``--odd wrong`` it returns ``token + 1`` for odd tokens, with ``--odd raise``
it raises CORBA.NO_RESOURCES for them.  The object is reachable as
``corbaloc::1.2@HOST:PORT/Sink``.

Prints that corbaloc URL on the first stdout line, then serves until
SIGTERM/SIGINT or until its stdin reaches end of file.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "servers"))

from omniORB import CORBA  # noqa: E402

import pyorb  # noqa: E402
from pyorb_echo import SHUTDOWN_GRACE_S, install_stoppers  # noqa: E402  (servers/pyorb_echo.py)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay", type=float, default=0.0, help="seconds work() waits (default 0)")
    parser.add_argument("--odd", choices=("ok", "wrong", "raise"), default="ok",
                        help="what work() does with an odd token (default ok)")
    return parser.parse_args(argv)


def make_servant(ns: argparse.Namespace) -> Any:
    idl = pyorb.load_idl(ROOT / "idl" / "bench.idl")

    class Sink(idl.Bench__POA.Sink):  # type: ignore[misc,name-defined]
        async def work(self, token: int) -> int:
            if ns.delay:
                await asyncio.sleep(ns.delay)
            if token % 2 and ns.odd == "wrong":
                return token + 1
            if token % 2 and ns.odd == "raise":
                raise CORBA.NO_RESOURCES(7, CORBA.COMPLETED_YES)
            return token

    return Sink()


async def serve(ns: argparse.Namespace) -> None:
    stop = asyncio.Event()
    install_stoppers(stop, watch_stdin=True)
    async with pyorb.Server() as server:
        server.activate(make_servant(ns), "Sink")
        print(server.corbaloc("Sink"), flush=True)
        await stop.wait()
        await asyncio.wait_for(server.close(), SHUTDOWN_GRACE_S)


if __name__ == "__main__":
    asyncio.run(serve(parse_args(None)))
