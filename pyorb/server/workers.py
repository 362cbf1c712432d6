"""Several server processes on one port, supervised: AMH on more than one core.

Each worker is a process with its own event loop and connections, accepting
on a port shared with SO_REUSEPORT (the kernel spreads connections).  The
supervisor holds the port while it runs, starts the workers, and starts a
worker again when one dies, as uvicorn's supervisor does; a worker that
keeps dying (more than ``max_restarts`` times within ``window`` seconds) is
a crash loop, and the supervisor stops everything instead of spinning.

A worker command follows the protocol of pyorb's server programs
(``python -m pyorb.servers.sink``, ``pyorb serve``): given ``--port N
--reuse-port`` it prints its IOR and its corbaloc URL, one line each, then
serves until its standard input reaches end of file.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import IO, Sequence

log = logging.getLogger(__name__)

STOP_POLL_S = 0.1
"""How often a wait for a starting worker looks at the stop event."""


class WorkerError(RuntimeError):
    """A worker could not be started, or kept dying."""


@dataclass(frozen=True)
class WorkerPolicy:
    """How the supervisor treats its workers."""

    max_restarts: int = 5
    """Restarts allowed within ``window`` seconds; one more is a crash loop."""
    window: float = 60.0
    start_timeout: float = 30.0
    """Seconds a worker has to print its IOR and corbaloc."""
    grace: float = 5.0
    """Seconds a worker has to exit after its stdin closes, before it is killed."""


class Supervisor:
    """``count`` processes of ``command`` accepting on one port, restarted when they die.

    ``start()`` returns the IOR and corbaloc the workers share; ``run(stop)``
    watches them until ``stop`` is set (0) or a crash loop (1); ``close()``
    stops them.  Use as a context manager around ``start`` and ``run``.
    """

    def __init__(
        self, command: Sequence[str], count: int, host: str = "127.0.0.1", port: int = 0,
        policy: WorkerPolicy = WorkerPolicy(),
    ) -> None:
        if count < 1:
            raise ValueError(f"at least one worker is needed, got {count}")
        self.command = list(command)
        self.count = count
        self.host = host
        self.policy = policy
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._holder = socket.socket(family, socket.SOCK_STREAM)
        self._holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._holder.bind((host, port))  # reserves the port for the workers; never listens
        self.port: int = self._holder.getsockname()[1]
        self.workers: list[subprocess.Popen[bytes]] = []
        self.restarts: deque[float] = deque()
        self.reference: tuple[str, str] | None = None

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> tuple[str, str]:
        """Start every worker; the (IOR, corbaloc) they announce.  WorkerError if one fails."""
        for _ in range(self.count):
            self.workers.append(self._spawn())
        assert self.reference is not None
        return self.reference

    def check(self, stop: threading.Event | None = None) -> bool:
        """Start again every worker that has died; False once that is a crash loop.

        A ``stop`` set while a new worker starts ends the wait for it: the
        worker is kept, unannounced, for :meth:`close` to stop.  Once ``stop``
        is set no worker is started again; the dead are left for :meth:`close`.
        """
        for i, worker in enumerate(self.workers):
            if stop is not None and stop.is_set():
                return True
            status = worker.poll()
            if status is None:
                continue
            now = time.monotonic()
            while self.restarts and now - self.restarts[0] > self.policy.window:
                self.restarts.popleft()
            if len(self.restarts) >= self.policy.max_restarts:
                log.error("worker %d exited (status %s): %d restarts in %.0f s already, giving up",
                          worker.pid, status, len(self.restarts), self.policy.window)
                return False
            self.restarts.append(now)
            log.warning("worker %d exited (status %s); starting another (%d of %d restarts in %.0f s)",
                        worker.pid, status, len(self.restarts), self.policy.max_restarts, self.policy.window)
            _close_streams(worker)
            try:
                self.workers[i] = self._spawn(stop)
            except WorkerError as exc:
                log.error("%s", exc)
                # Counted as a restart: the next check tries again or gives up.
        return True

    def run(self, stop: threading.Event, interval: float = 0.2) -> int:
        """Watch the workers until ``stop`` is set (0) or they are in a crash loop (1)."""
        while not stop.wait(interval):
            if not self.check(stop):
                return 1
        return 0

    def close(self) -> None:
        """Stop every worker (stdin end of file, then a kill after the grace time) and free the port."""
        for worker in self.workers:
            if worker.stdin is not None and not worker.stdin.closed:
                try:
                    worker.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + self.policy.grace
        for worker in self.workers:
            try:
                worker.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %d did not stop within %.1f s: killed", worker.pid, self.policy.grace)
                worker.kill()
                worker.wait()
            _close_streams(worker)
        self._holder.close()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    # -- one worker --------------------------------------------------------------
    def _spawn(self, stop: threading.Event | None = None) -> subprocess.Popen[bytes]:
        cmd = [*self.command, "--port", str(self.port), "--reuse-port"]
        worker = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert worker.stdout is not None
        lines = _read_lines(worker.stdout.fileno(), 2, self.policy.start_timeout, stop)
        if len(lines) < 2 or not lines[0].startswith("IOR:"):
            if stop is not None and stop.is_set():
                # A stop is no failure to start (with `kill` of the process group the worker dies of it too).
                log.info("stopping: worker %d was still starting", worker.pid)
                return worker
            worker.kill()
            worker.wait()
            _close_streams(worker)
            raise WorkerError(f"worker did not start (status {worker.returncode}): {' '.join(cmd)}")
        if self.reference is None:
            self.reference = (lines[0], lines[1])
        # Keep reading what it prints, so that a full pipe never blocks it.
        threading.Thread(target=_drain, args=(worker.stdout,), daemon=True, name=f"worker-{worker.pid}-out").start()
        log.info("worker %d serving on port %d", worker.pid, self.port)
        return worker


def _read_lines(fd: int, count: int, timeout: float, stop: threading.Event | None = None) -> list[str]:
    """Up to ``count`` lines from ``fd`` within ``timeout`` seconds (fewer at end of file, or once ``stop`` is set).

    Raw reads, not a buffered file: a buffer could hold the next line while
    ``select`` waits for bytes that never come."""
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while data.count(b"\n") < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not selector.select(left if stop is None else min(left, STOP_POLL_S)):
                if stop is not None and stop.is_set():
                    break
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return [line.decode(errors="replace").strip() for line in data.split(b"\n")[:count] if line]


def _drain(stream: IO[bytes]) -> None:
    try:
        while stream.read1(65536):  # type: ignore[attr-defined]
            pass
    except (OSError, ValueError):  # closed under us by close()
        pass


def _close_streams(worker: subprocess.Popen[bytes]) -> None:
    for stream in (worker.stdin, worker.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
