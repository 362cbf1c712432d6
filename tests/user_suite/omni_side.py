"""The application's omniORBpy code: a Counter servant and client functions.

Runs inside ``python -m pyorb.testing.omnipeer`` processes (started by the plugin's
``omni_server`` and ``omni_call`` fixtures), which compile shop.idl first.
"""

from __future__ import annotations

from typing import Any

import Shop
import Shop__POA
from omniORB import URI


class Counter(Shop__POA.Counter):
    """Shop::Counter as the IDL comments say."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, n: int) -> int:
        self.total += n
        return self.total

    def greet(self, who: str) -> str:
        return f"Hello, {who}!"

    def take(self, item: str, n: int) -> None:
        if n > 3:
            raise Shop.OutOfStock(item, n)


def use_counter(orb: Any, counter: Any, who: str) -> dict[str, Any]:
    """What an omniORBpy client sees of a Counter."""
    totals = [counter.add(1), counter.add(2)]
    try:
        counter.take("pears", 9)
        refused = None
    except Shop.OutOfStock as exc:
        refused = [exc.item, exc.wanted]
    return {"totals": totals, "greeting": counter.greet(who), "refused": refused}


def add_by_name(orb: Any, root: Any, name: str, n: int) -> int:
    """Find a Counter in the naming service by name and add to it."""
    counter = root.resolve(URI.stringToName(name))._narrow(Shop.Counter)
    result: int = counter.add(n)
    return result


def bind(orb: Any, root: Any, name: str, ior: str) -> None:
    root.bind(URI.stringToName(name), orb.string_to_object(ior))


def take_too_many(orb: Any, counter: Any) -> None:
    counter.take("apples", 4)
