"""benchmarks/bench_strategies.py runs end to end in --quick mode (a smoke run, not a timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
MODEL_ROWS = ("reactive", "thread_pool(8)", "thread_per_connection", "thread_per_request", "threaded",
              "locality(8)", "amh (AMH servant)", "omniORBpy thread/conn", "omniORBpy pool(8)",
              "floor: bare uvloop", "floor: bare + 8 threads", "floor: bare + thread/conn")


def test_quick_run_reports_every_model(tmp_path: Path) -> None:
    markdown = tmp_path / "strategies.md"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_strategies", "--quick",
                           "--markdown", str(markdown)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    text = markdown.read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("|") and not line.startswith("|-")}
    for model in MODEL_ROWS:
        assert model in rows, (model, text)
        # A measured row: a number of calls/s and of server CPU µs per call.
        cells = [c.strip() for c in rows[model].split("|")[1:-1]]
        assert cells[1] != "—" and cells[4] != "—", rows[model]
    assert "Targets (throughput ratios)" in text
    assert "thread_per_request ÷ thread_per_connection" in text
    assert "thread_pool(8) ÷ floor: bare + 8 threads" in text
    assert "thread_per_connection ÷ floor: bare + thread/conn" in text
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
