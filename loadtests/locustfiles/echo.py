"""Locust: Bench::Echo.ping, closed loop, against any echo server.

    python3 -m pyorb.servers.echo            # or: python3 -m pyorb.servers.omni echo; prints the IOR
    locust -f loadtests/locustfiles/echo.py --headless -u 10 -r 10 --run-time 30s --host <IOR>

Each task sends the current time as the stamp and counts a reply with any
other stamp as a failure.  The target (IOR or corbaloc URL of the Echo
object) comes from --host.

Environment variables (all optional):
  PYORB_CALL_TIMEOUT     per-call timeout in seconds (default 10)
  PYORB_CONNECT_TIMEOUT  TCP connect timeout in seconds (default 10)
  PYORB_GIOP             highest GIOP version to speak: 1.0, 1.1 or 1.2 (default 1.2)
"""
from __future__ import annotations

import time


from locust import task

from pyorb.idl import BENCH_IDL
from pyorb.locust import CorbaUser, config_from_env


class EchoUser(CorbaUser):
    """Pings the Echo object as fast as it answers."""

    idl = BENCH_IDL
    interface = "Bench::Echo"
    config = config_from_env()

    @task
    def ping(self) -> None:
        stamp = time.monotonic_ns()
        self.client.ping(stamp, check=lambda got: got == stamp)
