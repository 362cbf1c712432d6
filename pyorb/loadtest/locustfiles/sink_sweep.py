"""Locust closed-loop clients of ``Bench::Sink.work`` for the sweep driver.

Each Locust user is one client of the papers' experiments: its own
connection (as a client process would have), calling ``work(token)`` back
to back with no think time, each call a Locust request named ``work``
(:class:`pyorb.loadtest.locustfiles.sink_experiment.SinkUser`).

Set by the driver (``pyorb loadtest ...``) through the environment:
``PYORB_SINK_REF`` (IOR or corbaloc URL), ``PYORB_REQUESTS`` (calls per user,
0 for no limit: Harkema et al.'s clients stop after 200) and
``PYORB_TIMEOUT`` (seconds per call).  Run headless only, in a subprocess;
to run an experiment by hand use its own locustfile (client_scalability.py,
latency_scalability.py, harkema.py, ami_smi.py).
"""

from __future__ import annotations

import dataclasses
import os


from pyorb.loadtest.locustfiles.sink_experiment import SinkUser


class SinkClient(SinkUser):
    """One closed-loop client of a Bench::Sink."""

    host = os.environ.get("PYORB_SINK_REF", "")
    requests_per_user = int(os.environ.get("PYORB_REQUESTS", "0"))
    config = dataclasses.replace(SinkUser.config, call_timeout=float(os.environ.get("PYORB_TIMEOUT", "30")))
