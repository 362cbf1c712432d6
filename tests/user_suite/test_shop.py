"""An application's integration suite, written only against pyorb's pytest plugin.

Nothing here comes from a conftest: the fixtures (``pyorb_server``,
``pyorb_async_server``, ``pyorb_client``, ``pyorb_sync_client``,
``pyorb_sink``, ``omni_server``, ``omni_call``, ``omni_names``) are the plugin's, available
because pyorb is installed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import pytest

import pyorb
import pyorb.idl
from pyorb import naming
from pyorb.testing.plugin import NameServer, PeerProcessError, SyncClient

pytestmark = pytest.mark.integration  # opens sockets or starts processes

HERE = Path(__file__).resolve().parent
IDL_PATH = HERE / "shop.idl"
IDL = pyorb.load_idl(IDL_PATH)
Shop, Shop__POA = IDL.Shop, IDL.Shop__POA
OMNI = f"{HERE / 'omni_side.py'}"


class Counter(Shop__POA.Counter):
    """The application's pyorb servant (coroutine style)."""

    def __init__(self) -> None:
        self.total = 0

    async def add(self, n: int) -> int:
        self.total += n
        return self.total

    async def greet(self, who: str) -> str:
        return f"Hello, {who}!"

    async def take(self, item: str, n: int) -> None:
        if n > 3:
            raise Shop.OutOfStock(item, n)


# The application's omniORBpy servant runs unchanged on a pyorb server.
from omni_side import Counter as PlainCounter  # noqa: E402  (needs the IDL loaded above)


# -- pyorb server, pyorb client ------------------------------------------------------


@pytest.mark.parametrize("strategy", [None, "reactive", "thread_pool(2)", "thread_per_connection"])
def test_sync_calls_to_a_pyorb_server(pyorb_server: Any, pyorb_sync_client: SyncClient, strategy: str | None) -> None:
    served = pyorb_server(PlainCounter, strategy=strategy)
    counter = pyorb_sync_client.resolve(served.ior, Shop.Counter)
    assert [counter.add(1), counter.add(2)] == [1, 3]
    assert counter.greet("Zoë") == "Hello, Zoë!"
    with pytest.raises(Shop.OutOfStock) as caught:
        counter.take("pears", 4)
    assert (caught.value.item, caught.value.wanted) == ("pears", 4)
    assert served.servant.total == 3


def test_a_pyorb_server_answers_on_its_corbaloc(pyorb_server: Any, pyorb_sync_client: SyncClient) -> None:
    served = pyorb_server(Counter(), key="counter")
    assert served.corbaloc.endswith(f":{served.port}/counter")
    assert pyorb_sync_client.resolve(served.corbaloc, Shop.Counter).add(5) == 5


@pytest.mark.asyncio
async def test_async_calls_on_the_tests_loop(pyorb_async_server: Any, pyorb_client: pyorb.Client) -> None:
    served = await pyorb_async_server(Counter)
    counter = pyorb_client.resolve(served.ior, Shop.Counter)
    totals = await asyncio.gather(*(counter.add(1) for _ in range(200)))
    assert sorted(totals) == list(range(1, 201))
    with pytest.raises(Shop.OutOfStock):
        await counter.take("figs", 10)


@pytest.mark.asyncio
async def test_async_client_to_a_server_on_the_background_loop(pyorb_server: Any, pyorb_client: pyorb.Client) -> None:
    served = pyorb_server(PlainCounter)
    counter = await pyorb_client.narrow(served.ior, Shop.Counter)
    assert await counter.greet("you") == "Hello, you!"


# -- omniORBpy server, pyorb client --------------------------------------------------------


def test_sync_pyorb_client_of_an_omniorb_server(omni_server: Any, pyorb_sync_client: SyncClient) -> None:
    served = omni_server(IDL_PATH, f"{OMNI}:Counter")
    counter = pyorb_sync_client.resolve(served.ior, Shop.Counter)
    assert [counter.add(2), counter.add(2)] == [2, 4]
    assert counter.greet("日本") == "Hello, 日本!"
    with pytest.raises(Shop.OutOfStock):
        counter.take("kiwis", 5)


@pytest.mark.asyncio
async def test_async_pyorb_client_of_an_omniorb_server(omni_server: Any, pyorb_client: pyorb.Client) -> None:
    served = omni_server(IDL_PATH, f"{OMNI}:Counter", key="Counter")
    counter = pyorb_client.resolve(served.corbaloc, Shop.Counter)
    totals = await asyncio.gather(*(counter.add(1) for _ in range(50)))
    assert sorted(totals) == list(range(1, 51))


# -- pyorb server, omniORBpy client ----------------------------------------------------------


def test_omniorb_client_of_a_pyorb_server(pyorb_server: Any, omni_call: Callable[..., Any]) -> None:
    served = pyorb_server(Counter)
    seen = omni_call(IDL_PATH, f"{OMNI}:use_counter", served.ior, "Shop::Counter", ["Zoë"])
    assert seen == {"totals": [1, 3], "greeting": "Hello, Zoë!", "refused": ["pears", 9]}


def test_an_omniorb_client_error_is_raised_here(pyorb_server: Any, omni_call: Callable[..., Any]) -> None:
    served = pyorb_server(Counter)
    with pytest.raises(PeerProcessError, match="OutOfStock"):
        omni_call(IDL_PATH, f"{OMNI}:take_too_many", served.corbaloc, "Shop::Counter")


# -- a slow downstream service: pyorb's sink ---------------------------------------------------


@pytest.mark.asyncio
async def test_calls_to_a_sink_that_answers_after_a_delay(pyorb_sink: Any, pyorb_client: pyorb.Client) -> None:
    sink = pyorb_sink(0.2, model="amh")
    Bench = pyorb.idl.bench_idl().Bench
    worker = pyorb_client.resolve(sink.corbaloc, Bench.Sink)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await asyncio.gather(*(worker.work(t) for t in range(20))) == list(range(20))
    assert loop.time() - started >= 0.2  # the delay was applied (not a speed check)


# -- naming ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_omniorb_finds_a_pyorb_counter_by_name(
    omni_names: NameServer, pyorb_async_server: Any, pyorb_client: pyorb.Client, omni_call: Callable[..., Any]
) -> None:
    served = await pyorb_async_server(Counter)
    root = naming.root_context(pyorb_client, omni_names.corbaloc)
    shop = await root.bind_new_context("shop")
    await shop.bind("counter.object", pyorb_client.resolve(served.ior, Shop.Counter))
    # The omniORBpy client blocks: run it beside the loop that serves it.
    total = await asyncio.to_thread(omni_call, IDL_PATH, f"{OMNI}:add_by_name", omni_names.corbaloc,
                                    "CosNaming::NamingContext", ["shop/counter.object", 7])
    assert total == 7
    assert served.servant.total == 7


def test_pyorb_finds_an_omniorb_counter_by_name(
    omni_names: NameServer, omni_server: Any, omni_call: Callable[..., Any], pyorb_sync_client: SyncClient
) -> None:
    served = omni_server(IDL_PATH, f"{OMNI}:Counter")
    omni_call(IDL_PATH, f"{OMNI}:bind", omni_names.corbaloc, "CosNaming::NamingContext", ["counter", served.ior])

    async def find_and_add() -> int:
        counter = await naming.resolve_corbaname(pyorb_sync_client.client, f"{omni_names.corbaname}#counter",
                                                 Shop.Counter)
        return await counter.add(11)  # type: ignore[no-any-return]

    assert pyorb_sync_client.run(find_and_add()) == 11
