"""Memory per pending request in the AMH single-thread middle tier.

    python -m benchmarks.mem_pending --clients 1000,5000 --repeats 3
    python -m benchmarks.mem_pending --clients 1000 --repeats 1 --breakdown

Each repetition starts a fresh sink (``pyorb.servers.sink --delay D``) and
AMH-ST middle tier (``pyorb.servers.middle --model amh-st``) as processes,
opens N client connections from this process (one ``pyorb.Client`` each,
as the sweep's generator does), samples the middle tier's RSS, then runs
the N clients closed-loop (each sends its next call when the reply came, so
about N calls are always pending in the middle tier) and samples it again.
It reports KiB per client: for the idle connection (median RSS), for the
pending request (peak RSS over one sink delay: replies come in waves) and
both together (median of the repetitions, with min-max).

``--breakdown`` runs the middle tier under tracemalloc and prints what grew
between the two states by source line and by object type (gc census).
``--bare`` also measures a do-nothing uvloop server (RSS per accepted
connection), the part of a connection that is libuv's and uvloop's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import psutil  # type: ignore[import-untyped]

TRACE_TOP = 15
SAMPLES = 5  # RSS samples per state, SAMPLE_GAP_S apart; their median is the figure
SAMPLE_GAP_S = 0.2
PEAK_GAP_S = 0.05
MAX_CLIENTS = 10_000
RUN_LIMIT_S = 120.0  # a closed loop never runs longer than this, whatever the options


@dataclass(frozen=True)
class Point:
    """One repetition at N clients: the middle tier's RSS in bytes in each state."""

    clients: int
    started: int
    connected: int
    pending: int
    replies: int  # calls completed while the clients ran (a run with none measured nothing)
    in_flight: int  # the fewest calls pending while the pending state was sampled (at its start and end)

    def per_client_kib(self, before: int, after: int) -> float:
        return (after - before) / self.clients / 1024


# -- options -----------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from pyorb.servers.runner import OneLineParser

    p = OneLineParser(prog="mem_pending", description=__doc__.split("\n")[0])
    p.add_argument("--clients", default="1000,5000", help="comma-separated client counts N (default 1000,5000)")
    p.add_argument("--repeats", type=int, default=3, help="repetitions of each N (default 3)")
    p.add_argument("--delay", type=float, default=1.0, help="sink delay in seconds (default 1)")
    p.add_argument("--settle", type=float, default=None,
                   help="seconds the clients run before the pending state is sampled (default 2 x delay)")
    p.add_argument("--breakdown", action="store_true", help="run the middle tier under tracemalloc and break "
                                                            "the growth down by source line and object type")
    p.add_argument("--bare", action="store_true", help="also measure a do-nothing uvloop server")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the raw points as JSON here")
    ns = p.parse_args(argv)
    try:
        ns.clients = [int(n) for n in ns.clients.split(",")]
    except ValueError:
        p.error(f"--clients must be comma-separated integers, got {ns.clients!r}")
    if not all(1 <= n <= MAX_CLIENTS for n in ns.clients):
        p.error(f"--clients must each be in 1..{MAX_CLIENTS}")
    if ns.repeats < 1:
        p.error("--repeats must be at least 1")
    if not 0 < ns.delay <= 30:
        p.error("--delay must be in (0, 30] seconds")
    ns.settle = 2 * ns.delay if ns.settle is None else ns.settle
    if not 0 <= ns.settle <= 60:
        p.error("--settle must be in [0, 60] seconds")
    return ns


# -- RSS -----------------------------------------------------------------------

def rss_median(pid: int) -> int:
    """The median of SAMPLES RSS readings of ``pid``, SAMPLE_GAP_S apart."""
    proc = psutil.Process(pid)
    values = []
    for i in range(SAMPLES):
        if i:
            time.sleep(SAMPLE_GAP_S)
        values.append(proc.memory_info().rss)
    return int(statistics.median(values))


async def rss_now(pid: int) -> int:
    return await asyncio.to_thread(rss_median, pid)


def rss_peak(pid: int, seconds: float) -> int:
    """The highest RSS of ``pid`` over ``seconds``, read every PEAK_GAP_S.

    Replies come back in waves (every client's call started at about the
    same time), and each wave briefly holds a finished and a new request per
    client: the peak is what a pending request really needs.
    """
    proc = psutil.Process(pid)
    end = time.monotonic() + seconds
    peak = proc.memory_info().rss
    while time.monotonic() < end:
        time.sleep(PEAK_GAP_S)
        peak = max(peak, proc.memory_info().rss)
    return int(peak)


# -- the clients ---------------------------------------------------------------

async def measure(ref: str, pid: int, n: int, settle: float, delay: float, timeout: float,
                  probe: Any = None) -> tuple[Point, list[Any]]:
    """Connect N clients, sample, run them closed-loop, sample while their calls are pending
    (the peak over one sink delay, at least a second).

    ``probe(state)`` (if given) runs in each state too (the tracemalloc breakdown).
    """
    import pyorb
    from pyorb.idl import bench_idl
    from pyorb.loadtest.generator import _call, _connect_all

    started = await rss_now(pid)
    probes = [await _probe(probe, "started")]
    clients = [pyorb.Client(pyorb.Config(call_timeout=timeout)) for _ in range(n)]
    stop = asyncio.Event()
    replies = in_flight = 0

    async def closed_loop(i: int, sink: Any) -> None:
        nonlocal replies, in_flight
        token = i << 32
        while not stop.is_set():
            in_flight += 1
            ok = await _call(sink.work, token, timeout)
            in_flight -= 1
            replies += ok  # not "replies += await ...": that would read replies before the await
            token += 1

    try:
        sinks = [c.resolve(ref, bench_idl().Bench.Sink) for c in clients]
        failed = await _connect_all(clients, ref)
        if failed:
            raise SystemExit(f"mem_pending: error: {failed} of {n} clients could not connect")
        connected = await rss_now(pid)
        probes.append(await _probe(probe, "connected"))
        loops = asyncio.gather(*(closed_loop(i, s) for i, s in enumerate(sinks)))
        await asyncio.sleep(settle)
        fewest = in_flight
        pending = await asyncio.to_thread(rss_peak, pid, max(1.0, delay))
        fewest = min(fewest, in_flight)
        probes.append(await _probe(probe, "pending"))
        stop.set()
        try:
            await asyncio.wait_for(loops, timeout + 5)
        except asyncio.TimeoutError:
            pass
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    return Point(n, started, connected, pending, replies, fewest), probes


async def _probe(probe: Any, state: str) -> Any:
    return None if probe is None else await asyncio.to_thread(probe, state)


def one_point(ns: argparse.Namespace, n: int) -> tuple[Point, list[Any]]:
    """Fresh sink and middle tier, one measurement at N clients."""
    from pyorb.loadtest.processes import ServerProcess
    from pyorb.servers.runner import run

    middle_args = ["--model", "amh-st", "--timeout", str(ns.delay * 4 + 10)]
    with ServerProcess("sink", ["-m", "pyorb.servers.sink", "--model", "amh-st", "--delay", str(ns.delay)]) as sink:
        if ns.breakdown:
            middle = ServerProcess("middle", ["-m", "benchmarks.mem_pending", "_traced_middle", "--sink", sink.ior, *middle_args])
        else:
            middle = ServerProcess("middle", ["-m", "pyorb.servers.middle", "--sink", sink.ior, *middle_args])
        with middle:
            assert middle.proc is not None
            probe = TraceProbe(middle.proc.pid) if ns.breakdown else None
            box: list[tuple[Point, list[Any]]] = []

            async def go() -> int:
                box.append(await measure(middle.ior, middle.proc.pid, n, ns.settle,  # type: ignore[union-attr]
                                         ns.delay, ns.delay * 4 + 10, probe))
                return 0

            run(go)
            return box[0]


# -- the tracemalloc breakdown -------------------------------------------------
# The traced middle tier writes a snapshot summary when a request file appears
# (a thread polls for it: no signal handling inside the server's event loop).

def _trigger_paths(pid: int, state: str) -> tuple[Path, Path]:
    base = Path("/tmp") / f"mem_pending.{pid}.{state}"
    return base.with_suffix(".req"), base.with_suffix(".json")


class TraceProbe:
    """Asks the traced middle tier (pid) for a summary of its heap, and waits for it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self, state: str) -> dict[str, Any]:
        req, out = _trigger_paths(self.pid, state)
        req.touch()
        deadline = time.monotonic() + 120
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # written, then renamed: complete once it exists
        try:
            return dict(json.loads(out.read_text()))
        finally:
            out.unlink(missing_ok=True)


def _heap_summary() -> dict[str, Any]:
    current, peak = tracemalloc.get_traced_memory()  # peak: since the last summary, before this one's
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    lines = {f"{s.traceback[0].filename}:{s.traceback[0].lineno}": [s.size, s.count]
             for s in snap.statistics("lineno")}
    types: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        types[name] += 1
        sizes[name] += sys.getsizeof(obj)
    tracemalloc.reset_peak()  # after the census, which is no part of the server's peak
    return {"traced": current, "peak": peak, "lines": lines,
            "types": {k: [sizes[k], types[k]] for k in types}}


def _serve_summaries() -> None:
    import os

    pid = os.getpid()
    while True:
        time.sleep(0.1)
        for state in ("started", "connected", "pending"):
            req, out = _trigger_paths(pid, state)
            if req.exists():
                req.unlink()
                tmp = out.with_suffix(".tmp")
                tmp.write_text(json.dumps(_heap_summary()))
                tmp.rename(out)


def traced_middle(argv: Sequence[str]) -> int:
    """The middle tier, under tracemalloc, answering TraceProbe."""
    from pyorb.servers import middle

    tracemalloc.start(1)
    threading.Thread(target=_serve_summaries, daemon=True, name="mem-probe").start()
    return middle.main(list(argv))


def growth(before: dict[str, Any], after: dict[str, Any], key: str, top: int) -> list[tuple[str, int, int]]:
    """The ``top`` entries of ``key`` ("lines" or "types") that grew most: (name, bytes, count)."""
    old = before[key]
    rows = [(name, size - old.get(name, [0, 0])[0], count - old.get(name, [0, 0])[1])
            for name, (size, count) in after[key].items()]
    return sorted(rows, key=lambda r: -r[1])[:top]


# -- a bare uvloop server: what a connection costs below pyorb -----------------

class _Idle(asyncio.Protocol):
    """Keeps its transport, as any real protocol does, and does nothing."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        pass


def bare_server() -> int:
    """A do-nothing uvloop server on loopback: prints its port, stops at stdin EOF."""
    import uvloop

    from pyorb.servers.runner import wait_for_stop

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(_Idle, "127.0.0.1", 0)
        print("IOR:bare", server.sockets[0].getsockname()[1], flush=True)
        await wait_for_stop(True, lambda: None)
        server.close()

    uvloop.run(serve())
    return 0


async def _bare_measure(port: int, pid: int, n: int) -> tuple[int, int]:
    loop = asyncio.get_running_loop()
    before = await rss_now(pid)
    transports = []
    for i in range(0, n, 200):
        made = await asyncio.gather(*(loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
                                      for _ in range(min(200, n - i))))
        transports += [t for t, _ in made]
    await asyncio.sleep(0.5)
    after = await rss_now(pid)
    for t in transports:
        t.close()
    return before, after


def bare_point(n: int) -> float:
    """KiB of RSS per accepted connection in a do-nothing uvloop server."""
    from pyorb.loadtest.processes import ServerProcess
    from pyorb.servers.runner import run

    with ServerProcess("bare", ["-m", "benchmarks.mem_pending", "_bare_server"]) as bare:
        assert bare.proc is not None
        port, pid = int(bare.ior.split()[1]), bare.proc.pid
        box: list[tuple[int, int]] = []

        async def go() -> int:
            box.append(await _bare_measure(port, pid, n))
            return 0

        run(go)
    before, after = box[0]
    return (after - before) / n / 1024


# -- report --------------------------------------------------------------------

def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(ns: argparse.Namespace, points: dict[int, list[Point]], bare: dict[int, list[float]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"AMH-ST middle tier: KiB of RSS per client, sink delay {ns.delay:g} s, "
                        f"median (min-max) of {ns.repeats}")
    for col in ("N", "replies", "pending calls", "idle connection", "pending request", "connection + pending", "bare uvloop conn"):
        table.add_column(col, justify="right")
    for n, reps in points.items():
        table.add_row(str(n), str(statistics.median([p.replies for p in reps])),
                      str(min(p.in_flight for p in reps)),
                      _spread([p.per_client_kib(p.started, p.connected) for p in reps]),
                      _spread([p.per_client_kib(p.connected, p.pending) for p in reps]),
                      _spread([p.per_client_kib(p.started, p.pending) for p in reps]),
                      _spread(bare[n]) if n in bare else "-")
    Console(width=200).print(table)
    from pyorb import _accelerator

    print(f"pyorb accelerator (the middle tier inherits it): {_accelerator.status()}")


def report_breakdown(probes: list[dict[str, Any]], n: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    steps = (("connected", 0, 1), ("pending", 1, 2))
    for state, a, b in steps:
        grew = (probes[b]["traced"] - probes[a]["traced"]) / n
        for key, label in (("lines", "source line"), ("types", "type (gc-tracked, sys.getsizeof)")):
            table = Table(title=f"tracemalloc, {state} - previous state: {grew:.0f} B/client traced; "
                                f"by {label}, N = {n}")
            for col in (label, "B/client", "objects/client"):
                table.add_column(col, justify="right" if col != label else "left")
            for name, size, count in growth(probes[a], probes[b], key, TRACE_TOP):
                table.add_row(_short(name), f"{size / n:.0f}", f"{count / n:.2f}")
            console.print(table)
    peak = (probes[2]["peak"] - probes[0]["traced"]) / n
    console.print(f"traced Python memory over the started state: {peak:.0f} B/client at its peak while the "
                  f"clients ran, {(probes[2]['traced'] - probes[0]['traced']) / n:.0f} B/client when sampled")


def _short(path: str) -> str:
    for marker in ("/site-packages/", "/work/main/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["_traced_middle"]:
        return traced_middle(args[1:])
    if args[:1] == ["_bare_server"]:
        return bare_server()
    ns = parse_args(args)
    points: dict[int, list[Point]] = {}
    bare: dict[int, list[float]] = {}
    try:
        for n in ns.clients:
            for _ in range(ns.repeats):
                point, probes = one_point(ns, n)
                if point.replies == 0:
                    print(f"mem_pending: error: no replies at N = {n}: nothing was pending", file=sys.stderr)
                    return 1
                points.setdefault(n, []).append(point)
                if ns.breakdown:
                    report_breakdown(probes, n)
                if ns.bare:
                    bare.setdefault(n, []).append(bare_point(n))
    except RuntimeError as exc:  # a server did not start
        print(f"mem_pending: error: {exc}", file=sys.stderr)
        return 1
    report(ns, points, bare)
    if ns.json is not None:
        ns.json.write_text(json.dumps({str(n): [p.__dict__ for p in reps] for n, reps in points.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
