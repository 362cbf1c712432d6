"""TLS and metrics options of ``pyorb serve`` and the papers' servers, in real processes."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import pyorb
from pyorb.idl import BENCH_IDL, bench_idl
from pyorb.giop.ior import IOR
from pyorb.testing.certs import TestPKI, make_pki
from pyorb.testing.kit import ServerProcess

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
Bench = bench_idl().Bench
PYORB = [sys.executable, "-m", "pyorb"]
ECHO_SERVANT = '''
import pyorb
pyorb.load_idl("{idl}")
import Bench__POA


class Echo(Bench__POA.Echo):
    def ping(self, stamp):
        return stamp

    def notify(self, stamp):
        pass
'''


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPKI:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def servant_file(tmp_path: Path) -> Path:
    path = tmp_path / "echo_servant.py"
    path.write_text(ECHO_SERVANT.format(idl=BENCH_IDL))
    return path


def ping(ior: str, pki: TestPKI, identity: object = None, iface: object = None) -> int:
    async def run() -> int:
        async with pyorb.Client(tls=pki.client_context(identity=identity)) as client:  # type: ignore[arg-type]
            target = client.resolve(ior, iface or Bench.Echo)
            method = target.ping if iface is None else target.work
            return int(await method(41))

    return asyncio.run(run())


def test_pyorb_serve_with_mutual_tls_and_metrics(servant_file: Path, pki: TestPKI) -> None:
    server = ServerProcess([*PYORB, "serve", f"{servant_file}:Echo", "--tls-cert", str(pki.server.cert),
                            "--tls-key", str(pki.server.key), "--tls-ca", str(pki.ca), "--tls-require-client-cert",
                            "--metrics", "127.0.0.1:0"])
    try:
        ior_line, second = server.lines[:2]
        assert second == ior_line  # TLS only: no corbaloc can name it
        with pytest.raises(ValueError, match="TLS connections only"):
            server.corbaloc
        profile = IOR.from_string(ior_line).iiop
        assert profile is not None and profile.port == 0 and profile.ssl is not None and profile.ssl.requires_tls
        assert ping(ior_line, pki, pki.client) == 41
        url = _metrics_url(server)
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        assert 'pyorb_requests_total{operation="Bench::Echo.ping"} 1.0' in text
    finally:
        server.stop()


def test_pyorb_serve_tls_beside_plain(servant_file: Path, pki: TestPKI) -> None:
    server = ServerProcess([*PYORB, "serve", f"{servant_file}:Echo", "--tls-cert", str(pki.server.bundle),
                            "--tls-endpoint", "127.0.0.1:0"])
    try:
        profile = IOR.from_string(server.ior).iiop
        assert profile is not None and profile.port != 0 and profile.ssl is not None and not profile.ssl.requires_tls
        assert server.corbaloc.startswith("corbaloc:")
        assert ping(server.ior, pki) == 41
    finally:
        server.stop()


@pytest.mark.parametrize("argv, message", [
    (["--tls-ca", "CA"], "--tls-ca needs --tls-cert"),
    (["--tls-cert", "MISSING"], "does not exist"),
])
def test_pyorb_serve_refuses_bad_tls_options_in_one_line(servant_file: Path, pki: TestPKI, argv: list[str],
                                                         message: str) -> None:
    argv = [str(pki.ca) if a == "CA" else str(servant_file.parent / "missing.pem") if a == "MISSING" else a
            for a in argv]
    done = subprocess.run([*PYORB, "serve", f"{servant_file}:Echo", *argv], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_papers_middle_tier_and_sink_over_tls(pki: TestPKI) -> None:
    """The AMH sink TLS-only with client certificates required; the middle
    tier TLS-only too, calling the sink over TLS with its own certificate."""
    tls_server = ["--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key), "--tls-ca", str(pki.ca)]
    sink = ServerProcess([sys.executable, "-m", "pyorb.servers.sink", *tls_server, "--tls-require-client-cert"])
    try:
        middle = ServerProcess([sys.executable, "-m", "pyorb.servers.middle", "--sink", sink.ior, *tls_server])
        try:
            assert ping(middle.ior, pki, iface=Bench.Sink) == 41
        finally:
            middle.stop()
        assert "refused" not in sink.stderr()  # the middle tier's certificate was accepted
    finally:
        sink.stop()
    refused = subprocess.run([sys.executable, "-m", "pyorb.servers.sink", "--workers", "2", "--metrics",
                              "127.0.0.1:0"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode == 2 and "--metrics cannot be shared" in refused.stderr


def _metrics_url(server: ServerProcess) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = re.search(r"metrics at (http://\S+)", server.stderr())
        if found:
            return found.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no metrics URL on stderr: {server.stderr}")
