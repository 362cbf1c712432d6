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
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.ior import IOR, build_ior, to_corbaloc
from pyorb.testing import LoopThread
from tests.interop.servants import TypesCoroutine

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "tests" / "peers" / "jacorb"
Interop = pyorb.load_idl(ROOT / "idl" / "interop.idl").Interop
CLIENT_CASES = {"echo_string", "echo_string_latin1", "echo_string_unicode", "echo_wstring", "echo_wstring_latin1",
                "echo_wstring_unicode", "echo_wstring_empty", "echo_wchar", "echo_char"}


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the JacORB peer needs a JDK and Maven: {', '.join(missing)} not on PATH")
    out = tmp_path_factory.mktemp("jacorb")
    fetched = subprocess.run(["mvn", "-q", "-f", str(PEER / "pom.xml"), "dependency:copy-dependencies",
                              f"-DoutputDirectory={out / 'lib'}"], capture_output=True, text=True, timeout=600)
    assert fetched.returncode == 0, f"cannot fetch JacORB: {fetched.stdout[-2000:]} {fetched.stderr[-2000:]}"
    jars = f"{out / 'lib'}{os.sep}*"
    built = subprocess.run(["javac", "-cp", jars, "-d", str(out / "classes"), str(PEER / "JacClient.java"),
                            str(PEER / "JacServer.java")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return f"{jars}{os.pathsep}{out / 'classes'}"


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
    done = subprocess.run(["java", "-cp", classpath, "JacClient", target, str(minor)],
                          capture_output=True, text=True, timeout=120)
    results = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        results[row["case"]] = (row["ok"], row["detail"])
    assert results.keys() == CLIENT_CASES, f"JacClient ended (rc {done.returncode}): {done.stderr[-2000:]}"
    return results


@pytest.mark.parametrize("minor", [1, 2])
def test_jacorb_client_calls_pyorb(classpath: str, pyorb_server: tuple[pyorb.Server, bytes], minor: int) -> None:
    """Every text and wide-text echo from JacORB; the IOR's IIOP profile version sets JacORB's GIOP."""
    server, key = pyorb_server
    ior = build_ior(server.adapter.type_id(key), server.host, server.port, key, version=(1, minor)).to_string()
    results = run_client(classpath, ior, minor)
    assert not {case: detail for case, (ok, detail) in results.items() if not ok}


def test_jacorb_client_through_corbaloc(classpath: str, pyorb_server: tuple[pyorb.Server, bytes]) -> None:
    server, key = pyorb_server
    results = run_client(classpath, to_corbaloc(server.host, server.port, key), 2)
    assert not {case: detail for case, (ok, detail) in results.items() if not ok}


@pytest.fixture(params=[1, 2], ids=["giop1.1", "giop1.2"])
def jacorb_server(classpath: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    proc = subprocess.Popen(["java", "-cp", classpath, "JacServer", str(request.param)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ior = proc.stdout.readline().strip()
        assert ior.startswith("IOR:"), proc.stderr.read() if proc.stderr else ""
        yield ior, request.param
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # EOF: JacServer shuts down
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


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
