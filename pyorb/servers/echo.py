#!/usr/bin/env python3
"""pyorb echo server of Bench::Echo, on uvloop.

The pyorb side of the echo benchmarks (benchmarks/bench_echo.py): Echo.ping
returns the stamp it is given, written in one of pyorb's three servant
styles (--servant sync|coroutine|amh).

Prints the Echo IOR on the first stdout line, then serves until
SIGTERM/SIGINT or until its stdin reaches end of file, so that a driver
that dies still takes its servers with it.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
IDL = ROOT / "idl" / "bench.idl"
# Benchmark this checkout's pyorb, whatever the working directory and
# whether or not some pyorb is installed in the environment.
sys.path.insert(0, str(ROOT))

import pyorb  # noqa: E402  (needs the path set above)
import pyorb.tls  # noqa: E402

SERVANTS = ("sync", "coroutine", "amh")
# Hard limit on a clean close (pending replies, open connections) at exit.
SHUTDOWN_GRACE_S = 10.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 on a bad option."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1",
                        help="loopback address (127.0.0.1 or ::1)")
    parser.add_argument("--port", type=int, default=0,
                        help="TCP port, 0 for an ephemeral one (default 0)")
    parser.add_argument("--servant", choices=SERVANTS, default="sync",
                        help="servant style: plain POA servant (runs inline "
                             "on the loop), async def, or AMH (default sync)")
    parser.add_argument("--no-stdin-watch", action="store_true",
                        help="do not stop at stdin EOF (for manual runs)")
    parser.add_argument("--tls-cert", type=Path, metavar="PEM",
                        help="serve TLS only, with this certificate (and key, unless --tls-key)")
    parser.add_argument("--tls-key", type=Path, metavar="PEM", help="the private key of --tls-cert")
    ns = parser.parse_args(argv)
    if not 0 <= ns.port <= 65535:
        parser.error("--port must be in 0..65535")
    return ns


def make_servant(idl: SimpleNamespace, style: str) -> Any:
    """An Echo servant in the requested style."""
    poa_echo = idl.Bench__POA.Echo

    class SyncEcho(poa_echo):  # type: ignore[misc,valid-type]
        """Plain servant: returns its result."""

        def ping(self, stamp: int) -> int:
            return stamp

        def notify(self, stamp: int) -> None:
            pass

    class CoroutineEcho(poa_echo):  # type: ignore[misc,valid-type]
        """Coroutine servant: the return value is the reply."""

        async def ping(self, stamp: int) -> int:
            return stamp

        async def notify(self, stamp: int) -> None:
            pass

    class AmhEcho(pyorb.amh_skeleton(poa_echo)):  # type: ignore[misc]
        """AMH servant: replies through its response handler."""

        def ping(self, rh: Any, stamp: int) -> None:
            rh.ping(stamp)

        def notify(self, rh: Any, stamp: int) -> None:
            pass

    classes = {"sync": SyncEcho, "coroutine": CoroutineEcho, "amh": AmhEcho}
    return classes[style]()


def _watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Set ``stop`` at stdin end of file (raw reads in a daemon thread).

    A thread rather than loop.connect_read_pipe: stdin may be a file or
    /dev/null, which event loops refuse to watch.
    """
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    try:
        loop.call_soon_threadsafe(stop.set)
    except RuntimeError:  # the loop has already closed
        pass


def install_stoppers(stop: asyncio.Event, watch_stdin: bool) -> None:
    """SIGTERM/SIGINT (and optionally stdin EOF) set ``stop``."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if watch_stdin:
        threading.Thread(target=_watch_stdin, args=(loop, stop),
                         daemon=True, name="stdin-watch").start()


async def serve(ns: argparse.Namespace) -> int:
    """Start the server, print the IOR, serve until told to stop."""
    idl = pyorb.load_idl(IDL)
    stop = asyncio.Event()
    install_stoppers(stop, not ns.no_stdin_watch)
    try:
        tls = pyorb.tls.server_context(ns.tls_cert, ns.tls_key) if ns.tls_cert else None
        server = pyorb.Server(host=ns.host, port=ns.port, tls=tls)
        await server.start()
    except OSError as exc:
        print(f"pyorb_echo: cannot listen on {ns.host}:{ns.port}: {exc}",
              file=sys.stderr, flush=True)
        return 1
    try:
        key = server.activate(make_servant(idl, ns.servant), "Echo")
        print(server.ior(key), flush=True)
        await stop.wait()
    finally:
        try:
            await asyncio.wait_for(server.close(), SHUTDOWN_GRACE_S)
        except asyncio.TimeoutError:
            print("pyorb_echo: close timed out", file=sys.stderr, flush=True)
        # Closed: a SIGTERM from here to the exit must not turn it into -15.
        asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and serve on uvloop."""
    ns = parse_args(argv)
    import uvloop
    return uvloop.run(serve(ns))


if __name__ == "__main__":
    sys.exit(main())
