"""Bidirectional GIOP between pyorb peers: callbacks over the client's connection.

The callback server publishes an address nobody listens on, so the server
cannot reach it on a connection of its own: a callback either goes over
the connection the client opened, or fails with TRANSIENT.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.giop.bidir import BI_DIR_IIOP, bidir_context, listen_points, parse_listen_points
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.errors import ProtocolError
from pyorb.giop.ior import IOR
from pyorb.testing.certs import TestPKI, make_pki
from pyorb.giop.messages import GIOP_1_0, GIOP_1_2, NEED_DATA, MessageError, Reply, ReplyStatus, Request, \
    ServiceContext

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
IDL = pyorb.load_idl(ROOT / "idl" / "bidir.idl")
BiDir, BiDir__POA = IDL.BiDir, IDL.BiDir__POA


class Registry(BiDir__POA.Registry):
    def __init__(self, timeout: float = 0.5) -> None:
        self.kept: Any = None
        self.outcomes: list[str] = []
        self.texts: list[str] = []
        self.timeout = timeout

    async def call_back(self, listener: Any, text: str) -> str:
        return str(await listener.notify(text))

    async def subscribe(self, listener: Any) -> None:
        self.kept = listener

    async def call_kept(self, text: str) -> str:
        try:
            return str(await self.kept.notify(text, timeout=self.timeout))
        except CORBA.SystemException as exc:
            self.outcomes.append(type(exc).__name__)
            self.texts.append(str(exc._info))
            raise


class Listener(BiDir__POA.Listener):
    def __init__(self, delay: float = 0.0) -> None:
        self.heard: list[str] = []
        self.delay = delay
        self.cancelled = 0

    async def notify(self, text: str) -> str:
        self.heard.append(text)
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return f"heard {text}"


async def until(condition: Callable[[], object], what: str) -> None:
    """Wait (up to 10 s: a loaded machine is slow) until ``condition()`` holds."""
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"still not {what} after 10 s")


async def pending_callback(server: pyorb.Server, client: pyorb.Client, callbacks: pyorb.Server,
                           servant: Registry, slow: Listener) -> asyncio.Future[Any]:
    """The client's call_kept, waiting for its callback to the ``slow`` listener, which has started."""
    reg = await registry(server, client, servant)
    await reg.subscribe(listener_ref(callbacks, client, slow))
    pending = asyncio.ensure_future(reg.call_kept("never"))
    await until(lambda: slow.heard == ["never"], "called back")
    return pending


async def closing_with_a_callback_pending(client: pyorb.Client, callbacks: pyorb.Server, servant: Registry,
                                          slow: Listener, grace: float) -> asyncio.Future[Any]:
    """The client's call_kept, waiting for its callback to ``slow``, once a server closed with ``grace``."""
    server = pyorb.Server(bidirectional=True)
    await server.start()
    try:
        return await pending_callback(server, client, callbacks, servant, slow)
    finally:
        await server.close(grace=grace)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture
async def callbacks() -> AsyncIterator[pyorb.Server]:
    """The client's callback server, published at an address the server cannot connect to."""
    async with pyorb.Server(publish=f"127.0.0.1:{closed_port()}") as server:
        yield server


async def registry(server: pyorb.Server, client: pyorb.Client, servant: Registry | None = None) -> Any:
    server.activate(servant or Registry(), "Registry")
    return client.resolve(server.ior("Registry"), BiDir.Registry)


def listener_ref(callbacks: pyorb.Server, client: pyorb.Client, servant: Listener) -> Any:
    callbacks.activate(servant, "Listener")
    return client.resolve(callbacks.ior("Listener"), BiDir.Listener)


@pytest.mark.asyncio
async def test_a_callback_goes_over_the_connection_the_client_opened(callbacks: pyorb.Server) -> None:
    heard = Listener()
    async with pyorb.Server(bidirectional=True) as server, pyorb.Client(bidirectional=callbacks) as client:
        reg = await registry(server, client)
        listener = listener_ref(callbacks, client, heard)
        assert await reg.call_back(listener, "one") == "heard one"
        assert await reg.call_back(listener, "two") == "heard two"
        assert heard.heard == ["one", "two"]
        assert len(server.connections) == 1  # the client's only: the callbacks opened none
        assert callbacks.connections == set()  # and nothing connected to the callback server


@pytest.mark.asyncio
@pytest.mark.parametrize(("offers", "accepts"), [(False, True), (True, False)],
                         ids=["the client does not offer", "the server does not accept"])
async def test_unless_both_sides_agree_the_same_callback_is_transient(
        callbacks: pyorb.Server, offers: bool, accepts: bool) -> None:
    heard = Listener()
    async with pyorb.Server(bidirectional=accepts) as server, \
            pyorb.Client(bidirectional=callbacks if offers else None) as client:
        reg = await registry(server, client)
        listener = listener_ref(callbacks, client, heard)
        with pytest.raises(CORBA.TRANSIENT):
            await reg.call_back(listener, "one")
        assert heard.heard == []


@pytest.mark.asyncio
async def test_callbacks_time_out_and_are_cancelled_at_the_client(callbacks: pyorb.Server) -> None:
    slow = Listener(delay=30.0)
    servant = Registry()
    async with pyorb.Server(bidirectional=True) as server, pyorb.Client(bidirectional=callbacks) as client:
        reg = await registry(server, client, servant)
        await reg.subscribe(listener_ref(callbacks, client, slow))
        with pytest.raises(CORBA.TIMEOUT):
            await reg.call_kept("late")
        await until(lambda: slow.cancelled, "cancelled")  # the CancelRequest reached the listener's task
        assert slow.cancelled == 1
        slow.delay = 0.0
        assert await reg.call_kept("again") == "heard again"  # the connection still serves both ways


@pytest.mark.asyncio
async def test_a_client_closing_fails_the_servers_pending_callback(callbacks: pyorb.Server) -> None:
    slow = Listener(delay=30.0)
    servant = Registry(timeout=30.0)
    async with pyorb.Server(bidirectional=True) as server:
        async with pyorb.Client(bidirectional=callbacks) as client:
            pending = await pending_callback(server, client, callbacks, servant, slow)
        with pytest.raises(CORBA.SystemException):
            await pending
        await until(lambda: servant.outcomes, "failed")
        assert servant.outcomes == ["COMM_FAILURE"]  # sent, then the connection was lost: completed MAYBE


@pytest.mark.asyncio
async def test_the_servers_failed_callback_says_the_client_that_opened_the_connection_closed_it_and_may_have_run_it(
        callbacks: pyorb.Server) -> None:
    servant = Registry(timeout=30.0)
    async with pyorb.Server(bidirectional=True) as server:
        async with pyorb.Client(bidirectional=callbacks) as client:
            pending = await pending_callback(server, client, callbacks, servant, Listener(delay=30.0))
        with pytest.raises(CORBA.SystemException):
            await pending
        await until(lambda: servant.texts, "failed")
    [text] = servant.texts
    assert "(the client that opened it closed it); the client that opened the connection may have run the call" \
        in text, text
    assert "the server" not in text


@pytest.mark.asyncio
async def test_the_idle_sweeper_keeps_a_connection_whose_callback_awaits_its_reply(callbacks: pyorb.Server) -> None:
    """The connection offered for callbacks carries nothing from its client while the callback runs:
    idle as it looks, its own call awaiting a reply keeps it open."""
    servant = Registry(timeout=30.0)
    slow = Listener(delay=2.0)  # many idle timeouts and sweeps long
    config = pyorb.Config(idle_timeout=0.2)
    async with pyorb.Server(bidirectional=True, config=config) as server, \
            pyorb.Client(bidirectional=callbacks) as offering, pyorb.Client() as other:
        await (await registry(server, offering, servant)).subscribe(listener_ref(callbacks, offering, slow))
        called = other.resolve(server.ior("Registry"), BiDir.Registry)
        assert await called.call_kept("late") == "heard late"
        assert servant.outcomes == []
        await until(lambda: not server.connections, "closed once idle")  # the sweeper still closes idle ones


@pytest.mark.asyncio
async def test_request_ids_keep_their_parity_in_each_direction(callbacks: pyorb.Server) -> None:
    async with pyorb.Server(bidirectional=True) as server, pyorb.Client(bidirectional=callbacks) as client:
        reg = await registry(server, client)
        listener = listener_ref(callbacks, client, Listener())
        for n in range(3):
            await reg.call_back(listener, str(n))
        (server_side,) = server.connections
        (client_side,) = [c for c in client._conns.values()]
        assert client_side.writer._next_id == 2 + 2 * 3  # even: 2, 4, 6
        assert server_side.writer._next_id == 1 + 2 * 3  # odd: 1, 3, 5


@pytest.mark.asyncio
async def test_a_second_offer_of_the_same_listen_point_takes_no_calls_from_the_first() -> None:
    port = closed_port()
    first, second = Listener(), Listener()
    async with pyorb.Server(bidirectional=True) as server, \
            pyorb.Server(publish=f"127.0.0.1:{port}") as callbacks_a, \
            pyorb.Server(publish=f"127.0.0.1:{port}") as callbacks_b, \
            pyorb.Client(bidirectional=callbacks_a) as client_a, \
            pyorb.Client(bidirectional=callbacks_b) as client_b:
        servant = Registry()
        reg_a = await registry(server, client_a, servant)
        reg_b = client_b.resolve(server.ior("Registry"), BiDir.Registry)
        await reg_a.subscribe(listener_ref(callbacks_a, client_a, first))
        callbacks_b.activate(second, "Listener")  # the same key, behind the same claimed address
        assert await reg_b.call_kept("b asks") == "heard b asks"  # b's offer came second
        assert (first.heard, second.heard) == (["b asks"], [])


def raw_request(key: bytes, contexts: tuple[ServiceContext, ...], version: Any = GIOP_1_2) -> bytes:
    return GIOPConnection(Role.CLIENT).send(Request(4, 3, key, "_non_existent", b"", contexts, version, True))


async def raw_call(server: pyorb.Server, data: bytes) -> Reply:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(data)
        core = GIOPConnection(Role.CLIENT)
        while True:
            event = core.next_event()
            if event is NEED_DATA:
                chunk = await asyncio.wait_for(reader.read(65536), 10)
                assert chunk, "the server closed the connection"
                core.receive_data(chunk)
                continue
            assert isinstance(event, Reply)
            return event
    finally:
        writer.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("data", [b"", b"\x07", b"\x01\x00\x00\x00\xff\xff\xff\xff",
                                  b"\x01\x00\x00\x00" + (1).to_bytes(4, "little") + (0).to_bytes(4, "little")])
async def test_a_malformed_offer_is_ignored_and_logged_and_the_request_runs(
        caplog: pytest.LogCaptureFixture, data: bytes) -> None:
    caplog.set_level(logging.WARNING, logger="pyorb.bidir")
    async with pyorb.Server(bidirectional=True) as server:
        server.activate(Registry(), "Registry")
        reply = await raw_call(server, raw_request(b"Registry", (ServiceContext(BI_DIR_IIOP, data),)))
        assert reply.reply_status == ReplyStatus.NO_EXCEPTION
        assert "malformed BI_DIR_IIOP" in caplog.text
        (conn,) = server.connections
        assert conn.listen_points == ()


@pytest.mark.asyncio
async def test_an_offer_in_a_giop_1_0_request_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pyorb.bidir")
    async with pyorb.Server(bidirectional=True) as server:
        server.activate(Registry(), "Registry")
        offer = bidir_context([("127.0.0.1", 9)])
        reply = await raw_call(server, raw_request(b"Registry", (offer,), GIOP_1_0))
        assert reply.reply_status == ReplyStatus.NO_EXCEPTION
        assert "needs GIOP 1.2" in caplog.text
        (conn,) = server.connections
        assert conn.listen_points == () and not conn.core.bidirectional


@pytest.mark.asyncio
async def test_a_well_formed_offer_is_taken(caplog: pytest.LogCaptureFixture) -> None:
    async with pyorb.Server(bidirectional=True) as server:
        server.activate(Registry(), "Registry")
        offer = bidir_context([("10.0.0.1", 2809), ("callbacks.example", 1)])
        reply = await raw_call(server, raw_request(b"Registry", (offer,)))
        assert reply.reply_status == ReplyStatus.NO_EXCEPTION
        (conn,) = server.connections
        assert [(p.host, p.port) for p in conn.listen_points] == [("10.0.0.1", 2809), ("callbacks.example", 1)]
        assert conn.core.bidirectional


@pytest.mark.parametrize("little_endian", [True, False])
def test_listen_points_round_trip(little_endian: bool) -> None:
    context = bidir_context([("127.0.0.1", 2809), ("::1", 65535)], little_endian)
    assert context.context_id == BI_DIR_IIOP == 5
    points = listen_points([ServiceContext(1, b"\x01"), context])
    assert points is not None
    assert [(p.host, p.port) for p in points] == [("127.0.0.1", 2809), ("::1", 65535)]
    assert listen_points([ServiceContext(1, b"\x01")]) is None


@pytest.mark.parametrize("data", [b"", b"\x02\x00\x00\x00", b"\x01\x00\x00\x00\x11\x00\x00\x00" + b"\x00" * 200,
                                  b"\x01\x00\x00\x00\xff\xff\xff\x00",
                                  b"\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00",
                                  bidir_context([("h", 1)]).data[:-1]])
def test_a_malformed_context_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="BI_DIR_IIOP|truncated|string"):
        parse_listen_points(data)


def test_a_listen_point_needs_a_port() -> None:
    with pytest.raises(ValueError, match="1..65535"):
        bidir_context([("127.0.0.1", 0)])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPKI:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.mark.asyncio
@pytest.mark.parametrize("certified", [True, False])
async def test_over_tls_only_a_verified_peers_connection_carries_callbacks(
        pki: TestPKI, callbacks: pyorb.Server, certified: bool, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pyorb.bidir")
    heard = Listener()
    identity = pki.client if certified else None
    async with pyorb.Server(tls=pki.server_context(), bidirectional=True) as server, \
            pyorb.Client(tls=pki.client_context(identity=identity), bidirectional=callbacks) as client:
        reg = await registry(server, client)
        listener = listener_ref(callbacks, client, heard)
        if certified:
            assert await reg.call_back(listener, "one") == "heard one"
        else:
            with pytest.raises(CORBA.TRANSIENT):
                await reg.call_back(listener, "one")
            assert "only a peer with a verified certificate" in caplog.text
        assert heard.heard == (["one"] if certified else [])


@pytest.mark.asyncio
async def test_fragmented_requests_and_replies_flow_both_ways(callbacks: pyorb.Server) -> None:
    config = pyorb.Config(max_fragment_size=1024)
    text = "x" * 200_000 + "ü"
    heard = Listener()
    async with pyorb.Server(config=config, bidirectional=True) as server, \
            pyorb.Client(config, bidirectional=callbacks) as client:
        reg = await registry(server, client)
        listener = listener_ref(callbacks, client, heard)
        calls = [reg.call_back(listener, f"{n}{text}") for n in range(4)]
        assert await asyncio.gather(*calls) == [f"heard {n}{text}" for n in range(4)]


@pytest.mark.asyncio
async def test_a_server_closing_with_a_callback_pending_fails_the_clients_call(callbacks: pyorb.Server) -> None:
    slow = Listener(delay=30.0)
    servant = Registry(timeout=30.0)
    async with pyorb.Client(bidirectional=callbacks) as client:
        pending = await closing_with_a_callback_pending(client, callbacks, servant, slow, grace=0.5)
        with pytest.raises((CORBA.COMM_FAILURE, CORBA.TRANSIENT)) as raised:
            await asyncio.wait_for(pending, 10)
        assert raised.value.completed in (CORBA.COMPLETED_MAYBE, CORBA.COMPLETED_NO)


@pytest.mark.asyncio
async def test_a_reply_sent_to_an_accepting_server_before_any_offer_breaks_the_connection() -> None:
    async with pyorb.Server(bidirectional=True) as server:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        try:
            writer.write(GIOPConnection(Role.SERVER).send(Reply(1, ReplyStatus.NO_EXCEPTION)))
            core = GIOPConnection(Role.CLIENT)
            events = []
            while True:
                chunk = await asyncio.wait_for(reader.read(65536), 10)
                if not chunk:
                    break
                core.receive_data(chunk)
                while (event := core.next_event()) is not NEED_DATA:
                    events.append(type(event).__name__)
            assert events == ["MessageError"]
        finally:
            writer.close()


@pytest.mark.asyncio
async def test_a_server_closing_with_grace_lets_a_pending_callback_answer_its_clients_call(
        callbacks: pyorb.Server) -> None:
    """The call in flight waits for its callback's reply: the drain must keep reading it."""
    slow = Listener(delay=0.5)
    servant = Registry(timeout=30.0)
    async with pyorb.Client(bidirectional=callbacks) as client:
        pending = await closing_with_a_callback_pending(client, callbacks, servant, slow, grace=30.0)
        assert pending.done()  # close returned once the connection had answered it, well before the grace
        assert pending.result() == "heard never"
        assert servant.outcomes == []


@pytest.mark.asyncio
async def test_a_server_closing_with_grace_waits_for_a_callback_no_request_awaits(callbacks: pyorb.Server) -> None:
    """A callback the server made on its own (no request of the client in flight) gets the grace too."""
    slow = Listener(delay=0.5)
    servant = Registry()
    async with pyorb.Client(bidirectional=callbacks) as client:
        server = pyorb.Server(bidirectional=True)
        await server.start()
        try:
            reg = await registry(server, client, servant)
            await reg.subscribe(listener_ref(callbacks, client, slow))
            callback = asyncio.ensure_future(servant.kept.notify("alone", timeout=30.0))
            await until(lambda: slow.heard == ["alone"], "called back")
        finally:
            await server.close(grace=30.0)
        assert callback.done()
        assert callback.result() == "heard alone"


@pytest.mark.asyncio
async def test_a_message_error_from_the_offering_client_is_named_as_the_clients_in_the_servers_callback(
        callbacks: pyorb.Server) -> None:
    servant = Registry(timeout=30.0)
    async with pyorb.Server(bidirectional=True) as server, pyorb.Client(bidirectional=callbacks) as client:
        pending = await pending_callback(server, client, callbacks, servant, Listener(delay=30.0))
        [offered] = client._conns.values()
        offered.send(offered.core.send(MessageError()))  # as a client that could not read the callback would
        with pytest.raises(CORBA.SystemException):
            await asyncio.wait_for(pending, 10)
        await until(lambda: servant.texts, "failed")
    [text] = servant.texts
    assert "(the client that opened the connection sent MessageError: it could not read a message of this server)" \
        in text, text
    assert "the server" not in text


class ClosingServer:
    """A bidirectional server that a test closes with grace while it works (closed on the way out either way)."""

    def __init__(self) -> None:
        self.server = pyorb.Server(bidirectional=True)
        self.closing: asyncio.Future[None] | None = None

    async def __aenter__(self) -> ClosingServer:
        await self.server.start()
        return self

    def close(self, grace: float) -> asyncio.Future[None]:
        self.closing = asyncio.ensure_future(self.server.close(grace=grace))
        return self.closing

    async def __aexit__(self, *exc: object) -> None:
        await (self.server.close() if self.closing is None else self.closing)


@pytest.mark.asyncio
async def test_a_server_closing_with_grace_closes_a_connection_once_its_last_callback_timed_out(
        callbacks: pyorb.Server) -> None:
    """Nothing runs for the client and nothing awaits its reply once the callback is given up:
    the connection closes then, not when the grace is over."""
    slow = Listener(delay=60.0)
    servant = Registry()
    async with pyorb.Client(bidirectional=callbacks) as client, ClosingServer() as server:
        reg = await registry(server.server, client, servant)
        await reg.subscribe(listener_ref(callbacks, client, slow))
        callback = asyncio.ensure_future(servant.kept.notify("alone", timeout=1.0))
        await until(lambda: slow.heard == ["alone"], "called back")
        closing = server.close(grace=90.0)
        with pytest.raises(CORBA.TIMEOUT):
            await callback
        await asyncio.wait_for(asyncio.shield(closing), 45.0)  # well within the grace


class Reentrant(BiDir__POA.Listener):
    """A listener whose notify calls the server back (over the same connection) before it answers."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.go = asyncio.Event()
        self.registry: Any = None
        self.me: Any = None

    async def notify(self, text: str) -> str:
        self.heard.append(text)
        await self.go.wait()
        await self.registry.subscribe(self.me, timeout=60.0)
        return f"heard {text} after subscribing"


@pytest.mark.asyncio
async def test_a_server_closing_with_grace_runs_a_request_its_pending_callback_waits_for(
        callbacks: pyorb.Server) -> None:
    """The client's request that arrives while the server awaits the callback's reply runs:
    the callback's servant waits for it, so leaving it unrun would hold both until the grace ends."""
    reentrant = Reentrant()
    servant = Registry(timeout=60.0)
    async with pyorb.Client(bidirectional=callbacks) as client, ClosingServer() as server:
        reg = await registry(server.server, client, servant)
        reentrant.registry = reg
        reentrant.me = listener_ref(callbacks, client, reentrant)
        await reg.subscribe(reentrant.me)
        pending = asyncio.ensure_future(reg.call_kept("x", timeout=120.0))
        await until(lambda: reentrant.heard == ["x"], "called back")
        (conn,) = server.server.connections
        closing = server.close(grace=90.0)
        await until(lambda: conn.draining, "draining")
        reentrant.go.set()
        assert await asyncio.wait_for(pending, 45.0) == "heard x after subscribing"
        await asyncio.wait_for(asyncio.shield(closing), 45.0)  # closed once settled, not at the grace
        assert servant.outcomes == []


class RawOffer:
    """A hand-made client connection to ``server`` that offers ``port`` on loopback for callbacks."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.core = GIOPConnection(Role.CLIENT)
        self.core.make_bidirectional()

    @classmethod
    async def open(cls, server: pyorb.Server, port: int) -> RawOffer:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        raw = cls(reader, writer)
        writer.write(raw_request(b"Registry", (bidir_context([("127.0.0.1", port)]),)))
        assert isinstance(await raw.next_message(), Reply)
        return raw

    async def next_message(self) -> Any:
        while (event := self.core.next_event()) is NEED_DATA:
            chunk = await asyncio.wait_for(self.reader.read(65536), 10)
            assert chunk, "the server closed the connection"
            self.core.receive_data(chunk)
        return event

    def close_unanswered(self) -> None:
        """CloseConnection (GIOP 1.2, little endian, no body): none of the server's requests ran."""
        self.writer.write(b"GIOP\x01\x02\x01\x05\x00\x00\x00\x00")


@pytest.mark.asyncio
async def test_a_callback_an_offering_client_closed_unanswered_names_that_client() -> None:
    """The callback goes over the offer of the reference's first address; that client closes the
    connection unanswered, so the callback is sent once more, to the next address, over another
    client's offer, which closes unanswered too: TRANSIENT, naming the client, not a server."""
    first, second = closed_port(), closed_port()
    async with pyorb.Server(bidirectional=True) as server, \
            pyorb.Server(publish=[f"127.0.0.1:{first}", f"127.0.0.1:{second}"]) as callbacks:
        server.activate(Registry(), "Registry")
        callbacks.activate(Listener(), "Listener")
        offers = [await RawOffer.open(server, first), await RawOffer.open(server, second)]
        try:
            listener = server.client.resolve(callbacks.ior("Listener"), BiDir.Listener)
            call = asyncio.ensure_future(listener.notify("x", timeout=30.0))
            for offer in offers:
                request = await offer.next_message()
                assert isinstance(request, Request) and request.operation == "notify"
                offer.close_unanswered()
            with pytest.raises(CORBA.TRANSIENT) as raised:
                await asyncio.wait_for(call, 10)
        finally:
            for offer in offers:
                offer.writer.close()
    text = str(raised.value._info)
    closed = f"the client that opened the connection at 127.0.0.1:{second} closed the connection before answering"
    assert f"{closed} notify (CloseConnection)" in text, text
    assert "the server" not in text
