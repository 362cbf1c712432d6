"""Every example runs to completion and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # opens sockets or starts processes

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXPECT = {
    "amh_stock_quoter.py": ["300 quotes through the AMH middle tier, first three: [120, 7, 98]", "Invalid_Stock_Symbol"],
    "ami_client.py": ["futures: 1000 replies, sum 2000", "callback: 8", "poller: 6 ready now? True"],
    "strategies.py": ["thread_pool(4)", "thread_per_connection", "│ 16 ",
                      "per operation: ping ran on MainThread, notify on pyorb-pool"],
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example_runs(name: str) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=60,
                          cwd=EXAMPLES.parent, check=False)
    assert done.returncode == 0, done.stderr
    for line in EXPECT[name]:
        assert line in done.stdout, done.stdout


def test_every_example_is_tested() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(EXPECT)
