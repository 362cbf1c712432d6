"""The README demo: a sink, an AMH middle tier and hundreds of clients.

``python -m pyorb.demo`` starts a sink server (another process) whose
operation answers after a fixed delay, an AMH middle tier that forwards each
request to the sink with an AMI call and replies through its response
handler when the sink answers, and N closed-loop clients.  The middle tier
holds every pending request on one thread; the table shows it keeping up
with the ideal N / delay throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from typing import Any

import pyorb

def _bench() -> Any:
    from pyorb.idl import bench_idl

    return bench_idl()


async def run_demo(clients: int, seconds: float, delay: float) -> dict[str, Any]:
    """Start the sink process, the middle tier and the clients; measure."""
    errors = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty sink never blocks on it
    sink_proc = subprocess.Popen(
        # The papers' sink: AMH, each reply after ``delay`` on a loop timer.
        [sys.executable, "-m", "pyorb.servers.sink", "--model", "amh", "--delay", str(delay)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True,
    )
    try:
        assert sink_proc.stdout is not None
        sink_ior = sink_proc.stdout.readline().strip()
        if not sink_ior.startswith("IOR:"):
            sink_proc.wait(10)
            errors.seek(0)
            said = [line.strip() for line in errors.read().splitlines() if line.strip()]
            raise RuntimeError("the sink process did not start" + (f": {said[-1]}" if said else ""))
        return await _middle_and_clients(sink_ior, clients, seconds, delay)
    finally:
        if sink_proc.stdin is not None:
            sink_proc.stdin.close()
        try:
            sink_proc.wait(10)
        except subprocess.TimeoutExpired:
            sink_proc.kill()
            sink_proc.wait()
        errors.close()


async def _middle_and_clients(sink_ior: str, clients: int, seconds: float, delay: float) -> dict[str, Any]:
    idl = _bench()
    peak_pending = 0
    pending = 0

    class Middle(pyorb.amh_skeleton(idl.Bench__POA.Sink)):  # type: ignore[misc]
        def __init__(self, sink: Any) -> None:
            self.sink = sink

        def work(self, rh: Any, token: int) -> None:
            nonlocal pending, peak_pending
            pending += 1
            peak_pending = max(peak_pending, pending)
            self.sink.work(token).add_done_callback(lambda f: self._reply(rh, f))

        def _reply(self, rh: Any, fut: asyncio.Future[int]) -> None:
            nonlocal pending
            pending -= 1
            if fut.exception() is not None:
                rh.raise_exception(fut.exception())
            else:
                rh.work(fut.result())

    async with pyorb.Client() as to_sink, pyorb.Server() as middle, pyorb.Client() as front:
        key = middle.activate(Middle(to_sink.resolve(sink_ior, idl.Bench.Sink)), "Middle")
        proxy = front.resolve(middle.ior(key), idl.Bench.Sink)
        latencies: list[float] = []
        finished: list[float] = []
        errors = 0
        start = stop = 0.0  # set as the clients start

        async def client(n: int) -> None:
            nonlocal errors
            token = n << 32
            while True:  # one call at least: a slow start never leaves a client without any
                t0 = time.perf_counter()
                try:
                    got = await proxy.work(token, timeout=10)
                    errors += got != token
                except Exception:
                    errors += 1
                latencies.append(time.perf_counter() - t0)
                finished.append(time.monotonic())
                token += 1
                if finished[-1] >= stop:
                    return

        with _progress() as progress:
            bar = progress.add_task("measuring", total=seconds, replies=0)
            # From here: importing and drawing the progress bar can take a second on a loaded machine.
            start = time.monotonic()
            stop = start + seconds

            async def tick() -> None:
                while (now := time.monotonic()) < stop:
                    progress.update(bar, completed=now - start, replies=len(finished))
                    await asyncio.sleep(0.2)

            ticker = asyncio.ensure_future(tick())
            await asyncio.gather(*(client(i) for i in range(clients)))
            ticker.cancel()
    # Throughput over the steady window: after the first round trips, before the stop.
    window_start = start + min(2 * delay, seconds / 4)
    steady = sum(1 for t in finished if window_start <= t < stop)
    lat = sorted(latencies)
    return {
        "clients": clients,
        "delay_ms": delay * 1000,
        "replies": len(lat),
        "throughput": steady / (stop - window_start),
        "ideal": clients / delay,
        "p50_ms": statistics.median(lat) * 1000 if lat else 0.0,
        "p99_ms": lat[int(len(lat) * 0.99)] * 1000 if lat else 0.0,
        "errors": errors,
        "peak_pending": peak_pending,
        "threads": threading.active_count(),
    }


def _progress() -> Any:
    """A progress bar on a terminal's stderr (nothing when stderr is a file or pipe)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[replies]} replies"),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    disable=not sys.stderr.isatty())


def print_table(r: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="pyorb demo: AMH middle tier between closed-loop clients and a sink")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("clients (closed loop)", f"{r['clients']}"),
        ("sink delay", f"{r['delay_ms']:.0f} ms"),
        ("replies", f"{r['replies']}"),
        ("throughput", f"{r['throughput']:.0f} replies/s"),
        ("ideal N / delay", f"{r['ideal']:.0f} replies/s"),
        ("efficiency", f"{100 * r['throughput'] / r['ideal']:.1f} %"),
        ("latency p50 / p99", f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms"),
        ("requests pending in the middle tier (peak)", f"{r['peak_pending']}"),
        ("threads in the middle-tier process", f"{r['threads']}"),
        ("errors or wrong replies", f"{r['errors']}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def explain(r: dict[str, Any]) -> str:
    """The table in words."""
    efficiency = 100 * r["throughput"] / r["ideal"] if r["ideal"] else 0.0
    text = (
        f"In words: {r['clients']} clients each waited for a reply before sending the next request, and the "
        f"sink took {r['delay_ms']:g} ms per request, so at best the tier could return {r['ideal']:.0f} "
        f"replies/s (N / delay). It returned {r['throughput']:.0f} replies/s, {efficiency:.0f}% of the ideal, "
        f"with a median latency of {r['p50_ms']:.1f} ms against the sink's {r['delay_ms']:g} ms. "
        f"It did so by holding up to {r['peak_pending']} requests pending at once with "
        f"{r['threads']} threads in the process: AMH parks each request and AMI sends it on without "
        f"blocking, so no thread waits for the sink."
    )
    if r["errors"]:
        text += f" {r['errors']} calls failed or got a wrong reply."
    return "\n".join(textwrap.wrap(text, 100))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyorb.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=300, help="closed-loop clients (default 300)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measurement time (default 5)")
    parser.add_argument("--delay", type=float, default=0.1, help="sink delay in seconds (default 0.1)")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0 or args.delay <= 0:
        parser.error("--clients, --seconds and --delay must be positive")
    runner = _runner()
    try:
        return _run(runner, args)
    except (ImportError, OSError, RuntimeError) as exc:  # one line, not a traceback
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1


def _run(runner: Any, args: argparse.Namespace) -> int:
    print(textwrap.fill(f"Starting a sink in another process (it replies after {args.delay * 1000:g} ms), an AMH middle "
          f"tier that forwards each request to it with an AMI call, and {args.clients} closed-loop clients "
          f"calling the middle tier; measuring for {args.seconds:g} s...", 100), flush=True)
    result = runner(run_demo(args.clients, args.seconds, args.delay))
    print_table(result)
    print(explain(result), flush=True)
    return 0 if result["errors"] == 0 and result["replies"] > 0 else 1


def _runner() -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


if __name__ == "__main__":
    sys.exit(main())
