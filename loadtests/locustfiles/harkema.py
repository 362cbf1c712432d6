"""Locust: Harkema et al.'s threading-strategy experiment (section 4).

Closed-loop clients call the sink directly (no middle tier); each call costs
the server 1 ms of CPU, 5 ms of CPU or a 50 ms delay, drawn from an
exponential distribution; 2 to 128 clients; each client makes 200 requests
and stops, so the run ends by itself once every client has made its
requests (``--run-time`` only bounds it).

1. Start the sink with the threading strategy and the workload under test,
   for example thread per client (connection) at 1 ms of CPU::

       python3 -m pyorb.servers.sink --model tpc --cpu 0.001 --distribution exponential \\
           --seed 1 --no-stdin-watch --ior-file /tmp/sink.ior &

   The workload: ``--cpu 0.001``, ``--cpu 0.005`` or ``--delay 0.05``.  The
   strategy (``--model``): ``tpc`` (thread per client), ``thread-per-request``,
   ``tpr-8`` (a pool of 8 threads; ``thread-pool`` is the same), ``tpr-st``
   (reactive, one thread), ``amh-st`` (AMH on the event loop).  omniORBpy's
   own strategies, the baselines::

       python3 -m pyorb.servers.omni sink --threading tpc --cpu 0.001 --distribution exponential \\
           --seed 1 --no-stdin-watch --ior-file /tmp/sink.ior &
       python3 -m pyorb.servers.omni sink --threading pool --pool-size 8 --cpu 0.001 ...

2. Run one point (here 16 clients) and stop the sink::

       locust -f loadtests/locustfiles/harkema.py --headless -u 16 -r 16 --run-time 10m \\
           --host "$(head -1 /tmp/sink.ior)" --csv /tmp/harkema-tpc-16
       kill %1

   Repeat with ``-u`` 2, 4, ..., 128 (the paper's client counts) for each
   strategy and workload.

What to read: the summary line ``throughput with N users: ... calls/s`` (the paper's
throughput: calls after all users started over the time they took), and
Locust's own table (``Average`` response time, percentiles; the request
count is ``-u`` x 200 once every client is done).  Option:
``--requests-per-user N`` (default 200, the paper's; also in the web UI).
``pyorb loadtest harkema`` runs the whole sweep and draws the figure.
"""

from __future__ import annotations

from typing import Any

from locust import events

from pyorb.loadtest.locustfiles.sink_experiment import SinkUser, add_requests_option, install_report

REQUESTS_PER_CLIENT = 200  # Harkema et al.: each client makes 200 requests


@events.init_command_line_parser.add_listener  # type: ignore[untyped-decorator]
def _options(parser: Any) -> None:
    add_requests_option(parser, REQUESTS_PER_CLIENT)


install_report()


class HarkemaClient(SinkUser):
    """One of the paper's clients: ``--requests-per-user`` calls back to back, then it stops."""
