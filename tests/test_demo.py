"""The README's main job runs and reports a sane table."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # opens sockets or starts processes


def test_demo_runs_and_reports() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pyorb.demo", "--clients", "50", "--seconds", "1", "--delay", "0.05"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for row in ("clients (closed loop)", "throughput", "efficiency", "errors or wrong replies"):
        assert row in out, out
    pending = next(line for line in out.splitlines() if "pending in the middle tier" in line)
    assert "50" in pending  # all 50 clients were pending in the middle tier at once


def test_each_client_makes_its_first_call_however_short_the_run() -> None:
    """The measurement starts with the clients, not before the progress bar's import: a run
    shorter than the start-up (as a 1 s run is on a loaded machine) still calls from every client."""
    done = subprocess.run(
        [sys.executable, "-m", "pyorb.demo", "--clients", "50", "--seconds", "0.001", "--delay", "0.05"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {cells[1].strip(): cells[2].strip() for cells in (line.split("│") for line in done.stdout.splitlines())
            if len(cells) == 4}
    assert int(rows["replies"]) >= 50, done.stdout
    assert rows["requests pending in the middle tier (peak)"] == "50", done.stdout


def test_demo_rejects_bad_options() -> None:
    done = subprocess.run([sys.executable, "-m", "pyorb.demo", "--clients", "0"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "must be positive" in done.stderr
    assert "Traceback" not in done.stderr
