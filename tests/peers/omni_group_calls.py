"""omniORBpy side of the object-group tests: run by ``python -m pyorb.testing.omnipeer call``."""

from __future__ import annotations

from typing import Any


def work_many(orb: Any, sink: Any, count: int) -> int:
    """Call ``sink.work(i)`` ``count`` times; the number that came back right."""
    return sum(1 for i in range(count) if sink.work(i) == i)
