"""JacORB 3.9 (an independent Java ORB) against pyorb, both directions: char code sets and GIOP 1.1 wide text.

The peers are tests/peers/jacorb/JacClient.java (Dynamic Invocation) and
JacServer.java (Dynamic Skeleton): no IDL compiler, the echo operations of
idl/interop.idl.  GIOP 1.1 is where the wide-text forms differ: JacORB
writes the standard one (code units, null-terminated), omniORB the GIOP 1.2
one.  The JacORB jars come from Maven Central at the first test; a machine
without a JDK and Maven skips these tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.ior import IOR, build_ior, to_corbaloc
from pyorb.testing import LoopThread
from tests.interop.conftest import jacorb_server as start_jacorb_server
from tests.interop.conftest import run_jacorb_client
from tests.interop.servants import TypesCoroutine

ROOT = Path(__file__).resolve().parents[2]
Interop = pyorb.load_idl(ROOT / "idl" / "interop.idl").Interop
CLIENT_CASES = {"echo_string", "echo_string_latin1", "echo_string_unicode", "echo_wstring", "echo_wstring_latin1",
                "echo_wstring_unicode", "echo_wstring_empty", "echo_wchar", "echo_char"}


@pytest.fixture(scope="module")
def pyorb_server() -> Iterator[tuple[pyorb.Server, bytes]]:
    with LoopThread() as runner:
        async def start() -> tuple[pyorb.Server, bytes]:
            server = pyorb.Server()
            await server.start()
            return server, server.activate(TypesCoroutine(server), "Types")

        server, key = runner.run(start())
        yield server, key
        runner.run(server.close())


def run_client(classpath: str, target: str, minor: int) -> dict[str, tuple[bool, str]]:
    results = run_jacorb_client(classpath, "JacClient", target, minor)
    assert results.keys() == CLIENT_CASES, f"JacClient ended early: {results}"
    return results


@pytest.mark.parametrize("minor", [1, 2])
def test_jacorb_client_calls_pyorb(jacorb_classpath: str, pyorb_server: tuple[pyorb.Server, bytes],
                                   minor: int) -> None:
    """Every text and wide-text echo from JacORB; the IOR's IIOP profile version sets JacORB's GIOP."""
    server, key = pyorb_server
    ior = build_ior(server.adapter.type_id(key), server.host, server.port, key, version=(1, minor)).to_string()
    results = run_client(jacorb_classpath, ior, minor)
    assert not {case: detail for case, (ok, detail) in results.items() if not ok}


def test_jacorb_client_through_corbaloc(jacorb_classpath: str, pyorb_server: tuple[pyorb.Server, bytes]) -> None:
    server, key = pyorb_server
    results = run_client(jacorb_classpath, to_corbaloc(server.host, server.port, key), 2)
    assert not {case: detail for case, (ok, detail) in results.items() if not ok}


@pytest.fixture(params=[1, 2], ids=["giop1.1", "giop1.2"])
def jacorb_server(jacorb_classpath: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    with start_jacorb_server(jacorb_classpath, "JacServer", request.param) as ior:
        yield ior, request.param


def test_pyorb_client_calls_jacorb(jacorb_server: tuple[str, int]) -> None:
    ior, minor = jacorb_server
    profile = IOR.from_string(ior).iiop
    assert profile is not None and profile.version == (1, minor)
    values: list[tuple[str, Any]] = [
        ("echo_string", "ascii"), ("echo_string", "p\xe9"), ("echo_string", "\u20ac \u4e2d"),
        ("echo_wstring", "wide"), ("echo_wstring", "w\xe9\u20ac\U0001F600"), ("echo_wstring", ""),
        ("echo_wchar", "\u20ac"), ("echo_char", "c"),
    ]

    async def run() -> list[Any]:
        async with pyorb.Client(pyorb.Config(giop_version=(1, minor))) as client:
            types = client.resolve(ior, Interop.Types)
            return [await getattr(types, op)(value) for op, value in values]

    assert asyncio.run(run()) == [value for _, value in values]


def test_jacorb_runs_a_call_with_a_deadline_at_once(jacorb_server: tuple[str, int]) -> None:
    """JacORB reads the call's INVOCATION_POLICIES context: the deadline is its end, not a start
    time to hold the call until (the answer would then come only as the call times out)."""
    ior, minor = jacorb_server

    async def run() -> str:
        async with pyorb.Client(pyorb.Config(giop_version=(1, minor))) as client:
            types = client.resolve(ior, Interop.Types)
            return str(await asyncio.wait_for(types.echo_string("in time", timeout=60.0), 30.0))

    assert asyncio.run(run()) == "in time"


def test_jacorbs_exception_detail_message_reaches_the_pyorb_callers_text(jacorb_server: tuple[str, int]) -> None:
    """JacServer raises BAD_OPERATION(operation name) for what it does not serve: JacORB
    sends that message as an ExceptionDetailMessage, which the pyorb client shows."""
    ior, minor = jacorb_server
    profile = IOR.from_string(ior).iiop
    assert profile is not None

    async def run() -> BaseException:
        async with pyorb.Client(pyorb.Config(giop_version=(1, minor))) as client:
            with pytest.raises(CORBA.BAD_OPERATION) as failed:
                await client.resolve(ior, Interop.Types).echo_long(1)
            return failed.value

    exc = asyncio.run(run())
    assert f"echo_long on {profile.host}:{profile.port}" in str(exc)
    assert "the server says: echo_long" in str(exc)
