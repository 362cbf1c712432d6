"""The object adapter: object keys to servants, and the built-in operations."""

from __future__ import annotations

import itertools
from typing import Any

from pyorb.giop.ior import IOR
from pyorb.marshal import Operation
from pyorb.server.servant import ServantInfo, servant_info

# Operations every CORBA object answers, whatever its interface.
IS_A = Operation("_is_a", (((18, 0),), (8,), None))
NON_EXISTENT = Operation("_non_existent", ((), (8,), None))
BUILTIN_NAMES = {"_is_a": IS_A, "_non_existent": NON_EXISTENT, "_not_existent": NON_EXISTENT}


class ObjectAdapter:
    """Maps object keys to servants.  Keys are bytes; ``str`` keys are UTF-8."""

    def __init__(self) -> None:
        self._servants: dict[bytes, tuple[Any, ServantInfo]] = {}
        self._forwards: dict[bytes, IOR] = {}
        self._counter = itertools.count(1)

    def activate(self, servant: object, key: bytes | str | None = None) -> bytes:
        """Serve ``servant`` under ``key`` (a fresh one if None); returns the key."""
        info = servant_info(servant)
        if key is None:
            key = f"{type(servant).__name__}/{next(self._counter)}".encode()
        elif isinstance(key, str):
            key = key.encode()
        if key in self._servants:
            raise ValueError(f"object key {key!r} is already active")
        self._servants[key] = (servant, info)
        return key

    def deactivate(self, key: bytes | str) -> None:
        if isinstance(key, str):
            key = key.encode()
        if self._servants.pop(key, None) is None:
            raise KeyError(f"no servant is active under {key!r}")

    def forward(self, key: bytes | str, target: IOR) -> None:
        """Answer every request for ``key`` with LOCATION_FORWARD to ``target``
        (an object that moved); a servant active under ``key`` takes precedence."""
        self._forwards[key.encode() if isinstance(key, str) else key] = target

    def forwarded(self, key: bytes) -> IOR | None:
        return self._forwards.get(key)

    def lookup(self, key: bytes) -> tuple[Any, ServantInfo] | None:
        return self._servants.get(key)

    def type_id(self, key: bytes) -> str:
        entry = self._servants.get(key)
        if entry is None:
            raise KeyError(f"no servant is active under {key!r}")
        return entry[1].type_id

    def __len__(self) -> int:
        return len(self._servants)
