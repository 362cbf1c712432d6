"""Locust: the AMH paper's client scalability experiment (section 5).

N closed-loop clients (Locust users, each with its own connection) call a
middle tier that forwards every call to a sink answering after a delay D:
40 ms (the paper's) and 1 s (so that this small machine's CPU is not the
limit), N from 1 to several thousand.  A model that keeps up reaches the
ideal throughput N / D.

1. Start the sink (always pyorb's AMH sink, so that only the middle tier
   differs), then the middle tier with the model under test::

       python3 -m pyorb.servers.sink --delay 0.04 --no-stdin-watch --ior-file /tmp/sink.ior &
       for _ in $(seq 100); do [ -s /tmp/sink.ior ] && break; sleep 0.1; done
       python3 -m pyorb.servers.middle --sink "$(head -1 /tmp/sink.ior)" --model amh-st \\
           --no-stdin-watch --ior-file /tmp/middle.ior &
       for _ in $(seq 100); do [ -s /tmp/middle.ior ] && break; sleep 0.1; done

   Other models: ``--model tpc`` (thread per connection), ``tpr-16`` (a pool
   of 16), ``amh-2`` (AMH on 2 processes), ...; ``python3 -m pyorb.servers.middle
   --help`` lists them.  The omniORBpy middle tiers (the baselines)::

       python3 -m pyorb.servers.omni middle --sink "$(head -1 /tmp/sink.ior)" --threading tpc \\
           --sink-connections 200 --no-stdin-watch --ior-file /tmp/middle.ior &
       python3 -m pyorb.servers.omni middle --sink "$(head -1 /tmp/sink.ior)" --threading pool \\
           --pool-size 16 --sink-connections 200 --no-stdin-watch --ior-file /tmp/middle.ior &

2. Run one point (here N = 400; ``--sink-delay`` must be the sink's ``--delay``)
   and stop the servers::

       locust -f loadtests/locustfiles/client_scalability.py --headless -u 400 -r 400 --run-time 30s \\
           --sink-delay 0.04 --host "$(head -1 /tmp/middle.ior)" --csv /tmp/scalability-400
       kill %1 %2

   For D = 1 s start the sink with ``--delay 1`` and pass ``--sink-delay 1``;
   N = 1000 to 5000 needs ``ulimit -n`` above N and, since each user makes
   N / D calls per second between them, more Locust processes
   (``--processes 2``, or master and workers on other machines).

What to read: the summary line ``throughput with N users: ... calls/s ...; ideal N/D =
..., efficiency ...%`` (calls counted from the moment every user has
started until the end), Locust's ``req/s`` column and response times (at
least D each); ``--csv`` files with ``--csv-full-history`` give the curve.
Locust is one Python thread per process, on the same cores as the servers
(one process made about 4,200 calls/s here at N = 400, 42 % of the ideal):
when Locust warns that its CPU is above 90 %, the number measures Locust,
not the server.  ``pyorb loadtest client-scalability`` runs the sweep with
pyorb's asyncio generator where Locust cannot make the load, flags points
where the generator was the bottleneck, and draws the figure.

Options: ``--sink-delay SECONDS`` (default 0.04), ``--requests-per-user N``
(default 0: no limit, ``--run-time`` ends the run).
"""

from __future__ import annotations

from typing import Any

from locust import events

from pyorb.loadtest.locustfiles.sink_experiment import SinkUser, add_requests_option, add_sink_delay_option, install_report

PAPER_DELAY_S = 0.04


@events.init_command_line_parser.add_listener  # type: ignore[untyped-decorator]
def _options(parser: Any) -> None:
    add_sink_delay_option(parser, PAPER_DELAY_S)
    add_requests_option(parser, 0)


install_report()


class ScalabilityClient(SinkUser):
    """One of the paper's N clients of the middle tier: calls back to back until the run ends."""
