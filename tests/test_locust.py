"""Locust runs the locustfiles headless against real pyorb servers, and its
own statistics (CSV files, JSON summary) count the CORBA calls.

Locust runs in subprocesses only: importing it monkey-patches the process
with gevent, which must never happen inside pytest.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.test_blocking_client import Peer, sink_peer

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILES = ROOT / "loadtests" / "locustfiles"
RUN_TIME = "3s"


@pytest.fixture(scope="module")
def echo_server() -> Iterator[Peer]:
    peer = Peer("pyorb.servers.echo")
    yield peer
    peer.stop()


GEVENT_EXIT_NOISE = re.compile(
    r"Exception ignored in: <function _removeHandlerRef[^\n]*\n(?:[ \t].*\n|Traceback.*\n)*"
    r"RuntimeError: greenlet is being finalized\n?")


class Run:
    """One finished headless Locust run and the statistics it left."""

    def __init__(self, done: subprocess.CompletedProcess[str], prefix: Path) -> None:
        self.returncode = done.returncode
        self.stderr = done.stderr
        self.summary = _largest_json_list(done.stdout)
        self.stats = _rows(Path(f"{prefix}_stats.csv"))
        self.failures = _rows(Path(f"{prefix}_failures.csv"))

    @property
    def own_stderr(self) -> str:
        """stderr without gevent 25's noise at interpreter exit (logging's
        weakref callback finds the greenlet machinery already finalized; the
        last gevent release for Python 3.10, which Locust 2.46 requires, has
        it, gevent 26 does not): what is left is Locust's and pyorb's."""
        return GEVENT_EXIT_NOISE.sub("", self.stderr)

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
    final = run.entry("ping")
    assert final["method"] == "CORBA"
    assert final["num_requests"] > 0 and final["num_failures"] == 0
    assert final["total_content_length"] == 8 * final["num_requests"]  # reply body: one unsigned long long
    # The CSV files are rewritten every second while Locust runs; workers
    # report to the master every 3 s, so only a one-process run's CSV is
    # sure to have counted calls by the end of so short a test.
    rows = [r for r in run.stats if r["Name"] == "ping"]
    if processes == 1 or rows:
        (row,) = rows
        assert row["Type"] == "CORBA"
        assert 0 < int(row["Request Count"]) <= final["num_requests"] and int(row["Failure Count"]) == 0


@pytest.mark.parametrize(
    ("odd", "error"),
    [("raise", "NO_RESOURCES"), ("wrong", "work returned an unexpected result")],
    ids=["server-raises", "wrong-token"],
)
def test_sink_failures_are_counted_by_locust(tmp_path: Path, odd: str, error: str) -> None:
    sink = sink_peer("--odd", odd)
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


MISSING_IDL = """
from locust import task
from pyorb.locust import CorbaUser

class QuoteUser(CorbaUser):
    idl = "no/such.idl"
    interface = "Stock::Quoter"

    @task
    def quote(self) -> None:
        self.client.get_quote("ACME")
"""


@pytest.mark.parametrize(
    ("host", "env", "message"),
    [
        ("not-a-reference", {}, "is not an IOR or corbaloc URL"),
        ("corbaloc::1.2@127.0.0.1:1/Echo", {"PYORB_CALL_TIMEOUT": "soon"}, "PYORB_CALL_TIMEOUT must be a positive"),
        ("corbaloc::1.2@127.0.0.1:1/Echo", {"PYORB_GIOP": "2.0"}, "PYORB_GIOP must be one of 1.0, 1.1, 1.2"),
    ],
    ids=["bad-host", "bad-timeout", "bad-giop"],
)
def test_bad_input_ends_locust_with_its_message_alone(tmp_path: Path, host: str, env: dict[str, str],
                                                      message: str) -> None:
    run = run_locust("echo.py", host, tmp_path, env=env)
    assert run.returncode != 0
    assert message in run.stderr
    assert "Traceback" not in run.stderr and "greenlet" not in run.stderr, run.stderr[-2000:]


def test_a_missing_idl_ends_locust_with_its_message_alone(tmp_path: Path) -> None:
    locustfile = tmp_path / "quotes.py"
    locustfile.write_text(MISSING_IDL, encoding="utf-8")
    run = run_locust(str(locustfile), "corbaloc::1.2@127.0.0.1:1/Quoter", tmp_path)
    assert run.returncode != 0
    assert "QuoteUser.idl: " in run.stderr and "no/such.idl" in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "greenlet" not in run.stderr, run.stderr[-2000:]
