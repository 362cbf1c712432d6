"""Bidirectional GIOP with JacORB 3.9: a JacORB client's callback, called by a pyorb server.

The JacORB peer is tests/peers/jacorb/JacBidir.java (JacORB's
``BiDirConnectionInitializer`` and the BiDir policy on its POA; Dynamic
Skeleton and Invocation, no IDL compiler), with the command line of
tests/peers/omni_bidir.py; the pyorb peer is tests/peers/pyorb_bidir.py.
The client runs on its own host (network namespaces) and serves on that
host's loopback, which its IORs name: the server can reach the callback
object only over the connection the client opened.  JacORB offers the
address it listens on, not one its IORs publish instead, so where
namespaces cannot be made these tests are skipped.
"""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

from pyorb.testing import netns
from tests.interop.test_bidir_omnicxx import CALL_TIMEOUT, PYORB_PEER, Hosts, outcome

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    reason = netns.missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI makes network namespaces, yet: {reason}")
        pytest.skip(f"JacORB's callback object must be on a host of its own: {reason}")
    with netns.Network(["server", "client"], subnet="10.213.15.0/24") as network:
        yield Hosts(network)


def jacorb_calls_back(hosts: Hosts, classpath: str, *options: str) -> dict[str, object]:
    """What the JacORB client reports after passing its listener to the pyorb server's call_back."""
    started = hosts.start("server", [sys.executable, PYORB_PEER, "serve", *options], lines=1)
    try:
        done = hosts.run("client", ["java", "-cp", classpath, "JacBidir", "call", started.ior, "hello", *options],
                         timeout=CALL_TIMEOUT)
    finally:
        started.stop()
    return outcome(done, "JacORB")


def test_a_jacorb_clients_callback_comes_over_its_connection(hosts: Hosts, jacorb_classpath: str) -> None:
    assert jacorb_calls_back(hosts, jacorb_classpath) == {"ok": True, "result": "JacORB heard hello"}


def test_without_bidirectional_giop_the_jacorb_clients_callback_is_transient(
        hosts: Hosts, jacorb_classpath: str) -> None:
    outcome = jacorb_calls_back(hosts, jacorb_classpath, "--no-bidir")
    assert outcome["ok"] is False and outcome["error"] == "TRANSIENT", outcome
