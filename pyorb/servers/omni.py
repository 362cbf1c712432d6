"""The omniORBpy baselines: the papers' sink and middle tier, and the echo server, on omniORB's own POA.

``python -m pyorb.servers.omni sink --delay 0.04 --threading tpc``,
``python -m pyorb.servers.omni middle --sink IOR --threading pool --pool-size 8`` and
``python -m pyorb.servers.omni echo`` (Bench::Echo, the echo benchmarks' baseline).
omniORB's two server models: thread per connection (its default) and a
thread pool (``-ORBthreadPerConnectionPolicy 0 -ORBmaxServerThreadPoolSize N``).
The middle tier's servant makes a synchronous call to the sink in its upcall
thread, as omniORB applications do; its client side may open up to
``--sink-connections`` connections to the sink, each carrying several calls.

Same conventions as the pyorb servers (IOR and corbaloc on stdout, stop on
stdin end of file or SIGTERM).  This process never imports pyorb's asyncio
parts: it is omniORB all the way.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Sequence

from pyorb.giop.ior import IOR, to_corbaloc
from pyorb.idl.compiler import BENCH_IDL
from pyorb.servers import runner
from pyorb.servers.workload import Demand, spin
from pyorb.testing import omnipeer

IDL = BENCH_IDL


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = runner.OneLineParser(prog="omni", description=__doc__.split("\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    sink = roles.add_parser("sink", help="the sink (delay and/or CPU demand per call)")
    middle = roles.add_parser("middle", help="the middle tier (forwards each call to a sink)")
    echo = roles.add_parser("echo", help="Bench::Echo: ping returns its stamp")
    for sub, key in ((sink, "Sink"), (middle, "Middle"), (echo, "Echo")):
        sub.error = parser.error  # type: ignore[method-assign]
        runner.add_server_options(sub, key)
        sub.add_argument("--threading", choices=("tpc", "pool"), default="tpc",
                         help="thread per connection (omniORB's default) or thread pool")
        sub.add_argument("--pool-size", type=int, default=8, help="threads in pool mode (default 8)")
    sink.add_argument("--delay", type=float, default=0.0, help="seconds each call waits")
    sink.add_argument("--cpu", type=float, default=0.0, help="seconds of CPU each call computes")
    sink.add_argument("--distribution", choices=("fixed", "exponential"), default="fixed")
    sink.add_argument("--seed", type=int, default=None)
    middle.add_argument("--sink", required=True, help="IOR or corbaloc URL of the sink")
    middle.add_argument("--sink-connections", type=int, default=100,
                        help="most connections to the sink (omniORB's maxGIOPConnectionPerServer, default 100)")
    ns = parser.parse_args(argv)
    runner.check_port(parser, ns.port)
    try:
        ns.published = runner.publish_option(ns.publish, ns.port)
        ns.endpoints = runner.endpoints_option(ns.endpoint) or [(ns.host, ns.port)]
    except ValueError as exc:
        parser.error(str(exc))
    if ns.pool_size < 1:
        parser.error(f"--pool-size must be at least 1, got {ns.pool_size}")
    if ns.role == "sink":
        try:
            ns.demand = Demand(ns.delay, ns.cpu, ns.distribution == "exponential", ns.seed)
        except ValueError as exc:
            parser.error(str(exc))
    elif ns.role == "middle" and ns.sink_connections < 1:
        parser.error(f"--sink-connections must be at least 1, got {ns.sink_connections}")
    return ns


def orb_args(ns: argparse.Namespace) -> list[str]:
    args = ["omni", "-ORBnativeCharCodeSet", "UTF-8"]
    for host, port in ns.endpoints:  # omniORB takes -ORBendPoint once per endpoint
        args += ["-ORBendPoint", f"giop:tcp:[{host}]:{port}" if ":" in host else f"giop:tcp:{host}:{port}"]
    if ns.published:  # omniORB's own way: the first address in the profile, the others as alternates
        shown = (f"giop:tcp:[{h}]:{p}" if ":" in h else f"giop:tcp:{h}:{p}" for h, p in ns.published)
        args += ["-ORBendPointPublish", ",".join(shown)]
    if ns.threading == "tpc":
        args += ["-ORBthreadPerConnectionPolicy", "1"]
    else:
        args += ["-ORBthreadPerConnectionPolicy", "0", "-ORBmaxServerThreadPoolSize", str(ns.pool_size)]
    if ns.role == "middle":
        # Without these an omniORB client sends one call at a time on at most 5 connections.
        args += ["-ORBoneCallPerConnection", "0", "-ORBmaxGIOPConnectionPerServer", str(ns.sink_connections)]
    return args


def make_servant(ns: argparse.Namespace, orb: Any) -> Any:
    Bench, Bench__POA = sys.modules["Bench"], sys.modules["Bench__POA"]  # loaded by omniORB.importIDL

    if ns.role == "echo":

        class OmniEcho(Bench__POA.Echo):  # type: ignore[misc,name-defined]
            def ping(self, stamp: int) -> int:
                return stamp

            def notify(self, stamp: int) -> None:
                pass

        return OmniEcho()
    if ns.role == "sink":
        demand: Demand = ns.demand

        class OmniSink(Bench__POA.Sink):  # type: ignore[misc,name-defined]
            def work(self, token: int) -> int:
                delay, cpu = demand.draw()
                spin(cpu)
                if delay:
                    time.sleep(delay)
                return token

        return OmniSink()
    target = orb.string_to_object(ns.sink)._narrow(Bench.Sink)
    if target is None:
        raise SystemExit(f"omni: error: --sink {ns.sink[:40]}... is not a Bench::Sink")

    class OmniMiddle(Bench__POA.Sink):  # type: ignore[misc,name-defined]
        def work(self, token: int) -> int:
            return target.work(token)  # type: ignore[no-any-return]

    return OmniMiddle()


def serve(ns: argparse.Namespace) -> int:
    from omniORB import CORBA, PortableServer

    from pyorb.idl import import_generated

    orb = CORBA.ORB_init(orb_args(ns), CORBA.ORB_ID)
    import_generated(str(IDL))
    poa = orb.resolve_initial_references("omniINSPOA")  # persistent keys: corbaloc works
    servant = make_servant(ns, orb)
    poa.activate_object_with_id(ns.key.encode(), servant)
    poa._get_the_POAManager().activate()
    ref = poa.id_to_reference(ns.key.encode())
    text = orb.object_to_string(ref)
    profile = IOR.from_string(text).iiop  # what omniORB published, alternates included
    assert profile is not None
    corbaloc = to_corbaloc(profile.host, profile.port, ns.key.encode(), alternates=profile.alternate_addresses)
    omnipeer.serve_orb(orb, [text, corbaloc], not ns.no_stdin_watch, ns.ior_file)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return serve(parse_args(argv))


if __name__ == "__main__":
    omnipeer.exit_now(main())
