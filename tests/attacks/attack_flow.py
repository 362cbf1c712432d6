#!/usr/bin/env python3
"""Flow attacks against a real server, with a quiet client watching.

For each attack and strategy it starts a fresh tests/attacks/attack_server.py
process, pings it every 50 ms from a quiet client on its own connection,
runs the attack from other connections, and reports what the attack got,
the server's peak RSS, the quiet client's p50/p99 latency and lost pings,
and the server's exit status after a clean stop.  ``--tree DIR`` runs the
server from another checkout (the code before a fix); the attacks stay the
same.  Each point runs ``--runs`` times; the table gives the spread.

    python -m tests.attacks.attack_flow --runs 2
    python -m tests.attacks.attack_flow --runs 2 --tree /tmp/pyorb-before --only flood,unread
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]

from tests.attacks import flow_attacks as fa
from benchmarks.common import range_text as _spread

# name -> (strategies, server settings, extra server argv, attack(port) -> outcome text)
Attack = tuple[list[str], list[str], list[str], Callable[[int], str]]


def _unread(port: int) -> str:
    fates = [""] * 4
    workers = [threading.Thread(target=lambda i=i: fates.__setitem__(i, fa.unread(port, 1000, fa.MiB, 8.0)))
               for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    return "4 conns: " + ", ".join(sorted(set(fates)))


def _flood(message: bytes) -> Callable[[int], str]:
    def run(port: int) -> str:
        r = fa.flood(port, message, 400_000, 60.0)
        return f"{r['answered']:.0f}/{r['sent']:.0f} answered in {r['seconds']:.1f} s"
    return run


def _trains(port: int) -> str:
    r = fa.trains(port, 32, 3 * fa.MiB, 1.0, 12.0)
    dropped = r["dropped after s"]
    return "not dropped in 12 s" if dropped is None else f"dropped after {dropped:.1f} s"


def _fds(port: int) -> str:
    fates = fa.connections(port, 700, 1.0)
    return ", ".join(f"{k} {v}" for k, v in sorted(fates.items()))


ATTACKS: dict[str, Attack] = {
    "unread: 4 conns x 1,000 x 1 MiB replies, write_timeout 5 s": (
        ["reactive", "thread_pool(8)"], ["write_timeout=5.0"], [], _unread),
    "flood: 400,000 pipelined pings, one conn": (["reactive", "thread_pool(8)"], [], [], _flood(fa.ping())),
    "flood: 400,000 LocateRequests, unknown key": (["reactive"], [], [], _flood(fa.locate_storm())),
    "trains: 32 x 3 MiB unfinished + CancelRequest/s, read_timeout 3 s": (
        ["reactive"], ["read_timeout=3.0"], [], _trains),
    "fds: 700 idle conns, RLIMIT_NOFILE 512": (["reactive"], [], ["--nofile", "512"], _fds),
}


def one_run(tree: Path, model: str, settings: list[str], extra: list[str],
            attack: Callable[[int], str]) -> dict[str, Any]:
    # By its path, with the tree first on PYTHONPATH: that tree's pyorb serves, whatever this checkout holds.
    argv = [sys.executable, str(ROOT / "tests/attacks/attack_server.py"), "--model", model, *extra]
    for item in settings:
        argv += ["--set", item]
    proc = subprocess.Popen(argv, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
    proc.stdout.readline()  # the IOR
    port = int(proc.stdout.readline().strip().rsplit(":", 1)[1].split("/", 1)[0])
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]
    with fa.Watch(port, proc.pid) as watch:
        time.sleep(0.3)
        watch.latencies.clear()
        outcome = attack(port)
        time.sleep(0.5)
    code = proc.poll()
    status = "running" if code is None else (f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}")
    proc.stdin.close()
    try:
        code = proc.wait(15)
        stop = f"exit {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        stop = "hung: killed"
    warnings = sum(1 for line in errors if line.startswith(("WARNING", "ERROR")))
    return {"outcome": outcome, "status": status, "stop": stop, "log lines": warnings,
            "traceback": any("Traceback" in line for line in errors), **watch.summary()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per point (default 2)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout the server runs from (default: this one)")
    parser.add_argument("--only", default="", help="comma-separated attack name prefixes (default: all)")
    parser.add_argument("--server-args", default="", help="more arguments for attack_server.py, e.g. '--loop asyncio'")
    args = parser.parse_args()
    wanted = [w for w in args.only.split(",") if w]
    table = Table(title=f"flow attacks against {args.tree} {args.server_args}, {args.runs} runs per row")
    for col in ("attack", "model", "attack got", "server during", "stop", "RSS peak MiB", "quiet p50 ms",
                "quiet p99 ms", "quiet lost", "log lines"):
        table.add_column(col, justify="right" if col in ("RSS peak MiB", "quiet p50 ms", "quiet p99 ms",
                                                         "quiet lost", "log lines") else "left")
    for name, (models, settings, extra, attack) in ATTACKS.items():
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        for model in models:
            runs = []
            for _ in range(args.runs):
                runs.append(one_run(args.tree.resolve(), model, settings, extra + args.server_args.split(), attack))
                print(name, model, runs[-1], flush=True)  # as it comes: a later hang loses nothing
            table.add_row(name, model, " | ".join(r["outcome"] for r in runs),
                          ", ".join(sorted({r["status"] for r in runs})),
                          ", ".join(sorted({r["stop"] + (" (traceback)" if r["traceback"] else "") for r in runs})),
                          _spread([r["rss_mib"] for r in runs], "{:.0f}"),
                          _spread([r["p50_ms"] for r in runs]), _spread([r["p99_ms"] for r in runs]),
                          _spread([r["lost"] for r in runs], "{:.0f}"), _spread([r["log lines"] for r in runs], "{:.0f}"))
    Console(width=200).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
