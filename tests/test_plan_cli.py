"""``pyorb plan``: the strategies' models as a table, from options or a server's statistics."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyorb.cli.app import run
from pyorb.cli.plan import client_counts, duration, stats_json
from pyorb.server.call.stats import RecorderSnapshot, ServerStats, Timing

pytestmark = pytest.mark.integration  # opens sockets or starts processes


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def row(out: str, name: str) -> list[str]:
    """The cells of the table row whose first cell is ``name``."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").strip("│ ").split("│")]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name!r} in:\n{out}")


def test_a_blocking_workload_gets_a_thread_pool(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan(capsys, "--clients", "64", "--cpu", "200us", "--delay", "20ms")
    assert (code, err) == (0, "")
    assert "cpu 0.2 ms, delay 20 ms" in out and "synchronous servant" in out
    assert "recommended: thread_pool(64)" in out and "blocks its thread for 20 ms" in out
    # The loop is blocked 20.24 ms per call: about 49 calls/s, whatever the clients.
    assert row(out, "reactive")[1:3] == ["0", "49"]
    assert row(out, "thread_pool(8)")[1:3] == ["8", "394"]  # 8 / 20.3 ms


def test_an_async_servant_gets_amh(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(capsys, "-n", "500", "--cpu", "0.00005", "--delay", "0.05", "--async")
    assert code == 0
    assert "coroutine/AMH servant" in out
    assert "recommended: amh " in out and "holds no thread" in out


def test_a_range_of_clients_and_chosen_strategies(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = plan(capsys, "--clients", "1-16", "--cpu", "1ms", "--strategies", "reactive,thread_pool(8),amh-2",
                        "--async")
    assert code == 0
    assert row(out, "clients") == ["clients", "strategy", "threads", "calls/s", "response ms",
                                                "because"]
    assert "N=1" in out and "N=16" in out and "N=3" not in out  # powers of two and the ends
    assert row(out, "amh-2")[-1] == "1,932 (8.28)"  # two processes, two cores: 2 / 1.035 ms
    assert row(out, "16")[1:4] == ["amh-2", "0", "1,932"]


def stats_file(tmp_path: Path) -> Path:
    """A server's statistics: 1000 calls of 10 ms, 32 in flight."""
    op = RecorderSnapshot("work", served=1000, in_flight=32, failed=0, dropped=0, wait=Timing(0.001),
                          service=Timing(mean=0.010))
    path = tmp_path / "stats.json"
    path.write_text(stats_json(ServerStats(operations=(op,), connections=32)))
    return path


def test_statistics_from_a_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = plan(capsys, "--stats", str(stats_file(tmp_path)), "--cpu-share", "0.1")
    assert code == 0
    assert "cpu 1 ms, delay 9 ms" in out and "32 clients" in out
    assert "recommended: thread_pool(" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--cpu", "1x"], "error: Invalid value for --cpu: expected a duration"),
    (["--clients", "0"], "error: Invalid value for --clients: clients must be between 1"),
    (["--strategies", "thread_pool(x"], "error: malformed strategy 'thread_pool(x'"),
    (["--strategies", "nosuch"], "error: no calibration for strategy 'nosuch'"),
])
def test_bad_input_is_one_error_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, out, err = plan(capsys, *args)
    assert code in (1, 2) and out == ""
    assert err.startswith(message), err


@pytest.mark.parametrize(("args", "warning", "meant"), [
    (["--cpu", "200"], "warning: --cpu 200 has no unit, so it is 200 seconds per call; write 200ms or 200us",
     ["--cpu", "200s"]),
    (["--cpu", "1ms", "--delay", "2.5"], "warning: --delay 2.5 has no unit, so it is 2.5 seconds per call",
     ["--cpu", "1ms", "--delay", "2"]),
    (["--client-cpu", "34"], "warning: --client-cpu 34 has no unit", ["--client-cpu", "34us", "--think", "30"]),
    (["--cpu", "1ms", "--cpu-share", "0.5"], "warning: --cpu-share splits the service time of --stats: without "
                                             "--stats it is ignored", ["--cpu", "1ms"]),
])
def test_an_input_that_cannot_be_meant_is_warned_about(capsys: pytest.CaptureFixture[str], args: list[str],
                                                       warning: str, meant: list[str]) -> None:
    code, out, err = plan(capsys, *args)
    assert code == 0 and "recommended:" in out
    assert err.startswith(warning) and len(err.splitlines()) == 1, err
    # What was likely meant, or a plausible number of seconds (a think time is not a demand): no warning.
    assert plan(capsys, *meant)[::2] == (0, "")


@pytest.mark.parametrize(("text", "message"), [
    ("25", "error: Invalid value for --cpu-share: 25 is not a fraction of the service time (0 to 1): "
           "for 25 % write 0.25 or 25%"),
    ("250", "error: Invalid value for --cpu-share: a share of the service time is at most 1 (100%)"),
    ("half", "error: Invalid value for --cpu-share: expected a fraction such as 0.25 or 25%"),
])
def test_a_cpu_share_that_cannot_be_meant_is_refused(capsys: pytest.CaptureFixture[str],
                                                     text: str, message: str) -> None:
    code, out, err = plan(capsys, "--cpu-share", text)
    assert code == 2 and out == "" and err.startswith(message), err


def test_a_cpu_share_in_percent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = plan(capsys, "--stats", str(stats_file(tmp_path)), "--cpu-share", "25%")
    assert (code, err) == (0, "") and "cpu 2.5 ms, delay 7.5 ms" in out


def test_a_file_that_is_not_statistics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert plan(capsys, "--stats", str(bad))[2].startswith(f"error: {bad}: not JSON")
    bad.write_text('{"operations": [{"name": "x", "served": 3}]}')
    assert plan(capsys, "--stats", str(bad))[2].startswith(f"error: {bad}: not the JSON of server.stats()")


def test_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    png = tmp_path / "plan.png"
    pytest.importorskip("matplotlib")
    code, out, _ = plan(capsys, "--clients", "1,4,16", "--cpu", "1ms", "--plot", str(png))
    assert code == 0 and f"plot: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the extra were not installed
    code, _, err = plan(capsys, "--clients", "4", "--plot", str(tmp_path / "no.png"))
    assert code == 1 and err.startswith("error: --plot needs matplotlib (the loadtest extra)")


def test_parsers() -> None:
    assert duration("50ms", "--delay") == pytest.approx(0.05)
    assert duration("200us", "--cpu") == pytest.approx(2e-4)
    assert duration("1e-3", "--cpu") == pytest.approx(1e-3)
    assert client_counts("3-20") == [3, 4, 8, 16, 20]
    assert client_counts("8,1,8") == [1, 8]


def test_the_installed_command() -> None:
    done = subprocess.run([sys.executable, "-m", "pyorb", "plan", "-n", "8", "--cpu", "1ms"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "recommended: reactive" in done.stdout


def test_the_worked_example_of_the_docs_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/planning.md shows the output of its first command: it must not drift from the models."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "planning.md").read_text()
    block = page.split("```console\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[0].startswith("$ pyorb plan ")
    code, out, _ = plan(capsys, *block[0].split()[3:])
    assert code == 0
    assert out.splitlines() == block[1:]


def test_clients_on_the_same_host(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--clients", "150", "--delay", "10ms", "--async", "--middle", "--strategies", "amh,amh-2")
    code, alone, _ = plan(capsys, *args)
    assert code == 0 and "host:" not in alone
    code, shared, _ = plan(capsys, *args, "--client-cpu", "55us", "--sink-cpu", "40us", "--cores", "2")
    assert code == 0
    assert "host: 2 cores shared with clients (0.055 ms CPU per call) and a sink (0.04 ms)" in shared
    # Four processes (two workers, the generator, the sink) on two cores: amh-2 loses its second core.
    before, after = (int(row(out, "amh-2 *")[2].replace(",", "")) for out in (alone, shared))
    assert after < 0.8 * before
    code, _, err = plan(capsys, *args, "--client-cpu", "fast")
    assert code == 2 and "--client-cpu" in err
