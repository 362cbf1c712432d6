"""Hostile values that are well-formed GIOP (issue #12 items 1, 2, 9).

Each attack goes to a real ``pyorb serve`` process on its own connection; the
server must answer MARSHAL (before omniORB's unmarshaler sees the body) and
keep serving a well-behaved client on another connection.  Before the fix the
first two crashed the server with SIGSEGV and the third cost it 1 GiB.
"""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path
from typing import Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb import marshal
from pyorb.marshal import layout
from pyorb.giop import codec
from pyorb.giop.messages import Request
from pyorb.testing.kit import ServerProcess

from loadtests import hostile_values as hostile

ROOT = Path(__file__).resolve().parents[1]
IDL = ROOT / "idl" / "hardening.idl"
Hardening = pyorb.load_idl(IDL).Hardening
MARSHAL_ID = b"IDL:omg.org/CORBA/MARSHAL:1.0"


def serve(model: str) -> ServerProcess:
    return ServerProcess([sys.executable, "-m", "pyorb", "serve", f"{ROOT / 'tests/peers/hardening_servant.py'}:Target",
                          "--idl", str(IDL), "--key", "Target", "--model", model, "--stop-on-stdin-eof"])


@pytest.fixture(scope="module", params=["reactive", "thread_pool(4)"])
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    proc = serve(request.param)
    yield proc
    proc.stop()


def send_take(port: int, body: bytes, request_id: int = 1) -> bytes:
    """One take() request with a hand-made body on a fresh connection; the reply's bytes."""
    message = codec.encode(Request(request_id=request_id, response_flags=3, object_key=b"Target",
                                   operation="take", body=body))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(message)
        head = _read(sock, 12)
        assert head[:4] == b"GIOP" and head[7] == 1, head  # a Reply
        return head + _read(sock, struct.unpack("<I" if head[6] & 1 else ">I", head[8:12])[0])


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the server closed the connection instead of replying"
        data += chunk
    return data


def well_behaved(server: ServerProcess) -> None:
    with pyorb.BlockingClient() as client:
        target = client.resolve(server.ior, Hardening.Target)
        assert target.ping(42) == 42
        assert target.take(CORBA.Any(CORBA.TC_long, 5)).value() == 5


@pytest.mark.parametrize("attack", sorted(hostile.ATTACKS))
def test_hostile_any_gets_marshal_and_the_server_lives(server: ServerProcess, attack: str) -> None:
    well_behaved(server)
    reply = send_take(server.port, hostile.ATTACKS[attack]())
    assert MARSHAL_ID in reply, reply[:200]
    assert server.proc.poll() is None, server.stderr  # still running
    well_behaved(server)


def test_the_limits_are_the_configured_ones() -> None:
    codec_ = marshal.BodyCodec((layout.TV_ANY,))
    for body, limit in ((hostile.nested_anys(10), "max_nesting_depth"),
                        (hostile.empty_elements(1000), "max_empty_elements")):
        codec_.unpack(body, 0, True)  # within the defaults
        tight = pyorb.Config(**{limit: 5}).value_bounds()
        with pytest.raises(CORBA.MARSHAL):
            codec_.unpack(body, 0, True, bounds=tight)
    big_tc = hostile.nested_sequence_typecodes(20)
    with pytest.raises(CORBA.MARSHAL):
        codec_.unpack(big_tc, 0, True, bounds=layout.Bounds(max_typecode_size=64))


def test_plain_bodies_are_not_walked() -> None:
    # The walk is only for types that can nest without bound: the hot path stays as it was.
    assert not layout.needs_bounds((3, (18, 0), (19, 3, 0)))  # long, string, sequence<long>
    assert layout.needs_bounds((11,))  # any
    assert layout.needs_bounds((12,))  # TypeCode


def test_a_value_type_is_refused_not_sent_unscrubbed(server: ServerProcess) -> None:
    # omniORB leaves padding uninitialised and pyorb cannot walk a value to zero
    # it: the body is refused with MARSHAL in both directions, and nothing else is hurt.
    with pyorb.BlockingClient() as client:
        target = client.resolve(server.ior, Hardening.Target)
        with pytest.raises(CORBA.MARSHAL):
            target.make_point(1, 2)  # the server refuses to send its reply
        with pytest.raises(CORBA.MARSHAL):
            target.give_point(Hardening.Point(1, 2))  # the client refuses to send the request
    assert server.proc.poll() is None
    well_behaved(server)
