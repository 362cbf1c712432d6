"""The documented way to run a server (docs/getting-started.md, "Running a
server": the ``python server`` block, run exactly as written) leaves on
SIGTERM without costing a caller an error.

Two replicas of it in their own processes form an object group; ten
closed-loop callers call through the group reference while one replica is
sent SIGTERM.  A server killed by the signal (any other way of waiting)
would fail the calls it held with COMM_FAILURE.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing.kit import child_env
from tests.test_docs import blocks_of

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
(SERVER,) = [b for b in blocks_of(ROOT / "docs" / "getting-started.md") if "server" in b.info]
Stock = pyorb.load_idl(ROOT / "idl" / "stock.idl").Stock
CALLERS = 10
STARTUP_S = 60.0
EXIT_S = 30.0


class Replica:
    """The documented server program in its own process; its first line is its IOR."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=child_env(),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        assert self.proc.stdout is not None
        self.ior = self.proc.stdout.readline().strip()
        assert self.ior.startswith("IOR:"), f"the server printed {self.ior!r}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.communicate(timeout=EXIT_S)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[list[Replica]]:
    script = tmp_path / "quote_server.py"
    script.write_text(SERVER.text, encoding="utf-8")
    started: list[Replica] = []
    try:
        for _ in range(2):
            started.append(Replica(script))
        yield started
    finally:
        for replica in started:
            replica.stop()


class ClosedLoop:
    """``CALLERS`` callers, each calling again as soon as its call returns."""

    def __init__(self, quoter: object) -> None:
        self.quoter = quoter
        self.done = 0
        self.errors: list[str] = []
        self.stopping = asyncio.Event()

    async def caller(self) -> None:
        while not self.stopping.is_set():
            try:
                assert await self.quoter.get_quote("ACME", timeout=10.0) == 7  # type: ignore[attr-defined]
            except CORBA.Exception as exc:
                self.errors.append(f"{type(exc).__name__} {exc}")
            else:
                self.done += 1

    async def until_done(self, calls: int) -> None:
        deadline = asyncio.get_running_loop().time() + STARTUP_S
        while self.done < calls:
            assert asyncio.get_running_loop().time() < deadline, (self.done, self.errors)
            await asyncio.sleep(0.01)


@pytest.mark.asyncio
@pytest.mark.client_loop_only
async def test_the_documented_server_leaves_on_sigterm_and_no_caller_sees_an_error(
        replicas: list[Replica]) -> None:
    group = group_ior([IOR.from_string(r.ior) for r in replicas], GroupComponent("getting-started", 1))
    leaving = replicas[0].proc
    async with pyorb.Client(balancing="round_robin") as client:
        load = ClosedLoop(client.resolve(group.to_string(), Stock.Quoter))
        callers = [asyncio.create_task(load.caller()) for _ in range(CALLERS)]
        try:
            await load.until_done(100)  # both replicas busy
            leaving.send_signal(signal.SIGTERM)
            status = await asyncio.get_running_loop().run_in_executor(None, leaving.wait, EXIT_S)
            await load.until_done(load.done + 100)  # the other replica serves on
        finally:
            load.stopping.set()
            await asyncio.gather(*callers)
    assert load.errors == []
    assert status == 0, leaving.communicate()[0]
