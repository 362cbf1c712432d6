#!/usr/bin/env python3
"""Standalone omniORBpy server of Interop::Types (and Interop::Node).

The reference peer for pyorb's interoperability tests: a pyorb client calls
it exactly as it would call any omniORB server.  The servant follows the
comments of idl/interop.idl to the letter.

It prints one line on stdout, the stringified IOR of the Types object, then
serves until SIGTERM/SIGINT or until its stdin reaches end of file, so a test
process that dies (and so closes the pipe) never leaves it running.  The
Types object is also reachable as ``corbaloc::1.2@HOST:PORT/Types`` (it is
activated in omniORB's INS POA under the key ``Types``).
"""
from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

from pyorb.idl import import_generated
from pyorb.testing import omnipeer
from omniORB import CORBA

IDL = Path(__file__).resolve().parents[2] / "idl" / "interop.idl"
ECHO_OPS = (
    "echo_boolean", "echo_char", "echo_wchar", "echo_octet", "echo_short",
    "echo_ushort", "echo_long", "echo_ulong", "echo_longlong",
    "echo_ulonglong", "echo_float", "echo_double", "echo_string",
    "echo_wstring", "echo_point", "echo_points", "echo_blob", "echo_color",
    "echo_variant", "echo_any", "echo_matrix",
)
OBJECT_KEY = b"Types"
# Bounds the server's own outgoing calls (node_name calls back into
# whatever reference it was given) so a dead peer cannot stall shutdown.
OUTGOING_CALL_TIMEOUT_MS = 10_000


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 on a bad option."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1",
                        help="loopback address (127.0.0.1 or ::1)")
    parser.add_argument("--port", type=int, default=0,
                        help="TCP port, 0 for an ephemeral one (default 0)")
    parser.add_argument("--max-giop", choices=("1.0", "1.1", "1.2"),
                        default="1.2", help="-ORBmaxGIOPVersion (default 1.2)")
    parser.add_argument("--native-char", choices=("ISO-8859-1", "UTF-8"),
                        default="ISO-8859-1",
                        help="native char code set (default ISO-8859-1, "
                             "omniORB's own default)")
    parser.add_argument("--threading", choices=("tpc", "pool"), default="tpc",
                        help="thread per connection (omniORB default) or "
                             "thread pool")
    parser.add_argument("--pool-size", type=int, default=None, metavar="N",
                        help="maxServerThreadPoolSize in pool mode "
                             "(default: omniORB's, 100)")
    parser.add_argument("--no-stdin-watch", action="store_true",
                        help="do not stop at stdin EOF (for manual runs)")
    ns = parser.parse_args(argv)
    if ns.pool_size is not None and ns.threading != "pool":
        parser.error("--pool-size needs --threading pool")
    if ns.pool_size is not None and ns.pool_size < 1:
        parser.error("--pool-size must be at least 1")
    return ns


def endpoint(host: str, port: int) -> str:
    """omniORB endPoint URI; IPv6 literals go in brackets."""
    shown = f"[{host}]" if ":" in host else host
    return f"giop:tcp:{shown}:{port}"


def threading_args(mode: str, pool_size: int | None) -> list[str]:
    """ORB options selecting omniORB's server threading model."""
    if mode == "tpc":
        return ["-ORBthreadPerConnectionPolicy", "1"]
    args = ["-ORBthreadPerConnectionPolicy", "0"]
    if pool_size is not None:
        args += ["-ORBmaxServerThreadPoolSize", str(pool_size)]
    return args


def orb_args(ns: argparse.Namespace) -> list[str]:
    """Full ORB_init argument list for the parsed options."""
    args = [sys.argv[0], "-ORBendPoint", endpoint(ns.host, ns.port),
            "-ORBmaxGIOPVersion", ns.max_giop,
            "-ORBclientCallTimeOutPeriod", str(OUTGOING_CALL_TIMEOUT_MS)]
    # ISO-8859-1 is omniORB's default: only UTF-8 needs saying.
    if ns.native_char == "UTF-8":
        args += ["-ORBnativeCharCodeSet", "UTF-8"]
    return args + threading_args(ns.threading, ns.pool_size)


def load_idl() -> tuple[ModuleType, ModuleType]:
    """Compile interop.idl in-process; return (Interop, Interop__POA)."""
    import_generated(str(IDL))  # omniORB.importIDL, minus its PATH lookup
    return sys.modules["Interop"], sys.modules["Interop__POA"]


def _echo(self: Any, v: Any) -> Any:
    """Every echo_* operation: return the argument unchanged."""
    return v


def build_servant_classes(interop: ModuleType,
                          poa_mod: ModuleType) -> tuple[type, type]:
    """Define the Node and Types servant classes on the generated skeletons.

    The skeleton base classes only exist once the IDL is imported, hence a
    factory rather than module-level classes.
    """

    class NodeServant(poa_mod.Node):  # type: ignore[name-defined,misc]
        """A Node whose name() returns the name it was made with."""

        def __init__(self, name: str) -> None:
            self._name = name

        def name(self) -> str:
            return self._name

    class TypesServant(poa_mod.Types):  # type: ignore[name-defined,misc]
        """Interop::Types as the IDL comments define it."""

        def __init__(self, poa: Any) -> None:
            self._poa = poa
            self._last_oneway = ""
            self._lock = threading.Lock()

        def directions(self, a: int, b: int) -> tuple[int, int, int]:
            # Result a + b, inout b becomes b + 1, out doubled = 2a.
            return a + b, b + 1, 2 * a

        def mixed(self, s: str, d: float, o: int,
                  ll: int) -> tuple[float, str]:
            return float(d + o + ll), s[::-1]

        def raise_failure(self, code: int) -> None:
            raise interop.Failure(code, "failed", [1, 2, 3])

        def raise_empty(self) -> None:
            raise interop.Empty()

        def raise_undeclared(self) -> None:
            # Not in the IDL: omniORBpy turns it into CORBA.UNKNOWN.
            raise RuntimeError("boom")

        def raise_system(self) -> None:
            raise CORBA.BAD_PARAM(42, CORBA.COMPLETED_NO)

        def make_node(self, name: str) -> Any:
            return self._poa.servant_to_reference(NodeServant(name))

        def node_name(self, n: Any) -> str:
            # A real call on the reference received, wherever it lives.
            name: str = n.name()
            return name

        def nodes(self, count: int) -> list[Any]:
            return [self.make_node(f"node{i}") for i in range(count)]

        # References inside values: see the IDL comments.
        def label_holder(self, h: Any) -> Any:
            return interop.Holder(h.target.name(), h.target)

        def label_pair(self, p: list[Any]) -> list[Any]:
            return [interop.Holder(n.name(), n) for n in p]

        def flip_variant(self, v: Any) -> Any:
            if v._d:
                return interop.NodeOrName(name=v.ref.name())
            return interop.NodeOrName(ref=self.make_node(v.name))

        def flip_any(self, a: Any) -> Any:
            value = a.value()
            if isinstance(value, str):
                return CORBA.Any(interop._tc_Node, self.make_node(value))
            return CORBA.Any(CORBA.TC_string, value._narrow(interop.Node).name())

        def raise_node_error(self, n: Any) -> None:
            raise interop.NodeError(n.name(), n)

        def fire(self, v: str) -> None:
            with self._lock:
                self._last_oneway = v

        def last_oneway(self) -> str:
            with self._lock:
                return self._last_oneway

    for op in ECHO_OPS:
        setattr(TypesServant, op, _echo)
    return NodeServant, TypesServant


def start_server(ns: argparse.Namespace) -> tuple[Any, str]:
    """Initialise the ORB, activate the servants; return (orb, IOR)."""
    orb = CORBA.ORB_init(orb_args(ns), CORBA.ORB_ID)
    interop, poa_mod = load_idl()
    _, types_cls = build_servant_classes(interop, poa_mod)
    root = orb.resolve_initial_references("RootPOA")
    # omniINSPOA keys objects by the plain id, so corbaloc.../Types works.
    ins = orb.resolve_initial_references("omniINSPOA")
    servant = types_cls(root)
    ins.activate_object_with_id(OBJECT_KEY, servant)
    root._get_the_POAManager().activate()
    ins._get_the_POAManager().activate()
    ref = ins.id_to_reference(OBJECT_KEY)
    return orb, orb.object_to_string(ref)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until told to stop."""
    ns = parse_args(argv)
    orb, ior = start_server(ns)
    omnipeer.serve_orb(orb, [ior], not ns.no_stdin_watch)
    return 0


if __name__ == "__main__":
    omnipeer.exit_now(main())
