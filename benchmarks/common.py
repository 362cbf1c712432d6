"""Pieces the benchmarks in this folder share: run options, server processes, reading a load generator's result."""

from __future__ import annotations

import argparse
import json
import math
import os
import selectors
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable


def positive(kind: type) -> Callable[[str], Any]:
    """argparse type: a positive int or float."""

    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text}")
        return value

    return parse


@dataclass(frozen=True)
class RunDefaults:
    """A benchmark's window and repetitions when not given."""

    seconds: float
    warmup: float
    repeats: int


def add_run_options(p: argparse.ArgumentParser, normal: RunDefaults,
                    quick: RunDefaults, quick_help: str) -> None:
    """The benchmarks' common options: window, repeats, quick, outputs."""
    p.add_argument("--seconds", type=positive(float), default=None,
                   help=f"measured seconds per point (default "
                        f"{normal.seconds:g}, quick {quick.seconds:g})")
    p.add_argument("--warmup", type=float, default=None, metavar="S",
                   help=f"unmeasured seconds before each point (default "
                        f"{normal.warmup:g}, quick {quick.warmup:g})")
    p.add_argument("--repeats", type=positive(int), default=None,
                   help=f"repetitions of every point (default "
                        f"{normal.repeats}, quick {quick.repeats})")
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--markdown", type=Path, metavar="PATH",
                   help="also write the tables as Markdown here")
    p.add_argument("--json", type=Path, metavar="PATH",
                   help="also write the raw results as JSON here")
    add_cpus_option(p)


def add_cpus_option(p: argparse.ArgumentParser) -> None:
    """``--cpus``: where every server and client of the run may run."""
    p.add_argument("--cpus", type=int, nargs="+", metavar="CPU",
                   help="run every server and client on these CPUs only (default: wherever the kernel puts them)")


def pin_cpus(p: argparse.ArgumentParser, cpus: list[int] | None) -> str:
    """Pin this process, and so every process it starts afterwards, to ``cpus``
    (none: leave it where it is); how the run is placed, for its report.

    On a VM whose idle virtual CPUs halt, waking another CPU for each
    message can cost more than an ORB's work per call: pinned to one CPU, a
    round trip costs the processes' CPU time and a context switch, and the
    unpinned figures measure the host's wakeups as much as the ORBs."""
    if not cpus:
        return "unpinned"
    allowed = os.sched_getaffinity(0)
    if not set(cpus) <= allowed:
        p.error(f"--cpus {' '.join(map(str, cpus))}: this process may run only on CPUs "
                f"{', '.join(map(str, sorted(allowed)))}")
    os.sched_setaffinity(0, cpus)
    return f"every process on CPU {', '.join(map(str, sorted(set(cpus))))}"


def settle_run_options(p: argparse.ArgumentParser, ns: argparse.Namespace,
                       normal: RunDefaults, quick: RunDefaults) -> None:
    """Fill in what add_run_options' options left unset, and place the run on ``--cpus``."""
    chosen = quick if ns.quick else normal
    ns.seconds = ns.seconds or chosen.seconds
    ns.repeats = ns.repeats or chosen.repeats
    ns.warmup = chosen.warmup if ns.warmup is None else ns.warmup
    if ns.warmup < 0:
        p.error("--warmup must not be negative")
    ns.placement = pin_cpus(p, ns.cpus)


# -- server processes (bench_echo.py, bench_strategies.py) --------------------

ROOT = Path(__file__).resolve().parents[1]
SERVER_START_S = 30.0           # a server prints its IOR within this
SERVER_STOP_S = 5.0             # per step: stdin EOF, SIGTERM, SIGKILL


class ServerStartError(RuntimeError):
    """A server process did not print an IOR."""


def read_first_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The next stdout line of ``proc``, or '' at EOF or timeout.

    Reads the file descriptor itself, unbuffered, so that a later call
    finds the next line still unread.
    """
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(fd, 1)  # byte by byte: never read past the line
            if not chunk:
                break
            buf += chunk
    return buf.decode(errors="replace").strip()


def tail(stream: IO[bytes], limit: int = 300) -> str:
    """The last line of a captured stderr file, shortened."""
    stream.seek(0)
    lines = stream.read().decode(errors="replace").strip().splitlines()
    return lines[-1][-limit:] if lines else ""


def stop_process(proc: subprocess.Popen[bytes]) -> int:
    """Stop a process we started: stdin EOF, then SIGTERM, then SIGKILL.

    Returns its exit status; a server that needed SIGTERM or SIGKILL gets
    no extra mark here beyond what its exit status says.
    """
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()  # the servers stop at stdin EOF
        except OSError:
            pass
    for step in (None, proc.terminate, proc.kill):
        if step is not None:
            step()
        try:
            return proc.wait(SERVER_STOP_S)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()


class ServerProcess:
    """A fresh server for one point: ``command`` must print its IOR on the
    first stdout line and stop at stdin EOF.  A context manager that always
    stops the process it started (by its pid, via Popen)."""

    def __init__(self, command: list[str], name: str) -> None:
        self.command = command
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.rc: int | None = None
        self.stderr: IO[bytes] = tempfile.TemporaryFile()

    def __enter__(self) -> str:
        # stderr goes to a file: a chatty server must never block on a
        # full pipe in the middle of a measurement.
        self.proc = subprocess.Popen(
            self.command, cwd=ROOT, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr)
        ior = read_first_line(self.proc, SERVER_START_S)
        if not ior.startswith("IOR:"):
            self.rc = stop_process(self.proc)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            why = tail(self.stderr) or f"no IOR within {SERVER_START_S:g} s"
            raise ServerStartError(
                f"{self.name} failed to start (rc {self.rc}): {why}")
        return ior

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.rc is None:
            self.rc = stop_process(self.proc)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def problem(self) -> str | None:
        """Why the server's exit counts against the run, if it does."""
        if self.rc == 0:
            return None
        msg = f"server rc {self.rc}"
        why = tail(self.stderr)
        return f"{msg}: {why}" if why else msg


def last_json(stdout: bytes) -> dict[str, Any] | None:
    """A client's JSON line (the last one), or None if it printed none."""
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def generator_result(stdout: bytes) -> dict[str, Any] | None:
    """A load generator's result (:class:`pyorb.loadtest.stats.LoadResult`) as the tables read it, or None
    if it printed none: its JSON fields, ``calls_per_s`` (rounded) and the latency percentiles in µs."""
    from pyorb.loadtest.stats import read_result

    try:
        found = read_result(stdout)
    except ValueError:
        return None
    micro = {f"{k[:-3]}_us": None if math.isnan(v) else round(v * 1000, 1)
             for k, v in found.latency_ms.items() if k in ("min_ms", "p50_ms", "p99_ms")}
    return {**found.as_dict(), "calls_per_s": round(found.throughput, 1), **micro}


def generator_rate(argv: list[str], cwd: Path, timeout: float) -> float:
    """Run a load generator (``argv``, its command line) to its end: its answered calls per second.
    Raises RuntimeError if it exited non-zero, printed no result or had calls fail."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=timeout, check=False)
    found = generator_result(done.stdout)
    label = " ".join(argv[1:3])
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{label} failed (rc {done.returncode}): {done.stderr.decode(errors='replace')[-300:]}")
    if found["errors"]:
        raise RuntimeError(f"{label}: {found['errors']} calls failed")
    return float(found["calls_per_s"])


def range_text(values: list[float], fmt: str = "{:.1f}") -> str:
    """``min–max`` of repeated runs in ``fmt`` (one value when they agree): a table's spread column."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"
