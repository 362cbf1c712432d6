"""The processes of one sweep point: servers started fresh, every process metered.

A :class:`ServerProcess` is one of the papers' servers (``pyorb.servers.*``)
in a child process: started, its IOR read from its first stdout line, and
stopped by closing its stdin (then SIGTERM, then SIGKILL, by pid).  A
:class:`Meter` samples a process and its children with psutil (CPU time,
threads, RSS) from a background thread, so that the driver can say how busy
each process was over the measured window.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Sequence

import psutil  # type: ignore[import-untyped]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
SAMPLE_PERIOD_S = 0.25


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    cpu_s: float
    threads: int
    rss: int


@dataclass
class Meter:
    """psutil samples of one process tree (AMH-n's workers are children)."""

    pid: int
    samples: list[Sample] = field(default_factory=list)

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            if root.status() == psutil.STATUS_ZOMBIE:  # exited: its counters may read as zero
                return
            procs = [root, *root.children(recursive=True)]
            cpu = threads = rss = 0
            for p in procs:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu += t.user + t.system
                    threads += p.num_threads()
                    rss += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return
        self.samples.append(Sample(time.monotonic(), cpu, threads, rss))

    def utilisation(self, start: float, end: float) -> float:
        """Fraction of one core used between two times."""
        inside = [s for s in self.samples if start <= s.at <= end]
        if len(inside) < 2 or inside[-1].at <= inside[0].at:
            return float("nan")
        # max: psutil's per-thread sums can step back a tick when a thread exits between two reads.
        return max(0.0, inside[-1].cpu_s - inside[0].cpu_s) / (inside[-1].at - inside[0].at)

    def peak_threads(self) -> int:
        return max((s.threads for s in self.samples), default=0)

    def peak_rss(self) -> int:
        return max((s.rss for s in self.samples), default=0)

    def first_rss(self) -> int:
        return self.samples[0].rss if self.samples else 0


class Sampler:
    """Samples a set of meters every SAMPLE_PERIOD_S on a daemon thread."""

    def __init__(self, meters: Sequence[Meter]) -> None:
        self.meters = list(meters)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="loadtest-sampler")

    def add(self, meter: Meter) -> None:
        meter.sample()
        self.meters.append(meter)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD_S):
            for meter in list(self.meters):
                meter.sample()

    def __enter__(self) -> Sampler:
        for meter in self.meters:
            meter.sample()
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        for meter in self.meters:
            meter.sample()


class ServerProcess:
    """One server child process; ``with ServerProcess(name, args) as s: s.ior``."""

    def __init__(self, name: str, args: Sequence[str], log_dir: Path | None = None) -> None:
        self.name = name
        self.cmd = [sys.executable, *args]
        self.log_path = log_dir / f"{name}.stderr.txt" if log_dir is not None else None
        self.ior = ""
        self.proc: subprocess.Popen[str] | None = None
        self.meter: Meter | None = None

    def start(self) -> str:
        log: IO[Any] | int = open(self.log_path, "w") if self.log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         text=True)
        finally:
            if not isinstance(log, int):
                log.close()
        self.ior = _first_line(self.proc, START_TIMEOUT_S)
        if not self.ior.startswith("IOR:"):
            self.stop()
            raise RuntimeError(f"{self.name} did not start ({' '.join(self.cmd[1:4])} ...): "
                               f"{self.ior or 'no IOR'}; see {self.log_path or 'its stderr'}")
        self.meter = Meter(self.proc.pid)
        return self.ior

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the servers stop at stdin end of file
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The child's first stdout line, or "" if none comes within ``timeout``."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(timeout)
    if not box:
        return ""
    if proc.stdout is not None:  # the corbaloc line, so that the pipe never fills
        threading.Thread(target=proc.stdout.read, daemon=True).start()
    return box[0].strip()


def run_child(args: Sequence[str], timeout: float, sampler: Sampler, env: dict[str, str] | None = None,
              ) -> tuple[subprocess.CompletedProcess[str], Meter]:
    """Run a load generator to its end (killed after ``timeout``), metered."""
    proc = subprocess.Popen([sys.executable, *args] if args[0] == "-m" else list(args), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    meter = Meter(proc.pid)
    sampler.add(meter)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += f"\nkilled after {timeout:.0f} s"
    sampler.meters.remove(meter)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), meter
