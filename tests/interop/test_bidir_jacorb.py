"""Bidirectional GIOP with JacORB 3.9 both ways: a JacORB client's callback, called by a
pyorb server, and a pyorb client's callback, called by a JacORB server.

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


def pyorb_is_called_back(hosts: Hosts, classpath: str, *options: str) -> dict[str, object]:
    """What the pyorb client reports after passing its listener to the JacORB server's call_back.

    The pyorb client's call has a deadline (tests/peers/pyorb_bidir.py): JacORB
    reads it from the request's INVOCATION_POLICIES context and would hold
    the request until a start time there."""
    started = hosts.start("server", ["java", "-cp", classpath, "JacBidir", "serve", *options], lines=1)
    try:
        done = hosts.run("client", [sys.executable, PYORB_PEER, "call", started.ior, "hello", *options],
                         timeout=CALL_TIMEOUT)
    finally:
        started.stop()
    return outcome(done, "pyorb")


def test_a_jacorb_clients_callback_comes_over_its_connection(hosts: Hosts, jacorb_classpath: str) -> None:
    assert jacorb_calls_back(hosts, jacorb_classpath) == {"ok": True, "result": "JacORB heard hello"}


def test_without_bidirectional_giop_the_jacorb_clients_callback_is_transient(
        hosts: Hosts, jacorb_classpath: str) -> None:
    outcome = jacorb_calls_back(hosts, jacorb_classpath, "--no-bidir")
    assert outcome["ok"] is False and outcome["error"] == "TRANSIENT", outcome


def test_a_jacorb_server_calls_a_pyorb_clients_callback_over_its_connection(
        hosts: Hosts, jacorb_classpath: str) -> None:
    assert pyorb_is_called_back(hosts, jacorb_classpath) == {"ok": True, "result": "pyorb heard hello"}


def test_without_bidirectional_giop_the_jacorb_servers_callback_is_transient(
        hosts: Hosts, jacorb_classpath: str) -> None:
    outcome = pyorb_is_called_back(hosts, jacorb_classpath, "--no-bidir")
    assert outcome["ok"] is False and outcome["error"] == "TRANSIENT", outcome
