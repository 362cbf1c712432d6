"""A plain omniORBpy servant served by pyorb under different strategies,
and a strategy chosen per operation.

``Quoter.get_quote`` is ordinary blocking code (it sleeps 20 ms, like a
database lookup), written exactly as for omniORBpy.  Under ``reactive`` it
runs on the event loop, so 16 concurrent clients are served one at a time;
under ``thread_pool(4)`` four run at once; under ``thread_per_connection``
each client connection has its own thread.  Then one servant keeps ``ping``
on the event loop (cheap, no thread hop) and sends the blocking ``notify``
to a pool.  Run: python examples/strategies.py
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import pyorb
from pyorb.idl import bench_idl

ROOT = Path(__file__).resolve().parents[1]
stock = pyorb.load_idl(ROOT / "idl" / "stock.idl")
bench = bench_idl()
CLIENTS = 16


class Quoter(stock.Stock__POA.Quoter):
    """A plain, blocking omniORBpy servant."""

    def get_quote(self, stock_name: str) -> int:
        time.sleep(0.02)
        return len(stock_name)


class Echo(bench.Bench__POA.Echo):
    def __init__(self) -> None:
        self.threads: dict[str, str] = {}

    def ping(self, stamp: int) -> int:
        self.threads["ping"] = threading.current_thread().name
        return stamp

    def notify(self, stamp: int) -> None:
        time.sleep(0.01)  # blocking work, off the event loop
        self.threads["notify"] = threading.current_thread().name


async def quotes_under(strategy: str) -> tuple[float, int]:
    """Time 16 clients (one connection each) asking for one quote each."""
    async with pyorb.Server(strategy=strategy) as server:
        ref = server.corbaloc(server.activate(Quoter(), "Quoter"))
        clients = [pyorb.Client() for _ in range(CLIENTS)]
        start = time.perf_counter()
        quotes = await asyncio.gather(*(c.resolve(ref, stock.Stock.Quoter).get_quote("IBM") for c in clients))
        elapsed = time.perf_counter() - start
        threads = server.stats().strategies[0].threads
        await asyncio.gather(*(c.close() for c in clients))
    assert quotes == [3] * CLIENTS
    return elapsed, threads


async def per_operation() -> dict[str, str]:
    async with pyorb.Server() as server, pyorb.Client() as client:  # default strategy: reactive
        echo = Echo()
        key = server.activate(echo, "Echo", operations={"notify": "thread_pool(2)"})
        proxy = client.resolve(server.corbaloc(key), bench.Bench.Echo)
        await proxy.ping(1)
        await proxy.notify(2)  # oneway: returns once sent
        while "notify" not in echo.threads:
            await asyncio.sleep(0.01)
        return echo.threads


async def main() -> None:
    table = Table(title=f"{CLIENTS} concurrent clients, get_quote blocks 20 ms")
    for column in ("strategy", "elapsed", "dispatcher threads"):
        table.add_column(column)
    for strategy in ("reactive", "thread_pool(4)", "thread_per_connection"):
        elapsed, threads = await quotes_under(strategy)
        table.add_row(strategy, f"{elapsed * 1000:.0f} ms", str(threads))
    console = Console(width=100)
    console.print(table)
    threads = await per_operation()
    print(f"per operation: ping ran on {threads['ping']}, notify on {threads['notify'].rsplit('-', 1)[0]}")


if __name__ == "__main__":
    asyncio.run(main())
