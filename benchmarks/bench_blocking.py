"""Threaded blocking callers: pyorb's BlockingClient beside omniORBpy's client, against the same server, in one run.

One pyorb AMH sink (``pyorb.servers.sink --model amh-st``, delay 0) serves
every point.  For 1 and 4 threads, each round runs pyorb's generator in SMI
mode (one :class:`pyorb.client.blocking.BlockingClient` per thread) and
omniORBpy's (synchronous stubs, one connection per thread), the order
flipping every round, and prints calls/s (median, min–max) and the ratio
pyorb ÷ omniORBpy of the medians.

    python -m benchmarks.bench_blocking --rounds 3 --seconds 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from rich.console import Console
from rich.table import Table

from benchmarks.common import ROOT, ServerProcess, generator_result, positive, range_text

CLIENTS = {
    "pyorb BlockingClient": ["-m", "pyorb.loadtest.generator"],
    "omniORBpy": ["-m", "pyorb.loadtest.omni_generator"],
}
RUN_TIMEOUT_S = 120.0


def _rate(command: list[str], ior: str, threads: int, seconds: float, warmup: float) -> float:
    argv = [sys.executable, *command, ior, "--mode", "smi", "--clients", str(threads),
            "--duration", str(seconds), "--warmup", str(warmup), "--timeout", "10"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=RUN_TIMEOUT_S + seconds, check=False)
    found = generator_result(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{' '.join(command)} failed (rc {done.returncode}): "
                           f"{done.stderr.decode(errors='replace')[-300:]}")
    if found["errors"]:
        raise RuntimeError(f"{' '.join(command)}: {found['errors']} calls failed")
    return float(found["calls_per_s"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_blocking", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=positive(int), nargs="+", default=[1, 4], help="threads per point")
    p.add_argument("--rounds", type=positive(int), default=3, help="runs of every client at every point")
    p.add_argument("--seconds", type=positive(float), default=3.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each run")
    ns = p.parse_args(argv)
    rates: dict[tuple[int, str], list[float]] = {}
    with ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--model", "amh-st"], "sink") as ior:
        for r in range(ns.rounds):
            for threads in ns.threads:
                names = list(CLIENTS) if r % 2 == 0 else list(reversed(CLIENTS))
                for name in names:
                    rate = _rate(CLIENTS[name], ior, threads, ns.seconds, ns.warmup)
                    rates.setdefault((threads, name), []).append(rate)
                    print(f"round {r + 1}: {threads} thread(s) {name}: {rate:,.0f} calls/s", file=sys.stderr)
    table = Table(title=f"calls/s against the pyorb AMH sink ({ns.rounds} rounds of {ns.seconds:g} s)")
    for column in ("threads", *(f"{n} median (min–max)" for n in CLIENTS), "pyorb ÷ omniORBpy"):
        table.add_column(column, justify="right")
    for threads in ns.threads:
        medians = [statistics.median(rates[threads, n]) for n in CLIENTS]
        cells = [f"{m:,.0f} ({range_text(rates[threads, n], '{:,.0f}')})" for m, n in zip(medians, CLIENTS)]
        table.add_row(str(threads), *cells, f"{medians[0] / medians[1]:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
