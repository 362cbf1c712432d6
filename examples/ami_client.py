"""AMI in its three forms: futures (primary), callbacks (sendc_) and pollers (sendp_).

Run: python examples/ami_client.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pyorb

idl = pyorb.load_idl(Path(__file__).resolve().parents[1] / "idl" / "stock.idl")
Stock, Stock__POA = idl.Stock, idl.Stock__POA


class Quoter(Stock__POA.Quoter):
    async def get_quote(self, stock_name: str) -> int:
        await asyncio.sleep(0.01)
        return len(stock_name)


class QuoteHandler:
    """The reply handler of the callback form: <op> and <op>_excep."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.value: Any = None

    def get_quote(self, value: int) -> None:
        self.value = value
        self.done.set()

    def get_quote_excep(self, holder: Any) -> None:
        self.value = holder.exception
        self.done.set()


async def main() -> None:
    async with pyorb.Server() as server, pyorb.Client() as client:
        quoter = client.resolve(server.ior(server.activate(Quoter(), "Quoter")), Stock.Quoter)

        # 1. Futures: the call returns at once; 1000 calls share one connection.
        quotes = await asyncio.gather(*(quoter.get_quote("X" * (i % 5)) for i in range(1000)))
        print("futures:", len(quotes), "replies, sum", sum(quotes))

        # 2. Callback: the handler is called when the reply arrives.
        handler = QuoteHandler()
        quoter.sendc_get_quote(handler, "CALLBACK")
        await handler.done.wait()
        print("callback:", handler.value)

        # 3. Poller: poll it, or await it.
        poller = quoter.sendp_get_quote("POLLER")
        print("poller ready at once?", poller.is_ready())
        print("poller:", await poller, "ready now?", poller.is_ready())


if __name__ == "__main__":
    asyncio.run(main())
