"""The sequential caller: one call in flight, every client against every server, in one run.

A caller that awaits one call at a time pays the whole round trip per call:
its client's cost, the server's and the loopback's.  Each round starts every
server afresh (pyorb's echo server with a plain servant, omniORBpy's thread
per connection, the bare uvloop floor of ``bare_echo_server.py``) and runs
every client against it, one after the other, the order reversed every
other round:

- pyorb's generator, ``--mode sequential --untimed`` (``await
  proxy.ping(n)`` in a loop, no deadline per call), and ``--mode
  sequential`` with its 5 s timeout per call;
- omniORBpy's generator, one thread (a blocking C++ client);
- ``bare_echo_client.py``: a coroutine awaiting one future per call on a
  raw uvloop protocol, the least any asyncio caller can do.

``--cpus`` pins the benchmark, and so every server and client it starts, to
the CPUs given.  On one CPU a round trip costs the two processes' CPU time
and one context switch, and no wakeup of another CPU: on a VM whose idle
virtual CPUs halt, that wakeup costs more than either ORB's work (about
100 µs per round trip on the development machine), so the unpinned figures
measure the host's wakeups as much as the ORBs and the pinned ones their
CPU cost per call.

It prints calls/s (median, min–max over the rounds) and, per server, each
client's ratio to omniORBpy's client on the same server, per round and of
the medians: the bare asyncio client's ratio is the floor of pyorb's.

    python -m benchmarks.bench_sequential --rounds 5 --seconds 2
    python -m benchmarks.bench_sequential --rounds 5 --seconds 2 --cpus 0
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.common import ROOT, ServerProcess, add_cpus_option, generator_rate, pin_cpus, positive, range_text

SERVERS = {
    "pyorb": ["-m", "pyorb.servers.echo", "--servant", "sync"],
    "omniORBpy thread/conn": ["-m", "pyorb.servers.omni", "echo", "--threading", "tpc"],
    "bare floor": ["-m", "benchmarks.bare_echo_server"],
}
CLIENTS = {
    "pyorb, untimed": ["-m", "pyorb.loadtest.generator", "--target", "echo", "--mode", "sequential", "--untimed"],
    "pyorb, 5 s timeout": ["-m", "pyorb.loadtest.generator", "--target", "echo", "--mode", "sequential",
                           "--timeout", "5"],
    "omniORBpy": ["-m", "pyorb.loadtest.omni_generator", "--target", "echo", "--mode", "smi", "--clients", "1"],
    "bare asyncio": ["-m", "benchmarks.bare_echo_client"],
}
BASELINE_CLIENT = "omniORBpy"
RUN_TIMEOUT_S = 60.0


def _rate(client: list[str], ior: str, seconds: float, warmup: float) -> float:
    argv = [sys.executable, *client[:2], ior, *client[2:], "--duration", str(seconds), "--warmup", str(warmup)]
    return generator_rate(argv, ROOT, RUN_TIMEOUT_S + seconds)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_sequential", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=positive(int), default=5, help="runs of every pair")
    p.add_argument("--seconds", type=positive(float), default=2.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each run")
    p.add_argument("--servers", nargs="+", choices=list(SERVERS), default=list(SERVERS))
    p.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    add_cpus_option(p)
    p.add_argument("--json", type=Path, metavar="PATH", help="also write every run's calls/s as JSON here")
    ns = p.parse_args(argv)
    if BASELINE_CLIENT not in ns.clients:
        p.error(f"--clients must include {BASELINE_CLIENT!r}: the ratios are to it")
    placement = pin_cpus(p, ns.cpus)  # the servers and clients started below inherit it
    rates: dict[tuple[str, str], list[float]] = {(s, c): [] for s in ns.servers for c in ns.clients}
    for r in range(ns.rounds):
        for server in ns.servers:
            with ServerProcess([sys.executable, *SERVERS[server]], server) as ior:
                for client in ns.clients if r % 2 == 0 else reversed(ns.clients):
                    rate = _rate(CLIENTS[client], ior, ns.seconds, ns.warmup)
                    rates[server, client].append(rate)
                    print(f"round {r + 1}: {client} -> {server}: {rate:,.0f} calls/s", file=sys.stderr)
    table = Table(title=f"one call in flight, calls/s ({ns.rounds} rounds of {ns.seconds:g} s); "
                        f"ratio: the client ÷ omniORBpy's client on the same server")
    for column in ("server", "client", "median (min–max)", "ratio of medians", "ratio per round"):
        table.add_column(column, justify="left" if column in ("server", "client", "ratio per round") else "right")
    for server in ns.servers:
        base = rates[server, BASELINE_CLIENT]
        for client in ns.clients:
            runs = rates[server, client]
            per_round = ", ".join(f"{a / b:.2f}" for a, b in zip(runs, base))
            table.add_row(server, client, f"{statistics.median(runs):,.0f} ({range_text(runs, '{:,.0f}')})",
                          f"{statistics.median(runs) / statistics.median(base):.2f}", per_round)
    Console(width=160).print(table)
    print(f"placement: {placement}")
    omni = rates.get(("omniORBpy thread/conn", BASELINE_CLIENT))
    if omni:
        print("pyorb → pyorb ÷ omniORBpy → omniORBpy, per round:",
              ", ".join(f"{a / b:.2f}" for a, b in zip(rates.get(("pyorb", "pyorb, untimed"), []), omni)))
    if ns.json is not None:
        ns.json.write_text(json.dumps({f"{c} -> {s}": v for (s, c), v in rates.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
