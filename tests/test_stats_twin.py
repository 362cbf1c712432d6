"""The compiled count of a finished call (pyorb/server/call/_cstats.pyx) agrees with its Python original.

A recorder running ``Recorder.finish``'s compiled twin and one of a class
bound to the original are given the same finished calls (waits and service
times, failed or not, past the recent window); both must hold the same
counts, totals and recent samples.  Calls finished from several threads at
once are all counted.  They run where the compiled accelerator is in use
and are skipped in a pure-Python process.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyorb
from pyorb import _accelerator
from pyorb.server.call.stats import Recorder

ORIGINAL: Any = _accelerator.original("pyorb.server.call.stats.Recorder.finish")
SECONDS = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


class Original(Recorder):
    """A recorder that runs the Python original."""

    __slots__ = ()
    finish = ORIGINAL


def state(r: Recorder) -> tuple[Any, ...]:
    return (r.started, r.served, r.failed, r.dropped, r.rejected, r.wait_total, r.service_total, list(r.waits), list(r.services),
            r.shed, r.expired)


@pytest.fixture(autouse=True)
def compiled() -> None:
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    assert Recorder.finish is not ORIGINAL, "the twin is not in place"


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(st.tuples(SECONDS, SECONDS, st.booleans()), max_size=40), window=st.integers(1, 8))
def test_both_count_the_same_calls_alike(calls: list[tuple[float, float, bool]], window: int) -> None:
    twin, original = Recorder(window), Original(window)
    for wait, service, failed in calls:
        twin.finish(wait, service, failed)
        original.finish(wait, service, failed)
        assert state(twin) == state(original)


def test_a_subclass_runs_the_original() -> None:
    seen: list[float] = []

    class Watching(Recorder):
        __slots__ = ()

        @property  # type: ignore[override,misc]
        def wait_total(self) -> float:  # a slot hidden behind a property: the twin must not write the slot
            return -1.0

        @wait_total.setter
        def wait_total(self, value: float) -> None:
            seen.append(value)

    r = Watching()
    r.finish(0.5, 0.25, False)
    assert seen[-1] == -0.5 and r.served == 1  # the original: the property read, then written and r.service_total == 0.25


def test_calls_finished_on_several_threads_are_all_counted() -> None:
    r = Recorder()
    per_thread = 5000

    def finish_many() -> None:
        for i in range(per_thread):
            r.finish(0.001, 0.002, i % 2 == 0)

    threads = [threading.Thread(target=finish_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert (r.served, r.failed) == (4 * per_thread, 2 * per_thread)
    assert r.service_total == pytest.approx(4 * per_thread * 0.002)


@pytest.mark.parametrize("make_lock", [threading.Lock, threading.RLock], ids=["lock", "rlock"])
def test_the_lock_is_released_after_a_call_and_after_an_update_that_raises(make_lock: Any) -> None:
    twin, original = Recorder(), Original()
    for r in (twin, original):
        r.lock = make_lock()
        r.finish(0.5, 0.25, True)
        with pytest.raises(TypeError):
            r.finish("late", 0.25, False)  # type: ignore[arg-type]  # a wait that does not add: raised under the lock
        assert r.lock.acquire(blocking=False), f"{type(r).__name__} kept its lock after the failed update"
        r.lock.release()
    assert state(twin) == state(original)
