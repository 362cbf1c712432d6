"""Threaded blocking callers: pyorb's BlockingClient beside omniORBpy's client, against the same server, in one run.

One pyorb AMH sink (``pyorb.servers.sink --model amh-st``, delay 0) serves
every point.  For 1 and 4 threads, each round runs pyorb's generator in SMI
mode (one :class:`pyorb.client.blocking.BlockingClient` per thread) and
omniORBpy's (synchronous stubs, one connection per thread), the order
flipping every round, and prints calls/s (median, min–max) and the ratio
pyorb ÷ omniORBpy of the medians.  ``--baseline DIR`` adds pyorb's
generator run from another checkout with its own ``.venv`` (say, the main
branch before a change) against the same sink, with its ratio.

    python -m benchmarks.bench_blocking --rounds 3 --seconds 3 [--baseline /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from rich.console import Console
from rich.table import Table

from pathlib import Path

from benchmarks.common import ROOT, ServerProcess, generator_rate, positive, range_text

CLIENTS = {
    "pyorb BlockingClient": ["-m", "pyorb.loadtest.generator"],
    "omniORBpy": ["-m", "pyorb.loadtest.omni_generator"],
}
BASELINE = "pyorb, baseline checkout"
RUN_TIMEOUT_S = 120.0


def _rate(command: list[str], ior: str, threads: int, seconds: float, warmup: float,
          checkout: Path | None = None) -> float:
    python = sys.executable if checkout is None else str(checkout / ".venv" / "bin" / "python")
    argv = [python, *command, ior, "--mode", "smi", "--clients", str(threads),
            "--duration", str(seconds), "--warmup", str(warmup), "--timeout", "10"]
    return generator_rate(argv, checkout or ROOT, RUN_TIMEOUT_S + seconds)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_blocking", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=positive(int), nargs="+", default=[1, 4], help="threads per point")
    p.add_argument("--rounds", type=positive(int), default=3, help="runs of every client at every point")
    p.add_argument("--seconds", type=positive(float), default=3.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each run")
    p.add_argument("--baseline", type=Path, metavar="DIR",
                   help="also run pyorb's generator from this checkout (with its .venv) as a baseline")
    ns = p.parse_args(argv)
    clients = dict(CLIENTS)
    checkouts: dict[str, Path | None] = {name: None for name in CLIENTS}
    if ns.baseline is not None:
        if not (ns.baseline / ".venv" / "bin" / "python").exists():
            p.error(f"--baseline: no .venv/bin/python in {ns.baseline}")
        clients[BASELINE] = CLIENTS["pyorb BlockingClient"]
        checkouts[BASELINE] = ns.baseline
    rates: dict[tuple[int, str], list[float]] = {}
    with ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--model", "amh-st"], "sink") as ior:
        for r in range(ns.rounds):
            for threads in ns.threads:
                names = list(clients) if r % 2 == 0 else list(reversed(clients))
                for name in names:
                    rate = _rate(clients[name], ior, threads, ns.seconds, ns.warmup, checkouts[name])
                    rates.setdefault((threads, name), []).append(rate)
                    print(f"round {r + 1}: {threads} thread(s) {name}: {rate:,.0f} calls/s", file=sys.stderr)
    table = Table(title=f"calls/s against the pyorb AMH sink ({ns.rounds} rounds of {ns.seconds:g} s)")
    ratios = ["pyorb ÷ omniORBpy", *(["baseline ÷ omniORBpy"] if ns.baseline else [])]
    for column in ("threads", *(f"{n} median (min–max)" for n in clients), *ratios):
        table.add_column(column, justify="right")
    for threads in ns.threads:
        medians = [statistics.median(rates[threads, n]) for n in clients]
        cells = [f"{m:,.0f} ({range_text(rates[threads, n], '{:,.0f}')})" for m, n in zip(medians, clients)]
        table.add_row(str(threads), *cells, *(f"{m / medians[1]:.2f}" for m in [medians[0], *medians[2:]]))
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
