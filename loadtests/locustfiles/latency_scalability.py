"""Locust: the AMH paper's latency scalability experiment (section 5).

150 closed-loop clients (Locust users, each with its own connection) call a
middle tier that forwards every call to a sink answering after a delay D,
from 0 to 160 ms (0, 10, 20, 40, 80, 160 ms).  A model that keeps up reaches
the ideal throughput 150 / D; at D = 0 the middle tier's own cost per call
is the limit.

1. Start the sink with the delay, then the middle tier with the model under
   test::

       python3 -m pyorb.servers.sink --delay 0.16 --no-stdin-watch --ior-file /tmp/sink.ior &
       for _ in $(seq 100); do [ -s /tmp/sink.ior ] && break; sleep 0.1; done
       python3 -m pyorb.servers.middle --sink "$(head -1 /tmp/sink.ior)" --model amh-st \\
           --no-stdin-watch --ior-file /tmp/middle.ior &
       for _ in $(seq 100); do [ -s /tmp/middle.ior ] && break; sleep 0.1; done

   Other models: ``--model amh-2`` (AMH on 2 processes), ``tpc``, ``tpr-N``,
   ...; the omniORBpy middle tiers (the baselines)::

       python3 -m pyorb.servers.omni middle --sink "$(head -1 /tmp/sink.ior)" --threading tpc \\
           --sink-connections 200 --no-stdin-watch --ior-file /tmp/middle.ior &
       python3 -m pyorb.servers.omni middle --sink "$(head -1 /tmp/sink.ior)" --threading pool \\
           --pool-size 2 --sink-connections 200 --no-stdin-watch --ior-file /tmp/middle.ior &

2. Run the point (``--sink-delay`` must be the sink's ``--delay``) and stop
   the servers::

       locust -f loadtests/locustfiles/latency_scalability.py --headless -u 150 -r 150 --run-time 30s \\
           --sink-delay 0.16 --host "$(head -1 /tmp/middle.ior)" --csv /tmp/latency-160ms
       kill %1 %2

   Repeat for each delay (``--delay`` and ``--sink-delay`` 0, 0.01, 0.02,
   0.04, 0.08, 0.16) and each model.

What to read: the summary line ``throughput with N users: ... calls/s ...; ideal N/D =
..., efficiency ...%`` (none at D = 0), and Locust's response times (at
least D; what the middle tier adds is the rest).  Locust is one Python
thread per process, on the same cores as the servers: when Locust warns
that its CPU is above 90 %, the number measures Locust, not the server
(150 clients ask for 940 calls/s at D = 160 ms, 15,000 at D = 10 ms).  Add
``--processes 2`` or workers on other machines, or run ``pyorb loadtest
latency-scalability``, whose asyncio generator makes more load, and which
draws the figure.

Options: ``--sink-delay SECONDS`` (default 0: no ideal), ``--requests-per-user
N`` (default 0: no limit, ``--run-time`` ends the run).
"""

from __future__ import annotations

from typing import Any

from locust import events

from pyorb.loadtest.locustfiles.sink_experiment import SinkUser, add_requests_option, add_sink_delay_option, install_report

@events.init_command_line_parser.add_listener  # type: ignore[untyped-decorator]
def _options(parser: Any) -> None:
    add_sink_delay_option(parser, 0.0)
    add_requests_option(parser, 0)


install_report()


class LatencyClient(SinkUser):
    """One of the paper's 150 clients of the middle tier: calls back to back until the run ends."""
