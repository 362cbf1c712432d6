"""The compiled judgement of an arriving call (pyorb/server/_cadmission.pyx) agrees with its Python original.

Two admission controls, one running ``Admission.refusal``'s compiled twin
and one of a class bound to the original, see the same calls arrive,
start, be cancelled and be asked about, on the same fake clock and the
same event-loop lag: each question must get the same answer (the same
text object, as the connection finds its encoded reply by it), and both
controls must be left in the same state (CoDel's, the queue's pace and
backlog, the counts and the texts kept).  They run where the compiled
accelerator is in use and are skipped in a pure-Python process.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pyorb
from pyorb import _accelerator
from pyorb.server import admission as module
from pyorb.server.admission import Admission, AdmissionPolicy, LoopLag
from pyorb.server.call.stats import Recorder
from tests.admission_calls import QueuedCall as Queued

ORIGINAL: Any = _accelerator.original("pyorb.server.admission.Admission.refusal")


class Original(Admission):
    """An admission control that runs the Python original."""

    __slots__ = ()
    refusal = ORIGINAL


class Handle:
    def cancel(self) -> None:
        pass


class Loop:
    """What admission control asks of its event loop: the time, and timers it never runs here."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    def time(self) -> float:
        return self.clock[0]

    def call_at(self, when: float, callback: Any, *args: Any) -> Handle:
        return Handle()

    def call_later(self, delay: float, callback: Any, *args: Any) -> Handle:
        return Handle()


def state(control: Admission) -> tuple[Any, ...]:
    codel = control._codel
    return (None if codel is None else (codel.dropping, codel._first_above, codel._ended), control._pace,
            control._paced_at, control._last_start, control._backlogged, dict(control._backlog),
            [call.queued_at for call in control._queued], control._stats.shed, control._unlogged, control._logged,
            sorted(control._texts.items()))


@pytest.fixture(autouse=True)
def compiled() -> None:
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    assert Admission.refusal is not ORIGINAL, "the twin is not in place"


CONNECTIONS = st.sampled_from(["a", "b", "c"])
ASK = st.tuples(st.just("ask"), st.booleans(), CONNECTIONS)
STEP = st.one_of(  # bursts of arrivals, threads taking calls at some pace, questions, as under load
    st.tuples(st.just("arrive"), CONNECTIONS, st.integers(1, 8)),
    ASK, ASK, ASK,
    st.tuples(st.just("start"), st.integers(0, 30), st.floats(0.0, 0.03)),
    st.tuples(st.just("start"), st.integers(0, 30), st.floats(0.0, 0.03)),
    st.tuples(st.just("cancel"), st.integers(0, 30)),
    st.tuples(st.just("stall"), st.floats(0.0, 0.3)),
    st.tuples(st.just("idle"), st.floats(1.0, 12.0)),
)
POLICY = st.builds(AdmissionPolicy, target=st.sampled_from([None, 0.02, 0.05]), interval=st.sampled_from([0.02, 0.1]),
                   limit=st.sampled_from([None, 0.1, 0.3])).filter(lambda p: p.active)


def run_timers(probe: LoopLag, clock: list[float], until: float) -> None:
    """What the event loop does until ``until``: it runs the probe's timer at each due time
    (at once if one is overdue), and the clock moves on."""
    while probe._handle is not None and probe._due <= until:
        clock[0] = max(clock[0], probe._due)
        probe._tick()
    clock[0] = until


def ask(loop: Loop, twin: Admission, original: Admission, queued: bool, connection: str) -> str | None:
    """Both controls' answer to a call of ``connection`` arriving now, which must be the same."""
    answer = twin.refusal(loop, queued, connection)  # type: ignore[arg-type]
    assert answer == original.refusal(loop, queued, connection)  # type: ignore[arg-type]
    if answer is not None:  # the text kept: the connection finds its encoded reply by it
        assert any(text is answer for text in twin._texts.values())
    return answer


@settings(max_examples=300, deadline=None)
@given(policy=POLICY, steps=st.lists(STEP, min_size=10, max_size=150))
# A queue that stood, its pace measured, and arrivals expected to wait past the target with no
# limit set: refused for the expected wait in a standing queue (random examples seldom get there).
@example(policy=AdmissionPolicy(target=0.02, interval=0.02),
         steps=[("arrive", "a", 8), *[("start", 0, 0.03)] * 5, ("arrive", "a", 3), ("ask", True, "b")])
def test_both_judge_the_same_arrivals_alike(policy: AdmissionPolicy, steps: list[tuple[Any, ...]]) -> None:
    clock = [1.0]
    saved = module.perf_counter
    module.perf_counter = lambda: clock[0]  # what both read, at each call
    logging.disable(logging.WARNING)
    try:
        loop = Loop(clock)
        twin = Admission(policy, "op", "thread_pool(2)", Recorder())
        original = Original(policy, "op", "thread_pool(2)", Recorder())
        queues: tuple[list[Queued], list[Queued]] = ([], [])
        for step in steps:
            kind = step[0]
            if kind == "arrive":  # as a connection does: it asks, and a call not refused is queued
                for _ in range(step[2]):
                    if ask(loop, twin, original, True, step[1]) is not None:
                        continue
                    for control, queue in zip((twin, original), queues):
                        call = Queued(loop, clock[0], step[1])
                        if control.arrive(call):  # type: ignore[arg-type]
                            queue.append(call)
            elif kind in ("start", "cancel"):
                if queues[0]:
                    index = step[1] % len(queues[0])
                    for control, queue in zip((twin, original), queues):
                        call = queue.pop(index)
                        if kind == "start":
                            control.start(call)  # type: ignore[arg-type]
                        else:
                            call.done = True
                if kind == "start":  # the next call takes that long
                    run_timers(LoopLag.of(loop), clock, clock[0] + step[2])  # type: ignore[arg-type]
            elif kind == "ask":
                ask(loop, twin, original, step[1], step[2])
            elif kind == "stall":  # the loop is busy: its probe's timer runs late, after the next steps
                clock[0] += step[1]
            else:  # the loop runs its probe's timer when due, until then
                run_timers(LoopLag.of(loop), clock, clock[0] + step[1])  # type: ignore[arg-type]
            assert state(twin) == state(original), step
    finally:
        module.perf_counter = saved
        logging.disable(logging.NOTSET)


def test_a_subclass_runs_the_original() -> None:
    asked: list[bool] = []

    class Watching(Admission):
        __slots__ = ()

        def _arrival(self, now: float, lag: float, connection: Any) -> tuple[str, float] | None:
            asked.append(True)
            return super()._arrival(now, lag, connection)

    control = Watching(AdmissionPolicy(target=0.05), "op", "threaded", Recorder())
    control._pace = 0.01
    loop = Loop([0.0])
    assert control.refusal(loop, True, "a") is None  # type: ignore[arg-type]
    assert asked == [True]
