"""What a new user sees: tables with units, figures whose footer fits, and
commands that say what to do instead of failing vaguely."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pyorb
from pyorb.loadtest import report

from tests.test_strategies import Echo

pytestmark = pytest.mark.integration  # opens sockets or starts processes


@pytest.mark.parametrize("width", [3.0, 5.0, 12.0])
def test_figure_footer_stays_inside_the_figure(width: float) -> None:
    plt = report._pyplot()
    fig, ax = plt.subplots(figsize=(width, 4))
    ax.plot([1, 2, 3], [1, 4, 9])
    text = report._footer(fig, report.NOTE)
    renderer = fig.canvas.get_renderer()
    box = text.get_window_extent(renderer)
    plt.close(fig)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1, (box, fig.bbox)
    assert box.y0 >= 0
    # Nothing of the note is lost by the wrapping.
    assert " ".join(text.get_text().split()) == " ".join(report.NOTE.split())


def test_stats_table_has_units_and_does_not_wrap_operation_names() -> None:
    from rich.console import Console

    server = pyorb.Server(strategy="thread_pool(2)")
    server.activate(Echo(), "x")
    console = Console(record=True, width=100)
    console.print(server.stats().table())
    text = console.export_text()
    assert "operation Bench::Echo.ping" in text  # on one line, however narrow the terminal
    assert "strategy thread_pool(2)" in text
    assert "ms" in text.split("operation", 1)[0]  # time columns say their unit in the header


LOADTEST_HIDDEN = (
    "import sys\n"
    "for name in ('locust', 'matplotlib', 'psutil'):\n"
    "    sys.modules[name] = None  # as if the loadtest extra were not installed\n"
    "from pyorb.cli import main\n"
    "sys.argv = ['pyorb'] + sys.argv[1:]\n"
    "sys.exit(main())\n"
)


@pytest.mark.parametrize("args", [["loadtest"], ["loadtest", "client-scalability", "--quick"]])
def test_loadtest_without_the_extra_says_how_to_install_it(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", LOADTEST_HIDDEN, *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "No such command" not in done.stderr
    assert "[loadtest]" in done.stderr and "pip install" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_demo_says_what_it_does_and_what_the_table_shows() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pyorb.demo", "--clients", "20", "--seconds", "0.5", "--delay", "0.05"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    before_table, _, after_table = done.stdout.partition("pyorb demo:")
    # Before measuring: what is being started and for how long.
    assert "20 closed-loop clients" in before_table and "0.5 s" in before_table, done.stdout
    # After the table: its meaning in words, with the measured numbers.
    assert "In words:" in after_table, done.stdout
    assert "of the ideal" in after_table and "pending" in after_table
