"""What the papers' servers share: options, lifetime, statistics, worker processes.

A server prints its IOR on the first stdout line and its corbaloc URL on the
second (the IOR again if it takes TLS connections only), then serves until SIGTERM/SIGINT or until its stdin reaches end of
file (so that a driver that dies takes its servers with it); :func:`serve_until_stop` gives the same
lifetime to a server that is none of these (a bare asyncio server, a test peer).  SIGUSR1 prints
the dispatch statistics to stderr; they are printed again on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable, Coroutine, NoReturn, Sequence

from pyorb.server.workers import Supervisor, WorkerError, WorkerPolicy

SHUTDOWN_GRACE_S = 10.0
DRAIN_GRACE_S = 5.0
"""Seconds a stopping server gives requests in flight to finish (graceful shutdown)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_server_options(parser: argparse.ArgumentParser, key: str) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port, 0 for an ephemeral one (default 0)")
    parser.add_argument("--endpoint", action="append", default=[], metavar="HOST:PORT",
                        help="listen here instead of --host/--port (repeatable: several endpoints, IPv4 or IPv6)")
    parser.add_argument("--publish", action="append", default=[], metavar="ADDRESS",
                        help="address for the IOR instead of the bound one: HOST, HOST:PORT or [IPV6]:PORT "
                             "(repeatable: the first goes into the profile, the others are alternates)")
    parser.add_argument("--key", default=key, help=f"object key (default {key})")
    parser.add_argument("--ior-file", type=Path, help="also write the IOR to this file")
    parser.add_argument("--no-stdin-watch", action="store_true", help="do not stop at stdin end of file")


def add_security_options(parser: argparse.ArgumentParser) -> None:
    """TLS and metrics options of pyorb's own servers (the omniORBpy baselines have no SSL transport)."""
    group = parser.add_argument_group("TLS and metrics")
    group.add_argument("--tls-cert", type=Path, metavar="PEM",
                       help="serve TLS with this certificate (chain); without --tls-endpoint every endpoint is TLS only")
    group.add_argument("--tls-key", type=Path, metavar="PEM", help="its private key (default: in --tls-cert)")
    group.add_argument("--tls-ca", type=Path, metavar="PEM",
                       help="verify client certificates against this CA (and servers, for the server's own calls)")
    group.add_argument("--tls-require-client-cert", action="store_true", help="refuse clients without a certificate")
    group.add_argument("--tls-endpoint", action="append", default=[], metavar="HOST:PORT",
                       help="a TLS endpoint beside the plain ones (repeatable)")
    group.add_argument("--metrics", metavar="HOST:PORT",
                       help="serve Prometheus metrics at http://HOST:PORT/metrics")


def security_options(ns: Any) -> dict[str, Any]:
    """``pyorb.Server`` keyword arguments for the TLS options (ValueError if inconsistent, OSError if unreadable)."""
    if getattr(ns, "tls_cert", None) is None:
        given = [name for name in ("tls_key", "tls_ca", "tls_require_client_cert", "tls_endpoint")
                 if getattr(ns, name, None)]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} needs --tls-cert")
        return {}
    from pyorb import tls

    context = tls.server_context(ns.tls_cert, ns.tls_key, ca=ns.tls_ca, require_client_cert=ns.tls_require_client_cert)
    return {"tls": context, "tls_endpoints": endpoints_option(ns.tls_endpoint) or None}


def client_tls(ns: Any) -> Any:
    """The TLS context of a server's own client (the middle tier's calls): its CA and certificate, or None."""
    if getattr(ns, "tls_ca", None) is None and getattr(ns, "tls_cert", None) is None:
        return None
    from pyorb import tls

    return tls.client_context(ns.tls_ca, cert=ns.tls_cert, key=ns.tls_key)


def reference_lines(server: Any, key: bytes) -> tuple[str, str]:
    """What a server prints: its IOR, and its corbaloc URL, or the IOR again
    for a TLS-only server (a corbaloc ``iiop`` address cannot say TLS)."""
    ior = server.ior(key)
    tls = getattr(server, "tls", None)
    return ior, ior if tls is not None and tls.requires_tls else server.corbaloc(key)


def start_metrics(server: Any, address: str | None, prog: str) -> Any:
    """A Prometheus endpoint for ``server`` at ``address`` (HOST:PORT), or None without one."""
    if not address:
        return None
    from pyorb.server.metrics import serve_metrics
    from pyorb.server.server import parse_address

    host, port = parse_address(address, 0, bind=True)
    exporter = serve_metrics(server, port, host or "0.0.0.0")
    print(f"{prog}: metrics at {exporter.url}", file=sys.stderr, flush=True)
    return exporter


def endpoints_option(entries: Sequence[str]) -> list[tuple[str, int]]:
    """``--endpoint`` entries as (host, port) pairs to bind (port 0: any free one)."""
    from pyorb.server.server import parse_address

    return [parse_address(entry, 0, bind=True) for entry in entries]


def publish_option(entries: Sequence[str], port: int) -> list[tuple[str, int]]:
    """``--publish`` entries as (host, port) for a server that cannot learn its port
    after binding (omniORB's): each entry needs a port unless ``--port`` gives one."""
    from pyorb.server.server import published_addresses

    if not entries:
        return []
    if port == 0 and any(not _has_port(e) for e in entries):
        raise ValueError("--publish HOST needs HOST:PORT when --port is 0")
    return published_addresses([("127.0.0.1", port or 1)], list(entries))


def _has_port(entry: str) -> bool:
    entry = entry.strip()
    return "]:" in entry if entry.startswith("[") else entry.count(":") == 1


def check_port(parser: argparse.ArgumentParser, port: int) -> None:
    if not 0 <= port <= 65535:
        parser.error(f"--port must be in 0..65535, got {port}")


def announce(ior: str, corbaloc: str, ior_file: Path | None) -> None:
    if ior_file is not None:
        ior_file.write_text(ior + "\n")
    print(ior, flush=True)
    print(corbaloc, flush=True)


def _watch_stdin(callback: Callable[[], None]) -> None:
    # A thread rather than loop.connect_read_pipe: stdin may be a file or
    # /dev/null, which event loops refuse to watch.
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    callback()


def watch_stdin(callback: Callable[[], None]) -> None:
    """Call ``callback`` (from a daemon thread) when stdin reaches end of file."""
    threading.Thread(target=_watch_stdin, args=(callback,), daemon=True, name="stdin-watch").start()


async def wait_for_stop(watch: bool, on_usr1: Callable[[], None] | None = None) -> None:
    """Until SIGTERM, SIGINT or (if ``watch``) stdin end of file; SIGUSR1 calls ``on_usr1`` if given."""
    await _stop_signals(watch, on_usr1).wait()


def _stop_signals(watch: bool, on_usr1: Callable[[], None] | None) -> asyncio.Event:
    # The handlers are in place when this returns: a server announces itself after, as a driver may stop it at once.
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if on_usr1 is not None:
        loop.add_signal_handler(signal.SIGUSR1, on_usr1)
    if watch:
        watch_stdin(lambda: _set_threadsafe(loop, stop))
    return stop


async def serve_until_stop(lines: Sequence[str], close: Callable[[], Awaitable[object]], watch: bool = True) -> None:
    """The lifetime of a server that is not one of :mod:`pyorb.servers` (a bare asyncio server, a test peer):
    print ``lines`` (the IOR first) on stdout, serve until SIGTERM, SIGINT or (if ``watch``) stdin end of
    file, then ``close()`` the server and ignore a late SIGTERM (:func:`exiting`)."""
    try:
        stop = _stop_signals(watch, None)
        for line in lines:
            print(line, flush=True)
        await stop.wait()
    finally:
        await close()
        exiting()


def _set_threadsafe(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
    try:
        loop.call_soon_threadsafe(event.set)
    except RuntimeError:  # the loop has closed already
        pass


async def start_server(prog: str, ns: argparse.Namespace, strategy: str, config: Any = None) -> Any:
    """A started ``pyorb.Server`` for the options (and ``config``, default
    ``pyorb.Config()``), or None after a one-line error."""
    import pyorb

    try:
        server = pyorb.Server(ns.host, ns.port, config=config or pyorb.Config(), strategy=strategy,
                              reuse_port=ns.reuse_port,
                              endpoints=endpoints_option(ns.endpoint) or None, publish=ns.publish or None,
                              **security_options(ns))
    except (ValueError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    try:
        await server.start()
    except OSError as exc:
        print(f"{prog}: cannot listen on {ns.host}:{ns.port}: {exc.strerror or exc}", file=sys.stderr)
        return None
    return server


async def serve_until_stopped(server: Any, servant: Any, ns: argparse.Namespace, title: str) -> None:
    """Activate ``servant``, announce it, serve until told to stop, drain, print the statistics."""
    exporter = None
    try:
        key = server.activate(servant, ns.key)
        announce(*reference_lines(server, key), ns.ior_file)
        exporter = start_metrics(server, getattr(ns, "metrics", None), title.split()[0])
        await wait_for_stop(not ns.no_stdin_watch, lambda: print_stats(server.stats(), title))
    finally:
        if exporter is not None:
            exporter.close()
        await server.close(grace=DRAIN_GRACE_S)
        exiting()
        print_stats(server.stats(), title)


def print_stats(stats: Any, title: str) -> None:
    """Print a ``ServerStats`` snapshot to stderr as a table."""
    from rich.console import Console

    console = Console(file=sys.stderr, width=200)  # wide enough for every header of the table whole
    console.print(f"[bold]{title}[/bold] (pid {os.getpid()})")
    console.print(stats.table())


def exiting() -> None:
    """From the loop thread, once the server is closed: ignore SIGTERM until the process is gone.

    A supervisor (or a test) that closes stdin and then sends SIGTERM at
    once must not catch the process between the loop's end and its exit,
    where the default action would kill it and turn a clean exit into -15.
    """
    asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def run(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run ``main`` on uvloop when installed, asyncio otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main())
    return uvloop.run(main())


def run_workers(argv: Sequence[str], module: str, host: str, port: int, workers: int, watch: bool) -> int:
    """AMH-n: ``workers`` processes of ``module``, each with its own event loop
    and connections, accepting on one port (SO_REUSEPORT spreads connections),
    supervised by :class:`pyorb.server.workers.Supervisor` (a worker that dies
    is started again; a crash loop stops everything).

    Prints the (identical) IOR and corbaloc of the workers, then waits for a
    stop and stops them.
    """
    for unshared in ("--endpoint", "--tls-endpoint", "--metrics"):
        if _option(argv, unshared) is not None:
            print(f"{module}: {unshared} cannot be shared by several worker processes; use --host and --port",
                  file=sys.stderr)
            return 2
    args = [a for a in _without(argv, "--workers", "--port", "--ior-file") if a != "--no-stdin-watch"]
    policy = WorkerPolicy(grace=SHUTDOWN_GRACE_S)
    with Supervisor([sys.executable, "-m", module, *args], workers, host, port, policy) as supervisor:
        try:
            ior, corbaloc = supervisor.start()
        except WorkerError as exc:
            print(f"{module}: {exc}", file=sys.stderr)
            return 1
        ior_file = _option(argv, "--ior-file")
        announce(ior, corbaloc, Path(ior_file) if ior_file else None)
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        if watch:
            watch_stdin(stop.set)
        if supervisor.run(stop):
            print(f"{module}: workers keep dying; stopped", file=sys.stderr)
            return 1
        return 0


def _without(argv: Sequence[str], *options: str) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def _option(argv: Sequence[str], option: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None
