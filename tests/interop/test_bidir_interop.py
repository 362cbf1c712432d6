"""Bidirectional GIOP across hosts: the client's callback object is unreachable from the server.

Two hosts (network namespaces, see :mod:`pyorb.testing.netns`).  The
server listens on its host's address; the client serves its listener on
its own loopback, which its IORs name, so the server's attempt to connect
to it reaches the server host's loopback instead and is refused.  The
callback arrives only over the connection the client opened, and only when
the client offers it and the server accepts the offer; otherwise the
server's call, and so the client's, fails with TRANSIENT.  Each pairing of
pyorb and omniORBpy, both ways.  Needs root: CI runs as root, so there it
never skips.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

import pytest

from pyorb.testing import netns

pytestmark = pytest.mark.interop

PEERS = Path(__file__).resolve().parents[1] / "peers"
PEER = {"pyorb": str(PEERS / "pyorb_bidir.py"), "omniORB": str(PEERS / "omni_bidir.py")}
CALL_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def network() -> Iterator[netns.Network]:
    netns.require()
    with netns.Network(["server", "client"], subnet="10.213.13.0/24") as net:
        yield net


def call_back(network: netns.Network, server: str, client: str, *options: str) -> dict[str, object]:
    """What the ``client`` peer reports after passing its listener to a ``server`` peer's call_back."""
    started = network.start("server", [sys.executable, PEER[server], "serve", *options], lines=1)
    try:
        done = network.run("client", [sys.executable, PEER[client], "call", started.ior, "hello", *options],
                           timeout=CALL_TIMEOUT)
    finally:
        started.stop()
        network.processes.remove(started)
    lines = done.stdout.strip().splitlines()
    assert lines, f"{client} client printed nothing (rc {done.returncode}): {done.stderr[-3000:]}"
    outcome: dict[str, object] = json.loads(lines[-1])
    return outcome


PAIRS = [("pyorb", "pyorb"), ("pyorb", "omniORB"), ("omniORB", "pyorb")]


@pytest.mark.parametrize(("client", "server"), PAIRS)
def test_the_callback_comes_over_the_clients_connection(network: netns.Network, client: str, server: str) -> None:
    outcome = call_back(network, server, client)
    assert outcome == {"ok": True, "result": f"{client} heard hello"}


@pytest.mark.parametrize(("client", "server"), PAIRS)
def test_without_bidirectional_giop_the_callback_is_transient(network: netns.Network, client: str,
                                                              server: str) -> None:
    outcome = call_back(network, server, client, "--no-bidir")
    assert outcome["ok"] is False and outcome["error"] == "TRANSIENT", outcome
