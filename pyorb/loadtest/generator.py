"""pyorb's load generator: closed-loop calls of ``Bench::Sink.work`` or ``Bench::Echo.ping`` (one process, uvloop).

``python -m pyorb.loadtest.generator REF --mode M [--target sink|echo] ...``
prints one JSON line, a :class:`pyorb.loadtest.stats.LoadResult`.  The
target is the papers' sink (``work(token)``, the default) or the echo
benchmark's server (``ping(stamp)``); each reply must carry its call's
number back.  Modes:

* ``closed``: N closed-loop clients, each with its own connection (as N
  client processes would have), the next call as soon as the reply came;
  calls completing inside the window (after ``--warmup``) count.  With
  ``--requests R`` each client stops after R calls (Harkema et al.).
* ``sequential``: one client awaits ``--calls`` calls one after the other
  (AMI used synchronously: the latency of one round trip).

Every call has a timeout (``--timeout``, 30 s), so it carries a deadline
and an INVOCATION_POLICIES context, unless ``--untimed``: then, as
omniORBpy's generator, none; the run is still bounded (a sequential run
waits ``--timeout`` seconds past its window at most, the others less).
* ``pipelined``: one connection keeps ``--window`` calls outstanding (AMI);
  the echo benchmark's pyorb client.
* ``smi``: ``--clients`` threads, each a :class:`~pyorb.client.blocking.BlockingClient`
  making synchronous calls back to back (``--calls`` each, or for the window).

Objects whose IOR offers TLS are called over TLS (``--tls-ca``).  Used where
Locust cannot make the load on a small machine: thousands of clients or
thousands of calls per second cost one coroutine each here, a greenlet and
a Python-level request event each in Locust.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from pyorb.loadtest.stats import LoadResult

# Each target: its interface in Bench and the operation called, both (unsigned long long) -> the same value.
TARGETS = {"sink": ("Sink", "work"), "echo": ("Echo", "ping")}
CONNECT_BATCH = 200  # connections opened at once before the run (the listen backlog is finite)
END_GRACE_S = 0.5  # calls still pending this long after the window are abandoned (they would not count)


@dataclass
class Tally:
    """Calls, errors and latencies inside the measured window."""

    start: float
    end: float
    calls: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    last: float = 0.0

    def record(self, t0: float, ok: bool) -> bool:
        """Count a call that ended now; False if now is outside the window."""
        done = time.perf_counter()
        if not self.start <= done < self.end:
            return False
        self.calls += ok
        self.errors += not ok
        if ok:
            self.latencies.append(done - t0)
        self.last = max(self.last, done)
        return True


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from pyorb.servers.runner import OneLineParser

    p = OneLineParser(prog="generator", description=__doc__.split("\n")[0])
    p.add_argument("ref", help="IOR or corbaloc URL of the target")
    p.add_argument("--mode", choices=("closed", "sequential", "pipelined", "smi"), default="closed")
    p.add_argument("--target", choices=tuple(TARGETS), default="sink",
                   help="Bench::Sink.work (default) or Bench::Echo.ping")
    p.add_argument("--tls-ca", type=Path, metavar="PEM",
                   help="verify TLS servers against this CA (IORs that offer TLS are called over TLS)")
    p.add_argument("--clients", type=int, default=1, help="closed-loop clients or SMI threads")
    p.add_argument("--window", type=int, default=64, help="calls outstanding in pipelined mode")
    p.add_argument("--calls", type=int, default=0, help="calls in sequential mode (or per SMI thread)")
    p.add_argument("--requests", type=int, default=0, help="calls per closed-loop client, 0 for no limit")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds before the window")
    p.add_argument("--duration", type=float, default=5.0, help="seconds in the window (the bound of every mode)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds a call may take (with --untimed: how long past the window a run may wait for one)")
    p.add_argument("--untimed", action="store_true",
                   help="calls without a timeout (no deadline, no INVOCATION_POLICIES context), as omniORBpy's "
                        "generator makes them")
    ns = p.parse_args(argv)
    ns.call_timeout = None if ns.untimed else ns.timeout
    for name in ("clients", "window"):
        if getattr(ns, name) < 1:
            p.error(f"--{name} must be at least 1")
    if ns.duration <= 0 or ns.warmup < 0 or ns.timeout <= 0 or ns.calls < 0 or ns.requests < 0:
        p.error("--duration and --timeout must be positive; --warmup, --calls and --requests not negative")
    if ns.tls_ca is not None and ns.mode == "smi":
        p.error("--tls-ca: the smi mode's blocking clients call over plain TCP only")
    return ns


def _interface(ns: argparse.Namespace) -> Any:
    from pyorb.idl import bench_idl

    return getattr(bench_idl().Bench, TARGETS[ns.target][0])


def _operation(proxy: Any, ns: argparse.Namespace) -> Any:
    """The target's operation on ``proxy``, looked up once rather than per call."""
    return getattr(proxy, TARGETS[ns.target][1])


def _client(ns: argparse.Namespace) -> Any:
    import pyorb
    import pyorb.tls

    tls = pyorb.tls.client_context(ns.tls_ca) if ns.tls_ca is not None else None
    return pyorb.Client(pyorb.Config(call_timeout=ns.call_timeout), tls=tls)


async def _call(operation: Any, token: int, timeout: float | None) -> bool:
    """One call of a bound operation (``sink.work``, ``echo.ping``): did its number come back?"""
    from omniORB import CORBA

    try:
        return bool(await operation(token, timeout=timeout) == token)
    except CORBA.Exception:
        return False


async def _connect_all(clients: list[Any], ref: str) -> int:
    """Open each client's connection before the run, CONNECT_BATCH at a time; the failures.

    No call: with a thread pool and a long delay a first call each would take minutes.
    """
    from omniORB import CORBA

    from pyorb.giop.ior import parse_reference

    route = clients[0].route(parse_reference(ref))
    if route is None:
        raise SystemExit("generator: error: the reference has no IIOP profile")

    async def connect(client: Any) -> bool:
        try:
            await client.connection(*route.endpoint)
            return True
        except CORBA.SystemException:
            return False

    failed = 0
    for i in range(0, len(clients), CONNECT_BATCH):
        oks = await asyncio.gather(*(connect(c) for c in clients[i:i + CONNECT_BATCH]))
        failed += oks.count(False)
    return failed


async def closed(ns: argparse.Namespace) -> LoadResult:
    iface = _interface(ns)
    clients = [_client(ns) for _ in range(ns.clients)]
    try:
        sinks = [_operation(c.resolve(ns.ref, iface), ns) for c in clients]
        failed = await _connect_all(clients, ns.ref)
        t0 = time.perf_counter()
        tally = Tally(t0 + ns.warmup, t0 + ns.warmup + ns.duration)

        async def loop(n: int, sink: Any) -> None:
            token, made = n << 32, 0
            while time.perf_counter() < tally.end and (not ns.requests or made < ns.requests):
                start = time.perf_counter()
                tally.record(start, await _call(sink, token, ns.call_timeout))
                token, made = token + 1, made + 1

        await _bounded(asyncio.gather(*(loop(i, s) for i, s in enumerate(sinks))), tally.end + END_GRACE_S)
        # With a request limit the run may end before the window does.
        end = min(tally.end, tally.last) if ns.requests else tally.end
        return _result(ns, tally, max(end - tally.start, 1e-9), connect_failures=failed)
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


async def sequential(ns: argparse.Namespace) -> LoadResult:
    async with _client(ns) as client:
        sink = _operation(client.resolve(ns.ref, _interface(ns)), ns)
        await _connect_all([client], ns.ref)
        t0 = time.perf_counter()
        tally = Tally(t0 + ns.warmup, t0 + ns.warmup + ns.duration)
        # Bounded even when its calls are not (--untimed): a call the server never answers ends the run.
        await _bounded(_sequential_until(sink, ns, tally, t0), tally.end + ns.timeout + END_GRACE_S)
        return _result(ns, tally, max(tally.last - tally.start, 1e-9))


async def _sequential_until(sink: Any, ns: argparse.Namespace, tally: Tally, t0: float) -> None:
    token = 0
    while time.perf_counter() < tally.start:  # warm-up calls
        await _call(sink, token, ns.call_timeout)
        token += 1
    while time.perf_counter() < tally.end and (not ns.calls or tally.calls + tally.errors < ns.calls):
        start = time.perf_counter()
        tally.record(start, await _call(sink, token, ns.call_timeout))
        token += 1


async def pipelined(ns: argparse.Namespace) -> LoadResult:
    async with _client(ns) as client:
        sink = _operation(client.resolve(ns.ref, _interface(ns)), ns)
        await _connect_all([client], ns.ref)
        t0 = time.perf_counter()
        tally = Tally(t0 + ns.warmup, t0 + ns.warmup + ns.duration)

        async def slot(n: int) -> None:
            token = n << 32
            while time.perf_counter() < tally.end:
                start = time.perf_counter()
                tally.record(start, await _call(sink, token, ns.call_timeout))
                token += 1

        await _bounded(asyncio.gather(*(slot(i) for i in range(ns.window))), tally.end + END_GRACE_S)
        return _result(ns, tally, ns.duration, window=ns.window)


def sequential_calls(operation: Callable[[int], Any], n: int, tally: Tally, lock: threading.Lock, calls: int,
                     failure: type[BaseException]) -> None:
    """One closed-loop client thread of synchronous calls of a bound operation
    (``sink.work``), each with its own token, until the window ends (or
    ``calls`` are counted)."""
    token, mine = n << 32, 0
    while time.perf_counter() < tally.end and (not calls or mine < calls):
        start = time.perf_counter()
        try:
            ok = operation(token) == token
        except failure:
            ok = False
        with lock:
            # the tally's own clock decides, so a call ending at the window's edge is counted by both or neither
            mine += tally.record(start, ok)
        token += 1


def smi(ns: argparse.Namespace) -> LoadResult:
    """Threads of synchronous calls on blocking sockets (no event loop)."""
    from omniORB import CORBA

    from pyorb.client.blocking import BlockingClient
    from pyorb.config import Config

    iface = _interface(ns)
    t0 = time.perf_counter()
    tally = Tally(t0 + ns.warmup, t0 + ns.warmup + ns.duration)
    lock = threading.Lock()

    def worker(n: int) -> None:
        with BlockingClient(Config(call_timeout=ns.call_timeout)) as client:
            sequential_calls(_operation(client.resolve(ns.ref, iface), ns), n, tally, lock, ns.calls,
                             CORBA.Exception)

    stuck = run_threads([threading.Thread(target=worker, args=(i,), daemon=True) for i in range(ns.clients)],
                        tally.end + ns.timeout + 1)
    seconds = ns.duration if not ns.calls else max(tally.last - tally.start, 1e-9)
    return _result(ns, tally, seconds, stuck=stuck)


def run_threads(threads: list[threading.Thread], deadline: float) -> int:
    """Start ``threads`` and wait for them until ``deadline`` (perf_counter); how many are still running.

    A thread still in a call then is stuck past its call timeout: the caller counts it as an error.
    """
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.perf_counter()))
    return sum(t.is_alive() for t in threads)


async def _bounded(aw: Any, deadline: float) -> None:
    try:
        await asyncio.wait_for(aw, max(0.1, deadline - time.perf_counter()))
    except asyncio.TimeoutError:
        pass  # calls still pending after the window: what completed inside it is counted


def _result(ns: argparse.Namespace, tally: Tally, seconds: float, stuck: int = 0, **extra: Any) -> LoadResult:
    return LoadResult.measured(ns.mode, ns.clients, tally.calls, tally.errors + stuck, seconds, tally.latencies,
                               time.process_time(), time.perf_counter() - _STARTED, target=ns.target, **extra)


_STARTED = time.perf_counter()
MODES: dict[str, Callable[[argparse.Namespace], Any]] = {"closed": closed, "sequential": sequential,
                                                         "pipelined": pipelined}


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    if ns.mode == "smi":
        smi(ns).emit()
        return 0
    from pyorb.servers.runner import run

    async def go() -> int:
        (await MODES[ns.mode](ns)).emit()
        return 0

    return run(go)


if __name__ == "__main__":
    raise SystemExit(main())
