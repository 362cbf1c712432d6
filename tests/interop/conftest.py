"""Fixtures for interoperability tests: real omniORBpy and JacORB peers in processes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from pyorb.testing import LoopThread

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "tests" / "peers"
JACORB_PEERS = PEERS / "jacorb"


def run_omni_client(target: str, *options: str, timeout: float = 240) -> dict[str, tuple[bool, str]]:
    """Run tests/peers/omni_client.py; returns case -> (ok, detail)."""
    return _run_peer_client("omni_client", [sys.executable, str(PEERS / "omni_client.py"), target,
                                            "--timeout", "10", *options], timeout)


def _run_peer_client(name: str, command: list[str], timeout: float) -> dict[str, tuple[bool, str]]:
    """Run a peer client that prints one JSON line per case; returns case -> (ok, detail)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    results = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        results[row["case"]] = (row["ok"], row["detail"])
    if not results:
        raise AssertionError(f"{name} produced no result (rc {done.returncode}): {done.stderr[-2000:]}")
    return results


def failures(results: dict[str, tuple[bool, str]]) -> dict[str, str]:
    return {case: detail for case, (ok, detail) in results.items() if not ok}


class OmniServer:
    """tests/peers/omni_server.py in a subprocess; stopped by pid."""

    def __init__(self, *options: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PEERS / "omni_server.py"), *options],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        self.ior = self.proc.stdout.readline().strip()
        if not self.ior.startswith("IOR:"):
            self.stop()
            raise RuntimeError(f"omni_server did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def omni_server_factory() -> Iterator[Callable[..., OmniServer]]:
    started: list[OmniServer] = []

    def start(*options: str) -> OmniServer:
        server = OmniServer(*options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def jacorb_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The class path of the JacORB peers: JacORB's jars from Maven Central and tests/peers/jacorb compiled.

    Skips where there is no JDK or Maven; fetched and built once per session."""
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the JacORB peer needs a JDK and Maven: {', '.join(missing)} not on PATH")
    out = tmp_path_factory.mktemp("jacorb")
    fetched = subprocess.run(["mvn", "-q", "-f", str(JACORB_PEERS / "pom.xml"), "dependency:copy-dependencies",
                              f"-DoutputDirectory={out / 'lib'}"], capture_output=True, text=True, timeout=600)
    assert fetched.returncode == 0, f"cannot fetch JacORB: {fetched.stdout[-2000:]} {fetched.stderr[-2000:]}"
    jars = f"{out / 'lib'}{os.sep}*"
    sources = [str(source) for source in sorted(JACORB_PEERS.glob("*.java"))]
    built = subprocess.run(["javac", "-cp", jars, "-d", str(out / "classes"), *sources],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return f"{jars}{os.pathsep}{out / 'classes'}"


def run_jacorb_client(classpath: str, main: str, target: str, minor: int) -> dict[str, tuple[bool, str]]:
    """Run the JacORB client class ``main`` against ``target`` over GIOP 1.``minor``; returns case -> (ok, detail)."""
    return _run_peer_client(main, ["java", "-cp", classpath, main, target, str(minor)], 120)


@contextlib.contextmanager
def jacorb_server(classpath: str, main: str, minor: int) -> Iterator[str]:
    """The JacORB server class ``main`` in a process speaking GIOP 1.``minor``: yields its IOR, then
    closes its stdin (it shuts down) and waits for it, killing it by pid after 15 s."""
    proc = subprocess.Popen(["java", "-cp", classpath, main, str(minor)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ior = proc.stdout.readline().strip()
        assert ior.startswith("IOR:"), f"{main} did not start: {proc.stderr.read() if proc.stderr else ''}"
        yield ior
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # EOF: the server shuts down
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    with LoopThread() as runner:
        yield runner


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        if "interop" in str(item.fspath):
            item.add_marker(pytest.mark.interop)
            item.add_marker(pytest.mark.integration)
