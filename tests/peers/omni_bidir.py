"""An omniORBpy peer of bidirectional GIOP (``idl/bidir.idl``): omniORB's ORB, never pyorb's client or server.

``python tests/peers/omni_bidir.py serve [--host H] [--no-bidir]``
    serves a ``BiDir::Registry`` (``call_back(who, text)`` returns
    ``who.notify(text)``) from a POA with the BiDir policy BOTH, in an ORB
    started with ``-ORBacceptBiDirectionalGIOP 1`` and ``bidir`` in its
    transport rules (neither, and no policy, with ``--no-bidir``).  It
    prints its IOR and serves until stdin reaches end of file, SIGTERM or
    SIGINT.

``python tests/peers/omni_bidir.py call IOR TEXT [--host H] [--no-bidir]``
    serves a ``BiDir::Listener`` (``notify(text)`` answers ``"omniORB heard
    " + text``) on ``H`` (default 127.0.0.1: unreachable from another host)
    from a POA with the BiDir policy, in an ORB started with
    ``-ORBofferBiDirectionalGIOP 1`` (0 with ``--no-bidir``), passes it to
    the registry's ``call_back`` and prints one JSON line: ``{"ok": true,
    "result": ...}`` or ``{"ok": false, "error": "TRANSIENT", ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from omniORB import BiDirPolicy, CORBA

from pyorb.idl import import_generated
from pyorb.testing.omnipeer import serve_orb

IDL = Path(__file__).resolve().parents[2] / "idl" / "bidir.idl"


def orb_and_poa(bidir: bool, option: str, host: str) -> tuple[Any, Any]:
    argv = [sys.argv[0], f"-ORB{option}", "1" if bidir else "0", "-ORBendPoint", f"giop:tcp:{host}:",
            "-ORBnativeCharCodeSet", "UTF-8", "-ORBclientCallTimeOutPeriod", "20000"]
    if bidir:  # omniORB's transport rules must allow bidirectional connections too
        argv += ["-ORBserverTransportRule", "* unix,ssl,tcp,bidir", "-ORBclientTransportRule", "* unix,ssl,tcp,bidir"]
    orb = CORBA.ORB_init(argv, CORBA.ORB_ID)
    import_generated(str(IDL))  # omniidl through this interpreter, not PATH (a service's PATH may lack it)
    root = orb.resolve_initial_references("RootPOA")
    policies = [orb.create_policy(BiDirPolicy.BIDIRECTIONAL_POLICY_TYPE, CORBA.Any(CORBA.TC_ushort, BiDirPolicy.BOTH))]
    poa = root.create_POA("bidir", root._get_the_POAManager(), policies if bidir else [])
    root._get_the_POAManager().activate()
    return orb, poa


def serve(ns: argparse.Namespace) -> None:
    orb, poa = orb_and_poa(not ns.no_bidir, "acceptBiDirectionalGIOP", ns.host)
    BiDir__POA = sys.modules["BiDir__POA"]

    class Registry(BiDir__POA.Registry):  # type: ignore[misc,name-defined]
        kept: Any = None

        def call_back(self, who: Any, text: str) -> str:
            return str(who.notify(text))

        def subscribe(self, who: Any) -> None:
            self.kept = who

        def call_kept(self, text: str) -> str:
            return str(self.kept.notify(text))

    ref = poa.id_to_reference(poa.activate_object(Registry()))
    serve_orb(orb, [orb.object_to_string(ref)])


def call(ns: argparse.Namespace) -> int:
    orb, poa = orb_and_poa(not ns.no_bidir, "offerBiDirectionalGIOP", ns.host)
    BiDir, BiDir__POA = sys.modules["BiDir"], sys.modules["BiDir__POA"]

    class Listener(BiDir__POA.Listener):  # type: ignore[misc,name-defined]
        def notify(self, text: str) -> str:
            return "omniORB heard " + text

    listener = poa.id_to_reference(poa.activate_object(Listener()))
    registry = orb.string_to_object(ns.ior)._narrow(BiDir.Registry)
    try:
        result = registry.call_back(listener, ns.text)
        print(json.dumps({"ok": True, "result": result}), flush=True)
        return 0
    except CORBA.SystemException as exc:
        print(json.dumps({"ok": False, "error": type(exc).__name__, "minor": exc.minor,
                          "completed": str(exc.completed)}), flush=True)
        return 1
    finally:
        orb.destroy()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line of this peer and of its pyorb twin (``pyorb_bidir.py``)."""
    parser = argparse.ArgumentParser(description="a peer of bidirectional GIOP")
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve")
    calling = commands.add_parser("call")
    calling.add_argument("ior")
    calling.add_argument("text")
    calling.add_argument("--publish", default=None, help="the address the callback server publishes (pyorb only)")
    for sub, host in ((serving, "0.0.0.0"), (calling, "127.0.0.1")):
        sub.add_argument("--host", default=host)
        sub.add_argument("--no-bidir", action="store_true")
    return parser.parse_args(argv)


def main() -> int:
    ns = parse_args()
    if ns.command == "serve":
        serve(ns)
        return 0
    return call(ns)


if __name__ == "__main__":
    sys.exit(main())
