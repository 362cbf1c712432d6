#!/usr/bin/env python3
"""A/B of outlier detection: one of three replicas SIGSTOPped under closed-loop load.

Three sink replicas (``pyorb.servers.sink``, their own processes on
loopback) form a group; ``--callers`` closed-loop callers
(pyorb.testing.groupload) call it with a ``--timeout`` call timeout, and
``--stall-at`` seconds in one replica is stopped (SIGSTOP; SIGCONT after
the run).  Each configuration (outlier detection off or on, ``work``
declared idempotent or not) runs ``--repeats`` times, alternated, each on
fresh replicas.  The table gives per configuration the median and range of:
calls that failed (the callers caught on the stalled replica), and the
throughput in the second from 0.5 s after the stall as a fraction of the
second before it.

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

from pyorb.client.balancer import OutlierDetection
from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing.groupload import LoadResult, run
from pyorb.testing.kit import ServerProcess

CONFIGS = (("off", False), ("off", True), ("on", False), ("on", True))


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


def once(ns: argparse.Namespace, detection: str, idempotent: bool) -> LoadResult:
    replicas = [ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--delay", str(ns.delay)])
                for _ in range(3)]
    victim = replicas[1].pid
    try:
        group = group_ior([IOR.from_string(r.ior) for r in replicas], GroupComponent("stall-ab", 1))
        return asyncio.run(run(group, ns.stall_at + ns.timeout + 1.0, ns.callers, ns.timeout, idempotent=idempotent,
                               detection=OutlierDetection() if detection == "on" else None,
                               events=[(ns.stall_at, lambda: os.kill(victim, signal.SIGSTOP))]))
    finally:
        os.kill(victim, signal.SIGCONT)
        for replica in replicas:
            replica.stop()


def spread(values: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    failed: dict[tuple[str, bool], list[float]] = {c: [] for c in CONFIGS}
    kept: dict[tuple[str, bool], list[float]] = {c: [] for c in CONFIGS}
    lost = 0
    for _ in range(ns.repeats):
        for config in CONFIGS:
            result = once(ns, *config)
            lost += result.lost + result.duplicates
            failed[config].append(result.failed)
            before = result.rate(ns.stall_at - 1.0, ns.stall_at)
            kept[config].append(result.rate(ns.stall_at + 0.5, ns.stall_at + 1.5) / before if before else 0.0)
    print(f"{ns.callers} callers, 3 replicas, one SIGSTOPped {ns.stall_at:g} s in, {ns.timeout:g} s call timeout, "
          f"{ns.repeats} runs each: median (min–max)")
    print("| outlier detection | idempotent | failed calls | throughput 0.5–1.5 s after the stall / before |")
    print("| --- | --- | ---: | ---: |")
    for config in CONFIGS:
        print(f"| {config[0]} | {'yes' if config[1] else 'no'} | {spread(failed[config], '{:.0f}')} | "
              f"{spread(kept[config], '{:.2f}')} |")
    if lost:
        print(f"{lost} calls lost or answered twice", file=sys.stderr)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
