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
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--values", type=int, default=3000, help="values in each call's sequence (default 3000)")
    p.add_argument("--calls", type=int, default=20, help="timed calls per point (default 20)")
    p.add_argument("--repeats", type=int, default=3, help="repetitions of each point (at least 2; default 3)")
    ns = p.parse_args()
    if ns.repeats < 2 or ns.calls < 1 or ns.values < 1:
        p.error("--repeats must be at least 2, --calls and --values at least 1")
    import pyorb
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


if __name__ == "__main__":
    sys.exit(main())
