#!/usr/bin/env python3
"""Fault soak: closed-loop calls through an object group while its members fail on a schedule.

Three sink replicas, each on its own host (a network namespace, see
pyorb.testing.netns; needs root), form one group reference.  On a client
host, two pyorb clients (pyorb.testing.groupload: one declaring ``work``
idempotent and hedging it, one not) and an omniORBpy client (benchmarks/omni_soak_calls.py)
call it in closed loops for ``--minutes``.  Every ``--period`` seconds one
replica, in turn, fails for ``--fault-seconds``, the faults in turn too:

* kill: SIGKILL, then a new process on the same host and port;
* stall: SIGSTOP, then SIGCONT;
* partition: the host's link down, then up;
* leave: SIGTERM (a graceful exit), then a new process.

At the end it prints a table per client: calls ok, failed by exception,
lost (no outcome at all), duplicate replies, calls that ended more than a
second past their deadline; and the RSS of each process at its first
sample after the warm-up and at the end.  It exits 1 if any call was lost
or answered twice, or a pyorb client's RSS grew by more than
``--rss-growth`` (fraction).  Bounded: it stops by itself after the run.

    sudo python -m benchmarks.fault_soak --minutes 30
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import psutil

from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.idl import BENCH_IDL
from pyorb.testing import netns
from pyorb.testing.kit import ServerProcess

HOSTS = ("sink1", "sink2", "sink3")
FAULTS = ("kill", "stall", "partition", "leave")
WARMUP_S = 10.0
SAMPLE_S = 10.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=1.0, help="length of the run (default 1)")
    p.add_argument("--callers", type=int, default=20, help="closed-loop callers per pyorb client (default 20)")
    p.add_argument("--timeout", type=float, default=2.0, help="each call's timeout in seconds (default 2)")
    p.add_argument("--delay", type=float, default=0.005, help="sink delay per call in seconds (default 0.005)")
    p.add_argument("--period", type=float, default=15.0, help="seconds from one fault to the next (default 15)")
    p.add_argument("--fault-seconds", type=float, default=5.0, help="how long a fault lasts (default 5)")
    p.add_argument("--rss-growth", type=float, default=0.25,
                   help="most a pyorb client's RSS may grow after the warm-up, as a fraction (default 0.25)")
    p.add_argument("--json", type=Path, help="also write the results here")
    ns = p.parse_args(argv)
    if not 0 < ns.minutes <= 24 * 60 or ns.callers < 1 or not 0 < ns.fault_seconds < ns.period:
        p.error("--minutes must be in (0, 1440], --callers >= 1, 0 < --fault-seconds < --period")
    return ns


@dataclass
class Replica:
    host: str
    process: ServerProcess
    rss: list[int] = field(default_factory=list)  # this process's samples
    lives: int = 1


class Soak:
    def __init__(self, ns: argparse.Namespace, net: netns.Network) -> None:
        self.ns, self.net = ns, net
        self.replicas = {host: Replica(host, self._start_sink(host)) for host in HOSTS}
        self.rss: dict[str, list[int]] = {}
        self.events: list[tuple[float, str, str]] = []
        self.stopped: set[str] = set()
        self.cut: set[str] = set()

    def _start_sink(self, host: str) -> ServerProcess:
        return self.net.start(host, [sys.executable, "-m", "pyorb.servers.sink", "--host", "0.0.0.0", "--port", "2809",
                                     "--key", "Sink", "--delay", str(self.ns.delay)])

    def group(self) -> IOR:
        return group_ior([IOR.from_string(r.process.ior) for r in self.replicas.values()],
                         GroupComponent("fault-soak", 1))

    # -- faults --------------------------------------------------------------------
    def fault(self, kind: str, host: str) -> None:
        replica = self.replicas[host]
        if kind == "kill":
            os.kill(replica.process.pid, signal.SIGKILL)
        elif kind == "leave":
            os.kill(replica.process.pid, signal.SIGTERM)
        elif kind == "stall":
            os.kill(replica.process.pid, signal.SIGSTOP)
            self.stopped.add(host)
        else:
            self.net.partition(host)
            self.cut.add(host)

    def heal(self, kind: str, host: str) -> None:
        replica = self.replicas[host]
        if kind in ("kill", "leave"):
            old = replica.process
            old.stop()
            self.net.processes.remove(old)
            replica.process = self._start_sink(host)
            replica.rss = []
            replica.lives += 1
        elif kind == "stall":
            os.kill(replica.process.pid, signal.SIGCONT)
            self.stopped.discard(host)
        else:
            self.net.heal(host)
            self.cut.discard(host)

    def release(self) -> None:
        """Undo every fault still in force (on the way out, error or not)."""
        for host in list(self.stopped):
            os.kill(self.replicas[host].process.pid, signal.SIGCONT)
        for host in list(self.cut):
            self.net.heal(host)

    # -- memory ----------------------------------------------------------------------
    def sample(self, clients: dict[str, subprocess.Popen[bytes]]) -> None:
        for host, replica in self.replicas.items():
            replica.rss.append(_rss(replica.process.pid))
        for name, child in clients.items():
            self.rss.setdefault(name, []).append(_rss(child.pid))


def _rss(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def start_clients(soak: Soak, seconds: float) -> dict[str, subprocess.Popen[bytes]]:
    ns, net, group = soak.ns, soak.net, soak.group().to_string()
    load = [sys.executable, "-m", "pyorb.testing.groupload", group, "--seconds", str(seconds), "--in-flight",
            str(ns.callers), "--timeout", str(ns.timeout), "--bin", "1"]
    omni = [sys.executable, "-m", "pyorb.testing.omnipeer", "call", "--idl", str(BENCH_IDL),
            "--function", "benchmarks.omni_soak_calls:closed_loop", "--target", group,
            "--interface", "Bench::Sink", "--args", json.dumps([seconds, int(ns.timeout * 1000)])]
    pipe = subprocess.PIPE
    return {"pyorb": net.popen("client", load, stdout=pipe),
            "pyorb idempotent": net.popen("client", [*load, "--idempotent", "--hedging"], stdout=pipe),
            "omniORBpy": net.popen("client", omni, stdout=pipe)}


def run(ns: argparse.Namespace) -> dict[str, Any]:
    seconds = ns.minutes * 60
    with netns.Network([*HOSTS, "client"]) as net:
        soak = Soak(ns, net)
        clients: dict[str, subprocess.Popen[bytes]] = {}
        try:
            clients = start_clients(soak, seconds)
            start = time.monotonic()
            schedule = _schedule(ns, seconds)
            next_sample = start + WARMUP_S
            while time.monotonic() < start + seconds:
                now = time.monotonic() - start
                while schedule and schedule[0][0] <= now:
                    at, action, kind, host = schedule.pop(0)
                    (soak.fault if action == "fault" else soak.heal)(kind, host)
                    soak.events.append((round(now, 1), f"{action} {kind}", host))
                if time.monotonic() >= next_sample:
                    soak.sample(clients)
                    next_sample += SAMPLE_S
                time.sleep(0.05)
            soak.release()
            soak.sample(clients)
            outcomes = {name: _outcome(child, ns.timeout) for name, child in clients.items()}
        finally:
            soak.release()
        return {"seconds": seconds, "events": soak.events, "clients": outcomes,
                "rss": {**{name: [s[0], s[-1]] for name, s in soak.rss.items() if s},
                        **{f"{host} (life {r.lives})": [r.rss[0], r.rss[-1]] for host, r in soak.replicas.items()
                           if r.rss}}}


def _schedule(ns: argparse.Namespace, seconds: float) -> list[tuple[float, str, str, str]]:
    """(seconds from the start, fault or heal, kind, host), in time order; the
    last fault heals at least a period before the end."""
    steps: list[tuple[float, str, str, str]] = []
    at, n = WARMUP_S, 0
    while at + ns.period <= seconds:
        kind, host = FAULTS[n % len(FAULTS)], HOSTS[n % len(HOSTS)]
        steps += [(at, "fault", kind, host), (at + ns.fault_seconds, "heal", kind, host)]
        at += ns.period
        n += 1
    return steps


def _outcome(child: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    try:
        out, _ = child.communicate(timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return {"ok": 0, "errors": {"client did not finish": 1}, "lost": -1, "duplicates": 0, "late": 0}
    lines = out.decode(errors="replace").strip().splitlines()
    if not lines:
        return {"ok": 0, "errors": {f"client exited {child.returncode} without a result": 1}, "lost": -1,
                "duplicates": 0, "late": 0}
    found: dict[str, Any] = json.loads(lines[-1])
    if "result" in found or "error" in found:  # omnipeer's envelope
        if not found.get("ok"):
            return {"ok": 0, "errors": {found.get("error", "?"): 1}, "lost": -1, "duplicates": 0, "late": 0}
        found = {**found["result"], "lost": 0}
    return found


def table(results: dict[str, Any]) -> str:
    rows = ["| client | calls ok | failed (by exception) | lost | duplicate replies | past deadline + 1 s "
            "| p99 (ms) | p99.9 (ms) | hedges (won) |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, c in results["clients"].items():
        errors = ", ".join(f"{k} {v}" for k, v in sorted(c["errors"].items())) or "none"
        tail = (f"{c['p99'] * 1e3:.0f} | {c['p999'] * 1e3:.0f} | {c['hedges']} ({c['hedges_won']})" if "p99" in c
                else "– | – | –")  # the omniORBpy client counts no latencies
        rows.append(f"| {name} | {c['ok']} | {errors} | {c.get('lost', 0)} | {c['duplicates']} | {c['late']} "
                    f"| {tail} |")
    rows += ["", "| process | RSS after warm-up (MiB) | RSS at the end (MiB) |", "| --- | ---: | ---: |"]
    for name, (first, last) in results["rss"].items():
        rows.append(f"| {name} | {first / 2**20:.1f} | {last / 2**20:.1f} |")
    return "\n".join(rows)


def verdict(results: dict[str, Any], growth: float) -> list[str]:
    problems = []
    for name, c in results["clients"].items():
        if c.get("lost", 0) != 0 or c["duplicates"] or c["late"]:
            problems.append(f"{name}: {c.get('lost')} lost, {c['duplicates']} duplicates, {c['late']} late")
    for name in ("pyorb", "pyorb idempotent"):
        first, last = results["rss"].get(name, (0, 0))
        if first and last > first * (1 + growth):
            problems.append(f"{name}: RSS grew from {first / 2**20:.1f} to {last / 2**20:.1f} MiB")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    reason = netns.missing()
    if reason:
        print(f"fault_soak: {reason}", file=sys.stderr)
        return 2
    results = run(ns)
    faults = sum(1 for _, action, _ in results["events"] if action.startswith("fault"))
    print(f"{ns.minutes:g} min, {faults} faults (kill, stall, partition, leave in turn), "
          f"{ns.callers} callers per pyorb client, {ns.timeout:g} s call timeout")
    print(table(results))
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=1))
    problems = verdict(results, ns.rss_growth)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
