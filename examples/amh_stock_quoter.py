"""The AMH paper's stock-quote middle tier (section 4.1), in pyorb.

A back-end Quoter answers after a delay.  The middle tier is an AMH servant:
for each request it stores nothing but the response handler's future
continuation, calls the back end asynchronously (AMI) and replies through
the handler when the back end answers, so one thread holds every pending
request.  Run: python examples/amh_stock_quoter.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pyorb

idl = pyorb.load_idl(Path(__file__).resolve().parents[1] / "idl" / "stock.idl")
Stock, Stock__POA = idl.Stock, idl.Stock__POA
PRICES = {"IBM": 120, "ACME": 7, "RHT": 98}


class BackEnd(Stock__POA.Quoter):
    """A coroutine servant: slow, like a database lookup."""

    async def get_quote(self, stock_name: str) -> int:
        await asyncio.sleep(0.05)
        if stock_name not in PRICES:
            raise Stock.Invalid_Stock_Symbol()
        return PRICES[stock_name]


class MiddleTier(pyorb.amh_skeleton(Stock__POA.Quoter)):  # type: ignore[misc]
    """AMH: take the handler, start the back-end call, return at once."""

    def __init__(self, back_end: Any) -> None:
        self.back_end = back_end

    def get_quote(self, rh: Any, stock_name: str) -> None:
        self.back_end.get_quote(stock_name).add_done_callback(lambda reply: self._done(rh, reply))

    @staticmethod
    def _done(rh: Any, reply: asyncio.Future[int]) -> None:
        if reply.exception() is not None:
            rh.get_quote_excep(reply.exception())  # the back end's user exception goes to the client
        else:
            rh.get_quote(reply.result())


async def main() -> None:
    async with pyorb.Server() as back, pyorb.Server() as middle, pyorb.Client() as client:
        back_ref = client.resolve(back.ior(back.activate(BackEnd(), "Quoter")), Stock.Quoter)
        middle_ref = client.resolve(middle.ior(middle.activate(MiddleTier(back_ref), "Quoter")), Stock.Quoter)
        names = ["IBM", "ACME", "RHT"] * 100
        quotes = await asyncio.gather(*(middle_ref.get_quote(n) for n in names))
        print(f"{len(quotes)} quotes through the AMH middle tier, first three: {quotes[:3]}")
        try:
            await middle_ref.get_quote("NOPE")
        except Stock.Invalid_Stock_Symbol:
            print("NOPE: Invalid_Stock_Symbol, passed through from the back end")


if __name__ == "__main__":
    asyncio.run(main())
