"""A recorder's recent window: what snapshots read from it, and what it leaves to the garbage collector.

Both run against the recorder in place (the compiled twin of ``finish`` where
the accelerator is in use) and against the Python original.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from pyorb import _accelerator
from pyorb.server.call.stats import Recorder, merge

ORIGINAL: Any = _accelerator.original("pyorb.server.call.stats.Recorder.finish")


class Original(Recorder):
    """A recorder that runs the Python original."""

    __slots__ = ()
    finish = ORIGINAL


@pytest.mark.parametrize("cls", [Recorder, Original], ids=["in place", "original"])
def test_snapshots_take_percentiles_over_each_recorders_recent_window(cls: type[Recorder]) -> None:
    a, b = cls(window=10), cls(window=10)
    for i in range(100):  # a keeps waits 0.090..0.099 and services 0.180..0.198
        a.finish(i / 1000, 2 * i / 1000, failed=i % 10 == 0)
    b.finish(1.0, 3.0, failed=False)
    snap = merge("op", [a, b])
    assert (snap.served, snap.failed) == (101, 10)
    assert snap.wait.max == 1.0 and snap.service.max == 3.0
    assert snap.wait.p50 == pytest.approx(0.095) and snap.service.p50 == pytest.approx(0.19)
    assert snap.wait.mean == pytest.approx((sum(range(100)) / 1000 + 1.0) / 101)


@pytest.mark.parametrize("cls", [Recorder, Original], ids=["in place", "original"])
def test_finishing_calls_leaves_nothing_for_the_garbage_collector(cls: type[Recorder]) -> None:
    # A sample the collector tracks (a tuple) would survive in the window and
    # make it run every few hundred calls, walking the whole window.
    r = cls(window=4096)
    r.finish(0.001, 0.002, False)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        before = len(gc.get_objects())
        for _ in range(3000):
            r.finish(0.001, 0.002, False)
        grown = len(gc.get_objects()) - before
    finally:
        if enabled:
            gc.enable()
    assert grown < 100, f"{grown} objects tracked by the collector after 3,000 calls"
