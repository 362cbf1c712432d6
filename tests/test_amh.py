"""AMH: response handlers completed from anywhere, once, and never lost."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.testing.waiting import wait_until

pytestmark = pytest.mark.integration  # opens sockets or starts processes

IDL = pyorb.load_idl("idl/stock.idl")
Stock, Stock__POA = IDL.Stock, IDL.Stock__POA
AMHQuoter = pyorb.amh_skeleton(Stock__POA.Quoter)


class Quoter(AMHQuoter):  # type: ignore[misc,valid-type]
    """Behaviour chosen by the stock name, so one servant covers every case."""

    def __init__(self) -> None:
        self.held: list[Any] = []
        self.errors: list[BaseException] = []
        self.threads: set[int] = set()

    async def get_quote(self, rh: Any, name: str) -> None:
        self.threads.add(threading.get_ident())
        kind, _, arg = name.partition(":")
        if kind == "task":
            asyncio.get_running_loop().create_task(self._later(rh, int(arg)))
        elif kind == "thread":
            threading.Thread(target=rh.get_quote, args=(int(arg),)).start()
        elif kind == "hold":
            self.held.append(rh)  # replied later by the test
        elif kind == "double":
            rh.get_quote(1)
            try:
                rh.get_quote(2)
            except CORBA.BAD_INV_ORDER as exc:
                self.errors.append(exc)
        elif kind == "drop":
            pass  # returns without replying and without keeping rh
        elif kind == "excep":
            rh.get_quote_excep(Stock.Invalid_Stock_Symbol())
        elif kind == "raise":
            rh.raise_exception(CORBA.NO_PERMISSION(7, CORBA.COMPLETED_NO))
        elif kind == "await":
            rh.get_quote(5)
            await rh
            self.held.append("sent")

    async def _later(self, rh: Any, value: int) -> None:
        await asyncio.sleep(0.01)
        rh.get_quote(value)


@pytest_asyncio.fixture
async def setup() -> AsyncIterator[tuple[Quoter, Any]]:
    servant = Quoter()
    async with pyorb.Server() as server, pyorb.Client() as client:
        key = server.activate(servant)
        yield servant, client.resolve(server.ior(key), Stock.Quoter)


@pytest.mark.asyncio
async def test_reply_from_another_task(setup: tuple[Quoter, Any]) -> None:
    _, quoter = setup
    assert await quoter.get_quote("task:42") == 42


@pytest.mark.asyncio
async def test_reply_from_a_thread(setup: tuple[Quoter, Any]) -> None:
    _, quoter = setup
    assert await quoter.get_quote("thread:7") == 7


@pytest.mark.asyncio
async def test_reply_after_the_handler_returned(setup: tuple[Quoter, Any]) -> None:
    servant, quoter = setup
    call = asyncio.ensure_future(quoter.get_quote("hold"))
    while not servant.held:
        await asyncio.sleep(0.001)
    assert not call.done()
    servant.held.pop().get_quote(99)
    assert await call == 99


@pytest.mark.asyncio
async def test_second_reply_raises_bad_inv_order_and_sends_nothing(setup: tuple[Quoter, Any]) -> None:
    servant, quoter = setup
    assert await quoter.get_quote("double") == 1
    assert len(servant.errors) == 1 and isinstance(servant.errors[0], CORBA.BAD_INV_ORDER)
    # The connection carries on: nothing stray was sent for the second reply.
    assert await quoter.get_quote("task:3") == 3


@pytest.mark.asyncio
async def test_dropped_handler_sends_no_response(setup: tuple[Quoter, Any]) -> None:
    _, quoter = setup
    with pytest.raises(CORBA.NO_RESPONSE):
        await asyncio.wait_for(quoter.get_quote("drop"), 5)


@pytest.mark.asyncio
async def test_handler_held_then_released_sends_no_response(setup: tuple[Quoter, Any]) -> None:
    servant, quoter = setup
    call = asyncio.ensure_future(quoter.get_quote("hold"))
    while not servant.held:
        await asyncio.sleep(0.001)
    servant.held.clear()
    gc.collect()
    with pytest.raises(CORBA.NO_RESPONSE):
        await asyncio.wait_for(call, 5)


@pytest.mark.asyncio
async def test_user_exception_through_the_handler(setup: tuple[Quoter, Any]) -> None:
    _, quoter = setup
    with pytest.raises(Stock.Invalid_Stock_Symbol):
        await quoter.get_quote("excep")


@pytest.mark.asyncio
async def test_system_exception_through_raise_exception(setup: tuple[Quoter, Any]) -> None:
    _, quoter = setup
    with pytest.raises(CORBA.NO_PERMISSION) as info:
        await quoter.get_quote("raise")
    assert info.value.minor == 7


@pytest.mark.asyncio
async def test_await_handler_resolves_once_sent(setup: tuple[Quoter, Any]) -> None:
    servant, quoter = setup
    assert await quoter.get_quote("await") == 5
    await wait_until(lambda: servant.held == ["sent"], 10, what="the handler resolved")


@pytest.mark.asyncio
async def test_ten_thousand_requests_in_flight_on_one_thread(setup: tuple[Quoter, Any]) -> None:
    servant, quoter = setup
    n = 10_000
    threads_before = threading.active_count()
    calls = [asyncio.ensure_future(quoter.get_quote("hold")) for _ in range(n)]
    for _ in range(2000):
        if len(servant.held) == n:
            break
        await asyncio.sleep(0.01)
    # Every request is pending in the server at once, on this one thread.
    assert len(servant.held) == n
    assert servant.threads == {threading.get_ident()}
    assert threading.active_count() == threads_before  # no thread per pending request
    for i, rh in enumerate(servant.held):
        rh.get_quote(i)
    assert await asyncio.gather(*calls) == list(range(n))
