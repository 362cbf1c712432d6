"""Bidirectional GIOP with omniORB 4.2 C++: its client's callbacks, and its server's.

The C++ peer is tests/peers/omnicxx/bidir_peer.cc (``offerBiDirectionalGIOP``
when it calls, ``acceptBiDirectionalGIOP`` when it serves, the BiDir policy
on its POA), built here with Debian's omniORB packages (``.ci/run``
installs them); the pyorb peer is tests/peers/pyorb_bidir.py.  Both take
the command line of tests/peers/omni_bidir.py.

The client's callback object must be unreachable from the server, so that
the callback can only come over the connection the client opened.  Where
network namespaces can be made (root, as on CI), the client runs on its
own host and serves on that host's loopback, which its IORs name (as in
test_bidir_interop.py); elsewhere both run on this machine's loopback and
the client publishes a port nobody listens on in its IORs.  Without the
bidirectional option on either side, the server's callback, and so the
client's call, fails with TRANSIENT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from pyorb.testing import netns
from pyorb.testing.kit import ServerProcess, child_env, free_port
from tests.peers.omnicxx import build as omnicxx

pytestmark = pytest.mark.interop

PYORB_PEER = str(Path(__file__).resolve().parents[1] / "peers" / "pyorb_bidir.py")
CALL_TIMEOUT = 120.0
HEARD = {"pyorb": "pyorb heard hello", "omniORB C++": "omniORB C++ heard hello"}


@pytest.fixture(scope="module")
def cxx_peer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = omnicxx.missing(ssl=False)
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs omniORB C++ (see .ci/run), yet: {reason}")
        pytest.skip(f"omniORB C++ is not installed: {reason}")
    return omnicxx.build_bidir(tmp_path_factory.mktemp("omnicxx-bidir"))


class Loopback:
    """Both peers on this machine's loopback; the client's IORs name a closed port."""

    def start(self, host: str, argv: Sequence[str], lines: int) -> ServerProcess:
        return ServerProcess(argv, lines=lines)

    def run(self, host: str, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL, env=child_env())

    def server_options(self) -> list[str]:
        return ["--host", "127.0.0.1"]

    def client_options(self) -> list[str]:
        return ["--publish", f"127.0.0.1:{free_port()}"]


class Hosts:
    """A server host and a client host (network namespaces): the client serves on its own loopback."""

    def __init__(self, network: netns.Network) -> None:
        self.network = network

    def start(self, host: str, argv: Sequence[str], lines: int) -> ServerProcess:
        started = self.network.start(host, argv, lines=lines)
        self.network.processes.remove(started)  # the caller stops it
        return started

    def run(self, host: str, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        # The import path of this process, as a ServerProcess gets it: the pyorb peer runs this pyorb.
        return self.network.run(host, ["env", f"PYTHONPATH={child_env()['PYTHONPATH']}", *argv], timeout=timeout)

    def server_options(self) -> list[str]:
        return []

    def client_options(self) -> list[str]:
        return []


@pytest.fixture(scope="module")
def hosts() -> Iterator[Loopback | Hosts]:
    if netns.missing() is not None:
        yield Loopback()
        return
    with netns.Network(["server", "client"], subnet="10.213.14.0/24") as network:
        yield Hosts(network)


def peer(name: str, cxx_peer: Path) -> list[str]:
    return [str(cxx_peer)] if name == "omniORB C++" else [sys.executable, PYORB_PEER]


def call_back(hosts: Loopback | Hosts, cxx_peer: Path, server: str, client: str, *options: str) -> dict[str, object]:
    """What the ``client`` peer reports after passing its listener to a ``server`` peer's call_back."""
    started = hosts.start("server", [*peer(server, cxx_peer), "serve", *hosts.server_options(), *options], lines=1)
    try:
        done = hosts.run("client", [*peer(client, cxx_peer), "call", started.ior, "hello",
                                    *hosts.client_options(), *options], timeout=CALL_TIMEOUT)
    finally:
        started.stop()
    return outcome(done, client)


def outcome(done: subprocess.CompletedProcess[str], client: str) -> dict[str, object]:
    """The JSON line a ``client`` peer printed last."""
    lines = done.stdout.strip().splitlines()
    assert lines, f"{client} client printed nothing (rc {done.returncode}): {done.stderr[-3000:]}"
    result: dict[str, object] = json.loads(lines[-1])
    return result


PAIRS = [("omniORB C++", "pyorb"), ("pyorb", "omniORB C++")]


@pytest.mark.parametrize(("client", "server"), PAIRS)
def test_the_callback_comes_over_the_clients_connection(hosts: Loopback | Hosts, cxx_peer: Path, client: str,
                                                        server: str) -> None:
    outcome = call_back(hosts, cxx_peer, server, client)
    assert outcome == {"ok": True, "result": HEARD[client]}


@pytest.mark.parametrize(("client", "server"), PAIRS)
def test_without_bidirectional_giop_the_callback_is_transient(hosts: Loopback | Hosts, cxx_peer: Path, client: str,
                                                              server: str) -> None:
    outcome = call_back(hosts, cxx_peer, server, client, "--no-bidir")
    assert outcome["ok"] is False and outcome["error"] == "TRANSIENT", outcome
