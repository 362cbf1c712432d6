"""Public names that load their module on first use (PEP 562), for the packages
whose import must stay cheap: ``pyorb``, ``pyorb.testing``, ``pyorb.marshal``.
Standard library only: every layer may use it."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_names(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: name -> the module it lives in.

    A name is imported on first access and then kept in the package's
    namespace, so later lookups are plain attribute reads.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
