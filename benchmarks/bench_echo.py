#!/usr/bin/env python3
"""Side-by-side echo throughput benchmark: pyorb against omniORBpy.

Every point runs in fresh server and client processes on loopback.  The
clients are the two load generators calling Bench::Echo.ping: omniORBpy's
(pyorb.loadtest.omni_generator --target echo --mode smi: threads of
synchronous calls) and pyorb's (pyorb.loadtest.generator --target echo
--mode pipelined: calls in flight on one connection).

  (a) omniORBpy client, 1/8/64 threads (one connection per thread) against
      the pyorb server (sync servant), the omniORBpy server in
      thread-per-connection mode and in thread-pool mode, and two floors
      that are not ORBs (bare_echo_server.py: a uvloop protocol answering
      without parsing, inline or through a worker thread);
  (b) omniORBpy client -> omniORBpy server, the omniORB-to-omniORB
      reference: 8 threads on 8 connections and 64 on 64 (the same
      processes and options as the matching (a) points, so those runs are
      reused, not repeated) plus 64 threads sharing 8 connections;
  (c) pyorb client -> pyorb server, 1/64/1000 calls in flight on one
      connection, against the best omniORB-to-omniORB median of (b);
  (L) sequential latency: 2000 calls one after another, omniORBpy client
      -> pyorb server, -> omniORBpy thread-per-connection server and
      -> the bare floor.

The machine is shared and noisy, so the numbers are medians over
--repeats repetitions with their min-max spread, and ratios of medians
measured in the same run.  Within a repetition the points that are
compared with each other run back to back, and both the order of those
blocks and the order inside each block rotate from one repetition to the
next, so that drifting background load does not always hit one system.

A run counts as clean only if client and server exit 0 and the client saw
no error; medians use clean runs only and a point with an unclean run is
flagged, with the reason listed under the tables.

--cpus pins every server and client to the CPUs given (see
bench_sequential.py: on this VM, one CPU measures the processes' CPU
cost per call, two add the host's wakeups of the other CPU).

Tables are printed with `rich`; --markdown PATH writes them as Markdown
(rich's Markdown box), --json PATH the raw per-run results.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from benchmarks.common import (
    RunDefaults, ServerProcess, ServerStartError, add_run_options,
    generator_result, settle_run_options)

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table as RichTable

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SERVER_CMDS: dict[str, list[str]] = {
    "pyorb": ["-m", "pyorb.servers.echo", "--servant", "sync"],
    "omni-tpc": ["-m", "pyorb.servers.omni", "echo", "--threading", "tpc"],
    "omni-pool": ["-m", "pyorb.servers.omni", "echo",  # omniORB's default pool size
                  "--threading", "pool", "--pool-size", "100"],
    # The floors: no ORB at all, on the loop / through a worker thread.
    "bare": ["-m", "benchmarks.bare_echo_server"],
    "bare-handoff": ["-m", "benchmarks.bare_echo_server",
                     "--handoff"],
}
SERVER_NAMES = {"pyorb": "pyorb (sync servant)",
                "omni-tpc": "omniORBpy thread/conn",
                "omni-pool": "omniORBpy thread pool",
                "bare": "floor: bare uvloop, no ORB",
                "bare-handoff": "floor: bare uvloop + thread"}
A_SERVERS = ("pyorb", "omni-tpc", "omni-pool", "bare", "bare-handoff")
OMNI_CLIENT = ["-m", "pyorb.loadtest.omni_generator", "--target", "echo", "--mode", "smi"]
PYORB_CLIENT = ["-m", "pyorb.loadtest.generator", "--target", "echo", "--mode", "pipelined"]

A_THREADS = (1, 8, 64)
B_EXTRA = ((64, 8),)            # (threads, connections) beyond (a)'s n/n
B_REFERENCE = ((8, 8), (64, 64)) + B_EXTRA
C_CONCURRENCY = (1, 64, 1000)
LATENCY_CALLS = 2000
LATENCY_SERVERS = ("pyorb", "omni-tpc", "bare")
LATENCY_BOUND_S = 120.0         # the sequential calls' window: they end long before it

CALL_TIMEOUT_S = 5.0            # the clients' per-call timeout
CLIENT_SLACK_S = 30.0           # start-up and exit on top of the window


@dataclass(frozen=True)
class Point:
    """One measured configuration."""

    client: str                 # "omni" or "pyorb"
    server: str                 # a key of SERVER_CMDS
    n: int                      # client threads or calls in flight
    connections: int | None = None  # omni client connections (None: n)
    latency: bool = False       # sequential-latency mode

    @property
    def key(self) -> str:
        """A stable name, used in the JSON and the notes."""
        if self.latency:
            return f"latency:{self.client}->{self.server}"
        conns = f"/{self.connections}c" if self.connections else ""
        return f"{self.client}({self.n}{conns})->{self.server}"


@dataclass
class Run:
    """One run of one point, with everything needed to judge it."""

    point: str
    rep: int
    seq: int
    config: dict[str, Any] = field(default_factory=dict)
    client_rc: int | None = None
    server_rc: int | None = None
    result: dict[str, Any] | None = None
    wall_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Both processes exited 0 and the client counted no error."""
        return not self.problems


# -- command line ---------------------------------------------------------


NORMAL = RunDefaults(seconds=3.0, warmup=1.0, repeats=3)
QUICK = RunDefaults(seconds=1.0, warmup=0.5, repeats=1)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; --quick fills in what was not given."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p, NORMAL, QUICK, "1 s points, 1 repetition: a smoke run")
    ns = p.parse_args(argv)
    settle_run_options(p, ns, NORMAL, QUICK)
    return ns


# -- the plan ---------------------------------------------------------------


def blocks() -> list[list[Point]]:
    """The points, in blocks of those compared with each other."""
    out = [[Point("omni", s, n) for s in A_SERVERS] for n in A_THREADS]
    # pyorb->pyorb is compared with omni->omni: interleave the two.
    extra = [Point("omni", s, t, c) for t, c in B_EXTRA
             for s in ("omni-tpc", "omni-pool")]
    pyorb = [Point("pyorb", "pyorb", n) for n in C_CONCURRENCY]
    mixed = [pt for pair in zip(pyorb, extra + [None] * len(pyorb))
             for pt in pair if pt is not None]
    out.append(mixed)
    out.append([Point("omni", s, 1, latency=True) for s in LATENCY_SERVERS])
    return out


def rotate(items: list[Any], by: int) -> list[Any]:
    """``items`` rotated left by ``by`` places."""
    if not items:
        return items
    by %= len(items)
    return items[by:] + items[:by]


def schedule(rep: int) -> list[Point]:
    """The order of the points in repetition ``rep`` (0-based)."""
    return [pt for block in rotate(blocks(), rep) for pt in rotate(block, rep)]


# -- processes --------------------------------------------------------------


def client_command(pt: Point, ior: str, ns: argparse.Namespace) -> list[str]:
    """The client process for ``pt``."""
    if pt.latency:
        return [PY, *OMNI_CLIENT, ior, "--clients", "1", "--calls",
                str(LATENCY_CALLS), "--warmup", str(ns.warmup),
                "--duration", str(LATENCY_BOUND_S), "--timeout",
                str(CALL_TIMEOUT_S)]
    window = ["--duration", str(ns.seconds), "--warmup", str(ns.warmup),
              "--timeout", str(CALL_TIMEOUT_S)]
    if pt.client == "pyorb":
        return [PY, *PYORB_CLIENT, ior, "--window", str(pt.n), *window]
    return [PY, *OMNI_CLIENT, ior, "--clients", str(pt.n), "--connections",
            str(pt.connections or pt.n), *window]


def run_point(pt: Point, rep: int, seq: int, ns: argparse.Namespace) -> Run:
    """Run one point in a fresh server and client; judge the outcome."""
    run = Run(pt.key, rep, seq, asdict(pt))
    started = time.monotonic()
    server = ServerProcess([PY, *SERVER_CMDS[pt.server]],
                           f"{SERVER_NAMES[pt.server]} server")
    err = ""
    try:
        with server as ior:
            # subprocess.run kills its child on timeout: the client is
            # bounded even if it hangs.
            limit = ns.warmup + (LATENCY_BOUND_S if pt.latency else ns.seconds) + CALL_TIMEOUT_S + CLIENT_SLACK_S
            try:
                done = subprocess.run(
                    client_command(pt, ior, ns), cwd=ROOT, timeout=limit,
                    stdin=subprocess.DEVNULL, capture_output=True,
                    check=False)
                run.client_rc = done.returncode
                run.result = generator_result(done.stdout)
                err = done.stderr.decode(errors="replace").strip()
            except subprocess.TimeoutExpired:
                run.client_rc, err = None, f"client killed after {limit:g} s"
        run.server_rc = server.rc
        run.wall_s = round(time.monotonic() - started, 2)
        judge(run, server.problem(), err)
    finally:
        server.stderr.close()
    return run


def judge(run: Run, server_problem: str | None, client_err: str) -> None:
    """Fill ``run.problems``: every reason not to trust the run."""
    last_err = client_err.splitlines()[-1][:300] if client_err else ""
    if run.client_rc != 0:
        run.problems.append(
            f"client rc {run.client_rc}" + (f": {last_err}" if last_err
                                            else ""))
    if run.result is None:
        run.problems.append("client printed no result")
    elif run.result.get("errors"):
        run.problems.append(f"{run.result['errors']} call errors")
    if server_problem:
        run.problems.append(server_problem)


# -- statistics and tables ----------------------------------------------------


@dataclass
class Summary:
    """A point's clean runs boiled down; None where no run was clean."""

    median: float | None
    low: float | None
    high: float | None
    clean: int
    total: int

    @property
    def runs(self) -> str:
        """'3/3', or '2/3 !' when some run was not clean."""
        mark = "" if self.clean == self.total else " !"
        return f"{self.clean}/{self.total}{mark}"


def summarize(runs: list[Run], metric: str = "calls_per_s") -> Summary:
    """Median and min-max of ``metric`` over the clean runs."""
    values = [r.result[metric] for r in runs
              if r.clean and r.result and r.result.get(metric) is not None]
    if not values:
        return Summary(None, None, None, 0, len(runs))
    return Summary(statistics.median(values), min(values), max(values),
                   len(values), len(runs))


def rate(value: float | None) -> str:
    """Calls per second, with thousands separators."""
    return "—" if value is None else f"{value:,.0f}"


def spread(s: Summary, fmt: Callable[[float | None], str] = rate) -> str:
    """'min–max' of a summary."""
    return "—" if s.low is None else f"{fmt(s.low)}–{fmt(s.high)}"


def ratio(num: float | None, den: float | None) -> str:
    """num/den as '0.83×', or '—'."""
    if not num or not den:
        return "—"
    return f"{num / den:.2f}×"


def micro(value: float | None) -> str:
    """Microseconds with one decimal."""
    return "—" if value is None else f"{value:,.1f}"


@dataclass
class Table:
    """One group's table, rendered for the terminal and for Markdown."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    align: tuple[JustifyMethod, ...]
    note: str = ""

    def rich_table(self, style: box.Box, title: str | None) -> RichTable:
        """The table as a rich Table drawn with ``style``."""
        table = RichTable(title=title, box=style, title_justify="left")
        for header, align in zip(self.headers, self.align):
            table.add_column(header, justify=align)
        for row in self.rows:
            table.add_row(*row)
        return table

    def markdown(self) -> str:
        """The table as a GitHub Markdown table, numbers right-aligned."""
        buf = io.StringIO()
        Console(file=buf, width=400, color_system=None, highlight=False,
                force_terminal=False).print(
            self.rich_table(box.MARKDOWN, None))
        lines = [ln.rstrip() for ln in buf.getvalue().splitlines()
                 if ln.strip()]
        # rich's separator row has no alignment colons; GitHub needs them
        # to right-align the numbers.
        widths = [len(cell) for cell in lines[1].strip("|").split("|")]
        lines[1] = "|" + "|".join(
            "-" * (w - 1) + ":" if a == "right" else "-" * w
            for w, a in zip(widths, self.align)) + "|"
        return "\n".join(lines)


def table_a(by_key: dict[str, list[Run]]) -> Table:
    """(a): omniORBpy client against the three servers."""
    rows = []
    for n in A_THREADS:
        sums = {s: summarize(by_key[Point("omni", s, n).key])
                for s in A_SERVERS}
        for s, sm in sums.items():
            vs = "" if s == "pyorb" else ratio(sums["pyorb"].median, sm.median)
            rows.append([str(n), SERVER_NAMES[s], rate(sm.median), spread(sm),
                         sm.runs, vs])
    return Table(
        "(a) omniORBpy client (one connection per thread) → each server",
        ["threads", "server", "median calls/s", "min–max", "clean runs",
         "pyorb ÷ this"], rows,
        ("right", "left", "right", "right", "right", "right"),
        "pyorb ÷ this: the pyorb server's median over this server's, same "
        "thread count (>1: pyorb faster).  The floors are not ORBs "
        "(benchmarks/bare_echo_server.py): a uvloop protocol that answers "
        "without parsing, inline or from a worker thread; they bound what any "
        "asyncio server, and any thread-pool strategy, can reach here.")


def reference_points() -> list[Point]:
    """(b)'s omniORB-to-omniORB points."""
    return [Point("omni", s, t, None if t == c else c)
            for t, c in B_REFERENCE for s in ("omni-tpc", "omni-pool")]


def best_reference(by_key: dict[str, list[Run]]) -> tuple[Point, Summary] | None:
    """The omniORB-to-omniORB point with the highest median."""
    scored = [(pt, summarize(by_key[pt.key])) for pt in reference_points()]
    scored = [(pt, s) for pt, s in scored if s.median is not None]
    return max(scored, key=lambda ps: ps[1].median or 0.0, default=None)


def describe(pt: Point) -> str:
    """'omniORBpy thread pool, 8 threads / 8 conns'."""
    return (f"{SERVER_NAMES[pt.server]}, {pt.n} threads / "
            f"{pt.connections or pt.n} conns")


def table_b(by_key: dict[str, list[Run]]) -> Table:
    """(b): the omniORB-to-omniORB reference points."""
    best = best_reference(by_key)
    rows = []
    for pt in reference_points():
        sm = summarize(by_key[pt.key])
        mark = "best" if best and best[0] == pt else ""
        rows.append([str(pt.n), str(pt.connections or pt.n),
                     SERVER_NAMES[pt.server], rate(sm.median), spread(sm),
                     sm.runs, mark])
    return Table(
        "(b) omniORBpy client → omniORBpy server (the reference)",
        ["threads", "connections", "server", "median calls/s", "min–max",
         "clean runs", ""], rows,
        ("right", "right", "left", "right", "right", "right", "left"),
        "n threads on n connections are the same runs as in (a). 'best' is "
        "the highest median, the maximum of several noisy medians: it "
        "flatters omniORB a little.")


def table_c(by_key: dict[str, list[Run]]) -> Table:
    """(c): pyorb to pyorb against the best omniORB-to-omniORB median."""
    best = best_reference(by_key)
    ref = best[1].median if best else None
    rows = []
    for n in C_CONCURRENCY:
        sm = summarize(by_key[Point("pyorb", "pyorb", n).key])
        rows.append([str(n), rate(sm.median), spread(sm), sm.runs,
                     ratio(sm.median, ref)])
    where = (f"{rate(ref)} calls/s, {describe(best[0])}" if best
             else "no clean reference")
    return Table(
        "(c) pyorb client → pyorb server (one connection)",
        ["calls in flight", "median calls/s", "min–max", "clean runs",
         "÷ best omniORB→omniORB"], rows,
        ("right", "right", "right", "right", "right"),
        f"Best omniORB→omniORB median: {where}.")


def table_latency(by_key: dict[str, list[Run]]) -> Table:
    """(L): sequential round trips, omniORBpy client."""
    rows = []
    sums: dict[str, dict[str, Summary]] = {}
    for s in LATENCY_SERVERS:
        runs = by_key[Point("omni", s, 1, latency=True).key]
        sums[s] = {m: summarize(runs, m) for m in ("min_us", "p50_us",
                                                  "p99_us")}
    for s in LATENCY_SERVERS:
        st = sums[s]
        vs = "" if s == "pyorb" else ratio(sums["pyorb"]["p50_us"].median,
                                           st["p50_us"].median)
        rows.append([SERVER_NAMES[s], micro(st["min_us"].median),
                     micro(st["p50_us"].median), micro(st["p99_us"].median),
                     spread(st["p50_us"], micro), st["p50_us"].runs, vs])
    return Table(
        f"(L) Sequential latency, {LATENCY_CALLS} calls, omniORBpy client "
        "(µs)",
        ["server", "min", "median", "p99", "median: min–max", "clean runs",
         "pyorb ÷ this (median)"], rows,
        ("left", "right", "right", "right", "right", "right", "right"),
        "Each figure is the median over repetitions of that run's statistic;"
        " pyorb ÷ this >1: pyorb slower.")


def tables(by_key: dict[str, list[Run]]) -> list[Table]:
    """All result tables, in reading order."""
    return [table_a(by_key), table_b(by_key), table_c(by_key),
            table_latency(by_key)]


def problem_notes(runs: list[Run]) -> list[str]:
    """One line per unclean run."""
    return [f"rep {r.rep + 1}, {r.point}: {'; '.join(r.problems)}"
            for r in runs if not r.clean]


# -- output -------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {"python": platform.python_version(),
            "platform": platform.platform(), "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def header_lines(ns: argparse.Namespace, meta: dict[str, Any]) -> list[str]:
    """The run's settings and conditions, for both outputs."""
    return [f"Command: {meta['command']}",
            f"{ns.repeats} repetition(s), {ns.seconds:g} s measured per point "
            f"after {ns.warmup:g} s warm-up; fresh processes per point; "
            "loopback 127.0.0.1.",
            f"Python {meta['machine']['python']}, "
            f"{meta['machine']['cpus']} CPUs, {meta['machine']['platform']}.",
            f"Load average before: {meta['load_before']}, after: "
            f"{meta['load_after']}; total {meta['wall_s']:.0f} s.",
            f"Placement: {meta['placement']}.",
            f"pyorb accelerator (servers and clients inherit it): {accelerator_state()}."]


def accelerator_state() -> str:
    """Compiled or pure Python, and why: the benchmarks' pyorb processes run what this one does."""
    from pyorb import _accelerator

    status = _accelerator.status()
    return f"compiled ({status.compiler})" if status.compiled else f"pure Python ({status.reason})"


def print_report(ns: argparse.Namespace, meta: dict[str, Any],
                 tbls: list[Table], notes: list[str]) -> None:
    """The tables on stdout."""
    # Not a terminal (a log file): rich would wrap at 80 columns.
    console = Console(highlight=False,
                      width=None if sys.stdout.isatty() else 200)
    print()
    for line in header_lines(ns, meta):
        print(line)
    for t in tbls:
        print()
        console.print(t.rich_table(box.ROUNDED, t.title))
        if t.note:
            print(t.note)
    print("\nUnclean runs (left out of the medians):" if notes
          else "\nAll runs clean.")
    for line in notes:
        print(f"  {line}")


def write_markdown(path: Path, ns: argparse.Namespace, meta: dict[str, Any],
                   tbls: list[Table], notes: list[str]) -> None:
    """The tables as Markdown, ready to paste into docs/benchmarks.md."""
    parts = ["\n".join(f"{line}  " for line in header_lines(ns, meta))]
    for t in tbls:
        parts.append(f"**{t.title}**\n\n{t.markdown()}"
                     + (f"\n\n{t.note}" if t.note else ""))
    parts.append("Unclean runs (left out of the medians):\n\n"
                 + "\n".join(f"- {n}" for n in notes) if notes
                 else "All runs clean.")
    path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def write_json(path: Path, meta: dict[str, Any], runs: list[Run]) -> None:
    """Every run, raw."""
    data = {"meta": meta,
            "runs": [{**asdict(r), "clean": r.clean} for r in runs]}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


# -- main ---------------------------------------------------------------------


def shown(pt: Point, run: Run) -> str:
    """A run's figure in the progress line."""
    res = run.result or {}
    return (f"p50 {res.get('p50_us')} µs" if pt.latency
            else f"{rate(res.get('calls_per_s'))} calls/s")


def run_benchmark(name: str, argv: Sequence[str] | None,
                  ns: argparse.Namespace,
                  plan: Callable[[int], Sequence[Any]],
                  run_point: Callable[[Any, int, int, argparse.Namespace],
                                      Run],
                  show: Callable[[Any, Run], str],
                  tables_of: Callable[[dict[str, list[Run]]], list[Table]],
                  ) -> int:
    """Run every point of ``plan(rep)`` for each repetition, with progress
    on stderr, then print and write the report; 1 if a server would not
    start.  Shared by the benchmarks in this folder."""
    started = time.monotonic()
    meta: dict[str, Any] = {
        "command": " ".join(["python", "-m", f"benchmarks.{name}",
                             *(argv if argv is not None else sys.argv[1:])]),
        "seconds": ns.seconds, "warmup": ns.warmup, "repeats": ns.repeats,
        "machine": machine(),
        "placement": ns.placement,
        "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    runs: list[Run] = []
    try:
        for rep in range(ns.repeats):
            points = plan(rep)
            for i, pt in enumerate(points, 1):
                run = run_point(pt, rep, len(runs), ns)
                flag = "" if run.clean else "  ! " + "; ".join(run.problems)
                print(f"[rep {rep + 1}/{ns.repeats} {i:2}/{len(points)}] "
                      f"{pt.key:36} {show(pt, run)}{flag}", file=sys.stderr,
                      flush=True)
                runs.append(run)
    except ServerStartError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 1
    meta["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["wall_s"] = round(time.monotonic() - started, 1)
    by_key: dict[str, list[Run]] = {}
    for run in runs:
        by_key.setdefault(run.point, []).append(run)
    tbls = tables_of(by_key)
    notes = problem_notes(runs)
    print_report(ns, meta, tbls, notes)
    if ns.markdown:
        write_markdown(ns.markdown, ns, meta, tbls, notes)
    if ns.json:
        write_json(ns.json, meta, runs)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and report; 1 if a server would not start."""
    ns = parse_args(argv)
    return run_benchmark("bench_echo", argv, ns, schedule, run_point, shown,
                         tables)


if __name__ == "__main__":
    sys.exit(main())
