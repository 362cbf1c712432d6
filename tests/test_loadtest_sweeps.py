"""Tiny sweeps of the papers' four experiments through ``pyorb loadtest``.

Each command runs a couple of points in real server and generator processes
(Locust for some, pyorb's asyncio generator and the omniORBpy client for
others); the four run at once to keep the file short.  The checks are on
the outputs' shape and on physical sanity (a closed loop cannot beat N/D),
never on speed.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration  # opens sockets or starts processes

TIMEOUT_S = 150
COMMANDS = {
    "client-scalability": ["--models", "amh-st,omniorb-tpc", "--clients", "3", "--delays", "0.02"],
    "latency-scalability": ["--models", "amh-st", "--clients", "5", "--delays", "0,0.02"],
    "harkema": ["--models", "tpr-8", "--clients", "2", "--requests", "50"],
    "ami-smi": ["--models", "amh-st", "--calls", "200", "--threads", "2", "--window", "8"],
}


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sweeps")
    procs = {name: subprocess.Popen([sys.executable, "-m", "pyorb", "loadtest", name, "--quick", "--out", str(out),
                                     *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for name, args in COMMANDS.items()}
    results: dict[str, Any] = {"out": out}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
            results[name] = (proc.returncode, stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()  # its servers stop at their stdin's end of file
                proc.communicate()
    return results


def rows(out: Path, experiment: str) -> list[dict[str, str]]:
    with (out / f"{experiment}.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("experiment", list(COMMANDS))
def test_outputs_exist(sweeps: dict[str, Any], experiment: str) -> None:
    code, stderr = sweeps[experiment]
    assert code == 0, stderr
    assert "Traceback" not in stderr
    out: Path = sweeps["out"]
    assert (out / f"{experiment}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / f"{experiment}.md").read_text().startswith("| model")
    for row in rows(out, experiment):
        assert int(row["calls"]) > 0 and float(row["throughput"]) > 0, row
        assert int(row["errors"]) == 0, row
        assert 0 < float(row["min_ms"]) <= float(row["p50_ms"]) <= float(row["max_ms"]), row
        assert int(row["server_threads"]) >= 1 and float(row["server_rss_mib"]) > 1, row
        assert row["generator_bound"] in ("True", "False")


def test_client_scalability_rows(sweeps: dict[str, Any]) -> None:
    table = rows(sweeps["out"], "client-scalability")
    assert [(r["model"], r["clients"], r["delay_ms"]) for r in table] == [
        ("amh-st", "3", "20.0"), ("omniorb-tpc", "3", "20.0")]
    for r in table:
        assert r["generator"] == "locust"  # three users at 150 calls/s: Locust makes that load
        # A closed loop of N clients through a D-second sink cannot beat N/D.
        assert float(r["throughput"]) <= 1.05 * float(r["ideal"]) == pytest.approx(1.05 * 150)


def test_latency_scalability_rows(sweeps: dict[str, Any]) -> None:
    table = rows(sweeps["out"], "latency-scalability")
    assert [r["delay_ms"] for r in table] == ["0.0", "20.0"]
    slow = table[1]
    # every reply waited for the sink's delay (libuv timers, on a cached clock, may fire up to 1 ms early)
    assert float(slow["min_ms"]) >= 19.0
    assert float(slow["throughput"]) <= 1.05 * 5 / 0.02


def test_harkema_rows(sweeps: dict[str, Any]) -> None:
    table = rows(sweeps["out"], "harkema")
    assert [(r["cpu_ms"], r["delay_ms"]) for r in table] == [("1.0", "0.0"), ("5.0", "0.0"), ("0.0", "50.0")]
    assert {r["distribution"] for r in table} == {"exponential"}
    # Each client stops after its 50 requests.
    assert all(int(r["calls"]) <= 2 * 50 for r in table)


def test_ami_smi_rows(sweeps: dict[str, Any]) -> None:
    table = {r["label"]: r for r in rows(sweeps["out"], "ami-smi")}
    for orb in ("pyorb", "omniorb"):
        assert int(table[f"{orb} SMI sequential"]["calls"]) == 200
        assert int(table[f"{orb} AMI sequential"]["calls"]) == 200
        assert table[f"{orb} SMI 2 threads"]["clients"] == "2"
        assert table[f"{orb} AMI pipelined (8)"]["window"] == "8"
        assert table[f"{orb} AMI pipelined (8)"]["generator"] == ("omniorb" if orb == "omniorb" else "asyncio")


@pytest.mark.parametrize("args, message", [
    (["client-scalability", "--models", "warp-drive"], "unknown model"),
    (["client-scalability", "--models", "omniorb-pool-x"], "omniorb-pool-N"),
    (["latency-scalability", "--delays", "0,fast"], "comma-separated"),
    (["ami-smi", "--orbs", "corba"], "pyorb"),
])
def test_bad_options_are_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pyorb", "loadtest", *args, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_a_run_too_short_for_locusts_history_is_measured_over_the_whole_run(tmp_path: Path) -> None:
    from pyorb.loadtest import locustrun

    prefix = tmp_path / "locust"
    # What Locust 2.46 leaves after a 3 s run: the history has only its first row.
    (tmp_path / "locust_stats_history.csv").write_text(
        "Timestamp,User Count,Type,Name,Requests/s,Failures/s,Total Request Count,Total Failure Count\n"
        "1795422512,0,,Aggregated,0.000000,0.000000,0,0\n")
    (tmp_path / "locust_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
        "Max Response Time,50%,90%,99%\n"
        "CORBA,work,534,4,22,22.1,20,54,22,23,25\n"
        ",Aggregated,534,4,22,22.1,20,54,22,23,25\n")
    got = locustrun.read_results(prefix, 0.5, 3.0)
    assert (got["calls"], got["errors"], got["seconds"]) == (530, 4, 3.0)
    assert got["throughput"] == pytest.approx(530 / 3.0) and got["p99_ms"] == 25.0
