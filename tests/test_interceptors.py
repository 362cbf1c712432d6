"""Server and client request interceptors.

pyorb peers over loopback on asyncio's loop and uvloop, and omniORBpy peers
in their own processes: an ORB that does not know pyorb's service contexts
ignores them, both ways.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.interceptors import ClientRequestInfo, ServerRequestInfo
from pyorb.testing.certs import TestPKI, make_pki
from pyorb.testing.waiting import wait_until
from tests.interop.conftest import OmniServer, failures, run_omni_client
from tests.interop.servants import TypesCoroutine

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench
Interop = pyorb.load_idl("idl/interop.idl").Interop
import Bench__POA  # noqa: E402  (made by load_idl)

REQUEST_ID = 0x50590100
REPLY_ID = 0x50590101
TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")


class Echo(Bench__POA.Echo):  # type: ignore[misc]
    def __init__(self) -> None:
        self.tenants: list[tuple[str, bool]] = []
        self.notified = threading.Event()

    def ping(self, stamp: int) -> int:
        self.tenants.append((TENANT.get(), threading.current_thread() is threading.main_thread()))
        if stamp == 13:
            raise CORBA.BAD_PARAM(7, CORBA.COMPLETED_NO)
        return stamp

    def notify(self, stamp: int) -> None:
        self.notified.set()


class Stuck(Bench__POA.Sink):  # type: ignore[misc]
    """Holds its dispatcher thread until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def work(self, token: int) -> int:
        self.started.set()
        self.release.wait(30)
        return token


async def unreadable_work(port: int, key: bytes) -> bytes:
    """The reply body to a raw ``work`` request whose long argument is one octet short."""
    from tests.attacks.flow_attacks import request

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request("work", b"\x01", 9, key))  # a long is 4 bytes
        head = await asyncio.wait_for(reader.readexactly(12), 10)
        return await asyncio.wait_for(reader.readexactly(int.from_bytes(head[8:12], "little")), 10)
    finally:
        writer.close()
        await writer.wait_closed()


class Recording:
    """A server interceptor that records what it sees and marks each reply."""

    def __init__(self, refuse: str | None = None, wait: float = 0.0, broken: bool = False) -> None:
        self.seen: list[ServerRequestInfo] = []
        self.outcomes: list[tuple[str, str]] = []
        self.refuse = refuse
        self.wait = wait
        self.broken = broken

    def receive_request(self, info: ServerRequestInfo) -> Any:
        self.seen.append(info)
        tenant = info.request_contexts.get(REQUEST_ID, b"").decode()
        if self.wait:
            return self._later(info, tenant)
        self._admit(info, tenant)
        return None

    async def _later(self, info: ServerRequestInfo, tenant: str) -> None:
        await asyncio.sleep(self.wait)
        self._admit(info, tenant)

    def _admit(self, info: ServerRequestInfo, tenant: str) -> None:
        if self.broken:
            raise RuntimeError("interceptor bug")
        if tenant == self.refuse:
            raise CORBA.NO_PERMISSION(3, CORBA.COMPLETED_MAYBE)
        TENANT.set(tenant)
        info.reply_contexts[REPLY_ID] = f"served {info.operation} for {tenant}".encode()

    def send_reply(self, info: ServerRequestInfo, exception: BaseException | None) -> None:
        self.outcomes.append((info.operation, "ok" if exception is None else type(exception).__name__))


class Tenant:
    """A client interceptor that names a tenant and keeps the reply's mark."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.replies: list[tuple[str, bytes | None, str]] = []

    def send_request(self, info: ClientRequestInfo) -> None:
        info.request_contexts[REQUEST_ID] = self.tenant.encode()

    def receive_reply(self, info: ClientRequestInfo, exception: BaseException | None) -> None:
        self.replies.append((info.operation, info.reply_contexts.get(REPLY_ID),
                             "ok" if exception is None else type(exception).__name__))


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", ["reactive", "thread_pool(2)"])
async def test_server_and_client_interceptors_see_and_add_service_contexts(strategy: str) -> None:
    recording = Recording()
    async with pyorb.Server(interceptors=[recording], strategy=strategy) as server:
        servant = Echo()
        key = server.activate(servant, "Echo")
        tenant = Tenant("acme")
        async with pyorb.Client(interceptors=[tenant]) as client:
            echo = client.resolve(server.ior(key), Bench.Echo)
            assert await echo.ping(5) == 5
            with pytest.raises(CORBA.BAD_PARAM):
                await echo.ping(13)
            await echo.notify(1)
            await asyncio.get_running_loop().run_in_executor(None, servant.notified.wait, 5)
        info = recording.seen[0]
        assert (info.operation, info.object_key, info.interface) == ("ping", b"Echo", "IDL:Bench/Echo:1.0")
        assert info.peer[0] == "127.0.0.1" and info.certificate is None and info.response_expected
        assert info.request_contexts[REQUEST_ID] == b"acme"
        assert 1 in info.request_contexts  # the client's CodeSets context, on the first request
        assert [op for op, _ in recording.outcomes] == ["ping", "ping", "notify"]
        assert recording.outcomes[:2] == [("ping", "ok"), ("ping", "BAD_PARAM")]
        # The servant saw what receive_request set, on the loop or on a pool thread.
        assert [t for t, _ in servant.tenants] == ["acme", "acme"]
        assert all(on_main for _, on_main in servant.tenants) == (strategy == "reactive")
        assert tenant.replies == [("ping", b"served ping for acme", "ok"), ("ping", b"served ping for acme", "BAD_PARAM"),
                                  ("notify", None, "ok")]


@pytest.mark.asyncio
@pytest.mark.parametrize("wait", [0.0, 0.05], ids=["sync", "async"])
async def test_a_refusal_is_the_clients_exception_and_is_counted(wait: float) -> None:
    first, refusing = Recording(), Recording(refuse="mallory", wait=wait)
    async with pyorb.Server(interceptors=[first, refusing]) as server:
        servant = Echo()
        key = server.activate(servant, "Echo")
        async with pyorb.Client(interceptors=[Tenant("mallory")]) as bad, \
                pyorb.Client(interceptors=[Tenant("alice")]) as good:
            with pytest.raises(CORBA.NO_PERMISSION) as refused:
                await bad.resolve(server.ior(key), Bench.Echo).ping(1)
            assert refused.value.minor == 3 and refused.value.completed == CORBA.COMPLETED_NO
            assert await asyncio.gather(*(good.resolve(server.ior(key), Bench.Echo).ping(i) for i in range(10))) \
                == list(range(10))
        (ping,) = [op for op in server.stats().operations if op.name == "Bench::Echo.ping"]
        assert (ping.rejected, ping.served) == (1, 10)
        assert servant.tenants == [("alice", True)] * 10  # the refused call never reached the servant
        assert first.outcomes[0] == ("ping", "NO_PERMISSION")  # the interceptor that admitted it learns why
        assert len(refusing.outcomes) == 10  # the refusing one sees only what it admitted


@pytest.mark.asyncio
async def test_a_failing_interceptor_gives_unknown_and_the_server_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    class BrokenReply:
        def receive_request(self, info: ServerRequestInfo) -> None:
            pass

        def send_reply(self, info: ServerRequestInfo, exception: BaseException | None) -> None:
            raise ValueError("bug in send_reply")

    async with pyorb.Server(interceptors=[Recording(broken=True)]) as server, \
            pyorb.Server(interceptors=[BrokenReply()]) as tolerant:
        key = server.activate(Echo(), "Echo")
        other = tolerant.activate(Echo(), "Echo")
        async with pyorb.Client() as client:
            with caplog.at_level(logging.ERROR):
                with pytest.raises(CORBA.UNKNOWN):
                    await client.resolve(server.ior(key), Bench.Echo).ping(1)
                assert await client.resolve(tolerant.ior(other), Bench.Echo).ping(2) == 2  # logged, reply intact
        assert any("interceptor Recording failed" in r.getMessage() for r in caplog.records)
        assert any("failed in send_reply" in r.getMessage() for r in caplog.records)


@pytest.mark.asyncio
async def test_deadlines_and_cancellation_reach_send_reply() -> None:
    recording = Recording()

    class Held(Bench__POA.Echo):  # type: ignore[misc]
        """ping(0) answers at once; any other ping is held until its deadline passes or it is cancelled."""

        def __init__(self) -> None:
            self.held = 0
            self.never = asyncio.Event()

        async def ping(self, stamp: int) -> int:
            if stamp:
                self.held += 1
                await self.never.wait()
            return stamp

        def notify(self, stamp: int) -> None:
            pass

    servant = Held()
    async with pyorb.Server(interceptors=[recording]) as server:
        # A deadline a loaded machine meets for ping(0) and that a held ping always passes.
        key = server.activate(servant, "Held", deadline=2.0)
        async with pyorb.Client() as client:
            echo = client.resolve(server.ior(key), Bench.Echo)
            with pytest.raises(CORBA.TIMEOUT):
                await echo.ping(1)
            call = asyncio.ensure_future(echo.ping(2))
            await wait_until(lambda: servant.held == 2, 30, what="the second ping held in the servant")
            call.cancel()
            assert await echo.ping(0) == 0
            await wait_until(lambda: len(recording.outcomes) == 3, 30, what="three outcomes recorded")
        assert sorted(recording.outcomes) == [("ping", "CancelledError"), ("ping", "TIMEOUT"), ("ping", "ok")]


def test_client_interceptor_failures_fail_the_call_before_it_is_sent() -> None:
    class Refusing:
        def send_request(self, info: ClientRequestInfo) -> None:
            raise CORBA.NO_PERMISSION(1, CORBA.COMPLETED_MAYBE)

        def receive_reply(self, info: ClientRequestInfo, exception: BaseException | None) -> None:
            pass

    seen = Tenant("x")

    async def run() -> None:
        async with pyorb.Server() as server:
            key = server.activate(Echo(), "Echo")
            async with pyorb.Client(interceptors=[seen, Refusing()]) as client:
                with pytest.raises(CORBA.NO_PERMISSION) as failed:
                    await client.resolve(server.ior(key), Bench.Echo).ping(1)
                assert failed.value.completed == CORBA.COMPLETED_NO
            assert server.stats().operations == () or all(op.served == 0 for op in server.stats().operations)

    asyncio.run(run())
    assert seen.replies == [("ping", None, "NO_PERMISSION")]
    with pytest.raises(TypeError, match="send_request"):
        pyorb.Client(interceptors=[Recording()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="receive_request"):
        pyorb.Server(interceptors=[Tenant("x")])  # type: ignore[list-item]


def test_blocking_client_interceptors() -> None:
    from pyorb.testing import LoopThread

    recording = Recording()
    with LoopThread() as runner:
        async def start() -> tuple[pyorb.Server, str]:
            server = pyorb.Server(interceptors=[recording])
            await server.start()
            return server, server.ior(server.activate(Echo(), "Echo"))

        server, ior = runner.run(start())
        try:
            tenant = Tenant("blocking")
            with pyorb.BlockingClient(interceptors=[tenant]) as client:
                assert client.resolve(ior, Bench.Echo).ping(4) == 4
            assert tenant.replies == [("ping", b"served ping for blocking", "ok")]
        finally:
            runner.run(server.close())


@pytest.mark.asyncio
async def test_interceptors_see_the_verified_client_certificate(tmp_path: Path) -> None:
    pki: TestPKI = make_pki(tmp_path)
    recording = Recording()
    async with pyorb.Server(tls=pki.server_context(require_client_cert=True), interceptors=[recording]) as server:
        key = server.activate(Echo(), "Echo")
        async with pyorb.Client(tls=pki.client_context(identity=pki.client)) as client:
            assert await client.resolve(server.ior(key), Bench.Echo).ping(1) == 1
    certificate = recording.seen[0].certificate
    assert certificate is not None and pyorb.tls.describe_certificate(dict(certificate)) == "pyorb-test-client"


@pytest.mark.interop
@pytest.mark.client_loop_only
def test_omniorb_peers_ignore_pyorbs_service_contexts() -> None:
    """An omniORBpy client calls a server whose interceptor adds a reply
    context; a pyorb client with interceptors calls an omniORBpy server."""
    from pyorb.testing import LoopThread

    recording = Recording()
    with LoopThread() as runner:
        async def start() -> tuple[pyorb.Server, bytes]:
            server = pyorb.Server(interceptors=[recording])
            await server.start()
            return server, server.activate(TypesCoroutine(server), "Types")

        server, key = runner.run(start())
        try:
            results = run_omni_client(server.ior(key), "--cases", "echo_string,echo_long,raise_system")
            assert not failures(results) and len(results) == 3
        finally:
            runner.run(server.close())
    assert {info.operation for info in recording.seen} >= {"echo_string", "echo_long", "raise_system"}
    assert ("raise_system", "BAD_PARAM") in recording.outcomes

    omni = OmniServer()
    try:
        tenant = Tenant("acme")

        async def call() -> str:
            async with pyorb.Client(interceptors=[tenant]) as client:
                return str(await client.resolve(omni.ior, Interop.Types).echo_string("through omniORB"))

        assert asyncio.run(call()) == "through omniORB"
        assert tenant.replies == [("echo_string", None, "ok")]
    finally:
        omni.stop()


@pytest.mark.asyncio
async def test_interceptors_see_a_call_refused_before_its_arguments_are_read() -> None:
    # A standing queue: admission control answers a call before reading its
    # arguments (these cannot be read), after the interceptors saw it arrive:
    # they see it refused TRANSIENT, and its reply carries their contexts.

    recording = Recording()
    config = pyorb.Config(queue_target=0.05, queue_interval=0.1)
    async with pyorb.Server(interceptors=[recording], strategy="thread_pool(1)", config=config) as server:
        stuck = Stuck()
        key = server.activate(stuck, "Stuck")
        async with pyorb.Client() as client:
            proxy = client.resolve(server.ior(key), Bench.Sink)
            waiting = [asyncio.ensure_future(proxy.work(1, timeout=30)), asyncio.ensure_future(proxy.work(2, timeout=30))]
            await wait_until(stuck.started.is_set)
            await asyncio.sleep(0.3)
            waiting.append(asyncio.ensure_future(proxy.work(3, timeout=30)))  # over the target: the interval starts
            await asyncio.sleep(0.3)
            with pytest.raises(CORBA.TRANSIENT):  # over it for an interval: shed
                await proxy.work(4, timeout=30)
            reply = await unreadable_work(server.port, key)
            stuck.release.set()
            done = await asyncio.gather(*waiting, return_exceptions=True)  # the queued ones may be shed as they start
    assert done[0] == 1 and all(r == t or isinstance(r, CORBA.TRANSIENT) for t, r in enumerate(done, 1)), done
    assert b"IDL:omg.org/CORBA/TRANSIENT:1.0" in reply and b"served work for " in reply, reply
    shed = 2 + sum(isinstance(r, CORBA.TRANSIENT) for r in done)
    assert recording.outcomes.count(("work", "TRANSIENT")) == shed, recording.outcomes
    (op,) = server.stats().operations
    assert (op.shed, op.failed, op.served) == (shed, shed, 5)


@pytest.mark.asyncio
async def test_interceptors_see_arguments_that_cannot_be_read() -> None:
    # The interceptors admitted the request; its arguments then fail to
    # unmarshal: send_reply sees the MARSHAL the client gets, and the reply
    # carries the contexts the interceptors set.
    recording = Recording()
    async with pyorb.Server(interceptors=[recording]) as server:
        key = server.activate(Stuck(), "Stuck")
        reply = await unreadable_work(server.port, key)
    assert b"IDL:omg.org/CORBA/MARSHAL:1.0" in reply and b"served work for " in reply, reply
    assert recording.outcomes == [("work", "MARSHAL")]
