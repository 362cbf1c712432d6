"""IIOP over TLS between pyorb peers, and TLS bad input.

Certificates are made at test time (pyorb.testing.certs).  Every asyncio test
runs on asyncio's loop and on uvloop.  The interoperability tests with an
independent TLS peer (omniORB C++) are in tests/interop/test_tls_omniorb.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
import pyorb.tls
from pyorb.giop.ior import (
    CONFIDENTIALITY,
    ESTABLISH_TRUST_IN_CLIENT,
    INTEGRITY,
    NO_PROTECTION,
    IOR,
    SSLComponent,
    build_ior,
)
from pyorb.testing.certs import TestPKI, make_pki
from pyorb.testing.waiting import wait_until

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench
from tests.interop.servants import BenchEcho  # noqa: E402


Echo = BenchEcho


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPKI:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _tls_port(server: pyorb.Server) -> int:
    assert server.tls is not None
    return server.tls.port


def test_ssl_component_round_trip_and_ior_forms() -> None:
    offer = SSLComponent(0x66, 0x66, 4433)
    assert SSLComponent.decode(offer.to_component().data) == offer
    assert SSLComponent.decode(offer.to_component(little_endian=False).data) == offer
    # omniORB's own bytes for an SSL-only endpoint (see tests/peers/omnicxx/README.md).
    assert SSLComponent.decode(bytes.fromhex("010066006600ebdb")) == SSLComponent(0x66, 0x66, 0xDBEB)
    tls_only = build_ior("IDL:Bench/Echo:1.0", "h", 0, b"k", ssl=SSLComponent(0x7E, 0x1E, 4433))
    assert tls_only.iiop is not None and tls_only.iiop.port == 0 and tls_only.iiop.ssl == SSLComponent(0x7E, 0x1E, 4433)
    with pytest.raises(ValueError):  # port 0 only when the profile says TLS is required
        build_ior("IDL:Bench/Echo:1.0", "h", 0, b"k", ssl=SSLComponent(0x7F, 0, 4433))


def test_server_options_are_checked_at_construction(pki: TestPKI) -> None:
    with pytest.raises(TypeError, match=r"host must be an address string .*not Config \(a Config is passed as config="):
        pyorb.Server(pyorb.Config())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="port must be an int, not str"):
        pyorb.Server("127.0.0.1", "0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="host must be an address string .*not int"):
        pyorb.Server(endpoints=[(1, 0)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="tls_endpoints needs tls"):
        pyorb.Server(tls_endpoints=[("127.0.0.1", 0)])
    with pytest.raises(TypeError, match="ssl.SSLContext"):
        pyorb.Server(tls=str(pki.server.cert))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="require_client_cert needs ca"):
        pyorb.tls.server_context(pki.server.cert, pki.server.key, require_client_cert=True)
    with pytest.raises(TypeError, match="tls must be"):
        pyorb.Client(tls="yes")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_tls_only_server_advertises_ssliop_and_serves_verified_clients(pki: TestPKI) -> None:
    async with pyorb.Server(tls=pki.server_context()) as server:
        key = server.activate(Echo(), "Echo")
        profile = IOR.from_string(server.ior(key)).iiop
        assert profile is not None and profile.port == 0  # no plain port: SSLIOP's convention
        offer = profile.ssl
        assert offer is not None and offer.port == _tls_port(server) and offer.requires_tls
        assert offer.target_requires & (INTEGRITY | CONFIDENTIALITY)
        assert not offer.target_supports & NO_PROTECTION
        with pytest.raises(ValueError, match="corbaloc"):
            server.corbaloc(key)
        async with pyorb.Client(tls=pki.client_context()) as client:
            echo = client.resolve(server.ior(key), Bench.Echo)
            assert await asyncio.gather(*(echo.ping(i) for i in range(50))) == list(range(50))
            (conn,) = server.connections
            assert conn.transport is not None and conn.transport.get_extra_info("ssl_object") is not None
        async with pyorb.Client(tls=False) as plain:  # never TLS: a TLS-only object has no route
            with pytest.raises(CORBA.INV_OBJREF):
                await plain.resolve(server.ior(key), Bench.Echo).ping(1)


@pytest.mark.asyncio
async def test_tls_beside_plain_the_client_prefers_tls_and_can_opt_out(pki: TestPKI) -> None:
    async with pyorb.Server(tls=pki.server_context(), tls_endpoints=[("127.0.0.1", 0)]) as server:
        key = server.activate(Echo(), "Echo")
        profile = IOR.from_string(server.ior(key)).iiop
        assert profile is not None and profile.port == server.port != 0
        assert profile.ssl is not None and not profile.ssl.requires_tls and profile.ssl.target_supports & NO_PROTECTION
        assert server.corbaloc(key).endswith(f":{server.port}/Echo")
        async with pyorb.Client(tls=pki.client_context()) as client, pyorb.Client(tls=False) as plain:
            assert await client.resolve(server.ior(key), Bench.Echo).ping(7) == 7
            assert await plain.resolve(server.ior(key), Bench.Echo).ping(8) == 8
            secured = sorted(c.transport.get_extra_info("ssl_object") is not None
                             for c in server.connections if c.transport is not None)
            assert secured == [False, True]


@pytest.mark.asyncio
async def test_dispatcher_threads_write_plain_replies_themselves_and_never_tls_ones(pki: TestPKI) -> None:
    # Config.direct_replies: a thread's reply goes straight to a plain socket,
    # but raw bytes on a TLS connection's socket would corrupt its records.
    async with pyorb.Server(tls=pki.server_context(), tls_endpoints=[("127.0.0.1", 0)]) as server:
        key = server.activate(Echo(), "Echo", strategy="thread_pool(2)")
        async with pyorb.Client(tls=pki.client_context()) as client, pyorb.Client(tls=False) as plain:
            for peer in (client, plain):
                echo = peer.resolve(server.ior(key), Bench.Echo)
                assert await asyncio.gather(*(echo.ping(i) for i in range(200))) == list(range(200))
            by_tls = {c.transport.get_extra_info("ssl_object") is not None: c
                      for c in server.connections if c.transport is not None}
            assert by_tls[True].wire.direct_writer is None and by_tls[True].wire._direct is False
            assert by_tls[False].wire.direct_writer is not None


@pytest.mark.asyncio
async def test_the_client_never_falls_back_to_plain_text(pki: TestPKI) -> None:
    """A server that offers both, whose certificate the client does not trust:
    the call fails instead of going out in clear on the plain port."""
    async with pyorb.Server(tls=pki.server_context(identity=pki.rogue_server),
                            tls_endpoints=[("127.0.0.1", 0)]) as server:
        key = server.activate(Echo(), "Echo")
        async with pyorb.Client(tls=pki.client_context()) as client:
            with pytest.raises(CORBA.TRANSIENT, match="certificate not accepted"):
                await client.resolve(server.ior(key), Bench.Echo).ping(1)
        assert server.stats().operations == () or all(op.served == 0 for op in server.stats().operations)


@pytest.mark.asyncio
@pytest.mark.parametrize("which", ["rogue", "expired"])
async def test_untrusted_or_expired_server_certificate_is_refused_by_the_client(
    pki: TestPKI, which: str, caplog: pytest.LogCaptureFixture
) -> None:
    identity = pki.rogue_server if which == "rogue" else pki.expired_server
    async with pyorb.Server(tls=pki.server_context(identity=identity)) as server:
        key = server.activate(Echo(), "Echo")
        async with pyorb.Client(tls=pki.client_context()) as client:
            with caplog.at_level(logging.WARNING, logger="pyorb.aio.tls"):
                with pytest.raises(CORBA.TRANSIENT) as failed:
                    await client.resolve(server.ior(key), Bench.Echo).ping(1)
                await wait_until(lambda: server.stats().tls_refused == 1)
        assert "certificate not accepted" in repr(failed.value)
        assert ("expired" if which == "expired" else "unable to get local issuer") in repr(failed.value)
        assert [r.getMessage() for r in caplog.records if "TLS handshake with" in r.getMessage()]


@pytest.mark.asyncio
async def test_mutual_tls_refuses_clients_without_a_trusted_certificate(pki: TestPKI) -> None:
    async with pyorb.Server(tls=pki.server_context(require_client_cert=True)) as server:
        key = server.activate(Echo(), "Echo")
        ior = server.ior(key)
        offer = IOR.from_string(ior).iiop.ssl  # type: ignore[union-attr]
        assert offer is not None and offer.target_requires & ESTABLISH_TRUST_IN_CLIENT
        for identity in (None, pki.rogue_client):
            async with pyorb.Client(pyorb.Config(call_timeout=5), tls=pki.client_context(identity=identity)) as c:
                # TLS 1.3: the client learns of the refusal after its handshake, when the server's alert arrives.
                with pytest.raises((CORBA.TRANSIENT, CORBA.COMM_FAILURE)):
                    await c.resolve(ior, Bench.Echo).ping(1)
        await wait_until(lambda: server.stats().tls_refused == 2)
        async with pyorb.Client(tls=pki.client_context(identity=pki.client)) as client:
            assert await client.resolve(ior, Bench.Echo).ping(3) == 3
            (conn,) = server.connections
            assert conn.peer_certificate is not None and "pyorb-test-client" in str(conn.peer_certificate["subject"])


@pytest.mark.asyncio
async def test_plain_clients_and_stalled_handshakes_are_refused_without_disturbing_others(
    pki: TestPKI, caplog: pytest.LogCaptureFixture
) -> None:
    config = pyorb.Config(tls_handshake_timeout=0.5)
    async with pyorb.Server(tls=pki.server_context(), config=config) as server:
        key = server.activate(Echo(), "Echo")
        port = _tls_port(server)
        async with pyorb.Client(tls=pki.client_context()) as client:
            echo = client.resolve(server.ior(key), Bench.Echo)
            assert await echo.ping(0) == 0
            loop = asyncio.get_running_loop()
            with caplog.at_level(logging.WARNING, logger="pyorb.aio.tls"):
                # A plain IIOP client: a GIOP LocateRequest header in clear.
                plain = await loop.run_in_executor(None, _plain_giop_exchange, port)
                assert plain == b""  # closed, nothing answered in clear
                # Twenty clients that connect and never say a word.
                stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
                try:
                    started = time.monotonic()
                    for i in range(1, 40):  # the established client is served meanwhile
                        assert await echo.ping(i) == i
                    # By the 0.5 s handshake timeout, late as a loaded machine may be, not the 10 s default.
                    await wait_until(lambda: server.stats().tls_refused == 21, timeout=9)
                    assert time.monotonic() - started < 9
                    for sock in stalled:  # each was closed by the server
                        sock.settimeout(2)
                        assert sock.recv(1) == b""
                finally:
                    for sock in stalled:
                        sock.close()
            assert await echo.ping(99) == 99
        messages = [r.getMessage() for r in caplog.records]
        assert any("not TLS" in m and "plain client" in m for m in messages), messages
        assert sum("no complete handshake in time" in m for m in messages) == 20, messages
        assert len(server.connections) == 0 or all(c.transport is not None for c in server.connections)


def _plain_giop_exchange(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        header = b"GIOP\x01\x02\x01\x03" + struct.pack("<I", 8)
        sock.sendall(header + struct.pack("<I", 1) + b"\0\0\0\0")
        try:
            return sock.recv(100)
        except ConnectionResetError:
            return b""


@pytest.mark.asyncio
async def test_handshakes_count_against_max_connections(pki: TestPKI) -> None:
    config = pyorb.Config(max_connections=3, tls_handshake_timeout=2.0)
    async with pyorb.Server(tls=pki.server_context(), config=config) as server:
        key = server.activate(Echo(), "Echo")
        stalled = [socket.create_connection(("127.0.0.1", _tls_port(server))) for _ in range(3)]
        try:
            await asyncio.sleep(0.2)
            async with pyorb.Client(pyorb.Config(connect_timeout=1), tls=pki.client_context()) as client:
                with pytest.raises((CORBA.TRANSIENT, CORBA.COMM_FAILURE)):
                    await client.resolve(server.ior(key), Bench.Echo).ping(1)
        finally:
            for sock in stalled:
                sock.close()
        async with pyorb.Client(tls=pki.client_context()) as client:
            assert await client.resolve(server.ior(key), Bench.Echo).ping(2) == 2


def test_blocking_client_over_tls(pki: TestPKI) -> None:
    from pyorb.testing import LoopThread

    with LoopThread() as runner:
        async def start() -> tuple[pyorb.Server, str]:
            server = pyorb.Server(tls=pki.server_context(require_client_cert=True))
            await server.start()
            return server, server.ior(server.activate(Echo(), "Echo"))

        server, ior = runner.run(start())
        try:
            with pyorb.BlockingClient(tls=pki.client_context(identity=pki.client)) as client:
                echo = client.resolve(ior, Bench.Echo)
                assert [echo.ping(i) for i in range(5)] == list(range(5))
            with pyorb.BlockingClient(tls=pki.client_context()) as client:
                with pytest.raises((CORBA.TRANSIENT, CORBA.COMM_FAILURE)):
                    client.resolve(ior, Bench.Echo).ping(1, timeout=5)
        finally:
            runner.run(server.close())


def test_hostname_checking_follows_the_client_context(pki: TestPKI, tmp_path: Path) -> None:
    """A certificate that does not name the published host: refused unless
    the client turns host-name checking off (omniORB's and JacORB's way)."""
    other = make_pki(tmp_path, hosts=("service.invalid",))
    server_ctx = other.server_context()

    async def run(check: bool) -> int:
        async with pyorb.Server(tls=server_ctx) as server:
            key = server.activate(Echo(), "Echo")
            async with pyorb.Client(tls=other.client_context(check_hostname=check)) as client:
                return int(await client.resolve(server.ior(key), Bench.Echo).ping(5))

    with pytest.raises(CORBA.TRANSIENT, match="certificate not accepted"):
        asyncio.run(run(True))
    assert asyncio.run(run(False)) == 5


def test_the_pytest_fixtures_serve_and_call_over_tls(pyorb_server: Any, pyorb_pki: TestPKI, pyorb_loop: Any) -> None:
    from pyorb.testing.plugin import SyncClient

    running = pyorb_server(Echo, tls=pyorb_pki.server_context())
    assert running.port == 0 and running.server.tls is not None  # TLS only: the IOR names the TLS port
    sync = SyncClient(pyorb_loop, tls=pyorb_pki.client_context())
    try:
        assert sync.resolve(running.ior, Bench.Echo).ping(3) == 3
    finally:
        sync.close()
