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

    python -m benchmarks.bench_values --values 3000 --calls 20 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IDL = ROOT / "idl" / "values.idl"


def points(values_mod: Any, n: int) -> list[Any]:
    return [values_mod.Point(k, -k, f"p{k % 100}") for k in range(n)]


def omni_rounds(orb: Any, echo: Any, n: int, calls: int) -> float:
    """``omni_call`` entry: seconds per call of echo_points from an omniORBpy client."""
    import Values  # loaded by omnipeer from --idl

    sent = points(Values, n)
    echo.echo_points(sent)  # connection and first-use costs out of the timing
    start = time.perf_counter()
    for _ in range(calls):
        if len(echo.echo_points(sent)) != n:
            raise RuntimeError("a short reply")
    return (time.perf_counter() - start) / calls


def pyorb_rounds(values_mod: Any, ior: str, n: int, calls: int) -> float:
    """Seconds per call of echo_points from a pyorb blocking client."""
    import pyorb

    sent = points(values_mod, n)
    with pyorb.BlockingClient() as client:
        echo = client.resolve(ior, values_mod.Echo)
        echo.echo_points(sent)
        start = time.perf_counter()
        for _ in range(calls):
            if len(echo.echo_points(sent)) != n:
                raise RuntimeError("a short reply")
        return (time.perf_counter() - start) / calls


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
    results: dict[str, list[float]] = {"pyorb <-> pyorb": [], "omniORBpy <-> omniORBpy": []}
    for rep in range(ns.repeats):
        order = list(results) if rep % 2 == 0 else list(reversed(results))
        for system in order:
            if system.startswith("pyorb"):
                server = ServerProcess([sys.executable, "-m", "pyorb", "serve",
                                        f"{ROOT / 'tests/peers/values_servant.py'}:Echo", "--idl", str(IDL),
                                        "--key", "Echo", "--stop-on-stdin-eof"])
                try:
                    results[system].append(pyorb_rounds(values_mod, server.ior, ns.values, ns.calls))
                finally:
                    server.stop()
            else:
                omni = omni_server_process(str(IDL), "tests.peers.values_servant:Echo")
                try:
                    results[system].append(float(omni_call(str(IDL), "benchmarks.bench_values:omni_rounds", omni.ior,
                                                           interface="Values::Echo", args=(ns.values, ns.calls),
                                                           timeout=600)))
                finally:
                    omni.stop()
    print(f"echo_points with {ns.values} values, {ns.calls} calls per point, {ns.repeats} repetitions; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'system':<26} {'ms per call (median)':>21} {'min-max':>17} {'values/s':>10}")
    medians = {}
    for system, runs in results.items():
        ms = [r * 1000 for r in runs]
        medians[system] = statistics.median(ms)
        print(f"{system:<26} {medians[system]:>21.1f} {min(ms):>8.1f}-{max(ms):<8.1f} "
              f"{ns.values / (medians[system] / 1000):>10.0f}")
    ratio = medians["omniORBpy <-> omniORBpy"] / medians["pyorb <-> pyorb"]
    print(f"pyorb speed relative to omniORBpy (median time ratio, >1 is faster): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
