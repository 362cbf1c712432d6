"""Generated object keys are unique to a server's incarnation.

Two runs of the same server program on the same port: a reference to an
object activated without a key in the first run must get OBJECT_NOT_EXIST in
the second (not silently reach the object that now has the same number), while
an object activated under a stable key is reachable across restarts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from omniORB import CORBA

import pyorb
from pyorb.testing.kit import ServerProcess, free_port

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
Stock = pyorb.load_idl(ROOT / "idl" / "stock.idl").Stock

SERVER = f"""
import asyncio, sys
import pyorb
idl = pyorb.load_idl({str(ROOT / "idl" / "stock.idl")!r})

class Quoter(idl.Stock__POA.Quoter):
    def __init__(self, price):
        self.price = price
    def get_quote(self, name):
        return self.price

async def main():
    async with pyorb.Server(port=int(sys.argv[1])) as server:
        price = int(sys.argv[2])
        transient = server.activate(Quoter(price))          # a generated key
        stable = server.activate(Quoter(price), "Quoter")    # a stable one
        print(server.ior(transient), flush=True)
        print(server.ior(stable), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def run(port: int, price: int) -> ServerProcess:
    return ServerProcess([sys.executable, "-c", SERVER, str(port), str(price)], lines=2)


def test_a_stale_generated_key_gets_object_not_exist_after_a_restart() -> None:
    port = free_port()
    first = run(port, 1)
    old_transient, old_stable = first.lines
    with pyorb.BlockingClient() as client:
        assert client.resolve(old_transient, Stock.Quoter).get_quote("x") == 1
    first.stop()

    second = run(port, 2)
    try:
        with pyorb.BlockingClient() as client:
            with pytest.raises(CORBA.OBJECT_NOT_EXIST):
                client.resolve(old_transient, Stock.Quoter).get_quote("x")
            assert client.resolve(second.ior, Stock.Quoter).get_quote("x") == 2
            assert client.resolve(old_stable, Stock.Quoter).get_quote("x") == 2  # stable keys survive
    finally:
        second.stop()


class Quoter(pyorb.load_idl(ROOT / "idl" / "stock.idl").Stock__POA.Quoter):  # type: ignore[misc]
    def get_quote(self, name: str) -> int:
        return 0


def test_generated_keys_differ_between_servers_and_within_one() -> None:
    keys = set()
    for _ in range(2):
        server = pyorb.Server()
        keys |= {server.activate(Quoter()) for _ in range(3)}
    assert len(keys) == 6
