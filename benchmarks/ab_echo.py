"""Alternating A/B of pyorb-to-pyorb echo throughput: this checkout against another.

Each round runs pyorb.servers.echo and the pyorb echo client of one
checkout (pyorb's load generator, ``--target echo --mode pipelined``, or in
a checkout from before the generator took that target, its
benchmarks/pyorb_echo_client.py), then of the other (the order flips every round, so neither
always goes first on a machine that warms up or slows down), and prints
calls/s per run with the median, minimum and maximum of each side.

    git worktree add /tmp/pyorb-before <commit>
    python -m benchmarks.ab_echo --against /tmp/pyorb-before --rounds 6

``--omni-threads N`` measures the servers alone: this checkout's omniORBpy
load generator (``pyorb.loadtest.omni_generator``, N threads of synchronous
calls, one connection each) calls each side's pyorb echo server, so only
the server differs between the sides.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parents[1]


def tool(tree: Path, module: str, script: str) -> list[str]:
    """How ``tree`` runs one of its tools: as a module, or by its script path in a checkout older than benchmarks/."""
    return [str(tree / script)] if (tree / script).exists() else ["-m", module]


def echo_client(tree: Path, ior: str, concurrency: int, seconds: float) -> list[str]:
    """``tree``'s pyorb client of N calls in flight on one connection, for a measured window of ``seconds``."""
    if any((tree / folder / "pyorb_echo_client.py").exists() for folder in ("benchmarks", "loadtests")):
        old = tool(tree, "benchmarks.pyorb_echo_client", "loadtests/pyorb_echo_client.py")
        return [*old, ior, "--concurrency", str(concurrency), "--seconds", str(seconds), "--warmup", "0.5"]
    return ["-m", "pyorb.loadtest.generator", ior, "--target", "echo", "--mode", "pipelined", "--window",
            str(concurrency), "--duration", str(seconds), "--warmup", "0.5"]


def omni_client(ior: str, threads: int, seconds: float) -> list[str]:
    """This checkout's omniORBpy client: ``threads`` threads of synchronous calls, one connection each."""
    return ["-m", "pyorb.loadtest.omni_generator", "--target", "echo", "--mode", "smi", ior, "--clients", str(threads),
            "--connections", str(threads), "--duration", str(seconds), "--warmup", "0.5"]


def one_run(tree: Path, concurrency: int, seconds: float, omni_threads: int | None = None) -> float:
    """calls/s of one server of ``tree`` and either its own client (both importing pyorb from it)
    or, with ``omni_threads``, this checkout's omniORBpy client."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    server = subprocess.Popen([sys.executable, *tool(tree, "pyorb.servers.echo", "servers/pyorb_echo.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tree)
    try:
        assert server.stdout is not None
        ior = server.stdout.readline().strip()
        if omni_threads is None:
            client, client_env, client_cwd = echo_client(tree, ior, concurrency, seconds), env, tree
        else:
            client, client_env, client_cwd = omni_client(ior, omni_threads, seconds), dict(
                os.environ, PYTHONPATH=str(HERE)), HERE
        done = subprocess.run([sys.executable, *client], capture_output=True, text=True, env=client_env,
                              cwd=client_cwd, timeout=seconds + 60, check=True)
    finally:
        if server.stdin is not None:
            server.stdin.close()  # the server stops at stdin end of file
        server.wait(30)
        if server.stdout is not None:
            server.stdout.close()
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return float(result["calls"]) / float(result.get("seconds", seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="the other checkout (a git worktree)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds; each runs both sides once")
    parser.add_argument("--concurrency", type=int, default=64, help="calls in flight on the one connection")
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per run")
    parser.add_argument("--omni-threads", type=int, metavar="N",
                        help="this checkout's omniORBpy client with N threads calls each side's server")
    ns = parser.parse_args()
    if ns.omni_threads is not None and ns.omni_threads < 1:
        parser.error("--omni-threads must be at least 1")
    sides = {"this": HERE, "against": ns.against.resolve()}
    runs: dict[str, list[float]] = {name: [] for name in sides}
    for rnd in range(ns.rounds):
        order = list(sides) if rnd % 2 == 0 else list(reversed(sides))
        for name in order:
            runs[name].append(one_run(sides[name], ns.concurrency, ns.seconds, ns.omni_threads))
    what = (f"omniORBpy -> pyorb echo, {ns.omni_threads} threads" if ns.omni_threads is not None
            else f"pyorb -> pyorb echo, {ns.concurrency} in flight")
    table = Table("checkout", "calls/s per run", "median", "min", "max",
                  title=f"{what}, {ns.rounds} alternating rounds")
    for name, values in runs.items():
        table.add_row(f"{name} ({sides[name]})", " ".join(f"{v:,.0f}" for v in values),
                      f"{statistics.median(values):,.0f}", f"{min(values):,.0f}", f"{max(values):,.0f}")
    console = Console()
    console.print(table)
    console.print(f"median this / against: {statistics.median(runs['this']) / statistics.median(runs['against']):.3f}")


if __name__ == "__main__":
    main()
