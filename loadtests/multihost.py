#!/usr/bin/env python3
"""The AMH paper's middle tier in front of a replicated sink, on several hosts, driven by Locust's distributed mode.

Hosts are network namespaces on a private bridge (pyorb.testing.netns; run
as root): ``middle`` runs the AMH middle tier, ``sink1``..``sink3`` the
sink replicas (a thread pool of --sink-threads, each call sleeping --delay
seconds, so each replica serves at most threads/delay calls per second),
``client1`` and ``client2`` one Locust worker each, ``client1`` also the
master (``--expect-workers 2``).  Every server binds the wildcard address
and publishes its host name; the middle tier holds one group reference to
the sinks (``pyorb group``) and balances with least_pending.

Three experiments, each bounded in time:

* scaling: for 1, 2, 3 sink replicas, throughput against the ideal
  min(users, replicas x threads) / delay;
* failover: three replicas, one killed (SIGKILL) part-way; throughput and
  p99 latency per second, with the kill marked, to CSV and a plot;
* the AMH paper's client-scalability point, 400 clients and a 40 ms sink
  (one AMH sink), driven by two Locust workers.

    sudo python -m loadtests.multihost --out /tmp/multihost
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]

from pyorb.giop.ior import IOR, GroupComponent, group_ior
from pyorb.testing import netns
from pyorb.testing.kit import ServerProcess

LOCUSTFILE = ROOT / "loadtests" / "locustfiles" / "sink.py"
HOSTS = ["middle", "sink1", "sink2", "sink3", "client1", "client2"]
WARMUP_S = 2.0


@dataclass
class Outcome:
    label: str
    users: int
    ideal: float
    throughput: float
    p99_ms: float
    failures: int
    requests: int
    spread: str = ""


def start_sink(net: netns.Network, host: str, model: str, delay: float, port: int = 2809) -> ServerProcess:
    return net.start(host, [sys.executable, "-m", "pyorb.servers.sink", "--host", "0.0.0.0", "--port", str(port),
                            "--key", "Sink", "--model", model, "--delay", str(delay)])


def start_middle(net: netns.Network, sink: IOR) -> ServerProcess:
    return net.start("middle", [sys.executable, "-m", "pyorb.servers.middle", "--host", "0.0.0.0", "--port",
                                "2809", "--sink", sink.to_string(), "--model", "amh", "--timeout", "10"])


def stop(net: netns.Network, process: ServerProcess) -> None:
    process.stop()
    net.processes.remove(process)


def locust_run(net: netns.Network, target: str, users: int, seconds: float, prefix: Path,
               during: tuple[float, Callable[[], None]] | None = None) -> Path:
    """Locust master on client1, a worker on client1 and client2; the master's history CSV."""
    common = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
              "--loglevel", "WARNING"]
    env_timeout = ["env", "PYORB_CALL_TIMEOUT=10"]
    master = net.popen("client1", [*env_timeout, *common, "--master", "--master-bind-host", "0.0.0.0",
                                   "--expect-workers", "2", "-u", str(users), "-r", str(users), "--run-time",
                                   f"{seconds:g}s", "--host", target, "--csv", str(prefix), "--csv-full-history"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    # Each worker needs the target too: a CorbaUser checks it when it is made.
    logs = [open(f"{prefix}_worker_{host}.log", "wb") for host in ("client1", "client2")]  # noqa: SIM115
    workers = [net.popen(host, [*env_timeout, *common, "--worker", "--master-host", "client1", "--host", target],
                         stdout=subprocess.DEVNULL, stderr=log.fileno()) for host, log in zip(("client1", "client2"), logs)]
    timer = None
    if during is not None:
        timer = threading.Timer(during[0], during[1])
        timer.start()
    try:
        _, err = master.communicate(timeout=seconds + 120)
    finally:
        if timer is not None:
            timer.cancel()
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        for log in logs:
            log.close()
    history = Path(f"{prefix}_stats_history.csv")
    if not history.exists():
        raise RuntimeError(f"locust master wrote no history: {err.decode(errors='replace')[-2000:]}")
    return history


def aggregated(history: Path) -> list[dict[str, float]]:
    rows = []
    with history.open() as f:
        for row in csv.DictReader(f):
            if row["Name"] != "Aggregated":
                continue
            rows.append({"t": float(row["Timestamp"]), "users": float(row["User Count"]),
                         "rps": float(row["Requests/s"]), "fps": float(row["Failures/s"]),
                         "p99": _ms(row["99%"]), "total": float(row["Total Request Count"]),
                         "failed": float(row["Total Failure Count"])})
    return rows


RATE_WINDOW_S = 3.0
"""Workers report to the master every 3 s: rates are taken over that window of the cumulative counts."""


def with_rates(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    """Each row's calls/s and failures/s over the preceding RATE_WINDOW_S (Locust's own
    "current" rates lag by several report intervals)."""
    out = []
    for i, row in enumerate(rows):
        j = i
        while j > 0 and row["t"] - rows[j - 1]["t"] <= RATE_WINDOW_S:
            j -= 1
        span = row["t"] - rows[j]["t"]
        rate = (row["total"] - rows[j]["total"]) / span if span else 0.0
        failed = (row["failed"] - rows[j]["failed"]) / span if span else 0.0
        out.append({**row, "rps": rate, "fps": failed})
    return out


def _ms(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0  # "N/A" before the first reply


def locust_total(history: Path) -> tuple[float, int, int]:
    """Locust's own figures for the whole run: requests/s, requests, failures (the Aggregated row)."""
    stats = Path(str(history).replace("_stats_history.csv", "_stats.csv"))
    with stats.open() as f:
        for row in csv.DictReader(f):
            if row["Name"] == "Aggregated":
                return float(row["Requests/s"]), int(row["Request Count"]), int(row["Failure Count"])
    raise RuntimeError(f"no Aggregated row in {stats}")


def cpu_warnings(prefix: Path) -> int:
    """Locust workers' "CPU usage above 90%" warnings in this run (the load generator saturated)."""
    return sum(Path(log).read_text(errors="replace").count("CPU usage above")
               for log in prefix.parent.glob(f"{prefix.name}_worker_*.log"))


def summarize(label: str, users: int, ideal: float, rows: list[dict[str, float]],
              since: float | None = None, until: float | None = None) -> Outcome:
    """Throughput over the rows from ``since`` (default: the start plus WARMUP_S) to ``until``."""
    start = rows[0]["t"] + WARMUP_S if since is None else since
    steady = [r for r in rows if start <= r["t"] <= (until if until is not None else float("inf"))]
    if len(steady) < 2:  # a run too short for the window: every row with replies in it
        steady = [r for r in rows if r["total"] > 0] or rows
    last = steady[-1]
    p99s = [r["p99"] for r in steady if r["p99"]]
    return Outcome(label, users, ideal, _slope(steady), sorted(p99s)[len(p99s) // 2] if p99s else 0.0,
                   int(last["failed"]), int(last["total"]))


def _slope(rows: list[dict[str, float]]) -> float:
    """Calls/s as the least-squares slope of the cumulative count against time: the
    workers' reports arrive in 3 s steps, which a difference of two rows magnifies."""
    if len(rows) < 2:
        return 0.0
    ts, ns = [r["t"] for r in rows], [r["total"] for r in rows]
    mt, mn = sum(ts) / len(ts), sum(ns) / len(ns)
    var = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (n - mn) for t, n in zip(ts, ns)) / var if var else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("multihost-results"))
    parser.add_argument("--users", type=int, default=24, help="Locust users in the scaling and failover runs")
    parser.add_argument("--delay", type=float, default=0.05, help="the sink's delay per call, seconds")
    parser.add_argument("--sink-threads", type=int, default=4, help="threads per sink replica")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each scaling run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each scaling point (median shown)")
    parser.add_argument("--failover-seconds", type=float, default=24.0)
    parser.add_argument("--kill-at", type=float, default=12.0, help="seconds into the failover run")
    parser.add_argument("--big-users", type=int, default=400)
    parser.add_argument("--big-delay", type=float, default=0.04)
    parser.add_argument("--skip-big", action="store_true")
    ns = parser.parse_args()
    reason = netns.missing()
    if reason:
        sys.exit(f"multihost: {reason}")
    # SIGTERM unwinds like Ctrl-C, so the namespaces and their processes are removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ns.out.mkdir(parents=True, exist_ok=True)
    console = Console(width=150)
    outcomes: list[Outcome] = []
    model = f"tpr-{ns.sink_threads}"
    capacity = ns.sink_threads / ns.delay
    killed_at: list[float] = []
    with netns.Network(HOSTS) as net:
        sinks = [start_sink(net, host, model, ns.delay) for host in ("sink1", "sink2", "sink3")]
        iors = [IOR.from_string(sink.ior) for sink in sinks]
        for replicas in (1, 2, 3):
            middle = start_middle(net, group_ior(iors[:replicas], GroupComponent("multihost", replicas)))
            ideal = min(ns.users / ns.delay, replicas * capacity)
            runs = []
            for n in range(ns.repeats):
                history = locust_run(net, middle.ior, ns.users, ns.seconds, ns.out / f"scale{replicas}-{n}")
                rps, requests, failures = locust_total(history)
                runs.append(Outcome(f"{replicas} sink replica{'s' if replicas > 1 else ''}", ns.users, ideal, rps,
                                    summarize("", 0, 0, aggregated(history)).p99_ms, failures, requests))
            runs.sort(key=lambda o: o.throughput)
            median = runs[len(runs) // 2]
            median.spread = " ".join(f"{o.throughput:.0f}" for o in runs)
            median.failures = sum(o.failures for o in runs)
            outcomes.append(median)
            stop(net, middle)
        middle = start_middle(net, group_ior(iors, GroupComponent("multihost", 9)))

        def kill() -> None:
            killed_at.append(time.time())
            os.kill(sinks[1].pid, signal.SIGKILL)

        history = locust_run(net, middle.ior, ns.users, ns.failover_seconds, ns.out / "failover", (ns.kill_at, kill))
        failover = aggregated(history)
        if killed_at:
            loaded = next(r["t"] for r in failover if r["total"] > 0) + RATE_WINDOW_S  # first reports in
            outcomes.append(summarize("failover: before the kill (3 replicas)", ns.users,
                                      min(ns.users / ns.delay, 3 * capacity), failover, since=loaded,
                                      until=killed_at[0]))
            outcomes.append(summarize("failover: from 3 s after the kill (2 replicas)", ns.users,
                                      min(ns.users / ns.delay, 2 * capacity), failover, since=killed_at[0] + 3.0))
        stop(net, middle)
        if not ns.skip_big:
            amh = start_sink(net, "sink3", "amh", ns.big_delay, port=2810)
            middle = start_middle(net, IOR.from_string(amh.ior))
            history = locust_run(net, middle.ior, ns.big_users, ns.seconds, ns.out / "big")
            rps, requests, failures = locust_total(history)
            big = Outcome(f"{ns.big_users} clients, {ns.big_delay * 1000:g} ms AMH sink", ns.big_users,
                          ns.big_users / ns.big_delay, rps, summarize("", 0, 0, aggregated(history)).p99_ms,
                          failures, requests)
            warnings = cpu_warnings(ns.out / "big")
            big.spread = f"{warnings} Locust CPU warnings" if warnings else ""
            outcomes.append(big)
    write_failover(ns.out, failover, killed_at[0] if killed_at else None)
    table = Table(title=f"AMH middle tier, sink group, Locust distributed (2 workers); sink: {model}, "
                        f"delay {ns.delay * 1000:g} ms")
    for column in ("run", "users", "ideal calls/s", "calls/s", "of ideal", "runs (calls/s)",
                   "p99 ms (median of seconds)", "failures", "requests"):
        table.add_column(column, justify="left" if column == "run" else "right")
    with (ns.out / "summary.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run", "users", "ideal", "throughput", "ratio", "runs", "p99_ms", "failures", "requests"])
        for o in outcomes:
            ratio = o.throughput / o.ideal if o.ideal else 0.0
            writer.writerow([o.label, o.users, f"{o.ideal:.1f}", f"{o.throughput:.1f}", f"{ratio:.3f}", o.spread,
                             f"{o.p99_ms:.0f}", o.failures, o.requests])
            table.add_row(o.label, str(o.users), f"{o.ideal:,.0f}", f"{o.throughput:,.0f}", f"{ratio:.0%}", o.spread,
                          f"{o.p99_ms:.0f}", str(o.failures), str(o.requests))
    console.print(table)
    console.print(f"CSV and plot in {ns.out}")


def write_failover(out: Path, rows: list[dict[str, float]], killed_at: float | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = with_rates(rows)
    start = rows[0]["t"]
    with (out / "failover.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["second", "calls_per_s", "failures_per_s", "p99_ms"])
        for r in rows:
            writer.writerow([f"{r['t'] - start:.0f}", f"{r['rps']:.1f}", f"{r['fps']:.1f}", f"{r['p99']:.0f}"])
    seconds = [r["t"] - start for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    top.plot(seconds, [r["rps"] for r in rows], label="calls/s")
    top.plot(seconds, [r["fps"] for r in rows], label="failures/s")
    top.set_ylabel("calls per second")
    top.legend()
    bottom.plot(seconds, [r["p99"] for r in rows], color="tab:red")
    bottom.set_ylabel("p99 latency, ms")
    bottom.set_xlabel("seconds")
    if killed_at is not None:
        for ax in (top, bottom):
            ax.axvline(killed_at - start, color="grey", linestyle="--")
    top.set_title("Sink replica killed (dashed line): 3 -> 2 replicas behind one group reference")
    fig.tight_layout()
    fig.savefig(out / "failover.png", dpi=100)


if __name__ == "__main__":
    main()
