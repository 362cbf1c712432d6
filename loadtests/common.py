"""Pieces shared by the load-generator scripts in this folder."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Window:
    """The measured interval, in time.perf_counter() seconds."""

    start: float
    end: float


@dataclass
class Tally:
    """One worker's counts inside the window."""

    calls: int = 0
    errors: int = 0


def positive(kind: type) -> Callable[[str], Any]:
    """argparse type: a positive int or float."""

    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text}")
        return value

    return parse
