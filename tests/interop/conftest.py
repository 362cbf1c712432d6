"""Fixtures for interoperability tests: real omniORBpy peers in processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from pyorb.testing import LoopThread

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "tests" / "peers"


def run_omni_client(target: str, *options: str, timeout: float = 240) -> dict[str, tuple[bool, str]]:
    """Run tests/peers/omni_client.py; returns case -> (ok, detail)."""
    done = subprocess.run(
        [sys.executable, str(PEERS / "omni_client.py"), target, "--timeout", "10", *options],
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    results = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        results[row["case"]] = (row["ok"], row["detail"])
    if not results:
        raise AssertionError(f"omni_client produced no result (rc {done.returncode}): {done.stderr[-2000:]}")
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


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    with LoopThread() as runner:
        yield runner


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        if "interop" in str(item.fspath):
            item.add_marker(pytest.mark.interop)
