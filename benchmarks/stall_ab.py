#!/usr/bin/env python3
"""A/B of outlier detection and hedging: one of three replicas SIGSTOPped under closed-loop load.

Three sink replicas (``pyorb.servers.sink``, their own processes on
loopback) form a group; ``--callers`` closed-loop callers
(pyorb.testing.groupload) call it with a ``--timeout`` call timeout, and
``--stall-at`` seconds in one replica is stopped (SIGSTOP; SIGCONT after
the run).  Each configuration (outlier detection off or on, ``work``
declared idempotent or not) runs ``--repeats`` times, alternated, each on
fresh replicas; with hedging (pyorb.client.balancer.Hedging(), for
idempotent calls only) besides.  The table gives per configuration the
median and range of: calls that failed (the callers caught on the stalled
replica), the throughput in the second from 0.5 s after the stall as a
fraction of the second before it, the throughput over the whole run, the
99th and 99.9th percentiles of the answered calls' latency, the hedges
sent, and the calls whose answer came from the hedge.

    python -m benchmarks.stall_ab --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
from typing import Sequence

from pyorb.client.balancer import Hedging, OutlierDetection
from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing.groupload import LoadResult, run
from pyorb.testing.kit import ServerProcess

# (outlier detection, idempotent, hedging)
CONFIGS = (("off", False, False), ("off", True, False), ("on", False, False), ("on", True, False),
           ("off", True, True), ("on", True, True))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="runs per configuration (default 3)")
    p.add_argument("--callers", type=int, default=60, help="closed-loop callers (default 60)")
    p.add_argument("--timeout", type=float, default=2.0, help="call timeout in seconds (default 2)")
    p.add_argument("--delay", type=float, default=0.02, help="sink delay per call in seconds (default 0.02)")
    p.add_argument("--stall-at", type=float, default=2.0, help="seconds into a run (default 2)")
    ns = p.parse_args(argv)
    if ns.repeats < 1 or ns.callers < 3 or ns.timeout <= 0 or ns.stall_at < 1:
        p.error("--repeats >= 1, --callers >= 3, --timeout > 0, --stall-at >= 1")
    return ns


def once(ns: argparse.Namespace, detection: str, idempotent: bool, hedging: bool) -> LoadResult:
    replicas = [ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--delay", str(ns.delay)])
                for _ in range(3)]
    victim = replicas[1].pid
    try:
        group = group_ior([IOR.from_string(r.ior) for r in replicas], GroupComponent("stall-ab", 1))
        return asyncio.run(run(group, ns.stall_at + ns.timeout + 1.0, ns.callers, ns.timeout, idempotent=idempotent,
                               detection=OutlierDetection() if detection == "on" else None,
                               events=[(ns.stall_at, lambda: os.kill(victim, signal.SIGSTOP))],
                               hedging=Hedging() if hedging else None))
    finally:
        os.kill(victim, signal.SIGCONT)
        for replica in replicas:
            replica.stop()


def spread(values: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    failed: dict[tuple[str, bool, bool], list[float]] = {c: [] for c in CONFIGS}
    kept: dict[tuple[str, bool, bool], list[float]] = {c: [] for c in CONFIGS}
    rate: dict[tuple[str, bool, bool], list[float]] = {c: [] for c in CONFIGS}
    p99: dict[tuple[str, bool, bool], list[float]] = {c: [] for c in CONFIGS}
    p999: dict[tuple[str, bool, bool], list[float]] = {c: [] for c in CONFIGS}
    hedges: dict[tuple[str, bool, bool], list[float]] = {c: [] for c in CONFIGS}
    won: dict[tuple[str, bool, bool], list[float]] = {c: [] for c in CONFIGS}
    lost = 0
    for _ in range(ns.repeats):
        for config in CONFIGS:
            result = once(ns, *config)
            lost += result.lost + result.duplicates
            failed[config].append(result.failed)
            before = result.rate(ns.stall_at - 1.0, ns.stall_at)
            kept[config].append(result.rate(ns.stall_at + 0.5, ns.stall_at + 1.5) / before if before else 0.0)
            rate[config].append(result.ok / result.seconds)
            p99[config].append(result.p99 * 1e3)
            p999[config].append(result.p999 * 1e3)
            hedges[config].append(result.hedges)
            won[config].append(result.hedges_won)
    print(f"{ns.callers} callers, 3 replicas, one SIGSTOPped {ns.stall_at:g} s in, {ns.timeout:g} s call timeout, "
          f"{ns.repeats} runs each: median (min–max)")
    print("| outlier detection | idempotent | hedging | failed calls | throughput 0.5–1.5 s after the stall / before "
          "| calls/s | p99 (ms) | p99.9 (ms) | hedges | won by the hedge |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for config in CONFIGS:
        print(f"| {config[0]} | {'yes' if config[1] else 'no'} | {'on' if config[2] else 'off'} | "
              f"{spread(failed[config], '{:.0f}')} | {spread(kept[config], '{:.2f}')} | "
              f"{spread(rate[config], '{:.0f}')} | {spread(p99[config], '{:.0f}')} | "
              f"{spread(p999[config], '{:.0f}')} | {spread(hedges[config], '{:.0f}')} | "
              f"{spread(won[config], '{:.0f}')} |")
    if lost:
        print(f"{lost} calls lost or answered twice", file=sys.stderr)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
