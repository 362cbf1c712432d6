"""Default servants, servant locators and servant activators, with real clients over loopback.

Every test serves a key prefix and calls objects under it that were never
activated; the server and its pyorb clients share the test's loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Callable

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.giop import NEED_DATA, GIOPConnection, LocateReply, LocateRequest, LocateStatus, Role
from pyorb.giop.cdr import CDRReader
from pyorb.giop.ior import IOR
from pyorb.testing.waiting import wait_until
from tests.test_strategies import ALL_SPECS

pytestmark = pytest.mark.integration  # opens sockets or starts processes

IDL = bench_idl()
Bench, Bench__POA = IDL.Bench, IDL.Bench__POA
SINK_ID = "IDL:Bench/Sink:1.0"


def seen_id() -> int:
    oid = pyorb.current_object_id()
    assert oid is not None, "servant code under a prefix sees its object id"
    request = pyorb.current()
    assert request is not None and request.object_id == oid and request.object_key.endswith(oid)
    return int(oid)


class SyncSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """Answers token + its object id (read from the request) + its own offset."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset

    def work(self, token: int) -> int:
        return token + seen_id() + self.offset


class AsyncSink(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    def __init__(self, offset: int = 0) -> None:
        self.offset = offset

    async def work(self, token: int) -> int:
        await asyncio.sleep(0)
        return token + seen_id() + self.offset


class AMHSink(pyorb.amh_skeleton(Bench__POA.Sink)):  # type: ignore[misc]
    def __init__(self, offset: int = 0) -> None:
        self.offset = offset

    async def work(self, rh: Any, token: int) -> None:
        await asyncio.sleep(0)
        rh.work(token + seen_id() + self.offset)


class Fixed(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """An activator's servant: incarnate told it its id, it needs no request's."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def work(self, token: int) -> int:
        assert pyorb.current_object_id() is None
        return token + self.offset


class Echo(Bench__POA.Echo):  # type: ignore[misc,valid-type]
    def ping(self, stamp: int) -> int:
        return stamp

    def notify(self, stamp: int) -> None:
        pass


STYLES = [SyncSink, AsyncSink, AMHSink]


class Store:
    """A dict-backed locator: object id -> offset; records what it was asked."""

    def __init__(self, ids: range, style: type = SyncSink, asynchronous: bool = False) -> None:
        self.offsets = {str(i).encode(): 1000 * i for i in ids}
        self.style = style
        self.asynchronous = asynchronous
        self.pre: list[tuple[bytes, str]] = []
        self.post: list[tuple[bytes, str, Any]] = []
        self.threads: set[int] = set()

    def _find(self, oid: bytes, op: str) -> tuple[Any, Any]:
        self.pre.append((oid, op))
        self.threads.add(threading.get_ident())
        if oid not in self.offsets:
            raise CORBA.OBJECT_NOT_EXIST(0, CORBA.COMPLETED_NO)
        return self.style(self.offsets[oid]), ("cookie", oid)

    def preinvoke(self, oid: bytes, op: str) -> Any:
        if self.asynchronous:
            return self._later(oid, op)
        return self._find(oid, op)

    async def _later(self, oid: bytes, op: str) -> tuple[Any, Any]:
        await asyncio.sleep(0.001)
        return self._find(oid, op)

    def postinvoke(self, oid: bytes, op: str, servant: Any, cookie: Any) -> None:
        assert cookie == ("cookie", oid)
        self.post.append((oid, op, servant))


@pytest_asyncio.fixture
async def servers() -> AsyncIterator[Callable[..., Any]]:
    made: list[pyorb.Server] = []

    async def start(strategy: str = "reactive") -> pyorb.Server:
        server = pyorb.Server(strategy=strategy)
        await server.start()
        made.append(server)
        return server

    yield start
    for server in made:
        await server.close()


async def locate(server: pyorb.Server, key: bytes) -> list[LocateReply]:
    """Two GIOP 1.2 LocateRequests for ``key`` on one connection, as omniORB sends
    before its first call: a served object's first answer is the server's
    introduction of its full IOR (OBJECT_FORWARD to the object itself, to a
    client that named no code sets), the second OBJECT_HERE."""
    open_before = len(server.connections)
    reader, writer = await asyncio.open_connection(server.host, server.port)
    conn = GIOPConnection(Role.CLIENT)
    replies = []
    try:
        for rid in (1, 2):
            writer.write(conn.send(LocateRequest(rid, key)))
            event = conn.next_event()
            while event is NEED_DATA:
                conn.receive_data(await asyncio.wait_for(reader.read(4096), 10))
                event = conn.next_event()
            assert isinstance(event, LocateReply)
            replies.append(event)
    finally:
        writer.close()
        await writer.wait_closed()
    # The server sees the close before the test goes on (and closes the server).
    for _ in range(1000):
        if len(server.connections) <= open_before:
            break
        await asyncio.sleep(0.005)
    return replies


async def statuses(server: pyorb.Server, key: bytes) -> list[LocateStatus]:
    return [reply.locate_status for reply in await locate(server, key)]


def forwarded_to(reply: LocateReply) -> IOR:
    assert reply.locate_status == LocateStatus.OBJECT_FORWARD
    return IOR.decode(CDRReader(reply.body, reply.little_endian, base=reply.body_offset))


HERE = [LocateStatus.OBJECT_FORWARD, LocateStatus.OBJECT_HERE]
UNKNOWN = [LocateStatus.UNKNOWN_OBJECT] * 2


def in_flight(server: pyorb.Server) -> int:
    return sum(c.in_flight + len(c.tasks or {}) for c in server.connections)


# -- default servants ----------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize("style", STYLES)
async def test_a_default_servant_serves_every_id_and_reads_it(servers: Any, clients: Any, spec: str,
                                                              style: type) -> None:
    server = await servers(spec)
    server.activate_default(style(), "acct/")
    calls = [(c, i) for c in clients(3) for i in range(1, 5)]
    results = await asyncio.gather(*(c.resolve(server.ior(f"acct/{i}"), Bench.Sink).work(10) for c, i in calls))
    assert results == [10 + i for _, i in calls]
    assert len(server.adapter) == 0  # nothing was activated per object
    (op,) = server.stats().operations
    assert (op.name, op.served, op.failed) == ("Bench::Sink.work", 12, 0)
    assert [s.name for s in server.stats().strategies] == [server.adapter.registry.get(spec).name]


@pytest.mark.asyncio
async def test_an_activated_key_and_the_longest_prefix_come_first(servers: Any, clients: Any) -> None:
    server = await servers()
    server.activate_default(SyncSink(0), "a/")
    server.activate_default(SyncSink(500), "a/b/")
    server.activate(SyncSink(900), "a/b/7")
    (client,) = clients(1)

    async def work(key: str) -> Any:
        return await client.resolve(server.corbaloc(key), Bench.Sink).work(1)

    assert await work("a/3") == 4
    assert await work("a/b/3") == 504
    # The activated servant has no object id: it raises, the client gets UNKNOWN.
    with pytest.raises(CORBA.UNKNOWN):
        await work("a/b/7")


@pytest.mark.asyncio
async def test_a_default_servant_answers_is_a_non_existent_and_locate(servers: Any, clients: Any) -> None:
    server = await servers()
    server.activate_default(SyncSink(), "acct/")
    (client,) = clients(1)
    ref = server.reference("acct/42", Bench.Sink)
    assert IOR.from_string(server.ior("acct/42")).type_id == SINK_ID
    assert await ref._is_a(SINK_ID)
    assert not await ref._is_a("IDL:Bench/Echo:1.0")
    assert not await ref._non_existent()
    assert await statuses(server, b"acct/42") == HERE
    assert await statuses(server, b"other/42") == UNKNOWN


# -- servant locators -----------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("timeout", [None, 30.0], ids=["no-deadline", "deadline"])
async def test_a_locator_finds_each_requests_servant(servers: Any, clients: Any, spec: str, style: type,
                                                     asynchronous: bool, timeout: float | None) -> None:
    server = await servers(spec)
    store = Store(range(1, 6), style, asynchronous)
    server.set_locator("acct/", store, Bench__POA.Sink)
    # With the client's deadline, a synchronous servant answered inline sees its id through SERVING.
    calls = [(c, i) for c in clients(2, call_timeout=timeout) for i in range(1, 6)]
    results = await asyncio.gather(*(c.resolve(server.ior(f"acct/{i}"), Bench.Sink).work(7) for c, i in calls))
    assert results == [7 + 1001 * i for _, i in calls]
    assert sorted(store.pre) == sorted((str(i).encode(), "work") for _, i in calls)
    # postinvoke once per preinvoke, with the servant preinvoke returned, after the call settled
    # (on the loop, which a thread strategy's reply, written from its thread, may beat to the client)
    await wait_until(lambda: len(store.post) >= len(store.pre), 10, what="a postinvoke for each preinvoke")
    assert sorted((o, op) for o, op, _ in store.post) == sorted(store.pre)
    assert store.threads == {threading.get_ident()}  # preinvoke runs on the loop
    assert len(server.adapter) == 0
    (op,) = server.stats().operations
    assert (op.name, op.served, op.failed) == ("Bench::Sink.work", 10, 0)
    assert in_flight(server) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_a_locators_object_not_exist_reaches_the_client(servers: Any, clients: Any,
                                                              asynchronous: bool) -> None:
    server = await servers("thread_pool(2)")
    store = Store(range(1, 3), asynchronous=asynchronous)
    server.set_locator("acct/", store, Bench__POA.Sink)
    (client,) = clients(1)
    with pytest.raises(CORBA.OBJECT_NOT_EXIST) as caught:
        await client.resolve(server.ior("acct/99"), Bench.Sink).work(1)
    assert caught.value.completed == CORBA.COMPLETED_NO
    assert "'acct/99'" in str(caught.value)
    assert store.post == []  # preinvoke did not return: no postinvoke
    ref = server.reference("acct/99", Bench.Sink)
    assert await ref._non_existent()
    assert not await server.reference("acct/1", Bench.Sink)._non_existent()
    assert await statuses(server, b"acct/99") == UNKNOWN
    assert await statuses(server, b"acct/1") == HERE
    assert await client.resolve(server.ior("acct/2"), Bench.Sink).work(1) == 2003


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_a_locators_forward_request_sends_the_client_elsewhere(servers: Any, clients: Any,
                                                                     asynchronous: bool) -> None:
    home, elsewhere = await servers(), await servers()
    elsewhere.activate_default(SyncSink(5000), "moved/")

    class Forwarding(Store):
        def _find(self, oid: bytes, op: str) -> tuple[Any, Any]:
            raise pyorb.ForwardRequest(elsewhere.ior(b"moved/" + oid))

    home.set_locator("acct/", Forwarding(range(0), asynchronous=asynchronous), Bench__POA.Sink)
    (client,) = clients(1)
    assert await client.resolve(home.ior("acct/3"), Bench.Sink).work(1) == 5004
    for reply in await locate(home, b"acct/3"):
        target = forwarded_to(reply)
        assert target.iiop is not None and target.iiop.port == elsewhere.port
        assert target.iiop.object_key == b"moved/3"


class Misbehaving(Store):
    def __init__(self, answer: Callable[[], Any]) -> None:
        super().__init__(range(0))
        self.answer = answer

    def _find(self, oid: bytes, op: str) -> Any:
        self.pre.append((oid, op))
        return self.answer()


def _raise() -> Any:
    raise RuntimeError("the locator's secret")


@pytest.mark.asyncio
@pytest.mark.parametrize("answer, expected", [
    (_raise, CORBA.UNKNOWN),
    (lambda: (Echo(), None), CORBA.OBJ_ADAPTER),  # a servant of another interface
    (lambda: ("not a servant", None), CORBA.OBJ_ADAPTER),
    (lambda: SyncSink(), CORBA.OBJ_ADAPTER),  # not (servant, cookie)
    (lambda: pyorb.ForwardRequest(42), CORBA.OBJ_ADAPTER),  # returned, not raised
], ids=["raises", "other-interface", "not-a-servant", "no-cookie", "returns-forward"])
@pytest.mark.parametrize("spec", ["reactive", "thread_pool(2)"])
async def test_a_misbehaving_locator_gets_the_client_a_system_exception(
        servers: Any, clients: Any, answer: Callable[[], Any], expected: type, spec: str) -> None:
    server = await servers(spec)
    server.set_locator("bad/", Misbehaving(answer), Bench__POA.Sink)
    server.activate_default(SyncSink(), "good/")
    (client,) = clients(1)
    with pytest.raises(expected) as caught:
        await client.resolve(server.ior("bad/1"), Bench.Sink).work(1)
    assert "'bad/1'" in str(caught.value) or "bad/" in str(caught.value)
    assert "secret" not in str(caught.value)
    assert await client.resolve(server.ior("good/1"), Bench.Sink).work(1) == 2  # still serving
    assert in_flight(server) == 0


@pytest.mark.asyncio
async def test_a_forward_request_without_a_reference_is_obj_adapter(servers: Any, clients: Any) -> None:
    server = await servers()

    class Forwarding(Store):
        def _find(self, oid: bytes, op: str) -> tuple[Any, Any]:
            raise pyorb.ForwardRequest(42)

    server.set_locator("acct/", Forwarding(range(0)), Bench__POA.Sink)
    (client,) = clients(1)
    with pytest.raises(CORBA.OBJ_ADAPTER):
        await client.resolve(server.ior("acct/1"), Bench.Sink).work(1)


class Hanging(Store):
    """An async preinvoke that never answers (for a minute): records its start and its cancellation."""

    def __init__(self) -> None:
        super().__init__(range(1, 3), asynchronous=True)
        self.started, self.cancelled = asyncio.Event(), asyncio.Event()

    async def _later(self, oid: bytes, op: str) -> tuple[Any, Any]:
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return self._find(oid, op)


@pytest.mark.asyncio
async def test_a_preinvoke_that_hangs_past_the_deadline_gets_timeout_and_leaks_nothing(
        servers: Any, clients: Any) -> None:
    server = await servers("thread_pool(2)")
    store = Hanging()
    started, cancelled = store.started, store.cancelled
    server.set_locator("acct/", store, Bench__POA.Sink, deadline=0.3)
    (client,) = clients(1)
    with pytest.raises(CORBA.TIMEOUT) as caught:
        await asyncio.wait_for(client.resolve(server.ior("acct/1"), Bench.Sink).work(1), 30)
    assert caught.value.completed == CORBA.COMPLETED_NO
    assert started.is_set()
    await asyncio.wait_for(cancelled.wait(), 10)  # the pending preinvoke was cancelled
    assert store.post == []
    assert in_flight(server) == 0


@pytest.mark.asyncio
async def test_a_cancelled_or_closed_preinvoke_is_cancelled(servers: Any, clients: Any) -> None:
    server = await servers()
    store = Hanging()
    started, cancelled = store.started, store.cancelled
    server.set_locator("acct/", store, Bench__POA.Sink)
    (client,) = clients(1, call_timeout=0.3)
    with pytest.raises(CORBA.TIMEOUT):
        await client.resolve(server.ior("acct/1"), Bench.Sink).work(1)
    assert started.is_set()
    await client.close()  # the server's connection closes: its task is cancelled
    await asyncio.wait_for(cancelled.wait(), 10)


@pytest.mark.asyncio
async def test_postinvoke_may_be_async_and_its_failure_is_only_logged(servers: Any, clients: Any,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    server = await servers()
    done: list[bytes] = []

    class AsyncPost(Store):
        async def postinvoke(self, oid: bytes, op: str, servant: Any, cookie: Any) -> None:  # type: ignore[override]
            await asyncio.sleep(0)
            done.append(oid)
            raise RuntimeError("postinvoke broke")

    server.set_locator("acct/", AsyncPost(range(1, 3)), Bench__POA.Sink)
    (client,) = clients(1)
    assert await client.resolve(server.ior("acct/1"), Bench.Sink).work(1) == 1002
    await wait_until(lambda: done, 10, what="postinvoke ran")
    assert done == [b"1"]
    await server.adapter.wait_managers(5)
    assert "postinvoke under 'acct/' failed" in caplog.text


# -- servant activators ------------------------------------------------------------------


class Activator:
    def __init__(self, asynchronous: bool, fail: set[bytes] = frozenset()) -> None:  # type: ignore[assignment]
        self.asynchronous = asynchronous
        self.fail = set(fail)
        self.incarnated: list[bytes] = []
        self.etherealized: list[tuple[bytes, Any]] = []

    def _make(self, oid: bytes) -> Any:
        self.incarnated.append(oid)
        if oid in self.fail:
            self.fail.discard(oid)  # once
            raise CORBA.OBJECT_NOT_EXIST(0, CORBA.COMPLETED_NO)
        return Fixed(1001 * int(oid))

    def incarnate(self, oid: bytes) -> Any:
        if self.asynchronous:
            return self._later(oid)
        return self._make(oid)

    async def _later(self, oid: bytes) -> Any:
        await asyncio.sleep(0.05)  # long enough that every first request arrives before it ends
        return self._make(oid)

    def etherealize(self, oid: bytes, servant: Any) -> None:
        self.etherealized.append((oid, servant))


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_an_activator_incarnates_once_for_a_thousand_first_requests(servers: Any, clients: Any,
                                                                          asynchronous: bool) -> None:
    server = await servers("thread_pool(4)")
    activator = Activator(asynchronous)
    server.set_activator("acct/", activator, Bench__POA.Sink)
    refs = [c.resolve(server.ior("acct/3"), Bench.Sink) for c in clients(4)]
    results = await asyncio.gather(*(refs[i % 4].work(i) for i in range(1000)))
    assert results == [i + 3003 for i in range(1000)]
    assert activator.incarnated == [b"3"]
    assert len(server.adapter) == 1  # the incarnation is active under its key
    assert in_flight(server) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_an_activator_etherealizes_on_deactivate_and_on_close(clients: Any, asynchronous: bool) -> None:
    server = pyorb.Server()
    await server.start()
    activator = Activator(asynchronous)
    server.set_activator("acct/", activator, Bench__POA.Sink)
    (client,) = clients(1)
    for i in (1, 2):
        assert await client.resolve(server.ior(f"acct/{i}"), Bench.Sink).work(0) == 1001 * i
    server.deactivate("acct/1")
    assert [oid for oid, _ in activator.etherealized] == [b"1"]
    assert await client.resolve(server.ior("acct/1"), Bench.Sink).work(0) == 1001  # incarnated again
    assert activator.incarnated == [b"1", b"2", b"1"]
    await server.close()
    assert sorted(oid for oid, _ in activator.etherealized) == [b"1", b"1", b"2"]
    assert len(server.adapter) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_a_failed_incarnation_fails_its_waiters_and_is_tried_again(servers: Any, clients: Any,
                                                                         asynchronous: bool) -> None:
    server = await servers()
    activator = Activator(asynchronous, fail={b"5"})
    server.set_activator("acct/", activator, Bench__POA.Sink)
    ref = clients(1)[0].resolve(server.ior("acct/5"), Bench.Sink)
    outcomes = await asyncio.gather(*(ref.work(i) for i in range(20)), return_exceptions=True)
    # async: every first request waits for the one attempt and shares its failure;
    # sync: the first fails, the second incarnates
    expected = 20 if asynchronous else 1
    assert sum(isinstance(o, CORBA.OBJECT_NOT_EXIST) for o in outcomes) == expected
    assert await ref.work(1) == 5006
    assert activator.incarnated == [b"5", b"5"]


@pytest.mark.asyncio
async def test_an_activator_is_consulted_by_locate(servers: Any) -> None:
    server = await servers()
    activator = Activator(False, fail={b"9"})
    server.set_activator("acct/", activator, Bench__POA.Sink)
    assert await statuses(server, b"acct/4") == HERE
    # 9 fails its first incarnation only: then it is here
    assert await statuses(server, b"acct/9") == [LocateStatus.UNKNOWN_OBJECT, LocateStatus.OBJECT_FORWARD]
    assert activator.incarnated == [b"4", b"9", b"9"]
    assert len(server.adapter) == 2


# -- registration -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_bad_registrations_say_what_is_wrong(servers: Any) -> None:
    server = await servers()
    server.activate_default(SyncSink(), "acct/")
    with pytest.raises(ValueError, match="already has"):
        server.set_locator("acct/", Store(range(1)), Bench__POA.Sink)
    with pytest.raises(ValueError, match="empty"):
        server.activate_default(SyncSink(), "")
    with pytest.raises(TypeError, match="generated POA class"):
        server.set_locator("x/", Store(range(1)), Bench.Sink)
    with pytest.raises(ValueError, match="no operation"):
        server.set_locator("y/", Store(range(1)), Bench__POA.Sink, operations={"nope": "reactive"})
    with pytest.raises(KeyError, match="no default servant or servant manager"):
        server.ior("elsewhere/1")
