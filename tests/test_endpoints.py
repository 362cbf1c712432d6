"""Several endpoints and published addresses.

A server listens on one or more (host, port) pairs and writes the addresses
clients must call into its IORs and corbaloc URLs, independently of what it
binds: the first in the IIOP profile, the others as
TAG_ALTERNATE_IIOP_ADDRESS components.  Loopback only here (IPv4 and IPv6);
a wildcard bind is exercised through ``published_addresses`` alone, so no
test listens beyond loopback.
"""

from __future__ import annotations

import socket

import pytest

import pyorb
from pyorb.idl import bench_idl
from pyorb.giop.ior import IOR, parse_corbaloc
from pyorb.server.server import published_addresses
from pyorb.testing import LoopThread
from tests.interop.conftest import failures, run_omni_client
from tests.interop.servants import TypesCoroutine

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Interop = pyorb.load_idl("idl/interop.idl").Interop


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_what_is_published_by_default_and_on_request() -> None:
    host = socket.gethostname()
    assert published_addresses([("0.0.0.0", 5000)]) == [(host, 5000)]  # a wildcard publishes the host name
    assert published_addresses([("::", 5000), ("", 5001)]) == [(host, 5000), (host, 5001)]
    assert published_addresses([("127.0.0.1", 5000), ("::1", 5001)]) == [("127.0.0.1", 5000), ("::1", 5001)]
    assert published_addresses([("0.0.0.0", 5000)], "svc.example.org") == [("svc.example.org", 5000)]
    assert published_addresses([("0.0.0.0", 5000)], ["gw.example.org:443", "[2001:db8::1]:7", "2001:db8::2"]) == [
        ("gw.example.org", 443), ("2001:db8::1", 7), ("2001:db8::2", 5000)]
    for bad in ("0.0.0.0", ":80", "host:0", []):
        with pytest.raises(ValueError):
            published_addresses([("127.0.0.1", 5000)], bad)
    with pytest.raises(ValueError):
        pyorb.Server(publish="0.0.0.0")  # refused at construction, not at start


@pytest.mark.asyncio
async def test_two_endpoints_ipv4_and_ipv6_both_in_the_ior_and_both_serving() -> None:
    async with pyorb.Server(endpoints=[("127.0.0.1", 0), ("::1", 0)]) as server:
        key = server.activate(TypesCoroutine(server), "Types")
        (v4, p4), (v6, p6) = server.published
        assert (v4, v6) == ("127.0.0.1", "::1") and p4 != 0 and p6 != 0
        ior = IOR.from_string(server.ior(key))
        assert ior.iiop is not None and (ior.iiop.host, ior.iiop.port) == (v4, p4)
        assert ior.iiop.alternate_addresses == ((v6, p6),)
        assert [(a.host, a.port) for a in parse_corbaloc(server.corbaloc(key)).addresses] == [(v4, p4), (v6, p6)]
        async with pyorb.Client() as client:
            for host, port in server.published:  # each endpoint on its own
                one = client.resolve(f"corbaloc:iiop:1.2@{'[' + host + ']' if ':' in host else host}:{port}/Types",
                                     Interop.Types)
                assert await one.echo_long(port) == port


@pytest.mark.asyncio
async def test_the_pyorb_client_falls_back_to_an_alternate_address() -> None:
    dead = closed_port()
    async with pyorb.Server(publish=["127.0.0.1:%d" % dead, "127.0.0.1"]) as server:
        key = server.activate(TypesCoroutine(server), "Types")
        assert server.published == [("127.0.0.1", dead), ("127.0.0.1", server.published[1][1])]
        async with pyorb.Client() as client:
            assert await client.resolve(server.ior(key), Interop.Types).echo_long(7) == 7
            assert await client.resolve(server.corbaloc(key), Interop.Types).echo_string("x") == "x"


def test_an_omniorb_client_uses_the_alternate_addresses_too() -> None:
    """The IOR's profile names a port nothing listens on; omniORB reaches the object through the alternate."""
    dead = closed_port()
    with LoopThread() as runner:
        async def start() -> tuple[pyorb.Server, str]:
            server = pyorb.Server(publish=[f"127.0.0.1:{dead}", "127.0.0.1"])
            await server.start()
            return server, server.ior(server.activate(TypesCoroutine(server), "Types"))

        server, ior = runner.run(start())
        try:
            results = run_omni_client(ior, "--cases", "echo_long,echo_string,directions", "--native-char", "UTF-8")
        finally:
            runner.run(server.close())
    assert len(results) == 3 and not failures(results), failures(results)


@pytest.mark.parametrize("program", [["pyorb.servers.sink"], ["pyorb.servers.omni", "sink"]], ids=["pyorb", "omniORBpy"])
def test_the_papers_servers_take_publish_too(program: list[str]) -> None:
    """``--publish`` on the papers' sink and on its omniORBpy baseline (``-ORBendPointPublish``)."""
    import asyncio
    import sys

    from pyorb.testing.kit import ServerProcess, free_port

    dead, live = closed_port(), free_port()
    sink = ServerProcess([sys.executable, "-m", *program, "--port", str(live),
                          "--publish", f"127.0.0.1:{dead}", "--publish", "127.0.0.1"])
    try:
        profile = IOR.from_string(sink.ior).iiop
        assert profile is not None and (profile.port, profile.alternate_addresses) == (dead, (("127.0.0.1", live),))
        bench = bench_idl().Bench

        async def call() -> int:
            async with pyorb.Client() as client:
                return int(await client.resolve(sink.ior, bench.Sink).work(5))

        assert asyncio.run(call()) == 5
    finally:
        assert sink.stop() == 0, sink.stderr()


@pytest.mark.parametrize("program", [["pyorb.servers.sink"], ["pyorb.servers.omni", "sink"]], ids=["pyorb", "omniORBpy"])
def test_the_papers_servers_listen_on_several_endpoints(program: list[str]) -> None:
    """``--endpoint`` twice (IPv4 and IPv6 loopback): both serve, both are in the IOR."""
    import asyncio
    import sys

    from pyorb.testing.kit import ServerProcess, free_port

    v4 = free_port()
    with socket.socket(socket.AF_INET6) as s6:
        s6.bind(("::1", 0))
        v6 = int(s6.getsockname()[1])
    sink = ServerProcess([sys.executable, "-m", *program, "--endpoint", f"127.0.0.1:{v4}", "--endpoint", f"[::1]:{v6}"])
    try:
        profile = IOR.from_string(sink.ior).iiop
        assert profile is not None
        assert {(profile.host, profile.port), *profile.alternate_addresses} == {("127.0.0.1", v4), ("::1", v6)}
        bench = bench_idl().Bench

        async def calls() -> list[int]:
            async with pyorb.Client() as client:
                return [int(await client.resolve(url, bench.Sink).work(n)) for n, url in
                        enumerate([f"corbaloc:iiop:1.2@127.0.0.1:{v4}/Sink", f"corbaloc:iiop:1.2@[::1]:{v6}/Sink"])]

        assert asyncio.run(calls()) == [0, 1]
    finally:
        assert sink.stop() == 0, sink.stderr()


def test_endpoint_with_workers_is_refused_in_one_line() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pyorb.servers.sink", "--workers", "2", "--endpoint",
                           "127.0.0.1:0"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "--endpoint cannot be shared" in done.stderr and "Traceback" not in done.stderr
