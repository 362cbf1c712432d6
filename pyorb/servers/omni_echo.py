#!/usr/bin/env python3
"""omniORBpy baseline server of Bench::Echo and Bench::Sink.

The yardstick pyorb's servers are measured against.  Echo.ping returns the
stamp it is given; Sink.work returns its token after an optional delay.

Prints the Echo IOR on the first stdout line and the Sink IOR on the second,
then serves until SIGTERM/SIGINT or until its stdin reaches end of file.
The lifetime code mirrors tests/peers/omni_server.py on purpose: both are
standalone scripts that must run from any working directory.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

from pyorb.idl import import_generated
from omniORB import CORBA

IDL = Path(__file__).resolve().parents[1] / "idl" / "bench.idl"
# Hard limit on a clean ORB shutdown before the process exits regardless.
SHUTDOWN_GRACE_S = 10.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 on a bad option."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1",
                        help="loopback address (127.0.0.1 or ::1)")
    parser.add_argument("--port", type=int, default=0,
                        help="TCP port, 0 for an ephemeral one (default 0)")
    parser.add_argument("--threading", choices=("tpc", "pool"), default="tpc",
                        help="thread per connection (omniORB default) or "
                             "thread pool")
    parser.add_argument("--pool-size", type=int, default=None, metavar="N",
                        help="maxServerThreadPoolSize in pool mode "
                             "(default: omniORB's, 100)")
    parser.add_argument("--delay-ms", type=float, default=0.0, metavar="MS",
                        help="Sink.work sleeps this long (default 0)")
    parser.add_argument("--no-stdin-watch", action="store_true",
                        help="do not stop at stdin EOF (for manual runs)")
    ns = parser.parse_args(argv)
    if ns.pool_size is not None and ns.threading != "pool":
        parser.error("--pool-size needs --threading pool")
    if ns.pool_size is not None and ns.pool_size < 1:
        parser.error("--pool-size must be at least 1")
    if ns.delay_ms < 0:
        parser.error("--delay-ms must not be negative")
    return ns


def orb_args(ns: argparse.Namespace) -> list[str]:
    """ORB_init arguments: loopback endpoint and the threading model."""
    host = f"[{ns.host}]" if ":" in ns.host else ns.host
    args = [sys.argv[0], "-ORBendPoint", f"giop:tcp:{host}:{ns.port}"]
    if ns.threading == "tpc":
        return args + ["-ORBthreadPerConnectionPolicy", "1"]
    args += ["-ORBthreadPerConnectionPolicy", "0"]
    if ns.pool_size is not None:
        args += ["-ORBmaxServerThreadPoolSize", str(ns.pool_size)]
    return args


def build_servant_classes(poa_mod: ModuleType) -> tuple[type, type]:
    """Echo and Sink servants on the generated skeletons."""

    class EchoServant(poa_mod.Echo):  # type: ignore[name-defined,misc]
        """ping returns its stamp; notify (oneway) only counts."""

        def __init__(self) -> None:
            self.notified = 0

        def ping(self, stamp: int) -> int:
            return stamp

        def notify(self, stamp: int) -> None:
            self.notified += 1

    class SinkServant(poa_mod.Sink):  # type: ignore[name-defined,misc]
        """work returns its token after the configured delay."""

        def __init__(self, delay_s: float) -> None:
            self._delay_s = delay_s

        def work(self, token: int) -> int:
            if self._delay_s:
                time.sleep(self._delay_s)
            return token

    return EchoServant, SinkServant


def start_server(ns: argparse.Namespace) -> tuple[Any, list[str]]:
    """Initialise the ORB and activate both servants; return (orb, IORs)."""
    orb = CORBA.ORB_init(orb_args(ns), CORBA.ORB_ID)
    import_generated(str(IDL))  # omniORB.importIDL, minus its PATH lookup
    echo_cls, sink_cls = build_servant_classes(sys.modules["Bench__POA"])
    poa = orb.resolve_initial_references("RootPOA")
    refs = [poa.servant_to_reference(echo_cls()),
            poa.servant_to_reference(sink_cls(ns.delay_ms / 1000.0))]
    poa._get_the_POAManager().activate()
    return orb, [orb.object_to_string(r) for r in refs]


class StopSignal:
    """Records SIGTERM/SIGINT; the handler only sets a flag."""

    def __init__(self) -> None:
        self.received = False
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = True


def _watch_stdin(eof: threading.Event) -> None:
    """Set eof at stdin end of file; raw reads, never the buffered stdin."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    eof.set()


def wait_for_stop(signals: StopSignal, watch_stdin: bool) -> None:
    """Block until SIGTERM, SIGINT or (optionally) stdin EOF."""
    eof = threading.Event()
    if watch_stdin:
        threading.Thread(target=_watch_stdin, args=(eof,),
                         daemon=True).start()
    while not signals.received and not eof.wait(0.1):
        pass


def shutdown(orb: Any) -> None:
    """Shut the ORB down cleanly, or exit hard if that takes too long."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    killer = threading.Timer(SHUTDOWN_GRACE_S, os._exit, args=(3,))
    killer.daemon = True
    killer.start()
    orb.shutdown(True)
    orb.destroy()
    killer.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until told to stop."""
    ns = parse_args(argv)
    signals = StopSignal()
    orb, iors = start_server(ns)
    print("\n".join(iors), flush=True)
    wait_for_stop(signals, not ns.no_stdin_watch)
    shutdown(orb)
    return 0


def exit_now(code: int) -> None:
    """Flush and leave without interpreter finalisation.

    omniORB threads that wind down after orb.destroy() still take the GIL;
    if that happens while Python finalises, CPython ends them with
    pthread_exit, whose forced unwind through omniORB's C++ aborts the
    process ("terminate called without an active exception", rc -6, seen
    in about 1 exit in 5 after load).  The ORB is already destroyed here.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
