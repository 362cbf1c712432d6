"""A client's deadline through three tiers: how much work the sink starts after the client gave up.

The chain: this process's pyorb client -> ``pyorb.servers.middle --model amh``
(its own ``--timeout 30``) -> ``tests/peers/deadline_sink.py`` under
``thread_pool(1)``, each call sleeping ``--delay`` seconds.  The client sends
``--calls`` calls at once, each with ``timeout=--timeout``: the sink can
finish about timeout/delay of them in time, the others wait in its queue.
Once the sink has had time to work through the whole queue it is stopped and
its record read.  Per run: the calls answered, the calls that timed out, the
sink's starts after the client had given up on that call (more than
``MARGIN`` later: the client's timer and the two hops), and the calls the
sink counted as expired (never started).  ``--tree DIR`` runs the middle tier
and the sink from another checkout (the client stays this one's).

    python -m benchmarks.deadline_chain --runs 3
    python -m benchmarks.deadline_chain --runs 3 --tree /tmp/pyorb-before
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
MARGIN = 0.1
"""Seconds a sink start must trail the client's give-up to count as late work."""


@dataclass
class ChainRun:
    """One run of the chain: the client's view and the sink's record."""

    answered: int = 0
    timed_out: int = 0
    gave_up: dict[int, float] = field(default_factory=dict)
    """token -> time.time() when the client got TIMEOUT."""
    deadlines: dict[int, float] = field(default_factory=dict)
    """token -> the client's deadline, in time.monotonic() seconds."""
    starts: list[dict[str, Any]] = field(default_factory=list)
    """The sink's record: one entry per call whose servant code started."""
    sink_expired: int = 0

    @property
    def started_late(self) -> list[dict[str, Any]]:
        """Sink starts more than MARGIN after the client gave up on that call."""
        return [s for s in self.starts if s["token"] in self.gave_up and s["started"] > self.gave_up[s["token"]] + MARGIN]


def _start(tree: Path, argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen([sys.executable, *argv], cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ior = proc.stdout.readline().strip()
    proc.stdout.readline()  # the corbaloc URL
    if not ior.startswith("IOR:"):
        _stop(proc)
        raise RuntimeError(f"{argv[:3]} did not start: {proc.stderr.read() if proc.stderr else ''}")
    return proc, ior


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        proc.communicate(timeout=20)  # stdin end of file: it drains and exits
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


async def _calls(middle: str, calls: int, timeout: float, run: ChainRun) -> None:
    import pyorb
    from omniORB import CORBA
    from pyorb.idl import bench_idl

    async def one(proxy: Any, token: int) -> None:
        run.deadlines[token] = time.monotonic() + timeout
        try:
            await proxy.work(token, timeout=timeout)
            run.answered += 1
        except CORBA.TIMEOUT:
            run.gave_up[token] = time.time()
            run.timed_out += 1

    async with pyorb.Client() as client:
        proxy = client.resolve(middle, bench_idl().Bench.Sink)
        await proxy.work(0, timeout=30)  # connections open, the middle tier's too
        await asyncio.gather(*(one(proxy, token) for token in range(1, calls + 1)))


def run_chain(tree: Path = ROOT, calls: int = 12, timeout: float = 1.0, delay: float = 0.25) -> ChainRun:
    """One run of the chain with the middle tier and the sink from ``tree``; see the module's doc."""
    run = ChainRun()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "sink.jsonl"
        sink, sink_ior = _start(tree, [str(ROOT / "tests/peers/deadline_sink.py"), "--report", str(report),
                                       "--delay", str(delay), "--strategy", "thread_pool(1)"])
        try:
            middle, middle_ior = _start(tree, ["-m", "pyorb.servers.middle", "--sink", sink_ior, "--model", "amh",
                                               "--timeout", "30"])
            try:
                asyncio.run(_calls(middle_ior, calls, timeout, run))
                time.sleep(max(0.0, calls * delay - timeout) + 0.5)  # the queue the sink would work through
            finally:
                _stop(middle)
        finally:
            _stop(sink)
        _read(report.open(), run)
    return run


def _read(lines: IO[str], run: ChainRun) -> None:
    with lines:
        for line in lines:
            entry = json.loads(line)
            if "token" in entry and entry["token"] != 0:
                run.starts.append(entry)
            elif "expired" in entry:
                run.sink_expired = entry["expired"]


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from benchmarks.common import range_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--calls", type=int, default=12, help="calls sent at once (default 12)")
    parser.add_argument("--timeout", type=float, default=1.0, help="the client's timeout, seconds (default 1)")
    parser.add_argument("--delay", type=float, default=0.25, help="the sink's time per call, seconds (default 0.25)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout the middle tier and sink run from")
    args = parser.parse_args()
    runs = [run_chain(args.tree.resolve(), args.calls, args.timeout, args.delay) for _ in range(args.runs)]
    table = Table(title=f"{args.calls} calls, timeout {args.timeout:g} s, sink thread_pool(1) x {args.delay:g} s, "
                        f"middle and sink from {args.tree}; {args.runs} runs (ranges are the spread)")
    for col in ("answered", "timed out", "sink starts", "sink starts after the client gave up", "sink expired"):
        table.add_column(col, justify="right")
    table.add_row(*(range_text([float(f(r)) for r in runs], "{:.0f}") for f in (
        lambda r: r.answered, lambda r: r.timed_out, lambda r: len(r.starts), lambda r: len(r.started_late),
        lambda r: r.sink_expired)))
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
