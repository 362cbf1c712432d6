#!/usr/bin/env python3
"""omniORBpy closed-loop benchmark client of Bench::Sink.

omni_echo_client.py's load loop and options, calling work(token) instead
of ping(stamp): N threads, one connection each, for --warmup then
--seconds seconds.  Prints "ready" once the first call has connected (so
that a driver can time the measured window from outside), then the JSON
line {"threads", "calls", "seconds", "calls_per_s", "errors"}.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from benchmarks import omni_echo_client as echo_client


class SinkAsEcho:
    """A Bench::Sink reference answering the Echo client's ping(stamp)."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def ping(self, stamp: int) -> int:
        return int(self.sink.work(stamp))


def connect(ns: Any) -> Any:
    """Start the ORB and return the Sink reference, narrowed."""
    from pyorb.idl import import_generated
    from omniORB import CORBA
    orb = CORBA.ORB_init(echo_client.orb_args(ns), CORBA.ORB_ID)
    import_generated(str(echo_client.IDL))  # omniORB.importIDL, minus its PATH lookup
    bench = sys.modules["Bench"]
    return orb.string_to_object(ns.ior)._narrow(bench.Sink)


def first_call(target: SinkAsEcho) -> bool:
    """Connect with one call before the window opens; say why it failed."""
    from omniORB import CORBA
    try:
        return target.ping(1) == 1
    except CORBA.Exception as exc:
        print(f"omni_sink_client: first call failed: {exc!r}",
              file=sys.stderr, flush=True)
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Connect, say "ready", run the load and print its JSON line."""
    import json
    ns = echo_client.parse_args(argv)
    sink = connect(ns)
    target = SinkAsEcho(sink)
    ok = first_call(target)
    print("ready" if ok else "failed", flush=True)
    if not ok:
        print(json.dumps({"threads": ns.threads, "calls": 0,
                          "seconds": ns.seconds, "calls_per_s": 0.0,
                          "errors": 1}), flush=True)
        return 1
    print(json.dumps(echo_client.run_load(ns, target)), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    # As in omni_echo_client.py: a thread stuck in a call must not hold
    # the process.
    sys.stdout.flush()
    os._exit(code)
