"""Locust: the AMI paper's synchronous side (section 4): SMI latency and throughput.

The paper compares synchronous method invocation (SMI: a client thread
blocks for each reply) with asynchronous invocation (AMI) against the same
server: Table 1, the latency of 10,000 sequential calls (min, mean, max,
jitter); Table 2, the throughput of many client threads (SMI) against few
threads with pipelined AMI calls.

Locust users are blocking (gevent) clients, each making one call at a time
on its own connection, so Locust does the SMI rows: one user is Table 1's
sequential SMI client, many users are Table 2's client threads.  Pipelined
AMI (many calls outstanding on one connection, replies completing futures)
cannot be expressed as a blocking Locust user, and this file does not try.
The AMI rows come from pyorb's asyncio generator: ``pyorb loadtest ami-smi``
runs all of both tables (pyorb's and omniORBpy's clients), or one row by
hand, ``python3 -m pyorb.loadtest.generator REF --mode pipelined --window 64
--duration 5`` (``--mode sequential --calls 10000`` for AMI's Table 1 row).

1. Start the sink (no delay: the round trip itself is measured)::

       python3 -m pyorb.servers.sink --model amh-st --no-stdin-watch --ior-file /tmp/sink.ior &
       for _ in $(seq 100); do [ -s /tmp/sink.ior ] && break; sleep 0.1; done

   or omniORBpy's server, the baseline::

       python3 -m pyorb.servers.omni sink --threading tpc --no-stdin-watch --ior-file /tmp/sink.ior &

2. Table 1, SMI: one user makes 10,000 sequential calls, then the run ends
   by itself (``--run-time`` only bounds it)::

       locust -f loadtests/locustfiles/ami_smi.py --headless -u 1 -r 1 --run-time 5m \\
           --host "$(head -1 /tmp/sink.ior)"

   Table 2, SMI with 16 client threads, 2,000 calls each::

       locust -f loadtests/locustfiles/ami_smi.py --headless -u 16 -r 16 --run-time 5m \\
           --requests-per-user 2000 --host "$(head -1 /tmp/sink.ior)"
       kill %1

What to read: the summary line ``latency of 10000 calls: min, mean, max,
jitter (std dev)`` (Table 1; measured in the process that ran the users, to
the microsecond, whereas Locust's own table rounds to whole milliseconds),
and ``throughput with N users: ... calls/s`` (Table 2; for one user, the sequential
rate).  Option: ``--requests-per-user N`` (default 10,000, the paper's;
0 for no limit).  With ``--processes`` each worker logs the latency of its
own users' calls.
"""

from __future__ import annotations

from typing import Any

from locust import events

from pyorb.loadtest.locustfiles.sink_experiment import SinkUser, add_requests_option, install_report

SEQUENTIAL_CALLS = 10_000  # the AMI paper's Table 1


@events.init_command_line_parser.add_listener  # type: ignore[untyped-decorator]
def _options(parser: Any) -> None:
    add_requests_option(parser, SEQUENTIAL_CALLS)


install_report(latencies=True)


class SMIClient(SinkUser):
    """One synchronous client thread: a call, its reply, the next call."""
