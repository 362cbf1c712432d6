"""Locust closed-loop clients of ``Bench::Sink.work`` for the sweep driver.

Each Locust user is one client of the papers' experiments: its own
:class:`~pyorb.client.blocking.BlockingClient` (its own connection, as a
client process would have), calling ``work(token)`` back to back with no
think time and reporting each call as a Locust request event.

Set by the driver (``pyorb loadtest ...``) through the environment:
``PYORB_SINK_REF`` (IOR or corbaloc URL), ``PYORB_REQUESTS`` (calls per user,
0 for no limit: Harkema et al.'s clients stop after 200) and
``PYORB_TIMEOUT`` (seconds per call).  Run headless only, in a subprocess.
"""

from __future__ import annotations

import os
import time
from typing import Any

from locust import User, task
from locust.exception import StopUser

from pyorb.client.blocking import BlockingClient
from pyorb.config import Config
from pyorb.idl import bench_idl

REF = os.environ.get("PYORB_SINK_REF", "")
REQUESTS = int(os.environ.get("PYORB_REQUESTS", "0"))
TIMEOUT = float(os.environ.get("PYORB_TIMEOUT", "30"))
SINK = bench_idl().Bench.Sink


class SinkClient(User):  # type: ignore[misc]
    """One closed-loop client of a Bench::Sink."""

    def on_start(self) -> None:
        if not REF:
            raise StopUser()
        self.client = BlockingClient(Config(call_timeout=TIMEOUT))
        self.sink = self.client.resolve(REF, SINK)
        self.token = (id(self) & 0xFFFFFF) << 32
        self.made = 0

    def on_stop(self) -> None:
        self.client.close()

    @task
    def work(self) -> None:
        if REQUESTS and self.made >= REQUESTS:
            raise StopUser()
        self.made += 1
        self.token += 1
        start = time.perf_counter()
        exc: Any = None
        try:
            if self.sink.work(self.token) != self.token:
                exc = ValueError("wrong token in the reply")
        except Exception as error:  # every failure is a failed request in the statistics
            exc = error
        self.environment.events.request.fire(
            request_type="CORBA", name="Sink.work", response_time=(time.perf_counter() - start) * 1000,
            response_length=0, exception=exc, context={},
        )
