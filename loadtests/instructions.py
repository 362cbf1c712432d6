#!/usr/bin/env python3
"""CPU instructions per echo round trip, counted with callgrind: pyorb against the bare floor.

Both workloads run a client and a server in one process on one uvloop
loop, with ``--in-flight`` calls outstanding on one loopback connection:

* ``pyorb``: a pyorb Client calling ``Bench::Echo.ping`` on a pyorb Server
  (a plain servant, reactive strategy);
* ``bare``: the same traffic with no ORB: a protocol that frames the 12-byte
  GIOP header, writes requests and matches replies to futures by request
  id, against ``loadtests/bare_echo_server.py``'s protocol.

Callgrind counts instructions deterministically, so the noise of a shared
machine does not enter.  Each workload runs twice, with ``--calls`` N1 and
N2; the instructions per call are the difference over N2 - N1, which
cancels start-up (imports, IDL, connection set-up).

    python loadtests/instructions.py --calls 2000 8000
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "loadtests"))


async def pyorb_workload(calls: int, in_flight: int) -> None:
    import pyorb

    idl = pyorb.load_idl(ROOT / "idl" / "bench.idl")

    class Echo(idl.Bench__POA.Echo):  # type: ignore[misc,name-defined]
        def ping(self, stamp: int) -> int:
            return stamp

        def notify(self, stamp: int) -> None:
            pass

    async with pyorb.Server() as server, pyorb.Client() as client:
        echo = client.resolve(server.ior(server.activate(Echo(), "Echo")), idl.Bench.Echo)
        await _drive(lambda i: echo.ping(i), calls, in_flight)


async def bare_workload(calls: int, in_flight: int) -> None:
    from bare_echo_server import Bare

    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Bare(None), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, client = await loop.create_connection(BareClient, "127.0.0.1", port)
    await _drive(client.ping, calls, in_flight)
    client.transport.close()
    server.close()
    await server.wait_closed()


class BareClient(asyncio.Protocol):
    """GIOP 1.2 Requests for ping(stamp) and their Replies matched by request id: no ORB."""

    def __init__(self) -> None:
        self.pending: dict[int, asyncio.Future[int]] = {}
        self.next_id = 1
        self.buffer = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    # The Request for ping(stamp), made once: request id 1, response flags 3, KeyAddr, key "Echo",
    # operation "ping", no service contexts, then the argument.  Each call patches in its id and stamp.
    BODY = (struct.pack("<IB3xhxxI", 1, 3, 0, 4) + b"Echo" + struct.pack("<I", 5) + b"ping\0" + b"\0" * 3
            + struct.pack("<I", 0) + b"\0" * 4 + struct.pack("<Q", 0))
    HEAD = b"GIOP\x01\x02\x01\x00" + struct.pack("<I", len(BODY))
    MIDDLE = BODY[4:-8]

    def ping(self, stamp: int) -> asyncio.Future[int]:
        rid = self.next_id
        self.next_id += 1
        self.transport.write(b"".join((self.HEAD, rid.to_bytes(4, "little"), self.MIDDLE, stamp.to_bytes(8, "little"))))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        return future

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data
        while len(buffer) >= 12:
            size = 12 + struct.unpack_from("<I", buffer, 8)[0]
            if len(buffer) < size:
                break
            message, buffer = buffer[:size], buffer[size:]
            future = self.pending.pop(struct.unpack_from("<I", message, 12)[0], None)
            if future is not None:
                future.set_result(struct.unpack_from("<Q", message, size - 8)[0])
        self.buffer = buffer


async def _drive(call: Any, calls: int, in_flight: int) -> None:
    remaining = iter(range(calls))

    async def worker() -> None:
        for i in remaining:
            if await call(i) != i:
                raise AssertionError("wrong echo")

    await asyncio.gather(*(worker() for _ in range(in_flight)))


def run_inner(kind: str, calls: int, in_flight: int) -> None:
    import uvloop

    uvloop.run((pyorb_workload if kind == "pyorb" else bare_workload)(calls, in_flight))


def count(kind: str, calls: int, in_flight: int, out: Path) -> int:
    """Instructions (callgrind's total Ir) of one run of ``kind`` with ``calls`` calls."""
    target = out / f"{kind}-{calls}.callgrind"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={target}", "--dump-instr=no",
                    sys.executable, __file__, "--inner", kind, "--inner-calls", str(calls), "--in-flight", str(in_flight)],
                   check=True, capture_output=True, timeout=3600)
    found = re.search(r"^(?:summary|totals): (\d+)", target.read_text(errors="replace"), re.M)
    if found is None:
        raise RuntimeError(f"no instruction total in {target}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, nargs=2, default=[2000, 8000], metavar=("N1", "N2"))
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--inner", choices=("pyorb", "bare"), help=argparse.SUPPRESS)
    parser.add_argument("--inner-calls", type=int, default=1000, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.inner:
        run_inner(ns.inner, ns.inner_calls, ns.in_flight)
        return
    if shutil.which("valgrind") is None:
        sys.exit("instructions: valgrind is not installed (apt-get install valgrind)")
    n1, n2 = ns.calls
    if not 0 < n1 < n2:
        parser.error("--calls N1 N2 with 0 < N1 < N2")
    from rich.console import Console
    from rich.table import Table

    per_call: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="pyorb-instructions-") as tmp:
        for kind in ("bare", "pyorb"):
            low, high = count(kind, n1, ns.in_flight, Path(tmp)), count(kind, n2, ns.in_flight, Path(tmp))
            per_call[kind] = (high - low) / (n2 - n1)
    table = Table(title=f"instructions per round trip (callgrind), client and server in one process, "
                        f"{ns.in_flight} in flight, calls {n1} and {n2}")
    for column in ("workload", "instructions per call", "ratio to bare"):
        table.add_column(column, justify="left" if column == "workload" else "right")
    for kind in ("bare", "pyorb"):
        table.add_row(kind, f"{per_call[kind]:,.0f}", f"{per_call[kind] / per_call['bare']:.2f}")
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
