"""The blocking client against real servers: pyorb servers (in a loop thread
or a process) and an omniORBpy server; results, exceptions, forwards,
timeouts, lost and refused connections, limits, threads and gevent."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import BENCH_IDL, bench_idl
from pyorb.client.blocking import BlockingClient
from pyorb.config import Config
from pyorb.giop import codec
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.ior import IOR, build_ior
from pyorb.giop.messages import NEED_DATA, CloseConnection, MessageError, Request
from pyorb.testing import LoopThread
from tests import test_client
from tests.interop.conftest import OmniServer
from tests.interop.servants import Interop, TypesCoroutine
from tests.interop.test_pyorb_client import CASES, PyorbContext, expected_failures
from tests.peers import omni_client

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
Stock = test_client.Stock
Bench = bench_idl().Bench


class SlowQuoter(test_client.SlowQuoter):
    """test_client's quoter (replies after ``name`` ms); a name that is not
    a number is an Invalid_Stock_Symbol."""

    async def get_quote(self, name: str) -> int:
        if not name.isdigit():
            raise Stock.Invalid_Stock_Symbol()
        return await super().get_quote(name)


@pytest.fixture(scope="module")
def loop() -> Iterator[LoopThread]:
    with LoopThread() as runner:
        yield runner


class Served:
    """pyorb servers on the loop thread, closed by the fixture."""

    def __init__(self, loop: LoopThread) -> None:
        self.loop = loop
        self.servers: list[pyorb.Server] = []

    def start(self, **options: Any) -> pyorb.Server:
        server = pyorb.Server(**options)
        self.loop.run(server.start())
        self.servers.append(server)
        return server


@pytest.fixture
def served(loop: LoopThread) -> Iterator[Served]:
    holder = Served(loop)
    yield holder
    for server in holder.servers:
        loop.run(server.close())


@pytest.fixture
def types_server(served: Served) -> Iterator[pyorb.Server]:
    """A pyorb server of Interop::Types whose nodes are pyorb objects."""
    server = served.start()
    server.activate(TypesCoroutine(server), "Types")
    yield server


@pytest.fixture
def quoter(served: Served) -> tuple[pyorb.Server, SlowQuoter]:
    server = served.start()
    servant = SlowQuoter()
    server.activate(servant, "Slow")
    return server, servant


class Peer:
    """A server module (``python -m``) in a subprocess that prints its reference first; stopped by pid."""

    def __init__(self, module: str, *options: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *options],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.ref = self.proc.stdout.readline().strip()
        if not self.ref.startswith(("IOR:", "corbaloc:")):
            self.stop()
            raise RuntimeError(f"{module} did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def sink_peer(*options: str) -> Peer:
    """tests/peers/sink_peer.py: a pyorb Bench::Sink server."""
    return Peer("tests.peers.sink_peer", *options)


def free_port() -> int:
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- calls against a pyorb server -------------------------------------------


def test_results_user_exceptions_and_pseudo_operations(quoter: tuple[pyorb.Server, SlowQuoter]) -> None:
    server, _ = quoter
    with BlockingClient() as client:
        proxy = client.resolve(server.ior("Slow"), Stock.Quoter)
        assert proxy.get_quote("3") == 3
        with pytest.raises(Stock.Invalid_Stock_Symbol):
            proxy.get_quote("nope")
        assert proxy._is_a("IDL:Stock/Quoter:1.0") is True
        assert proxy._is_a("IDL:Other:1.0") is False
        assert proxy._non_existent() is False
        assert client.narrow(server.corbaloc("Slow"), Stock.Quoter).get_quote("1") == 1
        with pytest.raises(CORBA.BAD_PARAM):
            client.narrow(server.corbaloc("Slow"), Bench.Echo)
        with pytest.raises(CORBA.OBJECT_NOT_EXIST):
            client.resolve(server.corbaloc("NoSuchKey"), Stock.Quoter).get_quote("1")


def test_out_parameters_objrefs_and_system_exceptions(types_server: pyorb.Server) -> None:
    server = types_server
    with BlockingClient() as client:
        types = client.resolve(server.corbaloc("Types"), Interop.Types)
        assert types.directions(3, 4) == (7, 5, 6)  # a + b, b + 1, 2a
        node = types.make_node("n1")
        assert type(node).__name__ == "Node" and node.name() == "n1"
        assert types.node_name(node) == "n1"  # a blocking proxy as an argument
        with pytest.raises(Interop.Failure) as failure:
            types.raise_failure(9)
        assert (failure.value.code, failure.value.details) == (9, [1, 2, 3])
        with pytest.raises(CORBA.BAD_PARAM) as system:
            types.raise_system()
        assert system.value.minor == 42
        types.fire("one way")
        assert types.last_oneway() == "one way"


def test_location_forward_is_followed_and_a_loop_ends(served: Served, quoter: tuple[pyorb.Server, SlowQuoter]) -> None:
    real, servant = quoter
    forwarder = served.start()
    forwarder.adapter.forward("Moved", IOR.from_string(real.ior("Slow")))
    forwarder.adapter.forward("Loop", build_ior("IDL:Stock/Quoter:1.0", forwarder.host, forwarder.port, b"Loop"))
    with BlockingClient(Config(max_forwards=3)) as client:
        assert client.resolve(forwarder.corbaloc("Moved"), Stock.Quoter).get_quote("2") == 2
        assert servant.started == 1
        with pytest.raises(CORBA.TRANSIENT):
            client.resolve(forwarder.corbaloc("Loop"), Stock.Quoter).get_quote("1")


def test_timeout_cancels_and_the_connection_stays_usable(
    loop: LoopThread, quoter: tuple[pyorb.Server, SlowQuoter]
) -> None:
    server, servant = quoter
    with BlockingClient(Config(call_timeout=5.0)) as client:
        proxy = client.resolve(server.corbaloc("Slow"), Stock.Quoter)
        with pytest.raises(CORBA.TIMEOUT) as info:
            proxy.get_quote("3000", timeout=0.1)
        assert info.value.completed == CORBA.COMPLETED_MAYBE
        assert proxy.get_quote("1") == 1  # the next call reads past nothing stale
        assert len(server.connections) == 1
    loop.run(asyncio.sleep(0.05))
    assert servant.cancelled == 1  # the server got the CancelRequest


def test_threads_share_one_connection(quoter: tuple[pyorb.Server, SlowQuoter]) -> None:
    server, _ = quoter
    results: dict[int, list[int]] = {}
    with BlockingClient(Config(call_timeout=30.0)) as client:
        proxy = client.resolve(server.corbaloc("Slow"), Stock.Quoter)

        def work(n: int) -> None:
            results[n] = [proxy.get_quote(str((n + i) % 3)) for i in range(40)]

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(server.connections) == 1
    assert results == {n: [(n + i) % 3 for i in range(40)] for n in range(8)}


def test_message_size_limits(types_server: pyorb.Server) -> None:
    server = types_server
    with BlockingClient(Config(max_message_size=4096)) as client:
        types = client.resolve(server.corbaloc("Types"), Interop.Types)
        with pytest.raises(CORBA.MARSHAL) as sent:
            types.echo_string("x" * 5000)
        assert sent.value.completed == CORBA.COMPLETED_NO
        with pytest.raises(CORBA.COMM_FAILURE):  # the server answers more than we take
            types.nodes(400)
        assert types.echo_long(7) == 7  # a new connection


# -- connection failures -----------------------------------------------------


def test_refused_connection_raises_transient() -> None:
    with BlockingClient() as client:
        proxy = client.resolve(f"corbaloc::1.2@127.0.0.1:{free_port()}/Nobody", Stock.Quoter)
        with pytest.raises(CORBA.TRANSIENT) as info:
            proxy.get_quote("1")
        assert info.value.completed == CORBA.COMPLETED_NO


def test_server_killed_mid_call_raises_comm_failure() -> None:
    sink = sink_peer("--delay", "30")
    try:
        with BlockingClient() as client:
            proxy = client.resolve(sink.ref, Bench.Sink)
            threading.Timer(0.3, sink.proc.kill).start()
            with pytest.raises(CORBA.COMM_FAILURE) as info:
                proxy.work(1)
            assert info.value.completed == CORBA.COMPLETED_MAYBE
            sink.proc.wait(10)  # its listening socket may outlive the connection by a moment
            with pytest.raises(CORBA.TRANSIENT):  # and nobody listens any more
                proxy.work(1)
    finally:
        sink.stop()


def test_a_call_queued_on_a_lost_connection_uses_a_new_one(
    loop: LoopThread, quoter: tuple[pyorb.Server, SlowQuoter]
) -> None:
    server, _ = quoter
    queued: list[Any] = []

    def drop_connections() -> None:
        for conn in list(server.connections):
            loop.loop.call_soon_threadsafe(conn.abort)

    with BlockingClient(Config(call_timeout=30.0)) as client:
        proxy = client.resolve(server.corbaloc("Slow"), Stock.Quoter)
        second = threading.Thread(target=lambda: queued.append(proxy.get_quote("50")))
        threading.Timer(0.2, second.start).start()
        threading.Timer(0.5, drop_connections).start()
        with pytest.raises(CORBA.COMM_FAILURE) as info:
            proxy.get_quote("5000")
        assert info.value.completed == CORBA.COMPLETED_MAYBE
        second.join(10)
    # The queued call had sent nothing on the lost connection: it went out
    # on a new one and got its reply.
    assert queued == [50]


def one_shot_server(answer: bytes, hang_up: bool) -> tuple[int, threading.Thread, list[bytes]]:
    """A raw GIOP peer: reads one Request, writes ``answer`` (then stops
    writing if ``hang_up``), and keeps what it receives until EOF."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        with listener, listener.accept()[0] as conn:
            core = GIOPConnection(Role.SERVER)
            while not isinstance(event := core.next_event(), Request):
                assert event is NEED_DATA
                core.receive_data(conn.recv(65536))
            conn.sendall(answer)
            if hang_up:
                conn.shutdown(socket.SHUT_WR)
            conn.settimeout(10)
            while data := conn.recv(65536):
                received.append(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread, received


TRUNCATED = b"GIOP\x01\x02\x01\x01\x40\x00\x00\x00"  # a Reply header, no body


@pytest.mark.parametrize(
    ("answer", "hang_up", "error", "completed"),
    [
        (codec.encode(CloseConnection()), True, CORBA.TRANSIENT, CORBA.COMPLETED_NO),
        (codec.encode(MessageError()), True, CORBA.COMM_FAILURE, CORBA.COMPLETED_MAYBE),
        (b"GIOP\x01\x02\x01\x07" + bytes(4), False, CORBA.COMM_FAILURE, CORBA.COMPLETED_MAYBE),
        (TRUNCATED, True, CORBA.COMM_FAILURE, CORBA.COMPLETED_MAYBE),
        (TRUNCATED, False, CORBA.COMM_FAILURE, CORBA.COMPLETED_MAYBE),
    ],
    ids=["close-connection", "message-error", "bad-message-type", "truncated-then-eof", "stalled"],
)
def test_what_the_server_says_instead_of_a_reply(answer: bytes, hang_up: bool, error: Any, completed: Any) -> None:
    port, thread, received = one_shot_server(answer, hang_up)
    # No call timeout: the read timeout alone ends a stalled message.
    with BlockingClient(Config(read_timeout=0.3)) as client:
        proxy = client.resolve(f"corbaloc::1.2@127.0.0.1:{port}/X", Stock.Quoter)
        with pytest.raises(error) as info:
            proxy.get_quote("1")
        assert info.value.completed == completed
    thread.join(10)
    if answer[7] == 7:  # a protocol error is answered with a MessageError
        assert b"".join(received)[7] == 6


def test_a_closed_client_refuses_calls(quoter: tuple[pyorb.Server, SlowQuoter]) -> None:
    server, _ = quoter
    client = BlockingClient()
    proxy = client.resolve(server.corbaloc("Slow"), Stock.Quoter)
    assert proxy.get_quote("0") == 0
    client.close()
    with pytest.raises(CORBA.BAD_INV_ORDER):
        proxy.get_quote("0")


# -- an omniORBpy server -----------------------------------------------------


@pytest.fixture(scope="module")
def omni_server() -> Iterator[OmniServer]:
    server = OmniServer("--native-char", "UTF-8")
    yield server
    server.stop()


@pytest.mark.interop
@pytest.mark.parametrize(
    ("giop", "little_endian"), [((1, 2), True), ((1, 1), False), ((1, 0), True)], ids=["1.2-le", "1.1-be", "1.0-le"]
)
def test_every_interop_case_against_omniorb(
    omni_server: OmniServer, giop: tuple[int, int], little_endian: bool
) -> None:
    with BlockingClient(Config(giop_version=giop, little_endian=little_endian, call_timeout=30.0)) as client:
        proxy = client.resolve(omni_server.ior, Interop.Types)
        ctx = PyorbContext(target=proxy, raw=proxy, interop=Interop)
        results = [omni_client.run_case(ctx, name) for name in CASES]  # type: ignore[arg-type]
    failed = {r["case"]: r["detail"] for r in results if not r["ok"]}
    assert failed.keys() == expected_failures(giop, "UTF-8").keys(), failed


# -- gevent ------------------------------------------------------------------

GEVENT_SCRIPT = """
import sys, time
from gevent import monkey
monkey.patch_all()
import gevent
from pyorb.client.blocking import BlockingClient
Bench = __import__("pyorb").load_idl(sys.argv[2]).Bench
def call(token):
    with BlockingClient() as client:
        return client.resolve(sys.argv[1], Bench.Sink).work(token)
start = time.monotonic()
jobs = [gevent.spawn(call, n) for n in range(10)]
gevent.joinall(jobs, timeout=30)
print([j.value for j in jobs], time.monotonic() - start)
"""


def test_gevent_greenlets_overlap_their_calls() -> None:
    sink = sink_peer("--delay", "1.0")
    try:
        done = subprocess.run(
            [sys.executable, "-c", GEVENT_SCRIPT, sink.ref, str(BENCH_IDL)],
            capture_output=True, text=True, timeout=60, check=False,
        )
    finally:
        sink.stop()
    assert done.returncode == 0, done.stderr
    values, elapsed = done.stdout.rsplit(" ", 1)
    assert values == str(list(range(10)))
    # Ten 1 s calls one after the other would take 10 s; overlapped, about 1 s plus start-up.
    assert float(elapsed) < 5.0, elapsed


def test_importing_the_blocking_client_imports_neither_gevent_nor_locust() -> None:
    code = "import sys, pyorb.client.blocking; print(sorted({'gevent', 'locust'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "[]", done.stderr
