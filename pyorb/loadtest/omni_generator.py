"""omniORBpy's side of the AMI/SMI experiment: the same loads on omniORB's client.

``python -m pyorb.loadtest.omni_generator REF --mode smi|sequential|pipelined``
prints one JSON line like :mod:`pyorb.loadtest.generator`.  ``smi`` runs
``--clients`` threads of synchronous calls (``-ORBoneCallPerConnection 0``
and enough connections, or omniORB would run 5 at once); ``sequential`` is
one thread of ``--calls`` AMI calls each waited for (sendc_ and the reply
handler's callback); ``pipelined`` keeps ``--window`` sendc_ calls
outstanding, the handler sending the next.  omniORB runs each pending AMI
call on a client pool thread (at most 100), so windows above that queue.
This process never imports pyorb's asyncio parts.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any, Sequence

from pyorb.idl.compiler import BENCH_IDL
from pyorb.loadtest.generator import Tally, sequential_calls
from pyorb.loadtest.stats import emit, result

IDL = BENCH_IDL


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from pyorb.servers.runner import OneLineParser

    p = OneLineParser(prog="omni_generator", description=__doc__.split("\n")[0])
    p.add_argument("ref", help="IOR or corbaloc URL of a Bench::Sink")
    p.add_argument("--mode", choices=("smi", "sequential", "pipelined"), default="smi")
    p.add_argument("--clients", type=int, default=1, help="SMI threads")
    p.add_argument("--window", type=int, default=64, help="AMI calls outstanding in pipelined mode")
    p.add_argument("--calls", type=int, default=0, help="calls per thread, 0 for the whole window")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--timeout", type=float, default=30.0)
    ns = p.parse_args(argv)
    if ns.clients < 1 or ns.window < 1 or ns.duration <= 0 or ns.warmup < 0 or ns.calls < 0:
        p.error("--clients, --window and --duration must be positive")
    return ns


def connect(ns: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(orb, root POA, Sink reference) with AMI stubs loaded."""
    from omniORB import CORBA

    from pyorb.idl import import_generated

    orb = CORBA.ORB_init([sys.argv[0], "-ORBoneCallPerConnection", "0",
                          "-ORBmaxGIOPConnectionPerServer", str(max(ns.clients, 5)),
                          "-ORBclientCallTimeOutPeriod", str(int(ns.timeout * 1000))], CORBA.ORB_ID)
    import_generated(str(IDL), ["-Wbami"])
    poa = orb.resolve_initial_references("RootPOA")
    poa._get_the_POAManager().activate()
    sink = orb.string_to_object(ns.ref)._narrow(sys.modules["Bench"].Sink)
    if sink is None:
        raise SystemExit("omni_generator: error: the reference is not a Bench::Sink")
    return orb, poa, sink


def smi(ns: argparse.Namespace, sink: Any) -> Tally:
    from omniORB import CORBA

    t0 = time.perf_counter()
    tally = Tally(t0 + ns.warmup, t0 + ns.warmup + ns.duration)
    lock = threading.Lock()

    def worker(n: int) -> None:
        sequential_calls(sink, n, tally, lock, ns.calls, CORBA.Exception)

    _join([threading.Thread(target=worker, args=(i,), daemon=True) for i in range(ns.clients)],
           tally.end + ns.timeout + 1)
    return tally


def ami(ns: argparse.Namespace, poa: Any, sink: Any) -> Tally:
    """``--window`` chains of sendc_ calls; each reply sends the chain's next call."""
    base = sys.modules["Bench__POA"].AMI_SinkHandler
    t0 = time.perf_counter()
    tally = Tally(t0 + ns.warmup, t0 + ns.warmup + ns.duration)
    lock = threading.Lock()
    finished = threading.Semaphore(0)
    limit = ns.calls if ns.mode == "sequential" else 0

    class Chain(base):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            self.started = 0.0
            self.ref: Any = None

        def send(self) -> None:
            if time.perf_counter() >= tally.end or (limit and tally.calls + tally.errors >= limit):
                finished.release()
                return
            self.started = time.perf_counter()
            sink.sendc_work(self.ref, 7)

        def work(self, value: int) -> None:
            self.done(value == 7)

        def work_excep(self, holder: Any) -> None:
            self.done(False)

        def done(self, ok: bool) -> None:
            with lock:
                tally.record(self.started, ok)
            self.send()

    chains = [Chain() for _ in range(1 if ns.mode == "sequential" else ns.window)]
    for chain in chains:
        chain.ref = poa.id_to_reference(poa.activate_object(chain))
    for chain in chains:
        chain.send()
    for _ in chains:
        finished.acquire(timeout=max(0.0, tally.end + ns.timeout + 1 - time.perf_counter()))
    return tally


def _join(threads: list[threading.Thread], deadline: float) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.perf_counter()))


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    ns = parse_args(argv)
    orb, poa, sink = connect(ns)
    sink.work(0)  # connect before the clock starts
    tally = smi(ns, sink) if ns.mode == "smi" else ami(ns, poa, sink)
    seconds = max(tally.last - tally.start, 1e-9) if ns.calls else ns.duration
    emit(result(ns.mode, ns.clients, tally.calls, tally.errors, seconds, tally.latencies,
                time.process_time(), time.perf_counter() - started, window=ns.window))
    # omniORB threads winding down can abort a finalising interpreter (see pyorb.servers.omni).
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
