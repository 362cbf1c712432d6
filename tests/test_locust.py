"""Locust runs the locustfiles headless against real pyorb servers, and its
own statistics (CSV files, JSON summary) count the CORBA calls.

Locust runs in subprocesses only: importing it monkey-patches the process
with gevent, which must never happen inside pytest.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILES = ROOT / "loadtests" / "locustfiles"
RUN_TIME = "2s"


class Peer:
    """A server script in a subprocess that prints its reference first; stopped by pid."""

    def __init__(self, script: Path, *options: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *options],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        self.ref = self.proc.stdout.readline().strip()
        if not self.ref.startswith(("IOR:", "corbaloc:")):
            self.stop()
            raise RuntimeError(f"{script.name} did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture(scope="module")
def echo_server() -> Iterator[Peer]:
    peer = Peer(ROOT / "servers" / "pyorb_echo.py")
    yield peer
    peer.stop()


class Run:
    """One finished headless Locust run and the statistics it left."""

    def __init__(self, done: subprocess.CompletedProcess[str], prefix: Path) -> None:
        self.returncode = done.returncode
        self.stderr = done.stderr
        self.summary = _largest_json_list(done.stdout)
        self.stats = _rows(Path(f"{prefix}_stats.csv"))
        self.failures = _rows(Path(f"{prefix}_failures.csv"))

    def entry(self, name: str) -> dict[str, Any]:
        """The final JSON statistics of requests called ``name``."""
        (found,) = [e for e in self.summary if e["name"] == name]
        return found


def _largest_json_list(text: str) -> list[dict[str, Any]]:
    """The master's --json statistics (with --processes, workers print an empty list too)."""
    decoder, found, pos = json.JSONDecoder(), [], 0
    while (pos := text.find("[", pos)) >= 0:
        value, pos = decoder.raw_decode(text, pos)
        found.append(value)
    return max(found, key=len, default=[])


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def run_locust(locustfile: str, host: str, tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> Run:
    prefix = tmp_path / "stats"
    cmd = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILES / locustfile), "--headless",
        "-u", "10", "-r", "10", "--run-time", RUN_TIME, "--stop-timeout", "5",
        "--host", host, "--csv", str(prefix), "--only-summary", "--json", *options,
    ]
    done = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False,
        env={**_clean_env(), **(env or {})},
    )
    return Run(done, prefix)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYORB_")}


def csv_row(run: Run, name: str) -> dict[str, str]:
    (row,) = [r for r in run.stats if r["Name"] == name]
    return row


@pytest.mark.parametrize("processes", [1, 2], ids=["one-process", "distributed-2"])
def test_echo_calls_are_counted_by_locust(echo_server: Peer, tmp_path: Path, processes: int) -> None:
    options = ["--processes", "2"] if processes > 1 else []
    run = run_locust("echo.py", echo_server.ref, tmp_path, *options)
    assert run.returncode == 0, run.stderr[-3000:]
    row = csv_row(run, "ping")
    assert row["Type"] == "CORBA"
    assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0
    assert float(row["Average Content Size"]) == 8.0  # the reply body: one unsigned long long
    final = run.entry("ping")
    assert final["method"] == "CORBA"
    assert final["num_requests"] >= int(row["Request Count"]) and final["num_failures"] == 0


@pytest.mark.parametrize(
    ("odd", "error"),
    [("raise", "NO_RESOURCES"), ("wrong", "work returned an unexpected result")],
    ids=["server-raises", "wrong-token"],
)
def test_sink_failures_are_counted_by_locust(tmp_path: Path, odd: str, error: str) -> None:
    sink = Peer(ROOT / "tests" / "sink_peer.py", "--odd", odd)
    try:
        run = run_locust("sink.py", sink.ref, tmp_path)
    finally:
        sink.stop()
    assert run.returncode == 1, run.stderr[-3000:]  # Locust's exit code when requests failed
    final = run.entry("work")
    assert final["method"] == "CORBA"
    # Odd tokens fail, even ones succeed: about half of each.
    assert 0 < final["num_failures"] < final["num_requests"]
    assert any(r["Name"] == "work" and error in r["Error"] for r in run.failures), run.failures
    assert int(csv_row(run, "work")["Failure Count"]) > 0


@pytest.mark.parametrize(
    ("host", "env", "message"),
    [
        ("not-a-reference", {}, "is not an IOR or corbaloc URL"),
        ("corbaloc::1.2@127.0.0.1:1/Echo", {"PYORB_CALL_TIMEOUT": "soon"}, "PYORB_CALL_TIMEOUT must be a positive"),
    ],
    ids=["bad-host", "bad-timeout"],
)
def test_bad_input_ends_locust_with_a_message(tmp_path: Path, host: str, env: dict[str, str], message: str) -> None:
    run = run_locust("echo.py", host, tmp_path, env=env)
    assert run.returncode != 0
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def test_unreachable_server_counts_transient_failures(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = run_locust("echo.py", f"corbaloc::1.2@127.0.0.1:{port}/Echo", tmp_path, "-u", "2", "-r", "2")
    final = run.entry("ping")
    assert final["num_requests"] == final["num_failures"] > 0
    assert all("TRANSIENT" in r["Error"] for r in run.failures), run.failures
