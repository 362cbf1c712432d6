"""The AMH paper's middle tier (Bench::Sink): each call is forwarded to a sink.

Run ``python -m pyorb.servers.middle --sink IOR --model amh``.  Per model:

* ``amh`` (AMH-ST; AMH-N with ``--workers N``): the upcall starts an AMI call
  to the sink and returns; the sink's reply completes the stored response
  handler.  No thread is held by a pending request.
* ``coroutine``: ``async def work`` awaits the sink (one task per request).
* thread models (``tpc``, ``tpr-N``, ``thread_per_request``, ``threaded``,
  ``locality(N)``): a synchronous upcall that blocks its dispatcher thread on
  a two-way call to the sink (sent over the server loop's multiplexed
  connection).
* ``reactive`` (TPR-ST): the synchronous upcall blocks the event loop itself
  on a blocking-socket call, so the middle tier serves one request at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import functools
import sys
import threading
from typing import Any, Sequence

from pyorb.servers import runner
from pyorb.servers.models import Model, model_names, resolve_model


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Model]:
    parser = runner.OneLineParser(prog="middle", description=__doc__.split("\n")[0])
    runner.add_server_options(parser, "Middle")
    runner.add_security_options(parser)
    parser.add_argument("--sink", required=True, help="IOR or corbaloc URL of the sink")
    parser.add_argument("--model", default="amh", help=f"threading model (default amh): {model_names()}")
    parser.add_argument("--workers", type=int, default=1, help="processes accepting on the port (AMH-n)")
    parser.add_argument("--balancing", choices=("round_robin", "least_pending"), default="least_pending",
                        help="how calls spread over a sink group's replicas (default least_pending)")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds a call to the sink may take before the client gets TIMEOUT (default 30)")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    runner.check_port(parser, ns.port)
    if not ns.timeout > 0:
        parser.error(f"--timeout must be positive, got {ns.timeout:g}")
    from pyorb.giop.errors import ProtocolError
    from pyorb.giop.ior import parse_reference

    try:
        parse_reference(ns.sink)
        model = resolve_model(ns.model, ns.workers)
    except ProtocolError as exc:
        parser.error(f"--sink is not a valid IOR or corbaloc URL: {exc.reason}")
    except ValueError as exc:
        parser.error(str(exc))
    return ns, model


_CALLBACK_CONTEXT = contextvars.Context()
"""Where AMH completions run: _complete reads and sets no context variable."""


def make_servant(model: Model, sink: Any, blocking_sink: Any, loop: asyncio.AbstractEventLoop) -> Any:
    import pyorb
    from pyorb.idl import bench_idl

    poa = bench_idl().Bench__POA.Sink
    loop_thread = threading.get_ident()

    class AMHMiddle(pyorb.amh_skeleton(poa)):  # type: ignore[misc]
        def work(self, rh: Any, token: int) -> None:
            # A partial, not a closure (half the bytes per pending call), run
            # in one shared context rather than a copy of the current one each.
            sink.work(token).add_done_callback(functools.partial(_complete, rh), context=_CALLBACK_CONTEXT)

    class CoroutineMiddle(poa):  # type: ignore[misc,valid-type]
        async def work(self, token: int) -> int:
            return await sink.work(token)  # type: ignore[no-any-return]

    class SyncMiddle(poa):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            if threading.get_ident() == loop_thread:  # reactive: block the loop itself
                return blocking_sink.work(token)  # type: ignore[no-any-return]
            return asyncio.run_coroutine_threadsafe(_await(sink.work, token), loop).result()  # type: ignore[no-any-return]

    return {"sync": SyncMiddle, "coroutine": CoroutineMiddle, "amh": AMHMiddle}[model.style]()


def _complete(rh: Any, future: asyncio.Future[int]) -> None:
    exc = future.exception()
    if exc is None:
        rh.work(future.result())
    else:
        rh.work_excep(exc)


async def _connect(client: Any, sink: str) -> None:
    """Open the connection to the sink before taking calls.

    Otherwise the first wave of calls, all arriving while it is being
    opened, would wait for it as one task each: a burst of memory that the
    process keeps (its heap does not shrink) for the rest of the run.
    """
    from omniORB import CORBA

    from pyorb.giop.ior import parse_reference

    route = client.route(parse_reference(sink))
    if route is None:
        return  # no IIOP profile: each call fails with INV_OBJREF
    try:
        await client.connection(*route.endpoint)
    except CORBA.SystemException as exc:  # the sink may come up later: calls connect on demand
        print(f"middle: warning: cannot reach the sink yet ({type(exc).__name__}); calls connect when it is up",
              file=sys.stderr)


async def _await(method: Any, *args: Any) -> Any:
    return await method(*args)


async def serve(ns: argparse.Namespace, model: Model) -> int:
    import pyorb
    from pyorb.client.blocking import BlockingClient
    from pyorb.idl import bench_idl

    config = pyorb.Config(call_timeout=ns.timeout)
    sink_iface = bench_idl().Bench.Sink
    server = await runner.start_server("middle", ns, model.strategy)
    if server is None:
        return 1
    tls = runner.client_tls(ns)
    async with pyorb.Client(config, tls=tls, balancing=ns.balancing) as client:
        await _connect(client, ns.sink)
        with BlockingClient(config, tls=tls) as blocking:
            servant = make_servant(model, client.resolve(ns.sink, sink_iface), blocking.resolve(ns.sink, sink_iface),
                                   asyncio.get_running_loop())
            await runner.serve_until_stopped(server, servant, ns, f"middle {model.name}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    ns, model = parse_args(args)
    if model.workers > 1 and not ns.reuse_port:
        return runner.run_workers(args, "pyorb.servers.middle", ns.host, ns.port, model.workers,
                                  not ns.no_stdin_watch)
    return runner.run(lambda: serve(ns, model))


if __name__ == "__main__":
    sys.exit(main())
