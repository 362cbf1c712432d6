"""The papers' sink (Bench::Sink): per call a delay and/or CPU demand, then its token back.

Run ``python -m pyorb.servers.sink --delay 0.04 --model amh``.  The servant
style follows the model: AMH models wait on an event-loop timer (no thread
held), thread models sleep in their dispatcher thread, ``reactive`` sleeps on
the loop thread (and so serves one call at a time).  CPU demand is computed
in whichever thread runs the call (Harkema et al.'s doSomeWork).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, Sequence

from pyorb.servers import runner
from pyorb.servers.models import Model, model_names, resolve_model
from pyorb.servers.workload import Demand, spin


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Model, Demand]:
    parser = runner.OneLineParser(prog="sink", description=__doc__.split("\n")[0])
    runner.add_server_options(parser, "Sink")
    runner.add_security_options(parser)
    parser.add_argument("--model", default="amh", help=f"threading model (default amh): {model_names()}")
    parser.add_argument("--workers", type=int, default=1, help="processes accepting on the port (AMH-n)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each call waits (default 0)")
    parser.add_argument("--cpu", type=float, default=0.0, help="seconds of CPU each call computes (default 0)")
    parser.add_argument("--distribution", choices=("fixed", "exponential"), default="fixed",
                        help="demands fixed or exponentially distributed with the given means")
    parser.add_argument("--seed", type=int, default=None, help="random seed for exponential demands")
    parser.add_argument("--queue-target", type=float, default=None, metavar="S",
                        help="admission control: Config.queue_target (default: never shed)")
    parser.add_argument("--queue-interval", type=float, default=0.1, metavar="S",
                        help="admission control: Config.queue_interval (default 0.1)")
    parser.add_argument("--queue-limit", type=float, default=None, metavar="S",
                        help="admission control: Config.queue_limit (default: no bound)")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    runner.check_port(parser, ns.port)
    try:
        model = resolve_model(ns.model, ns.workers)
        demand = Demand(ns.delay, ns.cpu, ns.distribution == "exponential", ns.seed)
        admission_config(ns)
    except ValueError as exc:
        parser.error(str(exc))
    return ns, model, demand


def admission_config(ns: argparse.Namespace) -> Any:
    """The server's Config with the admission options (ValueError for bad values)."""
    import pyorb

    return pyorb.Config(queue_target=ns.queue_target, queue_interval=ns.queue_interval, queue_limit=ns.queue_limit)


def make_servant(model: Model, demand: Demand) -> Any:
    import pyorb
    from pyorb.idl import bench_idl

    poa = bench_idl().Bench__POA.Sink

    class SyncSink(poa):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            delay, cpu = demand.draw()
            spin(cpu)
            if delay:
                time.sleep(delay)
            return token

    class CoroutineSink(poa):  # type: ignore[misc,valid-type]
        async def work(self, token: int) -> int:
            delay, cpu = demand.draw()
            spin(cpu)
            if delay:
                await asyncio.sleep(delay)
            return token

    class AMHSink(pyorb.amh_skeleton(poa)):  # type: ignore[misc]
        def work(self, rh: Any, token: int) -> None:
            delay, cpu = demand.draw()
            spin(cpu)
            if delay:
                asyncio.get_running_loop().call_later(delay, rh.work, token)
            else:
                rh.work(token)

    return {"sync": SyncSink, "coroutine": CoroutineSink, "amh": AMHSink}[model.style]()


async def serve(ns: argparse.Namespace, model: Model, demand: Demand) -> int:
    server = await runner.start_server("sink", ns, model.strategy, admission_config(ns))
    if server is None:
        return 1
    title = f"sink {model.name} delay={demand.delay:g}s cpu={demand.cpu:g}s"
    await runner.serve_until_stopped(server, make_servant(model, demand), ns, title)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    ns, model, demand = parse_args(args)
    if model.workers > 1 and not ns.reuse_port:
        return runner.run_workers(args, "pyorb.servers.sink", ns.host, ns.port, model.workers,
                                  not ns.no_stdin_watch)
    return runner.run(lambda: serve(ns, model, demand))


if __name__ == "__main__":
    sys.exit(main())
