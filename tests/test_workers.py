"""Supervised workers on one port: a worker that dies is started again,
a crash loop stops the supervisor, a stop stops every worker.

Real processes: the papers' sink with ``--workers 2`` (each worker a pyorb
server on SO_REUSEPORT), killed by pid; psutil finds the workers.
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import pyorb
from pyorb.idl import bench_idl
from pyorb.server.workers import Supervisor, WorkerError, WorkerPolicy
from pyorb.testing.kit import ServerProcess
from pyorb.testing.waiting import wait_until_blocking

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Bench = bench_idl().Bench


def workers_of(pid: int) -> list[psutil.Process]:
    return [c for c in psutil.Process(pid).children() if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def serving(supervisor: int, port: int, count: int) -> set[int]:
    """The workers listening on ``port``, from one look at the process tree; empty until there are ``count``.

    One look, because a worker killed a moment ago can still be listed alive
    by one call and gone by the next; listening, because a worker started
    again is a child well before it serves.
    """
    try:
        pids = {w.pid for w in workers_of(supervisor)}
        if len(pids) != count:
            return set()
        for pid in pids:
            conns = psutil.Process(pid).net_connections("tcp")
            if not any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns):
                return set()
        return pids
    except psutil.NoSuchProcess:  # died while we looked
        return set()


async def calls(ref: str, count: int = 8) -> list[int]:
    clients = [pyorb.Client() for _ in range(count)]  # one connection each: SO_REUSEPORT spreads them
    try:
        return await asyncio.gather(*(c.resolve(ref, Bench.Sink).work(i) for i, c in enumerate(clients)))
    finally:
        await asyncio.gather(*(c.close() for c in clients))


def test_a_killed_worker_is_started_again_and_the_port_keeps_serving() -> None:
    sink = ServerProcess([sys.executable, "-m", "pyorb.servers.sink", "--workers", "2", "--delay", "0"])
    try:
        wait_until_blocking(lambda: serving(sink.pid, sink.port, 2), what="two workers listening")
        first, second = sorted(serving(sink.pid, sink.port, 2))
        assert sorted(asyncio.run(calls(sink.corbaloc))) == list(range(8))
        psutil.Process(first).send_signal(signal.SIGKILL)

        def replaced() -> bool:
            now = serving(sink.pid, sink.port, 2)
            return bool(now) and first not in now

        wait_until_blocking(replaced, what=f"a worker listening in place of {first}")
        assert second in serving(sink.pid, sink.port, 2)  # the other one was left alone
        assert sorted(asyncio.run(calls(sink.corbaloc))) == list(range(8))
        assert sink.proc.poll() is None
    finally:
        rc = sink.stop()
    err = sink.stderr()
    assert rc == 0, err
    # The killed worker is named; an earlier restart (a worker slow to start on a loaded machine) may precede it.
    assert re.search(rf"worker {first} exited \(status -9\); starting another \([1-5] of 5 restarts in 60 s\)", err), err
    assert "did not start" not in err, err  # the stop is no failure, even if it caught a worker starting


def test_a_crash_loop_stops_the_supervisor(tmp_path: object) -> None:
    """A worker that starts, then dies at once, every time: after max_restarts the supervisor gives up."""
    flaky = [sys.executable, "-c", "import time; print('IOR:0', flush=True); print('corbaloc:x', flush=True); "
             "time.sleep(0.1)"]
    with Supervisor(flaky, 2, policy=WorkerPolicy(max_restarts=3, window=60, grace=2)) as supervisor:
        assert supervisor.start() == ("IOR:0", "corbaloc:x")
        started = time.monotonic()
        assert supervisor.run(threading.Event(), interval=0.05) == 1
        assert len(supervisor.restarts) == 3
        assert time.monotonic() - started < 10


def test_a_stop_while_a_worker_restarts_ends_the_wait_for_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The first worker serves for a moment and dies; the one started in its
    place takes a minute to announce itself.  A stop meanwhile ends the
    supervisor's watch at once, and is no error."""
    marker = tmp_path / "started"
    script = (f"import os, time\nagain = os.path.exists({str(marker)!r})\nopen({str(marker)!r}, 'a').close()\n"
              "if again: time.sleep(60)\n"
              "print('IOR:0', flush=True); print('corbaloc:x', flush=True); time.sleep(0.1)\n")
    stop = threading.Event()
    timer = threading.Timer(1.0, stop.set)
    with Supervisor([sys.executable, "-c", script], 1, policy=WorkerPolicy(start_timeout=60, grace=1)) as supervisor:
        supervisor.start()
        timer.start()
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="pyorb.server.workers"):
            assert supervisor.run(stop, interval=0.05) == 0
        assert time.monotonic() - started < 5
        assert len(supervisor.restarts) == 1
        replacement = supervisor.workers[0]
        assert replacement.poll() is None  # still starting when the stop came
    timer.cancel()
    assert replacement.returncode is not None  # close() stopped it
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert any(f"worker {replacement.pid} was still starting" in r.getMessage() for r in caplog.records)


def test_a_stopping_supervisor_starts_no_worker_again(caplog: pytest.LogCaptureFixture) -> None:
    """Workers that died while the supervisor was stopping stay dead: no
    restart is counted or logged, and close() reaps them."""
    short = [sys.executable, "-c", "print('IOR:0', flush=True); print('corbaloc:x', flush=True)"]
    with Supervisor(short, 2, policy=WorkerPolicy(grace=1)) as supervisor:
        supervisor.start()
        dead = list(supervisor.workers)
        for worker in dead:
            worker.wait(10)
        stop = threading.Event()
        stop.set()
        with caplog.at_level(logging.INFO, logger="pyorb.server.workers"):
            assert supervisor.check(stop) is True
        assert supervisor.workers == dead
        assert len(supervisor.restarts) == 0
        assert not [r for r in caplog.records if r.name == "pyorb.server.workers"], caplog.text
        assert supervisor.check() is True  # without a stop, both are started again
        assert len(supervisor.restarts) == 2
        assert not set(supervisor.workers) & set(dead)


def test_a_worker_that_never_starts_is_an_error() -> None:
    with Supervisor([sys.executable, "-c", "raise SystemExit(3)"], 1) as supervisor:
        with pytest.raises(WorkerError, match="did not start"):
            supervisor.start()


def test_close_stops_every_worker() -> None:
    with Supervisor([sys.executable, "-m", "pyorb.servers.sink", "--delay", "0"], 2) as supervisor:
        supervisor.start()
        pids = supervisor.pids
        assert all(psutil.pid_exists(pid) for pid in pids)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert all(w.returncode == 0 for w in supervisor.workers)
