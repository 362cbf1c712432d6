"""The papers' four experiments as lists of sweep points.

Defaults are chosen so that each full sweep takes at most about ten minutes
on a 2-core machine; ``--quick`` sets take seconds (for the tests).  Models
vary in the innermost loop, so that each point's models run one after the
other under the same machine conditions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pyorb.loadtest.sweep import Point


@dataclass(frozen=True)
class Defaults:
    models: tuple[str, ...]
    quick_models: tuple[str, ...]


CLIENT_SCALABILITY = Defaults(("amh-st", "tpc", "omniorb-tpc", "omniorb-pool-16"),
                              ("amh-st", "omniorb-tpc"))
LATENCY_SCALABILITY = Defaults(("amh-st", "amh-2", "omniorb-tpc", "omniorb-pool-2"),
                               ("amh-st", "omniorb-pool-2"))
HARKEMA = Defaults(("tpc", "tpr-8", "amh-st", "omniorb-tpc", "omniorb-pool-8"),
                   ("tpr-8", "omniorb-pool-8"))
AMI_SMI = Defaults(("amh-st", "omniorb-tpc"), ("amh-st",))

# (delay s, clients) of the client-scalability sweep: the paper's 40 ms, and 1 s so that CPU is not the limit.
SCALABILITY_POINTS = ((0.04, (50, 150, 400, 1000)), (1.0, (1000, 5000)))
SCALABILITY_QUICK = ((0.04, (1, 20)),)
LATENCY_DELAYS = (0.0, 0.01, 0.02, 0.04, 0.08, 0.16)
LATENCY_QUICK = (0.0, 0.04)
LATENCY_CLIENTS = 150
# Harkema et al.: 1 ms CPU, 5 ms CPU, 50 ms delay; exponential demands; 200 requests per client.
HARKEMA_WORKLOADS = ((0.0, 0.001), (0.0, 0.005), (0.05, 0.0))
HARKEMA_CLIENTS = (2, 16, 128)
HARKEMA_QUICK_CLIENTS = (2, 8)
HARKEMA_REQUESTS = 200
AMI_CALLS = 10_000
SMI_THREADS = 16
AMI_WINDOW = 64


def client_scalability(models: Sequence[str], delays_clients: Sequence[tuple[float, Sequence[int]]]) -> list[Point]:
    return [Point("client-scalability", m, n, d) for d, ns in delays_clients for n in ns for m in models]


def latency_scalability(models: Sequence[str], delays: Sequence[float], clients: int) -> list[Point]:
    return [Point("latency-scalability", m, clients, d) for d in delays for m in models]


def harkema(models: Sequence[str], clients: Sequence[int], workloads: Sequence[tuple[float, float]],
            requests: int) -> list[Point]:
    return [Point("harkema", m, n, d, cpu=c, exponential=True, through_middle=False, requests=requests)
            for d, c in workloads for n in clients for m in models]


def ami_smi(models: Sequence[str], calls: int, threads: int, window: int,
            orbs: Sequence[str] = ("pyorb", "omniorb")) -> list[Point]:
    """Table 1 (sequential latency) and Table 2 (throughput) rows, for each server model and client ORB."""
    points = []
    for model in models:
        for client in orbs:
            def p(mode: str, label: str, clients: int = 1, window_: int = 0, calls_: int = 0) -> Point:
                return Point("ami-smi", model, clients, 0.0, through_middle=False, mode=mode, client=client,
                             window=window_, calls=calls_, label=f"{client} {label}")

            # Sequential synchronous throughput is the SMI sequential row's (calls / seconds).
            points += [p("smi", "SMI sequential", calls_=calls), p("sequential", "AMI sequential", calls_=calls),
                       p("smi", f"SMI {threads} threads", clients=threads),
                       p("pipelined", f"AMI pipelined ({window})", window_=window)]
    return points
