"""Bench::Echo on pyorb: ``ping`` returns the stamp it is given.

The pyorb side of the echo benchmarks (``python -m benchmarks.bench_echo``):
``python -m pyorb.servers.echo --servant sync|coroutine|amh`` serves it in one
of pyorb's three servant styles under the reactive strategy, with the
lifetime of :mod:`pyorb.servers.runner` (IOR and corbaloc on stdout, stop on
SIGTERM or stdin end of file).  ``python -m pyorb.servers.omni echo`` is its
omniORBpy baseline.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from pyorb.servers import runner

SERVANTS = ("sync", "coroutine", "amh")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = runner.OneLineParser(prog="echo", description=__doc__.split("\n")[0])
    runner.add_server_options(parser, "Echo")
    runner.add_security_options(parser)
    parser.add_argument("--servant", choices=SERVANTS, default="sync",
                        help="servant style: plain POA servant (runs inline on the loop), async def, or AMH "
                             "(default sync)")
    ns = parser.parse_args(argv)
    runner.check_port(parser, ns.port)
    ns.reuse_port = False
    return ns


def make_servant(idl: Any, style: str) -> Any:
    """An Echo servant of ``idl`` (what :func:`pyorb.idl.bench_idl` loads) in the requested style."""
    import pyorb

    poa = idl.Bench__POA.Echo

    class SyncEcho(poa):  # type: ignore[misc,valid-type]
        def ping(self, stamp: int) -> int:
            return stamp

        def notify(self, stamp: int) -> None:
            pass

    class CoroutineEcho(poa):  # type: ignore[misc,valid-type]
        async def ping(self, stamp: int) -> int:
            return stamp

        async def notify(self, stamp: int) -> None:
            pass

    class AmhEcho(pyorb.amh_skeleton(poa)):  # type: ignore[misc]
        def ping(self, rh: Any, stamp: int) -> None:
            rh.ping(stamp)

        def notify(self, rh: Any, stamp: int) -> None:
            pass

    return {"sync": SyncEcho, "coroutine": CoroutineEcho, "amh": AmhEcho}[style]()


async def serve(ns: argparse.Namespace) -> int:
    server = await runner.start_server("echo", ns, "reactive")
    if server is None:
        return 1
    from pyorb.idl import bench_idl

    await runner.serve_until_stopped(server, make_servant(bench_idl(), ns.servant), ns, f"echo {ns.servant}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    return runner.run(lambda: serve(ns))


if __name__ == "__main__":
    sys.exit(main())
