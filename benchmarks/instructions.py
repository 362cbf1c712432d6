#!/usr/bin/env python3
"""CPU instructions per echo round trip, counted with callgrind: pyorb against the bare floor.

Both workloads run a client and a server in one process on one uvloop
loop, with ``--in-flight`` calls outstanding on one loopback connection:

* ``pyorb``: a pyorb Client calling ``Bench::Echo.ping`` on a pyorb Server
  (a plain servant, reactive strategy);
* ``bare``: the same traffic with no ORB: a protocol that frames the 12-byte
  GIOP header, writes requests and matches replies to futures by request
  id, against ``benchmarks/bare_echo_server.py``'s protocol.

``--chain`` also counts the AMH experiment's chain in one process: the
client calls ``pyorb.servers.middle``'s AMH middle tier, which forwards each
call to ``pyorb.servers.sink``'s AMH sink (a ``--chain-delay`` timer per
call); its row's ratio is to the bare echo.  With ``--call-timeout`` the
middle tier's calls to the sink are timed too, as the middle tier's are.

``--shed`` counts a server refusing calls at arrival under overload, alone,
driven by a bare client in another process: pyorb's ``threaded`` server
with a standing queue (one call holds its thread, one waits behind it for
ever, so admission control sheds every later call on arrival: the path of
``bench_overload.py`` at many times the capacity) against
``benchmarks/bare_shed_sink.py``'s protocol refusing every call with its
prebuilt TRANSIENT.  The unit is one refused request.

``--alone`` also counts each side on its own against the other's bare peer
in another process, and ``--pool N`` the server alone under
``thread_pool(N)`` against the bare server handing each request to a pool of
N threads and back (``bare_echo_server.py --handoff``), the floor of any
thread-pool strategy (callgrind counts every thread of the process).

Callgrind counts instructions deterministically, so the noise of a shared
machine does not enter.  Each workload runs twice, with ``--calls`` N1 and
N2; the instructions per call are the difference over N2 - N1, which
cancels start-up (imports, IDL, connection set-up).

    python -m benchmarks.instructions --calls 2000 8000
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast



def bench() -> tuple[Any, Any]:
    """Bench's IDL, and an Echo servant whose ping returns its stamp."""
    from pyorb.idl import bench_idl

    idl = bench_idl()

    class Echo(idl.Bench__POA.Echo):  # type: ignore[misc,name-defined]
        def ping(self, stamp: int) -> int:
            return stamp

        def notify(self, stamp: int) -> None:
            pass

    return idl, Echo()


def client_config() -> Any:
    """The pyorb client's configuration: with ``PYORB_BENCH_CALL_TIMEOUT`` (seconds, set by
    ``--call-timeout``), every call has a deadline, as the middle tier's calls to its sink do."""
    import pyorb

    timeout = os.environ.get("PYORB_BENCH_CALL_TIMEOUT")
    return pyorb.Config(call_timeout=float(timeout) if timeout else None)


async def pyorb_workload(calls: int, in_flight: int) -> None:
    import pyorb

    idl, servant = bench()
    async with pyorb.Server() as server, pyorb.Client(client_config()) as client:
        echo = client.resolve(server.ior(server.activate(servant, "Echo")), idl.Bench.Echo)
        await _drive(echo.ping, calls, in_flight)


async def chain_workload(calls: int, in_flight: int) -> None:
    """A client -> AMH middle tier -> AMH sink, the servers the experiments run, on one loop."""
    import pyorb
    from pyorb.idl import bench_idl
    from pyorb.servers.middle import make_servant as middle_servant
    from pyorb.servers.models import resolve_model
    from pyorb.servers.sink import make_servant as sink_servant
    from pyorb.servers.workload import Demand

    sink_iface = bench_idl().Bench.Sink
    model = resolve_model("amh-st")
    delay = float(os.environ.get("PYORB_BENCH_CHAIN_DELAY", "0.001"))
    async with pyorb.Server(strategy=model.strategy) as sink, pyorb.Server(strategy=model.strategy) as middle, \
            pyorb.Client(client_config()) as onward, pyorb.Client(client_config()) as client:
        sink_ref = sink.ior(sink.activate(sink_servant(model, Demand(delay=delay)), "Sink"))
        forward = middle_servant(model, onward.resolve(sink_ref, sink_iface), None, asyncio.get_running_loop())
        target = client.resolve(middle.ior(middle.activate(forward, "Middle")), sink_iface)
        await _drive(target.work, calls, in_flight)


async def bare_workload(calls: int, in_flight: int) -> None:
    from benchmarks.bare_echo_server import Bare

    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Bare(None), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, client = await loop.create_connection(BareClient, "127.0.0.1", port)
    await _drive(client.ping, calls, in_flight)
    client.transport.close()
    server.close()
    await server.wait_closed()


class BareClient(asyncio.Protocol):
    """GIOP 1.2 Requests for ping(stamp) and their Replies matched by request id: no ORB, and as
    lean as an asyncio protocol gets: one pack per request, replies read in place by offset
    (12-byte header, request id at 12, the stamp in the last 8 bytes), no per-message slicing."""

    def __init__(self) -> None:
        self.pending: dict[int, asyncio.Future[int]] = {}
        self.next_id = 1
        self.buffer = b""
        self.transport: Any = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    # The Request for ping(stamp): request id, response flags 3, KeyAddr, key "Echo", operation
    # "ping", no service contexts, then the argument; each call packs in its id and stamp.
    # The request header ends at offset 48 of the message, 8-aligned: the argument follows unpadded.
    MIDDLE = (struct.pack("<B3xhxxI", 3, 0, 4) + b"Echo" + struct.pack("<I", 5) + b"ping\0" + b"\0" * 3
              + struct.pack("<I", 0))
    HEAD = b"GIOP\x01\x02\x01\x00" + struct.pack("<I", 4 + len(MIDDLE) + 8)
    REQUEST = struct.Struct(f"<12sI{len(MIDDLE)}sQ")

    def ping(self, stamp: int) -> asyncio.Future[int]:
        rid = self.next_id
        self.next_id = rid + 1
        self.transport.write(self.REQUEST.pack(self.HEAD, rid, self.MIDDLE, stamp))
        future: asyncio.Future[int] = self.loop.create_future()
        self.pending[rid] = future
        return future

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        size = len(buffer)
        start = 0
        pending = self.pending
        while size - start >= 12:
            end = start + 12 + _U32(buffer, start + 8)[0]
            if size < end:
                break
            future = pending.pop(_U32(buffer, start + 12)[0], None)
            if future is not None:
                future.set_result(_U64(buffer, end - 8)[0])
            start = end
        self.buffer = buffer[start:] if start < size else b""


_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


async def _drive(call: Any, calls: int, in_flight: int) -> None:
    remaining = iter(range(calls))

    async def worker() -> None:
        for i in remaining:
            if await call(i) != i:
                raise AssertionError("wrong echo")

    await asyncio.gather(*(worker() for _ in range(in_flight)))


async def serve_alone(kind: str, pool: int) -> None:
    """A server on its own, until stdin ends: its reference on stdout.
    ``pool``: the threads of the ``-pool-`` kinds."""
    loop = asyncio.get_running_loop()
    stop = loop.create_future()

    def stdin_readable() -> None:
        if not cast(io.BufferedReader, sys.stdin.buffer).read1(1):  # end of file: the driver is done
            loop.remove_reader(sys.stdin.fileno())
            stop.set_result(None)

    loop.add_reader(sys.stdin.fileno(), stdin_readable)
    if kind == "pyorb-shed-server":
        await serve_shedding(stop)
        return
    if kind == "bare-shed-server":
        from benchmarks.bare_shed_sink import Admission, Connection

        refuse_all = Admission(0)
        bare = await loop.create_server(lambda: Connection(refuse_all, None, 1.0), "127.0.0.1", 0)
        print(ior_for(bare), flush=True)
        await stop
        bare.close()
        return
    if kind.startswith("pyorb"):
        import pyorb

        _, echo = bench()
        async with pyorb.Server(strategy=f"thread_pool({pool})" if "-pool-" in kind else "reactive") as server:
            print(server.ior(server.activate(echo, "Echo")), flush=True)
            await stop
        return
    import queue
    import threading

    from benchmarks.bare_echo_server import Bare, worker

    jobs: queue.SimpleQueue[Any] | None = None
    if "-pool-" in kind:
        jobs = queue.SimpleQueue()
        for _ in range(pool):
            threading.Thread(target=worker, args=(jobs, loop), daemon=True).start()
    bare = await loop.create_server(lambda: Bare(jobs), "127.0.0.1", 0)
    print(ior_for(bare), flush=True)
    await stop
    bare.close()


def ior_for(server: asyncio.Server) -> str:
    """A bare server's Bench::Echo reference (object key ``Echo``)."""
    from pyorb.giop.ior import build_ior

    port = server.sockets[0].getsockname()[1]
    return build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", port, b"Echo").to_string()


async def serve_shedding(stop: asyncio.Future[None]) -> None:
    """pyorb's ``threaded`` server whose queue stands until ``stop``: the first ping holds the
    server's thread and the next waits behind it (no queue limit: for ever), so once the queue's
    age has passed the target for an interval every later call is refused on arrival."""
    import threading

    import pyorb
    from pyorb.server import admission as admission_module

    idl = bench()[0]
    release = threading.Event()

    class Stuck(idl.Bench__POA.Echo):  # type: ignore[misc,name-defined]
        def ping(self, stamp: int) -> int:
            release.wait()
            return stamp

        def notify(self, stamp: int) -> None:
            pass

    config = pyorb.Config(queue_target=0.001, queue_interval=0.001)
    loop = asyncio.get_running_loop()
    try:
        async with pyorb.Server(config=config, strategy="threaded") as server:
            key = server.activate(Stuck(), "Echo")
            print(server.ior(key), flush=True)
            binding = server.adapter.lookup(b"Echo")
            assert binding is not None
            route = binding.routes["ping"]

            def freeze_once_shedding() -> None:
                # A refusal's text names the queue's age to the millisecond, and the server encodes
                # a reply once per text: natively most refusals find theirs, but under callgrind's
                # slowdown the age moves on at every refusal.  Admission control's clock stands
                # still once the queue stands, so the counted refusals take the path most take natively.
                if route.stats.shed:
                    now = time.perf_counter()
                    setattr(admission_module, "perf_counter", lambda: now)
                else:
                    loop.call_later(0.05, freeze_once_shedding)

            freeze_once_shedding()
            await stop
            release.set()
    finally:
        release.set()


async def call_alone(kind: str, target: str, calls: int, in_flight: int) -> None:
    """A client on its own: ``calls`` pings to ``target`` with ``in_flight`` outstanding."""
    if kind == "pyorb-client":
        import pyorb

        idl, _ = bench()
        async with pyorb.Client(client_config()) as client:
            echo = client.resolve(target, idl.Bench.Echo)
            await _drive(echo.ping, calls, in_flight)
        return
    from pyorb.giop.ior import IOR

    profile = IOR.from_string(target).iiop
    assert profile is not None
    _, bare = await asyncio.get_running_loop().create_connection(BareClient, profile.host, profile.port)
    if kind == "bare-shed-client":
        await _drive_refused(bare, calls, in_flight)
    else:
        await _drive(bare.ping, calls, in_flight)
    bare.transport.close()


# A refusal's last 8 bytes, read as the ping's unsigned long long: the TRANSIENT's minor code
# (pyorb's SHED_MINOR, which bare_shed_sink sends too) and its completion status, NO (1).
REFUSAL_READ_AS_ANSWER = 0x4F4D0001 | 1 << 32


async def _drive_refused(client: BareClient, calls: int, in_flight: int) -> None:
    """Two calls that a shedding server keeps (one runs, one waits for ever), then single calls
    until one is refused (the queue stands from then on), then ``calls`` calls, each refused."""
    held = [client.ping(0)]
    # Time for the server's thread to take it, even under callgrind, before anything queues: a
    # call that a thread takes after waiting past the target while the queue stands is refused.
    await asyncio.sleep(2.0)
    held.append(client.ping(1))
    while True:
        probe = client.ping(2)
        try:
            answer = await asyncio.wait_for(asyncio.shield(probe), 0.5)
        except asyncio.TimeoutError:
            held.append(probe)  # queued: it waits with the others
            continue
        if answer != REFUSAL_READ_AS_ANSWER:
            raise AssertionError(f"a call to the shedding server was answered {answer:#x}, not refused")
        break
    remaining = iter(range(calls))

    async def worker() -> None:
        for i in remaining:
            if (answer := await client.ping(i)) != REFUSAL_READ_AS_ANSWER:
                raise AssertionError(f"call {i} was answered {answer:#x}, not refused")

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    for future in held:
        future.cancel()


def run_inner(kind: str, calls: int, in_flight: int, target: str | None = None, pool: int = 8) -> None:
    import uvloop

    if kind.endswith("-server"):
        uvloop.run(serve_alone(kind, pool))
    elif kind.endswith("-client"):
        assert target is not None
        uvloop.run(call_alone(kind, target, calls, in_flight))
    else:
        workloads = {"pyorb": pyorb_workload, "pyorb-chain": chain_workload, "bare": bare_workload}
        uvloop.run(workloads[kind](calls, in_flight))


def _inner(kind: str, calls: int, in_flight: int, target: str | None = None, pool: int = 8) -> list[str]:
    argv = [sys.executable, "-m", "benchmarks.instructions", "--inner", kind, "--inner-calls", str(calls), "--in-flight", str(in_flight),
            "--pool", str(pool)]
    return argv + (["--target", target] if target else [])


def callgrind_argv(out: Path) -> list[str]:
    """The command prefix that counts a program's instructions into ``out``."""
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"]


def callgrind_total(out: Path) -> int:
    """The instructions counted into ``out``."""
    found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(errors="replace"), re.M)
    if found is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(found.group(1))


def count(kind: str, calls: int, in_flight: int, out: Path, pure: bool = False, pool: int = 8) -> int:
    """Instructions (callgrind's total Ir) of one run of ``kind`` with ``calls`` calls.

    ``pyorb``/``bare``: client and server in the process counted.  ``X-server``:
    only the server is counted, driven by the bare client in another process
    (``X-pool-server``: answering through ``pool`` threads); ``X-client``: only
    the client, against the bare server in another process.  ``pure``: the
    counted process runs pyorb without its compiled accelerator."""
    result = out / f"{kind}-{calls}{'-pure' if pure else ''}.callgrind"
    env = {**os.environ, "PYORB_NO_EXTENSIONS": "1"} if pure else None
    if kind.endswith("-server"):
        server = subprocess.Popen([*callgrind_argv(result), *_inner(kind, 0, 0, pool=pool)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            assert server.stdout is not None and server.stdin is not None
            target = server.stdout.readline().strip()
            driver = "bare-shed-client" if "-shed-" in kind else "bare-client"
            subprocess.run(_inner(driver, calls, in_flight, target), check=True, timeout=3600)
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(3600)
            if server.stdout is not None:
                server.stdout.close()
        return callgrind_total(result)
    if kind.endswith("-client"):
        server = subprocess.Popen(_inner("bare-server", 0, 0), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        try:
            assert server.stdout is not None
            target = server.stdout.readline().strip()
            subprocess.run([*callgrind_argv(result), *_inner(kind, calls, in_flight, target)], check=True,
                           capture_output=True, timeout=3600, env=env)
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(60)
            if server.stdout is not None:
                server.stdout.close()
        return callgrind_total(result)
    subprocess.run([*callgrind_argv(result), *_inner(kind, calls, in_flight)], check=True, capture_output=True,
                   timeout=3600, env=env)
    return callgrind_total(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, nargs=2, default=[2000, 8000], metavar=("N1", "N2"))
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--pure", action="store_true",
                        help="also count pyorb without its compiled accelerator (PYORB_NO_EXTENSIONS=1)")
    parser.add_argument("--alone", action="store_true",
                        help="also count the server alone and the client alone (each against the bare peer)")
    parser.add_argument("--pool", type=int, default=0, metavar="N",
                        help="also count the server alone under thread_pool(N), against the bare server with N threads")
    parser.add_argument("--shed", action="store_true",
                        help="also count a server refusing calls at arrival under overload, alone (per refused call)")
    parser.add_argument("--call-timeout", type=float, default=None, metavar="S",
                        help="give every pyorb client call a timeout of S seconds (as the middle tier's calls have)")
    parser.add_argument("--chain", action="store_true",
                        help="also count a client -> AMH middle tier -> AMH sink chain (the experiments' servers)")
    parser.add_argument("--chain-delay", type=float, default=0.001, metavar="S",
                        help="the chain's sink delay per call (default 0.001 s)")
    parser.add_argument("--inner", choices=("pyorb", "pyorb-chain", "bare", "pyorb-server", "bare-server", "pyorb-pool-server",
                                            "bare-pool-server", "pyorb-client", "bare-client", "pyorb-shed-server",
                                            "bare-shed-server", "bare-shed-client"), help=argparse.SUPPRESS)
    parser.add_argument("--inner-calls", type=int, default=1000, help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.inner:
        run_inner(ns.inner, ns.inner_calls, ns.in_flight, ns.target, ns.pool)
        return
    if ns.pool < 0:
        parser.error("--pool N with N >= 1 (0: no thread-pool rows)")
    if shutil.which("valgrind") is None:
        sys.exit("instructions: valgrind is not installed (apt-get install valgrind)")
    n1, n2 = ns.calls
    if not 0 < n1 < n2:
        parser.error("--calls N1 N2 with 0 < N1 < N2")
    if ns.call_timeout is not None:
        if not ns.call_timeout > 0:
            parser.error("--call-timeout must be positive")
        os.environ["PYORB_BENCH_CALL_TIMEOUT"] = str(ns.call_timeout)  # inherited by the counted processes
    if not 0 <= ns.chain_delay <= 1:
        parser.error("--chain-delay must be between 0 and 1 second")
    os.environ["PYORB_BENCH_CHAIN_DELAY"] = str(ns.chain_delay)
    from rich.console import Console
    from rich.table import Table

    pairs = [("client and server in one process", "bare", "pyorb")]
    if ns.alone:
        pairs += [("server alone (bare client in another process)", "bare-server", "pyorb-server"),
                  ("client alone (bare server in another process)", "bare-client", "pyorb-client")]
    if ns.chain:
        pairs.append((f"client -> AMH middle tier -> AMH sink ({ns.chain_delay * 1e3:g} ms), one process", "bare",
                      "pyorb-chain"))
    if ns.pool:
        pairs.append((f"server alone, thread_pool({ns.pool}) (bare: a pool of {ns.pool} threads)", "bare-pool-server",
                      "pyorb-pool-server"))
    if ns.shed:
        pairs.append(("server alone refusing every call at arrival, threaded (bare: bare_shed_sink)",
                      "bare-shed-server", "pyorb-shed-server"))
    import pyorb

    compiled = pyorb.accelerated()
    # (kind, pure): pyorb as installed, and (with --pure, if that was compiled) without its accelerator.
    variants = [(False, "compiled" if compiled else "pure Python")]
    if ns.pure and compiled:
        variants.append((True, "pure Python"))
    per_call: dict[tuple[str, bool], float] = {}
    with tempfile.TemporaryDirectory(prefix="pyorb-instructions-") as tmp:
        for _, bare, kind in pairs:
            for what, pure in [(bare, False), *((kind, p) for p, _ in variants)]:
                if (what, pure) in per_call:  # the chain's row reuses the bare echo's count
                    continue
                low = count(what, n1, ns.in_flight, Path(tmp), pure, ns.pool)
                high = count(what, n2, ns.in_flight, Path(tmp), pure, ns.pool)
                per_call[what, pure] = (high - low) / (n2 - n1)
    timeouts = f", client calls with a {ns.call_timeout:g} s timeout" if ns.call_timeout else ""
    table = Table(title=f"instructions per round trip (callgrind), {ns.in_flight} in flight, calls {n1} and {n2}"
                        f"{timeouts}")
    for column in ("what is counted", "workload", "instructions per call", "ratio to bare"):
        table.add_column(column, justify="left" if column in ("what is counted", "workload") else "right")
    for title, bare, kind in pairs:
        floor = per_call[bare, False]
        table.add_row(title, "bare", f"{floor:,.0f}", "1.00")
        for pure, label in variants:
            table.add_row("", f"pyorb ({label})", f"{per_call[kind, pure]:,.0f}", f"{per_call[kind, pure] / floor:.2f}")
    Console(width=150).print(table)
    from pyorb import _accelerator

    print(f"pyorb accelerator: {_accelerator.status()}")


if __name__ == "__main__":
    main()
