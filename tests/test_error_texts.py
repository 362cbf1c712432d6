"""What each CORBA system exception a caller gets says, from the async and the blocking client.

Every case runs through both clients against a real server on loopback (a
pyorb server on its own loop thread, or a raw socket that plays a broken
server) and asserts the words a user needs in ``str(exc)``: the operation,
the endpoint, the object key, the limit that was passed, the cause, and
the completion status; ``repr`` stays omniORBpy's.  The ExceptionDetailMessage
service context (IOP id 14) is checked byte for byte and end to end.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from typing import Any, Callable, Iterator

import omniORB
import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.giop.cdr import CDRWriter
from pyorb.giop.detail import (
    MAX_DETAIL_CHARS,
    SC_EXCEPTION_DETAIL_MESSAGE,
    exception_detail,
    exception_detail_context,
    parse_exception_detail,
)
from pyorb.giop.errors import ProtocolError
from pyorb.giop.ior import IOR, GroupComponent, SSLComponent, build_ior, group_ior
from pyorb.giop.messages import ServiceContext
from pyorb.testing.certs import TestPKI
from tests.interop.servants import BenchEcho, Interop

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench


class Echo(BenchEcho):
    async def ping(self, stamp: int) -> int:  # type: ignore[override]
        if stamp == 7:
            raise KeyError("the password is hunter2")
        if stamp == 8:
            await asyncio.sleep(5)
        return stamp


Call = Callable[[Any], Any]


def both(ref: str, interface: type, call: Call, **client: Any) -> list[CORBA.SystemException]:
    """The system exception ``call(proxy)`` raises through the async client and through the blocking client."""

    async def through_async() -> CORBA.SystemException:
        async with pyorb.Client(**client) as c:
            with pytest.raises(CORBA.SystemException) as failed:
                await call(c.resolve(ref, interface))
            return failed.value

    caught = [asyncio.run(through_async())]
    with pyorb.BlockingClient(**client) as b:
        with pytest.raises(CORBA.SystemException) as failed:
            call(b.resolve(ref, interface))
    caught.append(failed.value)
    return caught


def expect(exc: CORBA.SystemException, kind: type, minor: int, completed: Any) -> str:
    """``str(exc)``, once ``exc`` is of ``kind`` with omniORB's ``minor`` and ``completed``."""
    assert isinstance(exc, kind) and (exc.minor, exc.completed) == (minor, completed), repr(exc)
    return str(exc)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def echo(pyorb_server: Any) -> Any:
    return pyorb_server(Echo(), key="Echo")


def test_a_call_past_its_timeout_names_the_call_the_endpoint_and_the_limit(echo: Any) -> None:
    for exc in both(echo.ior, Bench.Echo, lambda p: p.ping(8, timeout=0.3)):
        assert isinstance(exc, CORBA.TIMEOUT) and exc.completed == CORBA.COMPLETED_MAYBE
        assert exc.minor == omniORB.TIMEOUT_CallTimedOutOnClient
        assert f"no reply to ping from 127.0.0.1:{echo.port} within 0.3 s" in str(exc)
        assert "TIMEOUT_CallTimedOutOnClient" in repr(exc) and repr(exc) == str(exc)  # omniORBpy's form


@pytest.fixture
def dying_server() -> Iterator[int]:
    """A raw server that reads each request and closes the connection unanswered, as a killed server does."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()
        thread.join(5)


def test_a_server_lost_during_a_call_names_the_call_and_the_endpoint(dying_server: int) -> None:
    ior = build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", dying_server, b"Echo").to_string()
    for exc in both(ior, Bench.Echo, lambda p: p.ping(1, timeout=10)):
        text = expect(exc, CORBA.COMM_FAILURE, omniORB.COMM_FAILURE_WaitingForReply, CORBA.COMPLETED_MAYBE)
        assert f"connection to 127.0.0.1:{dying_server} broke while ping awaited its reply" in text
        assert "the server may have run the call" in text


def test_an_unknown_object_key_names_the_key_and_the_server_says_so_too(echo: Any) -> None:
    ior = build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", echo.port, b"Gone").to_string()
    for exc in both(ior, Bench.Echo, lambda p: p.ping(1)):
        text = expect(exc, CORBA.OBJECT_NOT_EXIST, omniORB.OBJECT_NOT_EXIST_NoMatch, CORBA.COMPLETED_NO)
        assert f"ping on 127.0.0.1:{echo.port} (key 'Gone'): no object with this key" in text
        assert "the server says: no object with key 'Gone' on this server" in text


def test_narrow_to_the_wrong_interface_names_both_type_ids(echo: Any) -> None:
    async def narrow() -> CORBA.SystemException:
        async with pyorb.Client() as client:
            with pytest.raises(CORBA.BAD_PARAM) as failed:
                await client.narrow(echo.ior, Bench.Sink)
            return failed.value

    with pyorb.BlockingClient() as blocking:
        with pytest.raises(CORBA.BAD_PARAM) as failed:
            blocking.narrow(echo.ior, Bench.Sink)
    for exc in (asyncio.run(narrow()), failed.value):
        assert exc.completed == CORBA.COMPLETED_NO
        text = str(exc)
        assert f"the object at 127.0.0.1:{echo.port} (key 'Echo') does not implement IDL:Bench/Sink:1.0" in text
        assert "its reference names IDL:Bench/Echo:1.0" in text


def test_a_proxy_of_the_wrong_interface_names_the_operation_and_both_types(echo: Any) -> None:
    for exc in both(echo.ior, Bench.Sink, lambda p: p.work(1)):
        text = expect(exc, CORBA.BAD_OPERATION, omniORB.BAD_OPERATION_UnRecognisedOperationName, CORBA.COMPLETED_NO)
        assert f"work on 127.0.0.1:{echo.port} (key 'Echo')" in text
        assert "does not implement this operation of IDL:Bench/Sink:1.0" in text
        assert "its reference names IDL:Bench/Echo:1.0" in text
        assert "the server says: the object is a IDL:Bench/Echo:1.0, which has no operation work" in text


def test_an_undeclared_servant_exception_is_unknown_python_exception_without_its_message(echo: Any) -> None:
    for exc in both(echo.ior, Bench.Echo, lambda p: p.ping(7)):
        assert isinstance(exc, CORBA.UNKNOWN) and exc.completed == CORBA.COMPLETED_MAYBE
        assert exc.minor == omniORB.UNKNOWN_PythonException
        assert "omniORB.UNKNOWN_PythonException" in repr(exc)
        text = str(exc)
        assert f"ping on 127.0.0.1:{echo.port} (key 'Echo')" in text
        assert "ping raised a Python KeyError, which its IDL does not declare" in text
        assert "hunter2" not in text and "Traceback" not in text


def test_a_wrong_argument_names_the_parameter_from_0_and_the_member_inside(echo: Any) -> None:
    types = echo  # the arguments fail on the client: nothing reaches the server
    bad = Interop.Point(1.0, "two", "p")
    for exc in both(types.ior, Interop.Types, lambda p: p.echo_point(bad)):
        assert isinstance(exc, CORBA.BAD_PARAM) and exc.completed == CORBA.COMPLETED_NO
        assert exc.minor == omniORB.BAD_PARAM_WrongPythonType
        assert ("Operation 'echo_point' parameter 0, member Point.y: Expecting double, got <class 'str'>"
                in str(exc))
    points = [Interop.Point(0.0, 0.0, "a"), bad]
    for exc in both(types.ior, Interop.Types, lambda p: p.echo_points(points)):
        assert "Operation 'echo_points' parameter 0, item 1, member Point.y: Expecting double" in str(exc)


def test_a_refused_connection_says_connection_refused_in_the_systems_words() -> None:
    port = free_port()
    ior = build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", port, b"Echo").to_string()
    for exc in both(ior, Bench.Echo, lambda p: p.ping(1)):
        assert isinstance(exc, CORBA.TRANSIENT) and exc.completed == CORBA.COMPLETED_NO
        assert exc.minor == omniORB.TRANSIENT_ConnectFailed
        assert f"cannot connect to 127.0.0.1:{port}: Connection refused" in str(exc)
        assert "Connect call failed" not in str(exc)


def test_every_member_of_a_group_down_names_the_members_tried() -> None:
    ports = [free_port() for _ in range(3)]
    members = [build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", p, b"Echo", code_sets=None) for p in ports]
    ior = group_ior(members, GroupComponent("errtext", 1, 1)).to_string()

    async def through_async() -> CORBA.SystemException:
        async with pyorb.Client() as client:
            with pytest.raises(CORBA.TRANSIENT) as failed:
                await client.resolve(ior, Bench.Echo).ping(1)
            return failed.value

    exc = asyncio.run(through_async())
    assert exc.completed == CORBA.COMPLETED_NO
    text = str(exc)
    assert "no member of the object group could take the call to ping (3 tried:" in text
    assert all(f"127.0.0.1:{p}" in text for p in ports)


def test_tls_false_against_a_tls_only_reference_names_the_tls_port(pyorb_server: Any, pyorb_pki: TestPKI) -> None:
    running = pyorb_server(Echo(), key="Echo", tls=pyorb_pki.server_context())
    tls_port = running.server.tls.port
    for exc in both(running.ior, Bench.Echo, lambda p: p.ping(1), tls=False):
        assert isinstance(exc, CORBA.INV_OBJREF) and exc.completed == CORBA.COMPLETED_NO
        assert "cannot call ping through this reference" in str(exc)
        assert f"reachable only over TLS on TLS port {tls_port}, and this client was made with tls=False" in str(exc)


@pytest.mark.parametrize("who", ["no certificate", "untrusted certificate"])
def test_a_refused_tls_handshake_is_completed_no_and_names_the_tls_port(
    pyorb_server: Any, pyorb_pki: TestPKI, who: str
) -> None:
    running = pyorb_server(Echo(), key="Echo", tls=pyorb_pki.server_context(require_client_cert=True))
    tls_port = running.server.tls.port
    assert IOR.from_string(running.ior).iiop.port == 0  # type: ignore[union-attr]
    identity = None if who == "no certificate" else pyorb_pki.rogue_client
    context = pyorb_pki.client_context(identity=identity)
    for exc in both(running.ior, Bench.Echo, lambda p: p.ping(1, timeout=10), tls=context):
        text = expect(exc, CORBA.TRANSIENT, omniORB.TRANSIENT_ConnectFailed, CORBA.COMPLETED_NO)
        assert f"cannot connect to TLS 127.0.0.1:{tls_port}: the server refused the TLS handshake" in text
        assert ":0" not in text.replace(f":{tls_port}", "")


def test_limits_are_named_in_the_text(echo: Any) -> None:
    config = pyorb.Config(max_message_size=4096)
    for exc in both(echo.ior, Interop.Types, lambda p: p.echo_blob(b"x" * 10000), config=config):
        assert isinstance(exc, CORBA.MARSHAL) and exc.completed == CORBA.COMPLETED_NO
        assert "over the 4096-byte limit (Config.max_message_size)" in str(exc)
        assert "echo_blob" in str(exc)


# -- ExceptionDetailMessage ------------------------------------------------------


def test_exception_detail_is_an_encapsulated_utf16_wstring() -> None:
    context = exception_detail_context("no object ☃", little_endian=False)
    assert context.context_id == SC_EXCEPTION_DETAIL_MESSAGE == 14
    text = "no object ☃".encode("utf-16-be")
    assert context.data == b"\x00\x00\x00\x00" + len(text).to_bytes(4, "big") + text  # the length 4-aligned
    little = exception_detail_context("abc")
    assert little.data == b"\x01\x00\x00\x00" + (6).to_bytes(4, "little") + "abc".encode("utf-16-be")
    for data in (context.data, little.data):
        assert parse_exception_detail(data) in ("no object ☃", "abc")


def test_exception_detail_reads_what_other_orbs_write_and_refuses_garbage() -> None:
    # A byte-order mark (omniORB's way) and a NUL at the end are honoured.
    w = CDRWriter(True)
    w.octet(1)
    body = b"\xff\xfe" + "why\0".encode("utf-16-le")
    w.ulong(len(body))
    w.raw(body)
    assert parse_exception_detail(w.getvalue()) == "why"
    assert parse_exception_detail(exception_detail_context("a\nb\x1b[31m").data) == "a b [31m"
    assert len(parse_exception_detail(exception_detail_context("x" * 5000).data)) == MAX_DETAIL_CHARS
    for garbage in (b"", b"\x02", b"\x01\x00\x00\x00\x03\x00\x00\x00abc", b"\x01\x00\x00\x00\xff\xff\x00\x00"):
        with pytest.raises(ProtocolError):
            parse_exception_detail(garbage)
    assert exception_detail([ServiceContext(14, b"\x05")]) is None  # advice: a bad one is ignored
    assert exception_detail([ServiceContext(1, b""), exception_detail_context("here")]) == "here"


def test_a_peers_exception_detail_reaches_the_callers_text(echo: Any) -> None:
    """A raw server that answers like JacORB: a system exception with its explanation."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        from pyorb.giop.connection import GIOPConnection, Role
        from pyorb.giop.messages import NEED_DATA, ReplyStatus, Request
        from pyorb.marshal.exceptions import pack_system_exception

        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                core = GIOPConnection(Role.SERVER)
                while True:
                    event = core.next_event()
                    if event is NEED_DATA:
                        core.receive_data(conn.recv(65536))
                        continue
                    assert isinstance(event, Request)
                    conn.sendall(core.reply(
                        event.request_id, ReplyStatus.SYSTEM_EXCEPTION, event.version, True,
                        lambda a: pack_system_exception(CORBA.NO_RESOURCES(0, CORBA.COMPLETED_NO), a, True),
                        (exception_detail_context("queue full: 100 requests waiting"),)))
                    break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        ior = build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", port, b"Far").to_string()
        for exc in both(ior, Bench.Echo, lambda p: p.ping(1, timeout=10)):
            assert isinstance(exc, CORBA.NO_RESOURCES) and exc.completed == CORBA.COMPLETED_NO
            assert f"ping on 127.0.0.1:{port} (key 'Far')" in str(exc)
            assert "the server says: queue full: 100 requests waiting" in str(exc)
    finally:
        listener.close()
        thread.join(5)


@pytest.fixture
def alerting_tls_server(pyorb_pki: TestPKI) -> Iterator[str]:
    """A TLS server on the standard library's blocking sockets, which (unlike asyncio's)
    sends the handshake's alert: for a client without a certificate, certificate_required.

    After the alert it stops writing and reads what the client sends until the client
    closes.  A server that closes at once turns the client's first request, sent as soon
    as its side of the TLS 1.3 handshake is done, into a reset, which the asyncio client
    can meet before it has read the alert (2 to 3 connections in 100 here): it then
    names no alert, only the likely causes, which is what this test does not check."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)
    context = pyorb_pki.server_context(require_client_cert=True)

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn, context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False) as tls:
                try:
                    tls.do_handshake()
                    tls.recv(65536)
                except (ssl.SSLError, OSError):  # refused: OpenSSL has written the alert to the socket
                    try:
                        tls.shutdown(socket.SHUT_WR)  # drops the TLS layer: the reads below are plain
                        tls.settimeout(10)
                        while tls.recv(65536):
                            pass
                    except OSError:
                        pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = int(listener.getsockname()[1])
    try:
        yield build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", 0, b"Echo",
                        ssl=SSLComponent(0x7E, 0x66, port)).to_string()
    finally:
        listener.close()
        thread.join(5)


def test_a_tls_alert_asking_for_a_certificate_is_named(alerting_tls_server: str, pyorb_pki: TestPKI) -> None:
    port = IOR.from_string(alerting_tls_server).iiop.ssl.port  # type: ignore[union-attr]
    for exc in both(alerting_tls_server, Bench.Echo, lambda p: p.ping(1, timeout=10), tls=pyorb_pki.client_context()):
        text = expect(exc, CORBA.TRANSIENT, omniORB.TRANSIENT_ConnectFailed, CORBA.COMPLETED_NO)
        assert (f"cannot connect to TLS 127.0.0.1:{port}: the server refused the TLS handshake "
                "(it requires a client certificate, and this client sent none)") in text


def test_calls_beyond_max_pending_calls_name_the_limit(echo: Any) -> None:
    async def run() -> CORBA.SystemException:
        async with pyorb.Client(pyorb.Config(max_pending_calls=1)) as client:
            proxy = client.resolve(echo.ior, Bench.Echo)
            assert await proxy.ping(1) == 1  # the connection is open
            slow = proxy.ping(8, timeout=10)
            with pytest.raises(CORBA.IMP_LIMIT) as failed:
                await proxy.ping(2)
            slow.cancel()
            return failed.value

    text = str(asyncio.run(run()))
    assert (f"ping was not sent: the connection to 127.0.0.1:{echo.port} already has 1 calls awaiting replies "
            "(Config.max_pending_calls)") in text


def test_a_call_pending_when_its_client_closes_says_the_client_closed_it(echo: Any) -> None:
    async def run() -> CORBA.SystemException:
        client = pyorb.Client()
        proxy = client.resolve(echo.ior, Bench.Echo)
        assert await proxy.ping(1) == 1  # the connection is open: the next call goes out at once
        slow = proxy.ping(8, timeout=10)
        await client.close()
        with pytest.raises(CORBA.COMM_FAILURE) as failed:
            await slow
        return failed.value

    text = expect(asyncio.run(run()), CORBA.COMM_FAILURE, omniORB.COMM_FAILURE_WaitingForReply,
                  CORBA.COMPLETED_MAYBE)
    assert f"the connection to 127.0.0.1:{echo.port} broke while ping awaited its reply (this client closed it)" in text
