"""A pyorb peer of bidirectional GIOP (``idl/bidir.idl``), the twin of ``omni_bidir.py``.

``python -m tests.peers.pyorb_bidir serve [--host H] [--no-bidir]``
    serves a ``BiDir::Registry`` (``call_back(who, text)`` returns
    ``who.notify(text)``) from ``Server(bidirectional=True)`` (False with
    ``--no-bidir``); prints its IOR and corbaloc URL and serves until stdin
    reaches end of file, SIGTERM or SIGINT.

``python -m tests.peers.pyorb_bidir call IOR TEXT [--host H] [--no-bidir]``
    serves a ``BiDir::Listener`` (answers ``"pyorb heard " + text``) from a
    callback server on ``H`` (default 127.0.0.1: unreachable from another
    host; ``--publish`` names another address in its IORs), passes it to the registry's ``call_back`` through
    ``Client(bidirectional=callback_server)`` (a plain client with
    ``--no-bidir``) and prints one JSON line as ``omni_bidir.py call`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from omniORB import CORBA

import pyorb
from pyorb.servers.runner import serve_until_stop
from tests.peers.omni_bidir import parse_args

IDL = pyorb.load_idl(Path(__file__).resolve().parents[2] / "idl" / "bidir.idl")


class Registry(IDL.BiDir__POA.Registry):  # type: ignore[misc]
    kept: Any = None

    async def call_back(self, who: Any, text: str) -> str:
        return str(await who.notify(text))

    async def subscribe(self, who: Any) -> None:
        self.kept = who

    async def call_kept(self, text: str) -> str:
        return str(await self.kept.notify(text))


class Listener(IDL.BiDir__POA.Listener):  # type: ignore[misc]
    def notify(self, text: str) -> str:
        return "pyorb heard " + text


async def serve(ns: argparse.Namespace) -> None:
    server = pyorb.Server(ns.host, bidirectional=not ns.no_bidir)
    await server.start()
    try:
        key = server.activate(Registry(), "Registry")
    except BaseException:
        await server.close()
        raise
    await serve_until_stop([server.ior(key), server.corbaloc(key)], server.close)


async def call(ns: argparse.Namespace) -> int:
    async with pyorb.Server(ns.host, publish=ns.publish) as callbacks:
        async with pyorb.Client(bidirectional=None if ns.no_bidir else callbacks) as client:
            callbacks.activate(Listener(), "Listener")
            listener = client.resolve(callbacks.ior("Listener"), IDL.BiDir.Listener)
            registry = client.resolve(ns.ior, IDL.BiDir.Registry)
            try:
                result = await registry.call_back(listener, ns.text, timeout=30.0)
            except CORBA.SystemException as exc:
                print(json.dumps({"ok": False, "error": type(exc).__name__, "minor": exc.minor,
                                  "completed": str(exc.completed), "text": str(exc)}), flush=True)
                return 1
    print(json.dumps({"ok": True, "result": result}), flush=True)
    return 0


def main() -> int:
    ns = parse_args()
    if ns.command == "serve":
        asyncio.run(serve(ns))
        return 0
    return asyncio.run(call(ns))


if __name__ == "__main__":
    sys.exit(main())
