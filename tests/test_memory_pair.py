"""pyorb.testing.memory_pair: a client and a server joined in memory run the real
protocol code on both sides and open no socket."""

from __future__ import annotations

import asyncio
import socket
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.testing import memory_pair
from pyorb.testing.waiting import wait_until

bench = bench_idl()
interop = pyorb.load_idl("idl/interop.idl")


class Echo(bench.Bench__POA.Echo):
    def ping(self, stamp: int) -> int:
        return stamp


class Blobs(interop.Interop__POA.Types):
    def echo_blob(self, v: bytes) -> bytes:
        return v


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Refuse (and record) every IP socket made while the test runs; the loop's
    own self-pipe (AF_UNIX) is allowed.  uvloop makes its sockets in C, out of
    sight: the test's asyncio-loop run is the one that checks."""
    tried: list[tuple[Any, ...]] = []
    real = socket.socket

    class Guarded(real):  # type: ignore[misc, valid-type]
        def __init__(self, family: int = -1, *args: Any, **kwargs: Any) -> None:
            if family in (socket.AF_INET, socket.AF_INET6, -1):
                tried.append((family, *args))
                raise AssertionError(f"an IP socket was made: socket.socket({family}, ...)")
            super().__init__(family, *args, **kwargs)

    monkeypatch.setattr(socket, "socket", Guarded)
    return tried


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", ["reactive", "thread_pool(2)", "thread_per_connection"])
async def test_calls_go_through_memory_and_no_socket_is_made(strategy: str, no_sockets: list[Any]) -> None:
    server = pyorb.Server(strategy=strategy)
    async with memory_pair(server) as client:
        echo = client.resolve(server.ior(server.activate(Echo(), "Echo")), bench.Bench.Echo)
        assert await asyncio.gather(*(echo.ping(i) for i in range(500))) == list(range(500))
        assert len(server.connections) == 1
        (conn,) = server.connections
        assert conn.peer[0] == "memory-client"
        stats = server.stats()
        assert sum(op.served for op in stats.operations) == 500
    assert no_sockets == []


@pytest.mark.asyncio
async def test_replies_beyond_the_write_buffer_pause_the_writer_and_all_arrive(no_sockets: list[Any]) -> None:
    config = pyorb.Config(write_buffer_limit=16 * 1024)
    server = pyorb.Server(config=config)
    async with memory_pair(server, config) as client:
        proxy = client.resolve(server.ior(server.activate(Blobs(), "Blobs")), interop.Interop.Types)
        blobs = [bytes([i]) * 100_000 for i in range(8)]  # far past the 16 KiB limit on both sides
        paused: list[bool] = []
        assert await proxy.echo_blob(b"x") == b"x"
        (conn,) = client._conns.values()
        original = conn.pause_writing

        def pause() -> None:
            paused.append(True)
            original()

        conn.pause_writing = pause  # type: ignore[method-assign]
        assert await asyncio.gather(*(proxy.echo_blob(b) for b in blobs)) == blobs
        assert paused, "the client's writes never filled the in-memory buffer"
        assert not conn.write_paused


@pytest_asyncio.fixture
async def echoing() -> AsyncIterator[tuple[pyorb.Server, pyorb.Client, Any]]:
    """A server and client joined in memory, and a proxy that has made its connection."""
    server = pyorb.Server()
    async with memory_pair(server) as client:
        echo = client.resolve(server.ior(server.activate(Echo(), "Echo")), bench.Bench.Echo)
        assert await echo.ping(1) == 1
        yield server, client, echo


@pytest.mark.asyncio
async def test_closing_the_client_ends_the_servers_connection(echoing: Any) -> None:
    server, client, _ = echoing
    await client.close()
    await wait_until(lambda: not server.connections, 5.0)


@pytest.mark.asyncio
async def test_an_aborted_server_connection_fails_the_calls_on_it_and_the_client_reconnects(echoing: Any) -> None:
    server, client, echo = echoing
    (conn,) = server.connections
    conn.abort()
    await wait_until(lambda: not client._conns or not next(iter(client._conns.values())).is_open, 5.0)
    assert await echo.ping(2) == 2  # a new in-memory connection
    assert len(server.connections) == 1


@pytest.mark.asyncio
async def test_another_address_is_refused_with_the_reason() -> None:
    server = pyorb.Server()
    async with memory_pair(server) as client:
        elsewhere = client.resolve("corbaloc::1.2@127.0.0.1:9/Echo", bench.Bench.Echo)
        with pytest.raises(CORBA.TRANSIENT) as info:
            await elsewhere.ping(1)
        assert "memory_pair's client reaches only its server" in str(info.value)


@pytest.mark.asyncio
async def test_new_connection_needs_a_started_server() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        pyorb.Server().new_connection()
