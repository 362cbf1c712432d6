"""In-process cost of one call's message work: ns per pack, unpack and message decode.

Times ``pyorb.marshal`` for a few bodies (what every call pays on each side
besides the GIOP header and the event loop) and the protocol core's
framing and decoding of a small Request and Reply, over several repeats.
An A/B against another checkout runs this script twice, the second time
with ``PYTHONPATH=/path/to/other`` from that checkout; the process must
import pyorb from the tree it is measuring, which the header line shows.

    python -m benchmarks.bench_marshal --number 200000 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

import pyorb
from pyorb import marshal
from pyorb.idl import bench_idl

ROOT = Path(pyorb.__file__).resolve().parents[1]  # the checkout being measured


def cases() -> list[tuple[str, marshal.BodyCodec, tuple[Any, ...]]]:
    bench = bench_idl().Bench
    interop = pyorb.load_idl(ROOT / "idl" / "interop.idl").Interop

    def codec(name: str) -> marshal.Operation:
        return marshal.Operation(name, getattr(interop.Types, "_d_" + name))

    return [
        ("ping (unsigned long long)", marshal.Operation("ping", bench.Echo._d_ping).args, (123456789,)),
        ("echo_string (20 chars)", codec("echo_string").args, ("x" * 20,)),
        ("echo_point (struct)", codec("echo_point").args, (interop.Point(1.5, 2.5, "label"),)),
        ("mixed (5 values, 1.1 alignment)", codec("mixed").args, ("abc", 1.5, 7, 1 << 40)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=200_000, help="calls per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per figure (min, median, max shown)")
    ns = parser.parse_args()
    console = Console()
    console.print(f"pyorb from {Path(pyorb.__file__).resolve().parent}; {ns.repeats} x {ns.number:,} calls per figure")
    table = Table("body", "operation", "min ns", "median ns", "max ns")
    for name, body_codec, values in cases():
        align = 4 if "1.1" in name else 0
        body = body_codec.pack(values, align, True)
        jobs: list[tuple[str, Callable[[], Any]]] = [
            ("pack", lambda: body_codec.pack(values, align, True)),
            ("unpack", lambda: body_codec.unpack(body, align, True)),
        ]
        for what, job in jobs:
            per_call = [t / ns.number * 1e9 for t in timeit.repeat(job, number=ns.number, repeat=ns.repeats)]
            table.add_row(name, what, f"{min(per_call):.0f}", f"{statistics.median(per_call):.0f}",
                          f"{max(per_call):.0f}")
    table.add_section()
    for name, job in core_jobs():
        per_call = [t / ns.number * 1e9 for t in timeit.repeat(job, number=ns.number, repeat=ns.repeats)]
        table.add_row(name, "receive + decode", f"{min(per_call):.0f}", f"{statistics.median(per_call):.0f}",
                      f"{max(per_call):.0f}")
    console.print(table)


def core_jobs() -> list[tuple[str, Callable[[], Any]]]:
    """GIOPConnection.receive_data + next_event of a ping's Request (server) and Reply (client)."""
    from pyorb.giop import fast12
    from pyorb.giop.connection import GIOPConnection, Role

    request = fast12.encode_request_12(1, 3, b"key", "ping", bytes(8), True)
    reply = fast12.encode_reply_12(1, 0, bytes(8), True)
    server, client = GIOPConnection(Role.SERVER), GIOPConnection(Role.CLIENT)

    def take_request() -> None:
        server.receive_data(request)
        server.next_event()

    def take_reply() -> None:
        client.receive_data(reply)
        client.next_event()

    return [("GIOP 1.2 Request (ping)", take_request), ("GIOP 1.2 Reply (ping)", take_reply)]


if __name__ == "__main__":
    main()
