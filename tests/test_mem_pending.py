"""benchmarks/mem_pending.py works: one-line option errors and a tiny real run (no memory thresholds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
MODULE = "benchmarks.mem_pending"


def run(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", MODULE, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, cwd=ROOT)


@pytest.mark.parametrize(("args", "message"), [
    (["--clients", "ten"], "--clients must be comma-separated integers"),
    (["--clients", "0"], "--clients must each be in"),
    (["--clients", "100000"], "--clients must each be in"),
    (["--repeats", "0"], "--repeats must be at least 1"),
    (["--delay", "0"], "--delay must be in"),
    (["--settle", "-1"], "--settle must be in"),
])
def test_bad_options_get_one_line(args: list[str], message: str) -> None:
    done = run(*args, timeout=30)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_tiny_run_measures_the_middle_tier(tmp_path: Path) -> None:
    out = tmp_path / "points.json"
    done = run("--clients", "20", "--repeats", "1", "--delay", "0.2", "--settle", "0.6", "--bare", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "KiB of RSS per client" in done.stdout
    (point,) = json.loads(out.read_text())["20"]
    assert point["replies"] > 20  # the closed loop ran: more than one call per client
    assert point["in_flight"] > 0  # calls were pending while the middle tier was sampled
    assert 0 < point["started"] and 0 < point["connected"] and 0 < point["pending"]
