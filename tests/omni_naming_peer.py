"""omniORBpy side of tests/test_naming.py, run by ``python -m pyorb.testing.omnipeer``.

Imports omniORB only (never pyorb's client or server): each function runs
in its own omniORBpy process, called as ``function(orb, obj, *args)``.
"""

from __future__ import annotations

from typing import Any

import Bench__POA
import CosNaming
from omniORB import URI


class Echo(Bench__POA.Echo):
    """Bench::Echo served by omniORBpy: ping returns its stamp plus one."""

    def ping(self, stamp: int) -> int:
        return stamp + 1

    def notify(self, stamp: int) -> None:
        pass


def ping(orb: Any, echo: Any, stamp: int) -> int:
    """``echo`` came from a corbaname URL: omniORB resolved it through omniNames."""
    result: int = echo.ping(stamp)
    return result


def bind(orb: Any, root: Any, name: str, ior: str) -> None:
    """Bind ``ior`` under ``name`` in the root context, as an omniORB program would."""
    root.bind(URI.stringToName(name), orb.string_to_object(ior))


def bind_new_context(orb: Any, root: Any, name: str) -> None:
    root.bind_new_context(URI.stringToName(name))


def names(orb: Any, root: Any) -> list[list[Any]]:
    """Every binding of the root context as [INS name, "object" | "context"]."""
    found, iterator = root.list(1000)
    if iterator is not None:
        iterator.destroy()
    kinds = {CosNaming.nobject: "object", CosNaming.ncontext: "context"}
    return sorted([URI.nameToString(b.binding_name), kinds[b.binding_type]] for b in found)
