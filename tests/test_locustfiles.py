"""The papers' locustfiles (loadtests/locustfiles/) run headless under plain
Locust against the real servers their docstrings name, and Locust's own CSV
statistics count the calls.

Locust runs in subprocesses only (it monkey-patches the process with gevent).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from pyorb.testing.kit import ServerProcess
from tests.interop.servants import TypesSync
from tests.test_docs import blocks_of
from tests.test_locust import ROOT, Run, csv_row, run_locust

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Start = Callable[..., ServerProcess]


def sink(start: Start, *options: str) -> ServerProcess:
    return start([sys.executable, "-m", "pyorb.servers.sink", *options])


def middle(start: Start, sink_ior: str, model: str) -> ServerProcess:
    return start([sys.executable, "-m", "pyorb.servers.middle", "--sink", sink_ior, "--model", model])


def calls(run: Run) -> int:
    """The request count of ``work`` in Locust's CSV file, after checking its type and that none failed."""
    assert run.returncode == 0, run.stderr[-3000:]
    row = csv_row(run, "work")
    assert row["Type"] == "CORBA"
    assert int(row["Failure Count"]) == 0, run.failures
    assert csv_row(run, "Aggregated")["Request Count"] == row["Request Count"]  # nothing under another name
    return int(row["Request Count"])


@pytest.mark.parametrize(("locustfile", "model", "delay"), [
    ("client_scalability.py", "amh-st", "0.02"),
    ("latency_scalability.py", "tpc", "0.01"),
])
def test_middle_tier_experiments(pyorb_server_process: Start, tmp_path: Path, locustfile: str, model: str,
                                 delay: str) -> None:
    back = sink(pyorb_server_process, "--delay", delay)
    front = middle(pyorb_server_process, back.ior, model)
    run = run_locust(locustfile, front.ior, tmp_path, "-u", "3", "-r", "3", "--run-time", "2s",
                     "--sink-delay", delay)
    assert calls(run) > 0
    ideal = 3 / float(delay)
    assert f"ideal N/D = {ideal:.1f}/s" in run.stderr  # the summary knows the sink's delay


def test_harkema_users_stop_after_their_requests(pyorb_server_process: Start, tmp_path: Path) -> None:
    server = sink(pyorb_server_process, "--model", "tpr-8", "--cpu", "0.001", "--distribution", "exponential",
                  "--seed", "1")
    run = run_locust("harkema.py", server.ior, tmp_path, "-u", "3", "-r", "3", "--run-time", "60s",
                     "--requests-per-user", "5")
    assert calls(run) == 3 * 5
    # The run ended by itself, not at --run-time (which would have taken a minute).
    assert "every user has made its requests" in run.stderr
    assert "--run-time limit reached" not in run.stderr


def test_ami_smi_sequential_latency(pyorb_server_process: Start, tmp_path: Path) -> None:
    server = sink(pyorb_server_process, "--model", "amh-st")
    run = run_locust("ami_smi.py", server.ior, tmp_path, "-u", "1", "-r", "1", "--run-time", "60s",
                     "--requests-per-user", "200")
    assert calls(run) == 200
    summary = _line(run.stderr, "latency of 200 calls:")
    assert all(word in summary for word in ("min", "mean", "max", "jitter (std dev)")), summary


def _line(text: str, start: str) -> str:
    found = [line[line.index(start):] for line in text.splitlines() if start in line]
    assert found, text[-3000:]
    return found[-1]


@pytest.mark.parametrize(("locustfile", "option", "value"), [
    ("harkema.py", "--requests-per-user", "lots"),
    ("ami_smi.py", "--requests-per-user", "-5"),
    ("client_scalability.py", "--sink-delay", "soon"),
    ("latency_scalability.py", "--sink-delay", "-0.1"),
])
def test_a_bad_option_value_is_one_message(locustfile: str, option: str, value: str, tmp_path: Path) -> None:
    run = run_locust(locustfile, "corbaloc::1.2@127.0.0.1:1/Sink", tmp_path, f"{option}={value}")
    assert run.returncode != 0
    assert f"argument {option}: must be a number of at least 0" in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.own_stderr, run.stderr[-2000:]


def test_the_locustfile_of_the_docs_calls_with_the_idl_struct_classes(pyorb_server: Callable[..., Any],
                                                                       tmp_path: Path) -> None:
    """docs/locust.md's locustfile, as written, takes a struct and an enum from load_idl."""
    (block,) = [b for b in blocks_of(ROOT / "docs" / "locust.md") if "load_idl" in b.text]
    locustfile = tmp_path / "points.py"
    locustfile.write_text(block.text, encoding="utf-8")
    (tmp_path / "idl").symlink_to(ROOT / "idl")  # Locust runs in tmp_path; the locustfile names idl/
    server = pyorb_server(TypesSync())
    run = run_locust(str(locustfile), server.ior, tmp_path, "-u", "2", "-r", "2", "--run-time", "2s")
    assert run.returncode == 0, run.stderr[-3000:]
    for name in ("echo_point", "echo_color"):
        row = csv_row(run, name)
        assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0, (row, run.failures)
