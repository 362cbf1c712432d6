"""The servant of idl/hardening.idl, served by ``pyorb serve`` in the hardening tests."""

from __future__ import annotations

import time
from typing import Any

import Hardening  # loaded by `pyorb serve --idl idl/hardening.idl`
import Hardening__POA


class Target(Hardening__POA.Target):  # type: ignore[misc]
    def take(self, v: Any) -> Any:
        return v

    def ping(self, stamp: int) -> int:
        return stamp

    def make_point(self, x: int, y: int) -> Any:
        return Hardening.Point(x, y)

    def give_point(self, p: Any) -> None:
        pass

    def give_titled_link(self, link: Any, title: Any) -> int:
        return self.give_link(link)

    def give_link(self, link: Any) -> int:
        return -1 if link is None else int(link.id)

    def blob(self, size: int) -> bytes:
        return bytes(size)

    def nap(self, ms: int) -> int:
        time.sleep(ms / 1000)
        return ms

    def refuse(self, why: Any) -> None:
        raise Hardening.Refused(why)

    def plant(self, t: Any) -> int:
        depth = 1
        while t.kids:
            t, depth = t.kids[0], depth + 1
        return depth
