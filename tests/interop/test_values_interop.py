"""Value types between pyorb and omniORBpy, both ways, with real processes.

The cases are tests/peers/values_servant.py's: concrete values with public and
private state, a derived value where its base is declared, a truncatable one,
null, sharing (one object sent twice arrives as one), boxes, values inside a
struct, a union, a sequence, an array, an any and a user exception.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.ior import IOR
from pyorb.giop.messages import GIOP_1_0, GIOP_1_1, GIOP_1_2, Version
from pyorb.testing.kit import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
IDL = ROOT / "idl" / "values.idl"
Values = pyorb.load_idl(IDL).Values
sys.modules.setdefault("Values", Values)  # the servant module imports the IDL as omnipeer loads it

from tests.peers import values_servant  # noqa: E402


@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
def test_pyorb_client_to_omniorbpy_server(omni_server: Any, version: Version) -> None:
    server = omni_server(str(IDL), "tests.peers.values_servant:Echo")
    with pyorb.BlockingClient(pyorb.Config(giop_version=version)) as client:
        echo = client.resolve(server.ior, Values.Echo)
        wide = version == GIOP_1_2  # omniORB refuses wide text over GIOP 1.1 (BAD_PARAM_WCharTCSNotKnown)
        left_out = {"exception"} | (set() if wide else {"wlabel"})
        expected = {case: v for case, v in values_servant.EXPECTED.items() if case not in left_out}
        assert values_servant.calls(echo, exceptions=False, wide=wide) == expected


@pytest.mark.parametrize("giop", ["1.2", "1.0"], ids=lambda v: f"GIOP {v}")
def test_omniorbpy_client_to_pyorb_server(omni_call: Any, giop: str) -> None:
    # The version is the corbaloc URL's.  Over GIOP 1.0 strings go as ISO-8859-1, and there is
    # no wstring and no fragment (omniORB cannot write a large body of values at all).
    server = ServerProcess([sys.executable, "-m", "pyorb", "serve", f"{ROOT / 'tests/peers/values_servant.py'}:Echo",
                            "--idl", str(IDL), "--key", "Echo", "--stop-on-stdin-eof"])
    try:
        target = server.corbaloc.replace(":1.2@", f":{giop}@")
        assert f":{giop}@" in target
        function = {"1.2": "omni_calls", "1.0": "omni_calls_10"}[giop]
        left_out = {"1.2": set(), "1.0": {"wlabel", "large"}}[giop]
        expected = {case: v for case, v in values_servant.EXPECTED.items() if case not in left_out}
        got = omni_call(str(IDL), f"tests.peers.values_servant:{function}", target, interface="Values::Echo")
        assert got == expected
    finally:
        server.stop()
    assert server.proc.returncode in (0, None, -15), server.stderr


def test_pyorb_client_to_omniorbpy_server_over_giop_1_0(omni_server: Any) -> None:
    # GIOP 1.0 negotiates no char code set: strings inside values go as ISO-8859-1,
    # so every value whose strings change length has its chunks and indirections rewritten.
    # (GIOP 1.1 with large bodies, which omniORB sends in fragment trains, is the test above.)
    server = omni_server(str(IDL), "tests.peers.values_servant:Echo")
    with pyorb.BlockingClient(pyorb.Config(giop_version=GIOP_1_0)) as client:
        echo = client.resolve(server.ior, Values.Echo)
        left_out = {"exception", "wlabel", "large"}  # omniORB cannot write a large reply over GIOP 1.0
        expected = {case: v for case, v in values_servant.EXPECTED.items() if case not in left_out}
        assert values_servant.calls(echo, exceptions=False, wide=False, large=False) == expected


@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1, GIOP_1_0], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
def test_values_nested_in_values_to_omniorbpy(omni_server: Any, version: Version, little_endian: bool) -> None:
    # A chain, a cycle, a box, a derived value and nulls inside values' states: pyorb writes them
    # (omniORB's in-memory marshaler cannot), an omniORBpy server reads them off the wire.
    server = omni_server(str(IDL), "tests.peers.values_servant:Nested")
    with pyorb.BlockingClient(pyorb.Config(giop_version=version, little_endian=little_endian)) as client:
        nested = client.resolve(server.ior, Values.Nested)
        assert values_servant.nested_calls(nested) == values_servant.NESTED_EXPECTED


@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1, GIOP_1_0], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
def test_references_inside_values_with_omniorbpy(omni_server: Any, version: Version) -> None:
    # A pyorb proxy inside a value goes out as a reference the omniORBpy server calls; a value
    # holding the server's reference arrives holding a pyorb proxy.
    echo_server = omni_server(str(IDL), "tests.peers.values_servant:Echo")
    server = omni_server(str(IDL), "tests.peers.values_servant:Nested")
    with pyorb.BlockingClient(pyorb.Config(giop_version=version)) as client:
        nested = client.resolve(server.ior, Values.Nested)
        echo = client.resolve(echo_server.ior, Values.Echo)
        assert values_servant.reference_calls(nested, echo) == values_servant.REFERENCE_EXPECTED


def serve_values(servant: str, idl: Path = IDL) -> ServerProcess:
    return ServerProcess([sys.executable, "-m", "pyorb", "serve", f"{ROOT / 'tests/peers/values_servant.py'}:{servant}",
                          "--idl", str(idl), "--key", servant, "--stop-on-stdin-eof"])


def echoed_through(server: Any, version: Version, little_endian: bool, case: Callable[[Any], Any]) -> Any:
    """``case(echo)`` from a pyorb client through ``server`` (an Echo), which is stopped after."""
    try:
        with pyorb.BlockingClient(pyorb.Config(giop_version=version, little_endian=little_endian)) as client:
            return case(client.resolve(server.ior, Values.Echo))
    finally:
        server.stop()


class WireTap:
    """A relay on 127.0.0.1 in front of a loopback IIOP server that keeps every octet either side
    sends: ``ior`` names the server's object at the relay's port.  One connection."""

    def __init__(self, ior: str) -> None:
        ref = IOR.from_string(ior)
        profile = ref.iiop
        assert profile is not None and profile.host in ("127.0.0.1", "localhost", "::1"), ior
        self.upstream = (profile.host, profile.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(60)
        moved = dataclasses.replace(profile, host="127.0.0.1", port=self.listener.getsockname()[1])
        self.ior = dataclasses.replace(ref, profiles=(moved,)).to_string()
        self.requests, self.replies = bytearray(), bytearray()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            down, _ = self.listener.accept()
        except OSError:
            return
        with down, socket.create_connection(self.upstream, timeout=60) as up:
            down.settimeout(60)
            back = threading.Thread(target=self._copy, args=(up, down, self.replies), daemon=True)
            back.start()
            self._copy(down, up, self.requests)
            back.join(60)

    @staticmethod
    def _copy(src: socket.socket, dst: socket.socket, keep: bytearray) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
                keep += chunk
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    @staticmethod
    def message_kinds(sent: bytearray) -> list[tuple[int, int]]:
        """(GIOP minor version, message type) of each message in ``sent`` (one direction)."""
        data, pos, found = bytes(sent), 0, []
        while pos + 12 <= len(data):
            size = int.from_bytes(data[pos + 8 : pos + 12], "little" if data[pos + 6] & 1 else "big")
            found.append((data[pos + 5], data[pos + 7]))
            pos += 12 + size
        return found

    def close(self) -> None:
        self.listener.close()
        self.thread.join(60)


@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
def test_a_large_body_of_nested_values_in_giop_1_1_fragments_from_omniorbpy(omni_server: Any,
                                                                            little_endian: bool) -> None:
    # omniORB sends the 20 KB reply as a GIOP 1.1 Reply and Fragments, each aligned relative to its
    # own Fragment message: pyorb's value reader reads the nested values where they lie.
    server = omni_server(str(IDL), "tests.peers.values_servant:Echo")
    tap = WireTap(server.ior)
    try:
        with pyorb.BlockingClient(pyorb.Config(giop_version=GIOP_1_1, little_endian=little_endian)) as client:
            got = values_servant.large_nested(client.resolve(tap.ior, Values.Echo))
    finally:
        tap.close()
        server.stop()
    assert got == values_servant.LARGE_NESTED
    kinds = tap.message_kinds(tap.replies)
    assert (1, 1) in kinds and kinds.count((1, 7)) >= 2  # a GIOP 1.1 Reply and its Fragments


@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1, GIOP_1_0], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
def test_values_nested_in_values_pyorb_to_pyorb(version: Version, little_endian: bool) -> None:
    # A chain, a cycle (one object again), a box, a derived and a truncatable value, nulls, and
    # values in a struct and a sequence inside a value's state: written and read by pyorb both ways.
    server = serve_values("Echo")
    assert echoed_through(server, version, little_endian, values_servant.nested_echoes) == values_servant.NESTED_ECHOES
    assert server.proc.returncode in (0, None, -15), server.stderr


@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1, GIOP_1_0], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
def test_values_nested_in_values_from_omniorbpy_server(omni_server: Any, version: Version,
                                                       little_endian: bool) -> None:
    # The omniORBpy server answers with the values nested as omniORB chunks them; pyorb reads them.
    server = omni_server(str(IDL), "tests.peers.values_servant:Echo")
    with pyorb.BlockingClient(pyorb.Config(giop_version=version, little_endian=little_endian)) as client:
        echo = client.resolve(server.ior, Values.Echo)
        assert values_servant.nested_echoes(echo) == values_servant.NESTED_ECHOES


@pytest.mark.parametrize("servant,function,expected,giop", [
    ("Echo", "omni_nested_echoes", values_servant.NESTED_ECHOES, "1.2"),
    ("Nested", "omni_nested_calls", values_servant.NESTED_EXPECTED, "1.2"),
    ("Nested", "omni_nested_calls", values_servant.NESTED_EXPECTED, "1.0"),
    ("Echo", "omni_nested_echoes", values_servant.NESTED_ECHOES, "1.0"),
], ids=["echoed", "plain results", "plain results over GIOP 1.0", "echoed over GIOP 1.0"])
def test_values_nested_in_values_from_omniorbpy_client(omni_call: Any, servant: str, function: str,
                                                       expected: dict[str, Any], giop: str) -> None:
    # Over GIOP 1.0 the strings inside the values go both ways in ISO-8859-1.
    server = serve_values(servant)
    try:
        target = server.corbaloc.replace(":1.2@", f":{giop}@")
        assert f":{giop}@" in target
        got = omni_call(str(IDL), f"tests.peers.values_servant:{function}", target, interface=f"Values::{servant}")
        assert got == expected
    finally:
        server.stop()
    assert server.proc.returncode in (0, None, -15), server.stderr


@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1, GIOP_1_0], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
def test_a_user_exception_of_values_nested_in_values_pyorb_to_pyorb(version: Version, little_endian: bool) -> None:
    # The servant raises Lost holding a chain that ends in a cycle: the pyorb server writes it,
    # the pyorb client reads it and raises it, the cycle one object again.
    server = serve_values("Nested")
    try:
        with pyorb.BlockingClient(pyorb.Config(giop_version=version, little_endian=little_endian)) as client:
            assert values_servant.lost_chain(client.resolve(server.ior, Values.Nested)) == values_servant.LOST
    finally:
        server.stop()
    assert server.proc.returncode in (0, None, -15), server.stderr


def called_by_omniorbpy(omni_call: Any, servant: str, function: str, idl: Path = IDL) -> Any:
    """What ``function`` of values_servant returns in an omniORBpy client calling a pyorb ``servant``
    (which is stopped after, and must not have crashed)."""
    server = serve_values(servant)
    try:
        got = omni_call(str(idl), f"tests.peers.values_servant:{function}", server.corbaloc,
                        interface=f"Values::{servant}")
    finally:
        server.stop()
    assert server.proc.returncode in (0, None, -15), server.stderr
    return got


def test_a_user_exception_of_values_nested_in_values_to_an_omniorbpy_client(omni_call: Any) -> None:
    assert called_by_omniorbpy(omni_call, "Nested", "omni_lost_chain") == values_servant.LOST


def test_an_omniorbpy_server_cannot_raise_a_user_exception_of_values_nested_in_values(omni_server: Any) -> None:
    # omniORB fails to marshal the reply (MARSHAL_CannotReserveOutputSpace) and answers with a
    # MessageError, as for any user exception holding a value: pyorb reports a broken connection.
    server = omni_server(str(IDL), "tests.peers.values_servant:Nested")
    with pyorb.BlockingClient() as client:
        nested = client.resolve(server.ior, Values.Nested)
        with pytest.raises(CORBA.COMM_FAILURE, match="MessageError"):
            values_servant.lost_chain(nested)
        assert nested.chain_length(Values.Node(1, None)) == 1  # the server carries on


ELSEWHERE = ROOT / "idl" / "values_elsewhere.idl"  # Elsewhere::Wrapped, which this process never loads


@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
@pytest.mark.parametrize("peer", ["omniORBpy", "pyorb"])
def test_a_truncated_value_holding_values_from_a_server(omni_server: Any, peer: str, version: Version,
                                                        little_endian: bool) -> None:
    # The server answers with a truncatable value of a type only it knows, holding the chain in its
    # own state, and the chain again (an indirection into that state): pyorb skips that state and
    # reads the chain where the indirection names it.
    server = (omni_server(str(ELSEWHERE), "tests.peers.values_servant:Truncating") if peer == "omniORBpy"
              else serve_values("Truncating", ELSEWHERE))
    assert echoed_through(server, version, little_endian, values_servant.truncated_reply) == values_servant.TRUNCATED


def test_a_truncated_value_holding_values_from_an_omniorbpy_client(omni_call: Any) -> None:
    assert called_by_omniorbpy(omni_call, "Echo", "omni_truncated_request", ELSEWHERE) == values_servant.TRUNCATED


@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("peer", ["omniORBpy", "pyorb"])
def test_a_large_body_of_nested_values_over_giop_1_2_fragments(omni_server: Any, peer: str,
                                                                little_endian: bool) -> None:
    # GIOP 1.2 fragments are joined before the value reader sees the body.
    server = omni_server(str(IDL), "tests.peers.values_servant:Echo") if peer == "omniORBpy" else serve_values("Echo")
    assert echoed_through(server, GIOP_1_2, little_endian, values_servant.large_nested) == values_servant.LARGE_NESTED
