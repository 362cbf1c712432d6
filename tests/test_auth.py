"""Authentication and authorization (pyorb.interceptors.auth).

Bearer tokens in a service context and mutual-TLS identities, checked
against per-object and per-operation rules; refusals are NO_PERMISSION and
are counted in the server's statistics.  Loopback, asyncio and uvloop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl
from pyorb.interceptors.auth import ANONYMOUS, ANYONE, Authorizer, BearerToken, Rule, caller
from pyorb.testing.certs import TestPKI, make_pki
from pyorb.testing.waiting import wait_until

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench
import Bench__POA  # noqa: E402  (made by load_idl)


class Echo(Bench__POA.Echo):  # type: ignore[misc]
    def __init__(self) -> None:
        self.callers: list[Any] = []

    def ping(self, stamp: int) -> int:
        who = caller()
        self.callers.append(None if who is None else (who.name, who.via))
        return stamp

    def notify(self, stamp: int) -> None:
        pass


RULES = [
    Rule(objects="public", allow={ANONYMOUS, ANYONE}),
    Rule(objects="Echo", operations="ping", allow={"reporting", "admin", "pyorb-test-client"}),
    Rule(objects="Echo", allow={"admin"}),
]


def _rejected(server: pyorb.Server) -> int:
    return sum(op.rejected for op in server.stats().operations)


@pytest.mark.asyncio
async def test_tokens_are_checked_against_rules_per_object_and_operation() -> None:
    authorizer = Authorizer(RULES, tokens={"t-report": "reporting", "t-admin": "admin", "t-other": "intern"})
    async with pyorb.Server(interceptors=[authorizer]) as server:
        servant, public = Echo(), Echo()
        key = server.activate(servant, "Echo")
        open_key = server.activate(public, "public")

        async def ping(token: str | None, target: bytes = key) -> int:
            interceptors = [BearerToken(token)] if token is not None else []
            async with pyorb.Client(interceptors=interceptors) as client:
                return int(await client.resolve(server.ior(target), Bench.Echo).ping(1))

        assert await ping("t-report") == 1
        assert await ping("t-admin") == 1
        for refused in ("t-other", None, "wrong-token", ""):
            with pytest.raises(CORBA.NO_PERMISSION) as failed:
                await ping(refused)
            assert failed.value.completed == CORBA.COMPLETED_NO
        assert await ping(None, open_key) == 1  # the public object admits anonymous callers
        with pytest.raises(CORBA.NO_PERMISSION):  # a wrong token is never ignored, even where anonymous is fine
            await ping("wrong-token", open_key)
        assert servant.callers == [("reporting", "token"), ("admin", "token")]
        assert public.callers == [None]
        assert _rejected(server) == 5


@pytest.mark.asyncio
async def test_operations_without_a_rule_and_the_default() -> None:
    async with pyorb.Server(interceptors=[Authorizer([Rule(operations="ping", allow={ANYONE})],
                                                     tokens={"t": "svc"})]) as strict, \
            pyorb.Server(interceptors=[Authorizer([Rule(operations="notify", allow={"nobody"})],
                                                  tokens={"t": "svc"}, default_allow=True)]) as lenient:
        async with pyorb.Client(interceptors=[BearerToken(lambda: "t")]) as client:
            for server in (strict, lenient):
                server.activate(Echo(), "Echo")
            strict_echo = client.resolve(strict.ior("Echo"), Bench.Echo)
            assert await strict_echo.ping(2) == 2
            assert await strict_echo._is_a("IDL:Bench/Echo:1.0")  # built-in operations are not servant code
            lenient_echo = client.resolve(lenient.ior("Echo"), Bench.Echo)
            assert await lenient_echo.ping(3) == 3  # no rule: admitted by default
            await lenient_echo.notify(1)  # a oneway refusal is counted, never answered
            await wait_until(lambda: _rejected(lenient) == 1, 30, what="the oneway's refusal counted")
        assert _rejected(lenient) == 1 and _rejected(strict) == 0


@pytest.mark.asyncio
async def test_an_async_token_check(caplog: pytest.LogCaptureFixture) -> None:
    checked: list[str] = []

    async def introspect(token: str) -> str | None:
        await asyncio.sleep(0.01)  # e.g. an identity provider's introspection endpoint
        checked.append(token)
        return "admin" if token == "good" else None

    async with pyorb.Server(interceptors=[Authorizer(RULES, tokens=introspect)]) as server:
        servant = Echo()
        key = server.activate(servant, "Echo")
        async with pyorb.Client(interceptors=[BearerToken("good")]) as good, \
                pyorb.Client(interceptors=[BearerToken("bad")]) as bad:
            results = await asyncio.gather(*(good.resolve(server.ior(key), Bench.Echo).ping(i) for i in range(20)))
            assert results == list(range(20))
            with pytest.raises(CORBA.NO_PERMISSION):
                await bad.resolve(server.ior(key), Bench.Echo).ping(1)
        assert servant.callers == [("admin", "token")] * 20 and len(checked) == 21
        assert any("refused ping" in r.getMessage() and "bearer token" in r.getMessage() for r in caplog.records)


@pytest.mark.asyncio
async def test_mutual_tls_identity(tmp_path: Path) -> None:
    pki: TestPKI = make_pki(tmp_path)
    rules = [Rule(objects="Echo", operations="ping", allow={"pyorb-test-client"})]
    async with pyorb.Server(tls=pki.server_context(), interceptors=[Authorizer(rules)]) as server:
        servant = Echo()
        key = server.activate(servant, "Echo")
        async with pyorb.Client(tls=pki.client_context(identity=pki.client)) as client:
            assert await client.resolve(server.ior(key), Bench.Echo).ping(9) == 9
        async with pyorb.Client(tls=pki.client_context()) as anonymous:  # TLS, but no client certificate
            with pytest.raises(CORBA.NO_PERMISSION):
                await anonymous.resolve(server.ior(key), Bench.Echo).ping(9)
        assert servant.callers == [("pyorb-test-client", "certificate")]
        assert _rejected(server) == 1


def test_blocking_client_sends_its_token() -> None:
    from pyorb.testing import LoopThread

    with LoopThread() as runner:
        async def start() -> tuple[pyorb.Server, str]:
            server = pyorb.Server(interceptors=[Authorizer(RULES, tokens={"t-admin": "admin"})])
            await server.start()
            return server, server.ior(server.activate(Echo(), "Echo"))

        server, ior = runner.run(start())
        try:
            with pyorb.BlockingClient(interceptors=[BearerToken("t-admin")]) as client:
                assert client.resolve(ior, Bench.Echo).ping(6) == 6
            with pyorb.BlockingClient() as client:
                with pytest.raises(CORBA.NO_PERMISSION):
                    client.resolve(ior, Bench.Echo).ping(6)
        finally:
            runner.run(server.close())
