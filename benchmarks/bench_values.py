#!/usr/bin/env python3
"""Value-type round trips: a sequence of small values, pyorb<->pyorb against omniORBpy<->omniORBpy.

Each repetition starts a pyorb server (``pyorb serve``) and an omniORBpy
server (``pyorb.testing.omnipeer``) serving tests/peers/values_servant.py,
then times ``--calls`` calls of ``echo_points`` with ``--values`` distinct
``Values::Point`` values (two longs and a short string) from a pyorb
blocking client in this process and from an omniORBpy client process (timed
inside that process, after its first call).  The order of the two systems
alternates between repetitions; medians, min-max spreads and the ratio of
the medians come from the same run.

Besides the wall-clock time per call, each point records the CPU time per
call of the client and the server process (all their threads), which a
shared machine's load distorts far less; and the run measures the floor
both systems share: omniORB's own marshal and unmarshal of the sequence,
once each per side, the part of a round trip no ORB above omniORB's
marshaler avoids.

    python -m benchmarks.bench_values --values 3000 --calls 20 --repeats 3

``--instructions`` counts instead, with callgrind, the CPU instructions per
value of a round trip, which the machine's load does not change: the floor
(in one process), then each system's server and client processes (each run
under callgrind, the server until its client is done); each count runs with
2 and with 6 calls, and the difference per value cancels start-up.

    python -m benchmarks.bench_values --values 3000 --instructions
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
IDL = ROOT / "idl" / "values.idl"


def points(values_mod: Any, n: int) -> list[Any]:
    return [values_mod.Point(k, -k, f"p{k % 100}") for k in range(n)]


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system, every thread) the process ``pid`` has used."""
    import psutil  # type: ignore[import-untyped]

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def omni_rounds(orb: Any, echo: Any, n: int, calls: int, server_pid: int) -> list[float]:
    """``omni_call`` entry: seconds per call of echo_points from an omniORBpy client, then the
    client's and the server's CPU seconds per call."""
    import Values  # loaded by omnipeer from --idl

    sent = points(Values, n)
    echo.echo_points(sent)  # connection and first-use costs out of the timing
    return timed(lambda: len(echo.echo_points(sent)) == n, calls, server_pid)


def pyorb_rounds(values_mod: Any, ior: str, n: int, calls: int, server_pid: int) -> list[float]:
    """Seconds per call of echo_points from a pyorb blocking client, then CPU seconds per call as omni_rounds."""
    import pyorb

    sent = points(values_mod, n)
    with pyorb.BlockingClient() as client:
        echo = client.resolve(ior, values_mod.Echo)
        echo.echo_points(sent)
        return timed(lambda: len(echo.echo_points(sent)) == n, calls, server_pid)


def timed(call: Callable[[], bool], calls: int, server_pid: int) -> list[float]:
    server_cpu, cpu, start = process_cpu(server_pid), time.process_time(), time.perf_counter()
    for _ in range(calls):
        if not call():
            raise RuntimeError("a short reply")
    wall = time.perf_counter() - start
    return [wall / calls, (time.process_time() - cpu) / calls, (process_cpu(server_pid) - server_cpu) / calls]


def omniorb_floor(values_mod: Any, n: int, calls: int) -> float:
    """CPU seconds per round trip of omniORB's marshaler alone: the sequence marshaled and
    unmarshaled twice (request and reply), as both systems do."""
    from pyorb.marshal.orb import cdr_marshal, cdr_unmarshal

    desc = values_mod.Echo._d_echo_points[0][0]
    sent = points(values_mod, n)
    start = time.process_time()
    for _ in range(calls):
        for _ in range(2):
            body = cdr_marshal(desc, sent, True)
            if len(cdr_unmarshal(desc, body, True)) != n:
                raise RuntimeError("a short sequence")
    return (time.process_time() - start) / calls


# -- instruction counts --------------------------------------------------------------

LOW, HIGH = 2, 6  # calls of the two counted runs of each workload


def count_floor(n: int, calls: int, out: Path) -> int:
    """Instructions of a process running ``omniorb_floor`` for ``calls`` calls."""
    from benchmarks.instructions import callgrind_argv, callgrind_total

    subprocess.run([*callgrind_argv(out), sys.executable, "-m", "benchmarks.bench_values", "--inner-floor",
                    "--values", str(n), "--calls", str(calls)], check=True, capture_output=True, cwd=ROOT,
                   timeout=3600)
    return callgrind_total(out)


def count_pair(system: str, n: int, calls: int, tmp: Path) -> tuple[int, int]:
    """Instructions of ``system``'s server process and client process (``calls`` calls of ``n`` values)."""
    from benchmarks.instructions import callgrind_argv, callgrind_total
    from pyorb.testing.kit import child_env

    srv_out, cli_out = tmp / f"{system}-server-{calls}.cg", tmp / f"{system}-client-{calls}.cg"
    if system == "pyorb":
        serve = ["-m", "pyorb", "serve", f"{ROOT / 'tests/peers/values_servant.py'}:Echo", "--idl", str(IDL),
                 "--key", "Echo", "--stop-on-stdin-eof"]
    else:
        serve = ["-m", "pyorb.testing.omnipeer", "serve", "--idl", str(IDL), "--servant",
                 "tests.peers.values_servant:Echo"]
    server = subprocess.Popen([*callgrind_argv(srv_out), sys.executable, *serve], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=child_env())
    try:
        assert server.stdout is not None
        ior = server.stdout.readline().strip()
        if not ior.startswith("IOR:"):
            raise RuntimeError(f"the {system} server printed {ior[:60]!r}, not its IOR")
        if system == "pyorb":
            call = ["-m", "benchmarks.bench_values", "--inner-client", ior, "--values", str(n), "--calls", str(calls)]
        else:
            call = ["-m", "pyorb.testing.omnipeer", "call", "--idl", str(IDL), "--function",
                    "benchmarks.bench_values:omni_rounds", "--target", ior, "--interface", "Values::Echo",
                    "--args", json.dumps([n, calls, server.pid])]
        subprocess.run([*callgrind_argv(cli_out), sys.executable, *call], check=True, capture_output=True, cwd=ROOT,
                       env=child_env(), timeout=3600)
    finally:
        if server.stdin is not None:
            server.stdin.close()  # the server ends at stdin's end, so callgrind writes its count
        server.wait(600)
        if server.stdout is not None:
            server.stdout.close()
    return callgrind_total(srv_out), callgrind_total(cli_out)


def instructions(n: int) -> None:
    """Print the instructions per value of a round trip: the floor, then each system's server and client."""
    per_value = float((HIGH - LOW) * n)
    with tempfile.TemporaryDirectory(prefix="pyorb-bench-values-") as tmp:
        floor = (count_floor(n, HIGH, Path(tmp) / "floor-high.cg")
                 - count_floor(n, LOW, Path(tmp) / "floor-low.cg")) / per_value
        sides = {}
        for system in ("pyorb", "omniORBpy"):
            high, low = count_pair(system, n, HIGH, Path(tmp)), count_pair(system, n, LOW, Path(tmp))
            sides[system] = ((high[0] - low[0]) / per_value, (high[1] - low[1]) / per_value)
    print(f"instructions per value of a round trip of echo_points ({n} values; callgrind, calls {LOW} and {HIGH}); "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'system':<12} {'server':>9} {'client':>9} {'total':>9} {'above the floor':>16}")
    print(f"{'floor':<12} {'':>9} {'':>9} {floor:>9,.0f} {0:>16,.0f}")
    for system, (server, client) in sides.items():
        print(f"{system:<12} {server:>9,.0f} {client:>9,.0f} {server + client:>9,.0f} {server + client - floor:>16,.0f}")
    pyorb_, omni = sum(sides["pyorb"]), sum(sides["omniORBpy"])
    print(f"pyorb relative to omniORBpy (omniORBpy / pyorb instructions, >1 is fewer): {omni / pyorb_:.3f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--values", type=int, default=3000, help="values in each call's sequence (default 3000)")
    p.add_argument("--calls", type=int, default=20, help="timed calls per point (default 20)")
    p.add_argument("--repeats", type=int, default=3, help="repetitions of each point (at least 2; default 3)")
    p.add_argument("--instructions", action="store_true",
                   help="count CPU instructions per value with callgrind instead of timing (needs valgrind)")
    p.add_argument("--inner-floor", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--inner-client", metavar="IOR", help=argparse.SUPPRESS)
    ns = p.parse_args()
    if ns.repeats < 2 or ns.calls < 1 or ns.values < 1:
        p.error("--repeats must be at least 2, --calls and --values at least 1")
    import pyorb

    if ns.inner_floor or ns.inner_client:  # a counted process of --instructions
        values_mod = pyorb.load_idl(IDL).Values
        if ns.inner_floor:
            from pyorb.marshal.orb import ensure_orb

            ensure_orb()
            omniorb_floor(values_mod, ns.values, ns.calls)
        else:
            pyorb_rounds(values_mod, ns.inner_client, ns.values, ns.calls, os.getpid())
        return 0
    if ns.instructions:
        if shutil.which("valgrind") is None:
            p.error("--instructions needs valgrind (apt-get install valgrind)")
        instructions(ns.values)
        return 0
    from pyorb.testing.kit import ServerProcess, omni_call, omni_server_process

    values_mod = pyorb.load_idl(IDL).Values
    results: dict[str, list[list[float]]] = {"pyorb <-> pyorb": [], "omniORBpy <-> omniORBpy": []}
    floors: list[float] = []
    for rep in range(ns.repeats):
        order = list(results) if rep % 2 == 0 else list(reversed(results))
        for system in order:
            if system.startswith("pyorb"):
                server = ServerProcess([sys.executable, "-m", "pyorb", "serve",
                                        f"{ROOT / 'tests/peers/values_servant.py'}:Echo", "--idl", str(IDL),
                                        "--key", "Echo", "--stop-on-stdin-eof"])
                try:
                    results[system].append(pyorb_rounds(values_mod, server.ior, ns.values, ns.calls, server.pid))
                finally:
                    server.stop()
            else:
                omni = omni_server_process(str(IDL), "tests.peers.values_servant:Echo")
                try:
                    results[system].append(list(omni_call(
                        str(IDL), "benchmarks.bench_values:omni_rounds", omni.ior, interface="Values::Echo",
                        args=(ns.values, ns.calls, omni.pid), timeout=600)))
                finally:
                    omni.stop()
        floors.append(omniorb_floor(values_mod, ns.values, ns.calls))
    report(results, floors, ns.values, ns.calls, ns.repeats)
    return 0


def spread(xs: list[float]) -> str:
    """Median and min-max of seconds, in ms."""
    ms = [x * 1000 for x in xs]
    return f"{statistics.median(ms):>7.1f} {min(ms):>7.1f}-{max(ms):<7.1f}"


def report(results: dict[str, list[list[float]]], floors: list[float], n: int, calls: int, repeats: int) -> None:
    print(f"echo_points with {n} values, {calls} calls per point, {repeats} repetitions; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'system':<24} {'wall ms/call':>11} {'min-max':<15} {'CPU ms/call':>11} {'min-max':<15} "
          f"{'client CPU':>10} {'server CPU':>10} {'values/s':>9}")
    wall, cpu = {}, {}
    for system, runs in results.items():
        walls = [r[0] for r in runs]
        cpus = [r[1] + r[2] for r in runs]
        wall[system], cpu[system] = statistics.median(walls), statistics.median(cpus)
        print(f"{system:<24} {spread(walls)} {spread(cpus)} {statistics.median(r[1] for r in runs) * 1000:>10.1f} "
              f"{statistics.median(r[2] for r in runs) * 1000:>10.1f} {n / wall[system]:>9.0f}")
    pyorb_, omni = "pyorb <-> pyorb", "omniORBpy <-> omniORBpy"
    print(f"pyorb speed relative to omniORBpy (median ratio, >1 is faster): wall {wall[omni] / wall[pyorb_]:.2f}, "
          f"CPU {cpu[omni] / cpu[pyorb_]:.2f}")
    floor = statistics.median(floors)
    print(f"floor: omniORB's marshal+unmarshal, twice per round trip: {spread(floors)} CPU ms/call "
          f"({floor / n * 1e6:.2f} us per value); CPU above it per value: "
          f"pyorb {(cpu[pyorb_] - floor) / n * 1e6:.2f} us, omniORBpy {(cpu[omni] - floor) / n * 1e6:.2f} us")
    # omniORB sends a large body in 8 KiB GIOP 1.2 fragments as it marshals it, and its peer
    # unmarshals each fragment as it comes: its two processes work at once (wall below CPU).  An
    # ORB that marshals a whole body with cdrMarshal before sending it, and unmarshals it whole
    # once it has come, works one process after the other: its wall is at least the floor.
    print(f"wall / CPU (below 1: client and server worked at once): pyorb {wall[pyorb_] / cpu[pyorb_]:.2f}, "
          f"omniORBpy {wall[omni] / cpu[omni]:.2f}: an ORB whose two processes work one after the other, "
          f"spending omniORBpy's CPU (the floor, within 2 % in instructions), reaches at best a wall ratio "
          f"of {wall[omni] / cpu[omni]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
