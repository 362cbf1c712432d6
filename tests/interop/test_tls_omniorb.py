"""IIOP over TLS with an independent peer: omniORB 4.2 C++ and its SSL transport.

The peers are tests/peers/omnicxx/echo_server.cc and echo_client.cc, built
here with Debian's omniORB packages (``.ci/run`` installs them).  The
omniORBpy wheel has no SSL transport, so it cannot be this peer.  Each test
runs real processes over loopback with certificates made at test time.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.giop.ior import IOR
from pyorb.testing import LoopThread
from pyorb.testing.certs import TestPKI, make_pki
from pyorb.testing.kit import ServerProcess
from pyorb.testing.waiting import wait_until_blocking
from tests.peers.omnicxx import build as omnicxx

pytestmark = pytest.mark.interop
Bench = bench_idl().Bench
from tests.interop.servants import BenchEcho  # noqa: E402


Echo = BenchEcho


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    reason = omnicxx.missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs omniORB C++ (see .ci/run), yet: {reason}")
        pytest.skip(f"omniORB C++ with SSL is not installed: {reason}")
    return omnicxx.build(tmp_path_factory.mktemp("omnicxx"))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPKI:
    return make_pki(tmp_path_factory.mktemp("pki"))


def run_client(programs: dict[str, Path], pki: TestPKI, ior: str, *extra: str, key: Path | None = None,
               calls: int = 20) -> dict[str, object]:
    argv = [str(programs["client"]), ior, "--ca", str(pki.ca), "--calls", str(calls), *extra]
    if key is not None:
        argv += ["--key", str(key)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"echo_client printed no result (rc {done.returncode}): {done.stderr[-2000:]}"
    result: dict[str, object] = json.loads(lines[-1])
    return result


class PyorbServer:
    def __init__(self, runner: LoopThread, **options: object) -> None:
        self.runner = runner

        async def start() -> tuple[pyorb.Server, str]:
            server = pyorb.Server(**options)  # type: ignore[arg-type]
            await server.start()
            return server, server.ior(server.activate(Echo(), "Echo"))

        self.server, self.ior = runner.run(start())

    def close(self) -> None:
        self.runner.run(self.server.close())


@pytest.fixture
def runner() -> Iterator[LoopThread]:
    with LoopThread() as loop:
        yield loop


def test_omniorb_client_calls_a_tls_only_pyorb_server(programs: dict[str, Path], pki: TestPKI,
                                                      runner: LoopThread) -> None:
    served = PyorbServer(runner, tls=pki.server_context())
    try:
        result = run_client(programs, pki, served.ior)
        assert result["ok"], result
        served_ops = {op.name: op.served for op in served.server.stats().operations}
        assert served_ops["Bench::Echo.ping"] == 20
    finally:
        served.close()


def test_omniorb_client_with_mutual_tls(programs: dict[str, Path], pki: TestPKI, runner: LoopThread) -> None:
    served = PyorbServer(runner, tls=pki.server_context(require_client_cert=True))
    try:
        assert run_client(programs, pki, served.ior, key=pki.client.bundle)["ok"]
        refused = run_client(programs, pki, served.ior)  # no client certificate
        assert not refused["ok"] and ("TRANSIENT" in str(refused["detail"]) or "COMM_FAILURE" in str(refused["detail"]))
        rogue = run_client(programs, pki, served.ior, key=pki.rogue_client.bundle)
        assert not rogue["ok"], rogue
        # The client may exit before the server has finished the refused handshake and counted it.
        wait_until_blocking(lambda: served.server.stats().tls_refused >= 2, 10.0,
                            what="the server counting both refused handshakes")
    finally:
        served.close()


def test_omniorb_client_takes_tls_when_offered_beside_plain(programs: dict[str, Path], pki: TestPKI,
                                                           runner: LoopThread) -> None:
    """The IOR offers both: omniORB restricted to its SSL transport still
    reaches the object (through TAG_SSL_SEC_TRANS), and restricted to TCP
    it reaches the plain port."""
    served = PyorbServer(runner, tls=pki.server_context(), tls_endpoints=[("127.0.0.1", 0)])
    try:
        assert run_client(programs, pki, served.ior, "-ORBclientTransportRule", "* ssl")["ok"]
        assert run_client(programs, pki, served.ior, "-ORBclientTransportRule", "* tcp")["ok"]
    finally:
        served.close()


@pytest.fixture(params=["optional", "required"])
def omniorb_tls_server(request: pytest.FixtureRequest, programs: dict[str, Path],
                       pki: TestPKI) -> Iterator[tuple[str, str]]:
    argv = [str(programs["server"]), "--no-tcp", "--ssl-port", "0", "--ca", str(pki.ca),
            "--key", str(pki.server.bundle)]
    if request.param == "required":
        argv.append("--require-client-cert")
    server = ServerProcess(argv, lines=1)  # the IOR; stops at stdin end of file
    try:
        yield server.ior, request.param
    finally:
        server.stop()


def test_pyorb_client_calls_an_omniorb_tls_server(omniorb_tls_server: tuple[str, str], pki: TestPKI) -> None:
    ior, client_cert = omniorb_tls_server
    profile = IOR.from_string(ior).iiop
    assert profile is not None and profile.port == 0 and profile.ssl is not None and profile.ssl.port != 0
    with pyorb.BlockingClient(tls=pki.client_context(identity=pki.client)) as client:
        echo = client.resolve(ior, Bench.Echo)
        assert [echo.ping(i) for i in range(10)] == list(range(10))

    import asyncio

    async def calls(identity: object) -> list[int]:
        async with pyorb.Client(pyorb.Config(call_timeout=10),
                                tls=pki.client_context(identity=identity)) as client:  # type: ignore[arg-type]
            echo = client.resolve(ior, Bench.Echo)
            return list(await asyncio.gather(*(echo.ping(i) for i in range(100))))

    assert asyncio.run(calls(pki.client)) == list(range(100))
    if client_cert == "required":
        with pytest.raises((CORBA.TRANSIENT, CORBA.COMM_FAILURE)):
            asyncio.run(calls(None))
    else:
        assert asyncio.run(calls(None)) == list(range(100))


def test_pyorb_client_refuses_an_omniorb_server_it_does_not_trust(omniorb_tls_server: tuple[str, str],
                                                                 tmp_path: Path) -> None:
    ior, _ = omniorb_tls_server
    stranger = make_pki(tmp_path)  # another CA: the omniORB server's certificate is not one of its own
    with pyorb.BlockingClient(tls=stranger.client_context(identity=stranger.client)) as client:
        with pytest.raises(CORBA.TRANSIENT, match="certificate not accepted"):
            client.resolve(ior, Bench.Echo).ping(1)
