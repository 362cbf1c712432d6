"""Locust: Bench::Sink.work(token), closed loop, against any Sink server.

    locust -f loadtests/locustfiles/sink.py --headless -u 10 -r 10 --run-time 30s --host <IOR or corbaloc>

Every call sends a fresh token (a per-user counter from a random start) and
counts a reply that does not return that same token as a failure.  The
target (IOR or corbaloc URL of the Sink object) comes from --host.

Environment variables (all optional):
  PYORB_CALL_TIMEOUT     per-call timeout in seconds (default 10)
  PYORB_CONNECT_TIMEOUT  TCP connect timeout in seconds (default 10)
  PYORB_GIOP             highest GIOP version to speak: 1.0, 1.1 or 1.2 (default 1.2)
"""
from __future__ import annotations

import itertools
import random


from locust import task

from pyorb.idl import BENCH_IDL
from pyorb.locust import CorbaUser, config_from_env


class SinkUser(CorbaUser):
    """Gives the Sink work and checks it hands back the same token."""

    idl = BENCH_IDL
    interface = "Bench::Sink"
    config = config_from_env()

    def on_start(self) -> None:
        self.tokens = itertools.count(random.getrandbits(48))

    @task
    def work(self) -> None:
        token = next(self.tokens)
        self.client.work(token, check=lambda got: got == token)
