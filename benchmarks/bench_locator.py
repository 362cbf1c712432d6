#!/usr/bin/env python3
"""A servant locator over a million objects against one activated servant.

Two server models, each a fresh process (reactive strategy, uvloop) serving
Bench::Sink.work:

  single   one servant activated under one key;
  locator  a servant locator under the prefix ``acct/`` answering --ids
           distinct object ids from a dict (id -> balance); preinvoke makes
           a small servant for the request from the store, postinvoke
           drops it.

The load is one closed-loop generator in this process (uvloop): --clients
pyorb clients (one connection each), --concurrency calls in flight in all;
every call resolves a reference to a random object id (``single``: the
reference is made all the same, then its one key is resolved instead, so
both models cost the client the same).  Per run: calls
per second in the window, the server's CPU seconds per call (psutil), and
the server's RSS after its store is built and after the run.  Each model
runs --repeats times, alternating; the table gives the median and the
min-max spread, and the locator's ratio to ``single`` measured in the same
invocation.  ``--serve MODEL`` is the server process itself.

``--instructions N1 N2`` counts instead, with callgrind, the CPU
instructions per call of each model with a pyorb client and server in one
process (``--concurrency`` calls in flight over one loopback connection,
references made before the calls): run with N1 and N2 calls, the
difference over N2 - N1 cancels start-up and the store.  Deterministic, so
the located path's added instructions can be told apart from the noise of
a shared machine; the throughput table is what the issue asks for.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import psutil  # type: ignore[import-untyped]
import uvloop
from omniORB import CORBA

import pyorb
from benchmarks.instructions import callgrind_argv, callgrind_total
from pyorb.idl import bench_idl
from pyorb.loadtest.stats import LoadResult

ROOT = Path(__file__).resolve().parents[1]

def models(ids: int) -> tuple[Any, Callable[[pyorb.Server, str], str]]:
    """Bench's IDL, and a function that installs a model in a server and
    returns the key (``single``) or prefix (``locator``) it serves."""
    idl = bench_idl()

    class Single(idl.Bench__POA.Sink):  # type: ignore[misc,name-defined]
        def work(self, token: int) -> int:
            return token

    class Account(idl.Bench__POA.Sink):  # type: ignore[misc,name-defined]
        __slots__ = ("balance",)

        def __init__(self, balance: int) -> None:
            self.balance = balance

        def work(self, token: int) -> int:
            return token

    class Locator:
        def __init__(self, store: dict[bytes, int]) -> None:
            self.store = store

        def preinvoke(self, oid: bytes, operation: str) -> tuple[Any, None]:
            balance = self.store.get(oid)
            if balance is None:
                raise CORBA.OBJECT_NOT_EXIST(0, CORBA.COMPLETED_NO)
            return Account(balance), None

        def postinvoke(self, oid: bytes, operation: str, servant: Any, cookie: None) -> None:
            pass

    def install(server: pyorb.Server, model: str) -> str:
        if model == "single":
            server.activate(Single(), "sink")
            return "sink"
        store = {str(i).encode(): i for i in range(ids)}
        server.set_locator("acct/", Locator(store), idl.Bench__POA.Sink)
        return "acct/"

    return idl, install


def reference(base: str, model: str, ids: int, rng: random.Random) -> str:
    """The reference of a call: a random object id's, which ``single`` makes too and leaves unused."""
    located = f"{base}{rng.randrange(ids)}"
    return base if model == "single" else located


def serve(model: str, ids: int) -> None:
    """The server process: prints its corbaloc prefix, serves until stdin closes."""
    _, install = models(ids)

    async def main() -> None:
        server = pyorb.Server()
        await server.start()
        prefix = install(server, model)
        print(json.dumps({"corbaloc": server.corbaloc(prefix)}), flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        await server.close()

    uvloop.run(main())


async def load(base: str, model: str, ids: int, clients: int, concurrency: int, seconds: float,
               warmup: float) -> LoadResult:
    idl = bench_idl()
    made = [pyorb.Client() for _ in range(clients)]
    latencies: list[float] = []
    errors = 0
    cpu, wall = time.process_time(), time.perf_counter()
    start = time.perf_counter() + warmup
    end = start + seconds
    rng = random.Random(1)

    async def one(client: Any) -> None:
        nonlocal errors
        while True:
            ref = reference(base, model, ids, rng)
            sent = time.perf_counter()
            try:
                ok = await client.resolve(ref, idl.Bench.Sink).work(7, timeout=10) == 7
            except CORBA.Exception:
                ok = False
            now = time.perf_counter()
            if now >= end:
                return
            if now >= start:
                if ok:
                    latencies.append(now - sent)
                errors += not ok

    try:
        await asyncio.gather(*(one(made[i % clients]) for i in range(concurrency)))
    finally:
        await asyncio.gather(*(c.close() for c in made))
    return LoadResult.measured(model, clients, len(latencies), errors, seconds, latencies, time.process_time() - cpu,
                               time.perf_counter() - wall, concurrency=concurrency, ids=ids)


async def counted(model: str, ids: int, calls: int, in_flight: int) -> None:
    """The workload callgrind counts: ``calls`` calls to random ids of ``model`` in this process."""
    idl, install = models(ids)
    rng = random.Random(1)
    async with pyorb.Server("127.0.0.1") as server, pyorb.Client() as client:
        base = server.corbaloc(install(server, model))
        refs = [client.resolve(reference(base, model, ids, rng), idl.Bench.Sink) for _ in range(calls)]
        remaining = iter(refs)

        async def worker() -> None:
            for ref in remaining:
                if await ref.work(7) != 7:
                    raise AssertionError(f"{model}: wrong answer")

        await asyncio.gather(*(worker() for _ in range(in_flight)))


def instructions(ns: argparse.Namespace) -> int:
    """Print the instructions per call of each model and the locator's excess; 0."""
    n1, n2 = ns.instructions
    per_call = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("single", "locator"):
            totals = []
            for calls in (n1, n2):
                out = Path(tmp) / f"{model}-{calls}.callgrind"
                subprocess.run([*callgrind_argv(out), sys.executable, "-m", "benchmarks.bench_locator", "--count", model,
                                "--ids", str(ns.ids), "--concurrency", str(ns.concurrency), "--instructions",
                                str(calls), str(calls)], cwd=ROOT, check=True, capture_output=True, timeout=3600)
                totals.append(callgrind_total(out))
            per_call[model] = (totals[1] - totals[0]) / (n2 - n1)
    print("| model | instructions per call (client and server) |")
    print("| --- | --- |")
    for model, count in per_call.items():
        print(f"| {model} | {count:,.0f} |")
    print(f"\nlocator / single: {per_call['locator'] / per_call['single']:.3f}; the located path adds "
          f"{per_call['locator'] - per_call['single']:,.0f} instructions per call ({n1:,} and {n2:,} calls, "
          f"{ns.concurrency} in flight, {ns.ids:,} ids)")
    return 0


def run(ns: argparse.Namespace, model: str) -> LoadResult:
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_locator", "--serve", model, "--ids", str(ns.ids)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base = json.loads(proc.stdout.readline())["corbaloc"]
        server = psutil.Process(proc.pid)
        rss_before = server.memory_info().rss
        cpu_before = sum(server.cpu_times()[:2])
        outcome = uvloop.run(load(base, model, ns.ids, ns.clients, ns.concurrency, ns.seconds, ns.warmup))
        cpu = sum(server.cpu_times()[:2]) - cpu_before
        # CPU over warm-up and window, per call of the window: a relative figure between models.
        return dataclasses.replace(outcome, extra={
            **outcome.extra, "rss_before_mb": rss_before / 2**20, "rss_after_mb": server.memory_info().rss / 2**20,
            "server_cpu_us_per_call": 1e6 * cpu / max(outcome.calls, 1) * ns.seconds / (ns.seconds + ns.warmup)})
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--serve", choices=["single", "locator"], help=argparse.SUPPRESS)
    p.add_argument("--ids", type=int, default=1_000_000, help="object ids the locator's store holds")
    p.add_argument("--clients", type=int, default=4, help="client connections")
    p.add_argument("--concurrency", type=int, default=32, help="calls in flight in all")
    p.add_argument("--seconds", type=float, default=8.0, help="measured window per run")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3, help="runs per model (at least 2 for a spread)")
    p.add_argument("--json", action="store_true", help="print the runs as one JSON line too")
    p.add_argument("--instructions", type=int, nargs=2, metavar=("N1", "N2"),
                   help="count instructions per call with callgrind instead (N1 < N2 calls)")
    p.add_argument("--count", choices=["single", "locator"], help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.instructions and not ns.count and not 0 < ns.instructions[0] < ns.instructions[1]:
        p.error("--instructions needs 0 < N1 < N2")
    if ns.ids < 1 or ns.clients < 1 or ns.concurrency < 1 or ns.seconds <= 0 or ns.repeats < 1:
        p.error("--ids, --clients, --concurrency, --seconds and --repeats must be positive")
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    if ns.serve:
        serve(ns.serve, ns.ids)
        return 0
    if ns.count:
        uvloop.run(counted(ns.count, ns.ids, ns.instructions[0], ns.concurrency))
        return 0
    if ns.instructions:
        return instructions(ns)
    runs: dict[str, list[LoadResult]] = {"single": [], "locator": []}
    for i in range(ns.repeats):
        for model in (("single", "locator") if i % 2 == 0 else ("locator", "single")):
            runs[model].append(run(ns, model))
    print("| model | calls/s | server CPU us/call | RSS before MB | RSS after MB | errors |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, results in runs.items():
        print(f"| {model} | {summary([r.throughput for r in results])} "
              f"| {summary([r.extra['server_cpu_us_per_call'] for r in results])} "
              f"| {summary([r.extra['rss_before_mb'] for r in results])} "
              f"| {summary([r.extra['rss_after_mb'] for r in results])} "
              f"| {sum(r.errors for r in results):.0f} |")
    single = statistics.median(r.throughput for r in runs["single"])
    located = statistics.median(r.throughput for r in runs["locator"])
    growth = max(r.extra["rss_after_mb"] - r.extra["rss_before_mb"] for r in runs["locator"])
    print(f"\nlocator / single throughput: {located / single:.3f} (medians of {ns.repeats} runs each); "
          f"largest locator RSS growth over a run: {growth:.1f} MB for {ns.ids:,} ids")
    if ns.json:
        print(json.dumps({"runs": {m: [r.as_dict() for r in rs] for m, rs in runs.items()}, "ratio": located / single}))
    return 0 if all(r.errors == 0 for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
