"""What the papers' locustfiles share: a closed-loop ``Bench::Sink`` user,
their Locust options and the summary they print when Locust quits.

Not a locustfile: the papers' locustfiles in the repository's
loadtests/locustfiles/ (client_scalability.py, latency_scalability.py,
harkema.py, ami_smi.py) and pyorb's own sink_sweep.py import it.

- :class:`SinkUser`: each user is one client of the papers' experiments,
  with its own connection, calling ``work(token)`` back to back (no think
  time) and counting a reply without its token as a failure.  A user stops
  after ``--requests-per-user`` calls (0: no limit).
- :func:`add_requests_option`, :func:`add_sink_delay_option`: the options,
  added from a locustfile's ``init_command_line_parser`` listener; they show
  in the web UI's start form and reach the workers of a distributed run.
- :func:`install_report`: when every user has made its requests the run
  ends by itself; when Locust quits it logs throughput over the window after
  all users started (and, with ``--sink-delay``, the ideal N / D and the
  efficiency), and optionally the latency of every call: min, mean, max and
  jitter (standard deviation), as in the AMI paper's Table 1.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import logging
import random
import time
from dataclasses import dataclass, field
from types import MethodType
from typing import Any, Callable, ClassVar

import gevent
from locust import events, task
from locust.env import Environment
from locust.exception import StopUser
from locust.stats import CSV_STATS_INTERVAL_SEC, StatsCSVFileWriter
from locust.runners import (
    STATE_INIT,
    STATE_RUNNING,
    STATE_SPAWNING,
    WORKER_REPORT_INTERVAL,
    MasterRunner,
    WorkerRunner,
)

from pyorb.idl import BENCH_IDL
from pyorb.loadtest.stats import latency_summary
from pyorb.locust import CorbaUser, config_from_env

log = logging.getLogger("pyorb.experiment")

MAX_RECORDED = 1_000_000
"""Latencies kept for the summary (8 bytes each); later calls are counted by Locust only."""


def option(environment: Environment, name: str, default: Any) -> Any:
    """A custom option's value (``default`` when Locust runs without a command line)."""
    return getattr(environment.parsed_options, name, default)


class SinkUser(CorbaUser):
    """One closed-loop client of a ``Bench::Sink`` (the sink or a middle tier)."""

    abstract = True
    idl = BENCH_IDL
    interface = "Bench::Sink"
    config = config_from_env()
    requests_per_user: ClassVar[int | None] = None
    """Calls before the user stops (0: no limit); None reads ``--requests-per-user``."""

    def on_start(self) -> None:
        self.tokens = itertools.count(random.getrandbits(48))
        budget = self.requests_per_user
        self.budget: int = option(self.environment, "requests_per_user", 0) if budget is None else budget
        self.made = 0

    @task
    def work(self) -> None:
        if self.budget and self.made >= self.budget:
            raise StopUser()
        self.made += 1
        token = next(self.tokens)
        self.client.work(token, check=lambda got: got == token)


def _at_least_zero(kind: Callable[[str], float]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"must be a number of at least 0, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def add_requests_option(parser: Any, default: int) -> None:
    parser.add_argument(
        "--requests-per-user", type=_at_least_zero(int), default=default, metavar="N",
        help=f"calls each user makes before it stops; 0 for no limit (default {default})",
    )


def add_sink_delay_option(parser: Any, default: float) -> None:
    parser.add_argument(
        "--sink-delay", type=_at_least_zero(float), default=default, metavar="SECONDS",
        help=f"the --delay the sink was started with, for the ideal N/D in the summary (default {default:g})",
    )


@dataclass
class Report:
    """Throughput after spawning, latencies, and the end of a run whose users all finished."""

    latencies: bool
    environment: Environment | None = None
    window_start: tuple[float, int] | None = None
    recorded: list[float] = field(default_factory=list)

    def install(self) -> None:
        events.init.add_listener(self._init)  # type: ignore[no-untyped-call]
        events.test_start.add_listener(self._test_start)  # type: ignore[no-untyped-call]
        events.spawning_complete.add_listener(self._spawned)  # type: ignore[no-untyped-call]
        events.quitting.add_listener(self._quitting)  # type: ignore[no-untyped-call]
        events.quit.add_listener(_stop_csv_writer)  # type: ignore[no-untyped-call]
        if self.latencies:
            events.request.add_listener(self._request)  # type: ignore[no-untyped-call]

    def _init(self, environment: Environment, **_kwargs: Any) -> None:
        self.environment = environment

    def _test_start(self, environment: Environment, **_kwargs: Any) -> None:
        self.window_start, self.recorded = None, []
        if not isinstance(environment.runner, WorkerRunner):  # the master (or the one process) decides
            gevent.spawn(_end_when_all_users_finish, environment)

    def _spawned(self, user_count: int, **_kwargs: Any) -> None:
        if self.environment is not None:
            self.window_start = (time.time(), self.environment.stats.total.num_requests)

    def _request(self, response_time: float, exception: Exception | None, **_kwargs: Any) -> None:
        if exception is None and len(self.recorded) < MAX_RECORDED:
            self.recorded.append(response_time / 1000.0)

    def _quitting(self, environment: Environment, **_kwargs: Any) -> None:
        if not isinstance(environment.runner, WorkerRunner):
            _log_throughput(environment, self.window_start)
        if self.recorded:  # the process that ran the users
            _log_latencies(self.recorded)


def install_report(latencies: bool = False) -> None:
    """Register the summary (and the end of a run whose users all finished) for this locustfile."""
    Report(latencies).install()


def _end_when_all_users_finish(environment: Environment) -> None:
    runner = environment.runner
    assert runner is not None
    while runner.state in (STATE_INIT, STATE_SPAWNING, STATE_RUNNING):
        gevent.sleep(0.2)
        if runner.state == STATE_RUNNING and runner.user_count == 0:
            log.info("every user has made its requests: ending the test")
            # Locust rewrites its CSV files once a second (and not at exit), and
            # workers report every few seconds: let the final counts reach both.
            reports = WORKER_REPORT_INTERVAL if isinstance(runner, MasterRunner) else 0.0
            gevent.sleep(reports + CSV_STATS_INTERVAL_SEC + 0.2)
            if environment.parsed_options is not None and environment.parsed_options.headless:
                runner.quit()
            else:
                runner.stop()  # the web UI stays up for the next run
            return


def _stop_csv_writer(**_kwargs: Any) -> None:
    """Kill Locust's CSV writer just before Locust closes its files.

    Locust leaves the writer greenlet running after closing them, and a
    ``--processes`` master then waits for its workers cooperatively: a
    writer tick in that wait fails with "I/O operation on closed file".
    """
    for obj in gc.get_objects():
        if isinstance(obj, gevent.Greenlet) and isinstance(getattr(obj, "_run", None), MethodType) \
                and isinstance(obj._run.__self__, StatsCSVFileWriter):
            obj.kill(block=False)


def _log_throughput(environment: Environment, start: tuple[float, int] | None) -> None:
    total = environment.stats.total
    if total.num_requests == 0 or not total.last_request_timestamp:
        return
    since, before = start if start is not None else (total.start_time, 0)
    if total.last_request_timestamp - since <= 0.5 or total.num_requests <= before:
        since, before = total.start_time, 0  # the users finished while spawning: the whole run
    seconds = max(total.last_request_timestamp - since, 1e-3)
    users = environment.runner.target_user_count if environment.runner is not None else 0
    rate = (total.num_requests - before) / seconds
    line = (f"throughput with {users} users: {total.num_requests - before} calls in {seconds:.1f} s from the "
            f"last user's start: {rate:.1f} calls/s ({total.num_failures} failed in the whole run)")
    delay = option(environment, "sink_delay", 0.0)
    if delay > 0 and users:
        ideal = users / delay
        line += f"; ideal N/D = {ideal:.1f}/s, efficiency {100 * rate / ideal:.1f}%"
    log.info("%s", line)


def _log_latencies(seconds: list[float]) -> None:
    s = latency_summary(seconds)
    log.info("latency of %d calls: min %.3f ms, mean %.3f ms, max %.3f ms, jitter (std dev) %.3f ms, "
             "p50 %.3f ms, p99 %.3f ms", len(seconds), s["min_ms"], s["mean_ms"], s["max_ms"], s["jitter_ms"],
             s["p50_ms"], s["p99_ms"])
