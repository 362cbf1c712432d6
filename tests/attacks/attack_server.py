#!/usr/bin/env python3
"""The server the attack scripts start: idl/hardening.idl's Target under one strategy and Config.

    python -m tests.attacks.attack_server --model "thread_pool(8)" --set read_timeout=3 --nofile 256

It prints the object's IOR and corbaloc URL, serves until stdin closes or
SIGTERM, and exits 0 after a clean close.  It uses only ``pyorb.Server`` and ``pyorb.Config`` so that it runs
from any checkout (run by its path with ``PYTHONPATH=<tree>``): the figures before a fix use the
same server code path as those after it.  ``--set`` names a Config field;
one that the checkout does not have is ignored with a note on stderr (older
code has fewer limits).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import resource
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _config(settings: list[str]) -> object:
    import pyorb

    fields = {f.name: f.type for f in dataclasses.fields(pyorb.Config)}
    kwargs: dict[str, object] = {}
    for item in settings:
        name, _, value = item.partition("=")
        if name not in fields:
            print(f"attack_server: this pyorb has no Config.{name}; ignored", file=sys.stderr)
            continue
        kwargs[name] = float(value) if "." in value else int(value)
    return pyorb.Config(**kwargs)


async def _serve(args: argparse.Namespace) -> int:
    import pyorb

    pyorb.load_idl(ROOT / "idl/hardening.idl")
    from tests.peers.hardening_servant import Target

    server = pyorb.Server(strategy=args.model, config=_config(args.set))
    await server.start()
    server.activate(Target(), "Target")
    if args.threads_fit:
        _fit_threads(args.threads_fit)
    print(server.ior("Target"), flush=True)
    print(server.corbaloc("Target"), flush=True)
    from pyorb.servers.runner import exiting, wait_for_stop

    # Not runner.serve_until_stop: attack_flow.py runs this against older checkouts, which lack it.
    await wait_for_stop(True, lambda: None)
    await server.close(grace=1.0)
    exiting()  # a SIGTERM racing the exit must not turn a clean stop into -15
    return 0


def _fit_threads(n: int) -> None:
    # Address space, not a thread count, is what runs out here: a real limit
    # that root cannot ignore (pids cgroups are not always enforced, and
    # RLIMIT_NPROC does not bind root).  Run with MALLOC_ARENA_MAX=1 so that
    # threads do not reserve malloc arenas of their own.
    stack = 32 * 1024 * 1024
    threading.stack_size(stack)
    with open("/proc/self/status") as status:
        vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
    headroom = n * (stack + 64 * 1024) + 24 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, resource.RLIM_INFINITY))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="reactive")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a Config field")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="event loop (default uvloop, as pyorb serve)")
    parser.add_argument("--switch-interval", type=float, metavar="S",
                        help="sys.setswitchinterval: how long a thread may hold the GIL while others wait")
    parser.add_argument("--nofile", type=int, help="RLIMIT_NOFILE (soft and hard) of the server process")
    parser.add_argument("--threads-fit", type=int, metavar="N",
                        help="make room for about N more threads only: 32 MiB thread stacks and RLIMIT_AS set "
                             "once serving (Thread.start then fails as on a machine out of threads)")
    args = parser.parse_args()
    if args.nofile:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    if args.loop == "uvloop":
        import uvloop

        return uvloop.run(_serve(args))
    return asyncio.run(_serve(args))


if __name__ == "__main__":
    sys.exit(main())
