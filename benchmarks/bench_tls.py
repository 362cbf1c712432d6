#!/usr/bin/env python3
"""The echo benchmark over TLS beside plain TCP, pyorb and omniORB C++, side by side in one run.

For each stack and load it alternates plain and TLS runs (``--rounds``
each, the order flipping every round) and prints calls/s (median, min,
max) and the TLS/plain ratio of the medians.  pyorb: pyorb.servers.echo
and pyorb's load generator (pyorb.loadtest.generator --target echo --mode
pipelined: N calls in flight on one connection).
omniORB: the C++ echo server and client of tests/peers/omnicxx (T threads),
built here if Debian's omniORB packages are installed, skipped otherwise.
Certificates are made for the run in a temporary directory.

    python -m benchmarks.bench_tls --rounds 3 --seconds 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table


from pyorb.loadtest.stats import read_result
from pyorb.testing.certs import TestPKI, make_pki
from tests.peers.omnicxx import build as omnicxx


def _serve(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    assert server.stdout is not None
    ior = server.stdout.readline().strip()
    if not ior.startswith("IOR:"):
        _stop(server)
        raise RuntimeError(f"{argv[0]} did not start")
    return server, ior


def _stop(server: subprocess.Popen[str]) -> None:
    if server.stdin is not None:
        server.stdin.close()  # every server here stops at stdin end of file
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if server.stdout is not None:
        server.stdout.close()


def _measure(server_argv: list[str], client_argv: Callable[[str], list[str]], seconds: float,
             rate: Callable[[str], float]) -> float:
    """calls/s of one run: a fresh server, the client, and ``rate`` read from the client's output."""
    server, ior = _serve(server_argv)
    try:
        done = subprocess.run(client_argv(ior), capture_output=True, text=True, timeout=seconds + 60, check=False)
    finally:
        _stop(server)
    try:
        return rate(done.stdout)
    except ValueError as exc:
        raise RuntimeError(f"{exc}; its stderr ended: {done.stderr[-500:]}") from None


def generator_rate(stdout: str) -> float:
    """pyorb's load generator: the throughput of its result, which must have no error."""
    result = read_result(stdout)
    if result.errors:
        raise ValueError(f"client errors: {result.as_dict()}")
    return result.throughput


def omnicxx_rate(stdout: str) -> float:
    """The omniORB C++ echo client's calls/s (its own JSON line), which must have no error."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise ValueError("client printed nothing")
    result = json.loads(lines[-1])
    if result.get("errors"):
        raise ValueError(f"client errors: {result}")
    return float(result["calls_per_s"])


def pyorb_point(pki: TestPKI, tls: bool, concurrency: int, seconds: float) -> float:
    server = [sys.executable, "-m", "pyorb.servers.echo"]
    client = [sys.executable, "-m", "pyorb.loadtest.generator", "--target", "echo", "--mode", "pipelined"]
    if tls:
        server += ["--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key)]
    extra = ["--tls-ca", str(pki.ca)] if tls else []
    return _measure(server, lambda ior: [*client, ior, "--window", str(concurrency), "--duration", str(seconds),
                                         "--warmup", "0.5", *extra], seconds, generator_rate)


def omniorb_point(programs: dict[str, Path], pki: TestPKI, tls: bool, threads: int, seconds: float) -> float:
    server = [str(programs["server"])]
    if tls:
        server += ["--no-tcp", "--ssl-port", "0", "--ca", str(pki.ca), "--key", str(pki.server.bundle)]
    return _measure(server, lambda ior: [str(programs["client"]), ior, "--ca", str(pki.ca), "--threads",
                                         str(threads), "--seconds", str(seconds), "--warmup", "0.5"], seconds,
                    omnicxx_rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each point, plain and TLS alternating")
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per run")
    parser.add_argument("--loads", default="1,16", help="pyorb calls in flight / omniORB threads (comma-separated)")
    ns = parser.parse_args()
    loads = [int(x) for x in ns.loads.split(",")]
    console = Console(width=150)
    with tempfile.TemporaryDirectory(prefix="pyorb-bench-tls-") as tmp:
        pki = make_pki(Path(tmp) / "pki")
        points: list[tuple[str, int, Callable[[bool], float]]] = []
        for load in loads:
            points.append(("pyorb", load, lambda tls, n=load: pyorb_point(pki, tls, n, ns.seconds)))
        reason = omnicxx.missing()
        if reason:
            console.print(f"[yellow]omniORB C++ skipped: {reason}[/yellow]")
        else:
            programs = omnicxx.build(Path(tmp) / "omnicxx")
            for load in loads:
                points.append(("omniORB C++", load, lambda tls, n=load: omniorb_point(programs, pki, tls, n,
                                                                                       ns.seconds)))
        table = Table(title=f"echo calls/s, plain TCP vs TLS ({ns.rounds} runs each, {ns.seconds:g} s)")
        for column in ("stack", "load", "plain median", "plain min-max", "TLS median", "TLS min-max", "TLS/plain"):
            table.add_column(column, justify="left" if column == "stack" else "right")
        for stack, load, run in points:
            runs: dict[bool, list[float]] = {False: [], True: []}
            for rnd in range(ns.rounds):
                for tls in ((False, True) if rnd % 2 == 0 else (True, False)):
                    runs[tls].append(run(tls))
            plain, secure = statistics.median(runs[False]), statistics.median(runs[True])
            table.add_row(stack, str(load), f"{plain:,.0f}", f"{min(runs[False]):,.0f}-{max(runs[False]):,.0f}",
                          f"{secure:,.0f}", f"{min(runs[True]):,.0f}-{max(runs[True]):,.0f}", f"{secure / plain:.2f}")
            console.print(f"{stack} load {load}: plain {runs[False]} TLS {runs[True]}")
        console.print(table)


if __name__ == "__main__":
    main()
