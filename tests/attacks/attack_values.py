#!/usr/bin/env python3
"""Hostile values against a real server, with a quiet client watching.

For each attack of tests/attacks/hostile_values.py and each strategy it starts a
fresh ``pyorb serve`` process of idl/hardening.idl, starts a quiet client that
pings every 50 ms on its own connection, sends the attack once on another
connection, and reports: what the attacker got back, the server's peak RSS
(sampled every 10 ms), the quiet client's p50/p99 latency over the attack
window, the server's exit status (running, or the signal that killed it) and
the quiet calls lost.  Each point runs ``--runs`` times; the table gives the
spread.  ``--tree DIR`` runs the server from another checkout (the code
before a fix) while the attacks stay the same.

    python -m tests.attacks.attack_values --runs 3
    python -m tests.attacks.attack_values --runs 3 --tree /tmp/pyorb-before
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]

from tests.attacks import hostile_values as hostile
from benchmarks.common import range_text as _spread

QUIET_PERIOD = 0.05
WINDOW = 3.0  # seconds watched after the attack is sent


def _start(tree: Path, model: str) -> tuple[subprocess.Popen[str], str, int]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyorb", "serve", f"{ROOT / 'tests/peers/hardening_servant.py'}:Target",
         "--idl", str(ROOT / "idl/hardening.idl"), "--key", "Target", "--model", model, "--stop-on-stdin-eof"],
        cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    ior = proc.stdout.readline().strip()
    corbaloc = proc.stdout.readline().strip()
    return proc, ior, int(corbaloc.rsplit(":", 1)[1].split("/", 1)[0])


def _attack(port: int, body: bytes) -> str:
    from pyorb.giop import codec
    from pyorb.giop.messages import Request

    msg = codec.encode(Request(request_id=1, response_flags=3, object_key=b"Target", operation="take", body=body))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=WINDOW) as sock:
            sock.sendall(msg)
            data = b""
            while len(data) < 12 or len(data) < 12 + struct.unpack("<I" if data[6] & 1 else ">I", data[8:12])[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    return "connection closed"
                data += chunk
    except OSError as exc:
        return f"{type(exc).__name__}"
    for name in (b"MARSHAL", b"NO_MEMORY", b"UNKNOWN", b"BAD_PARAM"):
        if b"CORBA/" + name in data:
            return name.decode()
    return "a reply"


def one_run(tree: Path, model: str, attack: str) -> dict[str, Any]:
    import pyorb

    hardening = pyorb.load_idl(ROOT / "idl/hardening.idl").Hardening
    proc, ior, port = _start(tree, model)
    ps = psutil.Process(proc.pid)
    peak = ps.memory_info().rss
    latencies: list[float] = []
    lost = 0
    stop = threading.Event()

    def quiet() -> None:
        nonlocal lost
        with pyorb.BlockingClient(pyorb.Config(call_timeout=2.0)) as client:
            target = client.resolve(ior, hardening.Target)
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    target.ping(1)
                    latencies.append(time.perf_counter() - t0)
                except Exception:
                    lost += 1
                stop.wait(QUIET_PERIOD)

    watcher = threading.Thread(target=quiet, daemon=True)
    watcher.start()
    time.sleep(0.3)
    latencies.clear()
    body = hostile.ATTACKS[attack]()
    outcome: list[str] = []
    sender = threading.Thread(target=lambda: outcome.append(_attack(port, body)), daemon=True)
    sender.start()
    deadline = time.monotonic() + WINDOW
    while time.monotonic() < deadline:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.01)
    stop.set()
    watcher.join(5)
    sender.join(5)
    code = proc.poll()
    status = "running" if code is None else (f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}")
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    lat = sorted(latencies)
    return {"reply": outcome[0] if outcome else "no answer", "rss": peak / 2**20, "status": status, "lost": lost,
            "p50": statistics.median(lat) * 1e3 if lat else float("nan"),
            "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3 if lat else float("nan")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per point (default 2)")
    parser.add_argument("--models", default="reactive,thread_pool(4)", help="strategies, comma-separated")
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout the server runs from (default: this one)")
    args = parser.parse_args()
    table = Table(title=f"hostile values against pyorb serve ({args.tree}), {args.runs} runs per row")
    for col in ("attack", "model", "attacker got", "server RSS peak MiB", "server after", "quiet p50 ms",
                "quiet p99 ms", "quiet calls lost"):
        table.add_column(col, justify="left" if col in ("attack", "model", "attacker got", "server after") else "right")
    for attack in hostile.ATTACKS:
        for model in args.models.split(","):
            runs = [one_run(args.tree.resolve(), model, attack) for _ in range(args.runs)]
            table.add_row(attack, model, ", ".join(sorted({r["reply"] for r in runs})),
                          _spread([r["rss"] for r in runs], "{:.0f}"),
                          ", ".join(sorted({r["status"] for r in runs})),
                          _spread([r["p50"] for r in runs]), _spread([r["p99"] for r in runs]),
                          _spread([r["lost"] for r in runs], "{:.0f}"))
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
