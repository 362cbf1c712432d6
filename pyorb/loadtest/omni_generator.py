"""omniORBpy's load generator: the loads of :mod:`pyorb.loadtest.generator` on omniORB's client.

``python -m pyorb.loadtest.omni_generator REF --mode smi|sequential|pipelined
[--target sink|echo]`` prints one JSON line, a
:class:`pyorb.loadtest.stats.LoadResult`, like pyorb's generator, and calls
the same targets (``Bench::Sink.work``, ``Bench::Echo.ping``).  ``smi`` runs
``--clients`` threads of synchronous calls: the omniORBpy client of the
echo and strategy benchmarks, and with ``--clients 1 --calls N`` their
sequential latency.  omniORB opens at most ``--connections`` connections
(default the larger of ``--clients`` and 5) and sends several calls on one
(``-ORBoneCallPerConnection 0``), or it would run 5 calls at once.
``sequential`` is one thread of ``--calls`` AMI calls each waited for
(sendc_ and the reply handler's callback); ``pipelined`` keeps ``--window``
sendc_ calls outstanding, the handler sending the next.  omniORB runs each
pending AMI call on a client pool thread (at most 100), so windows above
that queue.  ``--ready`` prints ``ready`` once the first call has connected,
so that a driver can time a window from outside.  This process never
imports pyorb's asyncio parts.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any, Sequence

from pyorb.idl.compiler import BENCH_IDL
from pyorb.loadtest.generator import TARGETS, Tally, run_threads, sequential_calls
from pyorb.loadtest.stats import LoadResult

IDL = BENCH_IDL


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from pyorb.servers.runner import OneLineParser

    p = OneLineParser(prog="omni_generator", description=__doc__.split("\n")[0])
    p.add_argument("ref", help="IOR or corbaloc URL of the target")
    p.add_argument("--mode", choices=("smi", "sequential", "pipelined"), default="smi")
    p.add_argument("--target", choices=tuple(TARGETS), default="sink",
                   help="Bench::Sink.work (default) or Bench::Echo.ping")
    p.add_argument("--clients", type=int, default=1, help="SMI threads")
    p.add_argument("--connections", type=int, default=0,
                   help="omniORB's maxGIOPConnectionPerServer (default: the larger of --clients and 5)")
    p.add_argument("--ready", action="store_true", help="print 'ready' once the first call has connected")
    p.add_argument("--window", type=int, default=64, help="AMI calls outstanding in pipelined mode")
    p.add_argument("--calls", type=int, default=0, help="calls per thread, 0 for the whole window")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--timeout", type=float, default=30.0)
    ns = p.parse_args(argv)
    if ns.clients < 1 or ns.window < 1 or ns.duration <= 0 or ns.warmup < 0 or ns.calls < 0 or ns.connections < 0:
        p.error("--clients, --window and --duration must be positive; --warmup, --calls and --connections "
                "not negative")
    return ns


def connect(ns: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(orb, root POA, target reference) with AMI stubs loaded."""
    from omniORB import CORBA

    from pyorb.idl import import_generated

    orb = CORBA.ORB_init([sys.argv[0], "-ORBoneCallPerConnection", "0",
                          "-ORBmaxGIOPConnectionPerServer", str(ns.connections or max(ns.clients, 5)),
                          "-ORBclientCallTimeOutPeriod", str(int(ns.timeout * 1000))], CORBA.ORB_ID)
    import_generated(str(IDL), ["-Wbami"])
    poa = orb.resolve_initial_references("RootPOA")
    poa._get_the_POAManager().activate()
    interface = TARGETS[ns.target][0]
    target = orb.string_to_object(ns.ref)._narrow(getattr(sys.modules["Bench"], interface))
    if target is None:
        raise SystemExit(f"omni_generator: error: the reference is not a Bench::{interface}")
    return orb, poa, target


def smi(ns: argparse.Namespace, operation: Any) -> tuple[Tally, int]:
    """``--clients`` threads of synchronous calls; the tally and how many threads were stuck in a call."""
    from omniORB import CORBA

    t0 = time.perf_counter()
    tally = Tally(t0 + ns.warmup, t0 + ns.warmup + ns.duration)
    lock = threading.Lock()

    def worker(n: int) -> None:
        sequential_calls(operation, n, tally, lock, ns.calls, CORBA.Exception)

    stuck = run_threads([threading.Thread(target=worker, args=(i,), daemon=True) for i in range(ns.clients)],
                        tally.end + ns.timeout + 1)
    return tally, stuck


def ami(ns: argparse.Namespace, poa: Any, target: Any) -> Tally:
    """``--window`` chains of sendc_ calls; each reply sends the chain's next call."""
    interface, op = TARGETS[ns.target]
    base = getattr(sys.modules["Bench__POA"], f"AMI_{interface}Handler")
    sendc = getattr(target, f"sendc_{op}")
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
            sendc(self.ref, 7)

        def replied(self, value: int) -> None:
            self.done(value == 7)

        def failed(self, holder: Any) -> None:
            self.done(False)

        def done(self, ok: bool) -> None:
            with lock:
                tally.record(self.started, ok)
            self.send()

    # The reply handler's callbacks are named after the operation (work, work_excep).
    setattr(Chain, op, Chain.replied)
    setattr(Chain, f"{op}_excep", Chain.failed)

    chains = [Chain() for _ in range(1 if ns.mode == "sequential" else ns.window)]
    for chain in chains:
        chain.ref = poa.id_to_reference(poa.activate_object(chain))
    for chain in chains:
        chain.send()
    for _ in chains:
        finished.acquire(timeout=max(0.0, tally.end + ns.timeout + 1 - time.perf_counter()))
    return tally


def first_call(ns: argparse.Namespace, operation: Any) -> bool:
    """Connect with one call before the clock starts; say on stderr why it failed."""
    from omniORB import CORBA

    try:
        return bool(operation(0) == 0)
    except CORBA.Exception as exc:
        print(f"omni_generator: the first call to {ns.ref[:60]} failed: {exc!r}", file=sys.stderr, flush=True)
        return False


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    ns = parse_args(argv)
    orb, poa, target = connect(ns)
    operation = getattr(target, TARGETS[ns.target][1])
    connected = first_call(ns, operation)
    if ns.ready:
        print("ready" if connected else "failed", flush=True)
    tally, stuck = (Tally(0.0, 0.0), 0) if not connected else \
        smi(ns, operation) if ns.mode == "smi" else (ami(ns, poa, target), 0)
    seconds = max(tally.last - tally.start, 1e-9) if ns.calls and connected else ns.duration
    LoadResult.measured(ns.mode, ns.clients, tally.calls, tally.errors + stuck + (not connected), seconds,
                        tally.latencies, time.process_time(), time.perf_counter() - started, target=ns.target,
                        window=ns.window).emit()
    # omniORB threads winding down can abort a finalising interpreter (see pyorb.servers.omni).
    sys.stderr.flush()
    os._exit(0 if connected else 1)


if __name__ == "__main__":
    main()
