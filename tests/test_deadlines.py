"""Deadlines that travel: the INVOCATION_POLICIES context, the server's expiry check,
``pyorb.current()``, and the remaining time passed on by servant code.

The protocol core is tested alone; the rest with servers on a loop thread,
clients on the test's loop, real sockets over loopback, and one chain of
three processes (client, AMH middle tier, sink).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omniORB import CORBA

import pyorb
from pyorb.idl import BENCH_IDL, bench_idl
from pyorb.client.deadlines import RESOLUTION
from benchmarks.deadline_chain import MARGIN, run_chain
from pyorb.giop import NEED_DATA, GIOPConnection, ProtocolError, Request, Role
from pyorb.giop.messages import SC_INVOCATION_POLICIES, ServiceContext
from pyorb.giop.policies import (
    RELATIVE_RT_TIMEOUT_POLICY_TYPE,
    REPLY_END_TIME_POLICY_TYPE,
    REQUEST_END_TIME_POLICY_TYPE,
    UTC_EPOCH_OFFSET,
    PolicyValue,
    Timeouts,
    UtcT,
    deadline_context,
    decode_policies,
    decode_time_t,
    decode_utc_t,
    encode_policies,
    encode_time_t,
    encode_utc_t,
    request_deadline,
    request_timeouts,
    timeouts,
)
from pyorb.interceptors import ClientRequestInfo
from pyorb.testing import LoopThread, kit

pytestmark = pytest.mark.integration  # opens sockets or starts processes

bench = bench_idl()
Bench, Bench__POA = bench.Bench, bench.Bench__POA
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
THREADS = ["thread_pool(1)", "threaded", "thread_per_connection", "locality(1)"]
STRATEGIES = ["reactive", "amh", "thread_pool(2)", "thread_per_request", "thread_per_connection", "threaded",
              "locality(2)", "adaptive"]


# -- the protocol core -------------------------------------------------------------------
@FAST
@given(st.floats(0, 1e6), st.floats(0, 4e9), st.booleans())
def test_a_deadline_context_is_what_the_general_encoder_makes(timeout: float, now: float, le: bool) -> None:
    ticks = int(timeout * 10_000_000)
    general = encode_policies([
        PolicyValue(RELATIVE_RT_TIMEOUT_POLICY_TYPE, encode_time_t(ticks, le)),
        PolicyValue(REQUEST_END_TIME_POLICY_TYPE, encode_utc_t(UtcT(UTC_EPOCH_OFFSET + int(now * 1e7) + ticks), le)),
    ], le)
    context = deadline_context(timeout, now, le)
    assert type(context) is ServiceContext
    assert context == ServiceContext(SC_INVOCATION_POLICIES, general)
    assert hash(context) == hash(ServiceContext(SC_INVOCATION_POLICIES, general))
    found = request_timeouts([ServiceContext(1, b"\x01\0\0\0"), context])
    assert found is not None and found.relative is not None and found.end_time is not None
    assert timeout - 1e-7 <= found.relative <= timeout  # rounded down: never later than the caller's
    assert found.end_time == pytest.approx(now + timeout, abs=1e-6)


@FAST
@given(st.floats(0, 1e6), st.floats(0, 4e9), st.booleans(), st.integers(0, 59), st.integers(0, 255))
def test_reading_a_deadline_context_agrees_with_the_general_decoder(timeout: float, now: float, le: bool, at: int,
                                                                   byte: int) -> None:
    """request_timeouts reads pyorb's own layout in one step; that, and the same bytes with
    any one byte changed, give what the general decoder gives (or it raises ProtocolError)."""
    data = deadline_context(timeout, now, le).data
    for variant in (data, data[:at] + bytes([byte]) + data[at + 1:]):
        try:
            general: Timeouts | None = timeouts(decode_policies(variant))
        except ProtocolError:
            general = None
        try:
            found = request_timeouts([ServiceContext(SC_INVOCATION_POLICIES, variant)])
        except ProtocolError:
            found = None
        assert found == general, variant.hex()


@FAST
@given(st.floats(0, 1e6), st.floats(0, 4e9), st.booleans(), st.integers(0, 63), st.integers(0, 255),
       st.floats(0, 1e6), st.floats(0, 4e9))
def test_a_request_deadline_is_the_deadline_of_its_timeouts(timeout: float, now: float, le: bool, at: int, byte: int,
                                                             arrived: float, posix: float) -> None:
    """request_deadline reads pyorb's own layout in one step; for it, and the same bytes with any
    one byte changed, it gives the deadline of what request_timeouts reads (or both raise
    ProtocolError), and reads the POSIX clock only for an end time without a relative timeout."""
    data = deadline_context(timeout, now, le).data
    for variant in (data, data[:at] + bytes([byte]) + data[at + 1:]):
        contexts = [ServiceContext(1, b"\x01\0\0\0"), ServiceContext(SC_INVOCATION_POLICIES, variant)]
        clock_reads: list[float] = []

        def posix_clock() -> float:
            clock_reads.append(posix)
            return posix

        try:
            found = request_timeouts(contexts)
            expected = None if found is None else found.deadline(arrived, posix)
            needs_clock = found is not None and found.relative is None and found.end_time is not None
        except ProtocolError:
            with pytest.raises(ProtocolError):
                request_deadline(contexts, arrived, posix_clock)
            continue
        assert request_deadline(contexts, arrived, posix_clock) == expected, variant.hex()
        assert len(clock_reads) == needs_clock
    assert request_deadline([ServiceContext(1, b"\x01\0\0\0")], arrived, posix_clock) is None


@FAST
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.binary(max_size=40)), max_size=8), st.booleans())
def test_policy_values_round_trip_in_both_byte_orders(values: list[tuple[int, bytes]], le: bool) -> None:
    policies = tuple(PolicyValue(t, v) for t, v in values)
    assert decode_policies(encode_policies(policies, le)) == policies


@FAST
@given(st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**16 - 1), st.integers(-2**15, 2**15 - 1),
       st.booleans())
def test_time_values_round_trip_in_both_byte_orders(time_: int, lo: int, hi: int, tdf: int, le: bool) -> None:
    assert decode_utc_t(encode_utc_t(UtcT(time_, lo, hi, tdf), le)) == UtcT(time_, lo, hi, tdf)
    assert decode_time_t(encode_time_t(time_, le)) == time_


def test_an_end_time_as_jacorb_sends_it() -> None:
    """Big-endian, a ReplyEndTime and a RequestEndTime only (JacORB turns its relative timeouts into these),
    and a policy pyorb does not know: the earliest end time counts, the unknown policy is skipped."""
    end = UtcT.from_posix(1_800_000_000.5)
    utc = bytes([0, 0, 0, 0, 0, 0, 0, 0]) + end.time.to_bytes(8, "big") + bytes(8)  # flag, 7 pad, time, 0s
    later = bytes(8) + (end.time + 10).to_bytes(8, "big") + bytes(8)
    data = (bytes([0, 0, 0, 0]) + (3).to_bytes(4, "big")
            + (99).to_bytes(4, "big") + (1).to_bytes(4, "big") + b"\0" + bytes(3)
            + REPLY_END_TIME_POLICY_TYPE.to_bytes(4, "big") + (24).to_bytes(4, "big") + later
            + REQUEST_END_TIME_POLICY_TYPE.to_bytes(4, "big") + (24).to_bytes(4, "big") + utc)
    found = request_timeouts([ServiceContext(SC_INVOCATION_POLICIES, data)])
    assert found == Timeouts(None, end.posix())
    assert end.posix() == pytest.approx(1_800_000_000.5)
    assert found.deadline(100.0, 1_800_000_000.0) == pytest.approx(100.5)


def test_the_policy_types_are_those_of_the_messaging_idl() -> None:
    """Messaging.idl numbers RequestStartTime 27 and RequestEndTime 28: a deadline sent as
    type 27 is a time before which a receiver that honours it (JacORB) does not run the call."""
    data = deadline_context(5.0, 1_800_000_000.0, False).data
    assert [policy.ptype for policy in decode_policies(data)] == [32, 28]
    start = UtcT.from_posix(1_800_000_000.0)
    only_start = encode_policies([PolicyValue(27, encode_utc_t(start, False))], False)
    assert request_timeouts([ServiceContext(SC_INVOCATION_POLICIES, only_start)]) == Timeouts(None, None)
    only_end = encode_policies([PolicyValue(28, encode_utc_t(start, False))], False)
    assert request_timeouts([ServiceContext(SC_INVOCATION_POLICIES, only_end)]) == Timeouts(None, start.posix())


def test_a_relative_timeout_wins_over_an_end_time() -> None:
    """An end time from a host whose clock is an hour ahead does not shorten the relative timeout."""
    both = Timeouts(relative=2.0, end_time=1_000.0 + 3600)
    assert both.deadline(50.0, 1_000.0) == 52.0
    assert Timeouts().deadline(50.0, 1_000.0) is None


@FAST
@given(st.binary(max_size=80))
def test_arbitrary_context_data_parses_or_raises_protocol_error(data: bytes) -> None:
    try:
        request_timeouts([ServiceContext(SC_INVOCATION_POLICIES, data)])
    except ProtocolError:
        pass


def test_every_truncation_of_a_context_raises_protocol_error() -> None:
    data = deadline_context(1.0, time.time()).data
    for end in range(len(data)):
        with pytest.raises(ProtocolError):
            request_timeouts([ServiceContext(SC_INVOCATION_POLICIES, data[:end])])


def test_a_huge_policy_count_is_refused_before_it_is_read() -> None:
    with pytest.raises(ProtocolError, match="policies"):
        decode_policies(b"\x01\0\0\0" + (2**32 - 1).to_bytes(4, "little"))


# -- the server --------------------------------------------------------------------------
class Policies:
    """A client interceptor that sends ``data`` as the INVOCATION_POLICIES context of every
    call: a deadline without the client's own timeout, so no CancelRequest follows it."""

    def __init__(self, data: bytes | None) -> None:
        self.data = data  # None: send none

    def send_request(self, info: ClientRequestInfo) -> None:
        if self.data is not None:
            info.request_contexts[SC_INVOCATION_POLICIES] = self.data

    def receive_reply(self, info: ClientRequestInfo, exception: BaseException | None) -> None:
        pass


class Tokens(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """Records the tokens whose servant code ran; a call with token 1 waits for ``release``."""

    def __init__(self) -> None:
        self.ran: list[int] = []
        self.release = threading.Event()

    def work(self, token: int) -> int:
        self.ran.append(token)
        if token == 1:
            assert self.release.wait(10)
        return token


class Recorder(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    """Records ``pyorb.current()`` per call."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, pyorb.RequestContext | None]] = []

    def work(self, token: int) -> int:
        self.seen.append((token, pyorb.current()))
        return token


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    with LoopThread() as lt:
        yield lt


@pytest.fixture
def serve(loop_thread: LoopThread) -> Iterator[Any]:
    """``serve(servant, strategy, **activation)``: a pyorb server on the loop thread serving
    ``servant`` (activated with ``activation``, e.g. ``deadline=``), closed after the test."""
    running: list[kit.RunningServer] = []

    def start(servant: Any, strategy: str = "thread_pool(2)", **activation: Any) -> kit.RunningServer:
        async def go() -> kit.RunningServer:
            server = pyorb.Server(strategy=strategy)
            await server.start()
            instance = servant() if isinstance(servant, type) else servant
            return kit.RunningServer(server, instance, server.activate(instance, **activation))

        started = loop_thread.run(go())
        running.append(started)
        return started

    yield start
    for server in running:
        loop_thread.run(server.server.close())


def _operation(server: kit.RunningServer) -> Any:
    (op,) = server.server.stats().operations
    return op


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_request_that_arrives_expired_is_answered_timeout_and_never_runs(serve: Any, strategy: str) -> None:
    running = serve(Tokens, strategy)
    expired = deadline_context(0.0, time.time()).data  # a RelativeRoundtripTimeout of 0
    async with pyorb.Client(interceptors=[Policies(expired)]) as late, pyorb.Client() as plain:
        with pytest.raises(CORBA.TIMEOUT) as info:
            await late.resolve(running.ior, Bench.Sink).work(7)
        assert await plain.resolve(running.ior, Bench.Sink).work(8) == 8
    assert info.value.completed == CORBA.COMPLETED_NO
    assert "expired" in str(info.value) and "before it started" in str(info.value)  # the server's words
    assert running.servant.ran == [8]
    op = _operation(running)
    assert (op.expired, op.served, op.in_flight) == (1, 2, 0)


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", THREADS)
async def test_calls_that_expire_while_queued_for_a_thread_never_start(serve: Any, strategy: str) -> None:
    """Five calls wait behind one that holds the only thread (on one connection, which
    thread_per_connection serves in order); their deadline (0.2 s) passes meanwhile.  Their
    client sends no CancelRequest: the server alone keeps them from running."""
    running = serve(Tokens, strategy)
    policies = Policies(None)
    async with pyorb.Client(interceptors=[policies]) as client:
        sink = client.resolve(running.ior, Bench.Sink)
        first = asyncio.ensure_future(sink.work(1))
        policies.data = deadline_context(0.2, time.time()).data
        queued = [asyncio.ensure_future(sink.work(token)) for token in range(10, 15)]
        await asyncio.sleep(0.5)
        running.servant.release.set()
        assert await first == 1
        outcomes = await asyncio.gather(*queued, return_exceptions=True)
    assert all(isinstance(o, CORBA.TIMEOUT) and o.completed == CORBA.COMPLETED_NO for o in outcomes), outcomes
    assert running.servant.ran == [1]
    assert _operation(running).expired == 5


class Styles:
    """One Bench::Sink per servant style, each recording ``pyorb.current()`` where its code runs."""

    @staticmethod
    def make(style: str, seen: list[pyorb.RequestContext | None]) -> Any:
        class Sync(Bench__POA.Sink):  # type: ignore[misc,valid-type]
            def work(self, token: int) -> int:
                seen.append(pyorb.current())
                return token

        class Coroutine(Bench__POA.Sink):  # type: ignore[misc,valid-type]
            async def work(self, token: int) -> int:
                await asyncio.sleep(0)
                seen.append(pyorb.current())
                return token

        class AMH(pyorb.amh_skeleton(Bench__POA.Sink)):  # type: ignore[misc]
            def work(self, rh: Any, token: int) -> None:
                seen.append(pyorb.current())

                def later() -> None:  # a loop callback the handler scheduled: it has the context too
                    seen.append(pyorb.current())
                    rh.work(token)

                try:
                    asyncio.get_running_loop().call_later(0.01, later)
                except RuntimeError:  # on a dispatcher thread: no loop here
                    later()

        return {"sync": Sync, "coroutine": Coroutine, "amh": AMH}[style]()


@pytest.mark.asyncio
@pytest.mark.parametrize("style", ["sync", "coroutine", "amh"])
@pytest.mark.parametrize("strategy", ["reactive", "thread_pool(2)"])
async def test_servant_code_sees_its_request_and_deadline(serve: Any, style: str, strategy: str) -> None:
    seen: list[pyorb.RequestContext | None] = []
    running = serve(Styles.make(style, seen), strategy)
    async with pyorb.Client() as client:
        sink = client.resolve(running.ior, Bench.Sink)
        sent = time.monotonic()
        assert await sink.work(3, timeout=5.0) == 3
        timed = list(seen)
        seen.clear()
        assert await sink.work(4) == 4
    assert pyorb.current() is None  # outside servant code
    assert timed and all(c is not None for c in timed)
    for context in timed:
        assert context is not None and context.deadline is not None
        assert (context.operation, context.object_key) == ("work", running.key)
        assert sent + 4.0 < context.deadline <= sent + 5.0 + 0.05  # the client's 5 s, measured from arrival
    assert seen and all(c is not None and c.deadline is None and c.remaining() is None for c in seen)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [(1, 0), (1, 1), (1, 2)], ids=["giop1.0", "giop1.1", "giop1.2"])
@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
async def test_every_giop_version_and_byte_order_carries_the_deadline(
    serve: Any, version: tuple[int, int], little_endian: bool
) -> None:
    running = serve(Recorder, "reactive")
    async with pyorb.Client(pyorb.Config(giop_version=version, little_endian=little_endian)) as client:
        sent = time.monotonic()
        assert await client.resolve(running.ior, Bench.Sink).work(9, timeout=3.0) == 9
    ((_, context),) = running.servant.seen
    assert context is not None and context.deadline is not None
    assert sent + 2.0 < context.deadline <= sent + 3.0 + 0.05


@pytest.mark.asyncio
@pytest.mark.parametrize(("client_timeout", "server_deadline", "bound"), [(1.0, 30.0, 1.0), (30.0, 0.5, 0.5)])
async def test_the_tighter_of_the_clients_and_the_servers_deadline_wins(
    serve: Any, client_timeout: float, server_deadline: float, bound: float
) -> None:
    running = serve(Recorder, "thread_pool(2)", deadline=server_deadline)
    async with pyorb.Client() as client:
        sent = time.monotonic()
        assert await client.resolve(running.ior, Bench.Sink).work(2, timeout=client_timeout) == 2
    ((_, context),) = running.servant.seen
    assert context is not None and context.deadline is not None
    assert sent + bound - 0.5 < context.deadline <= sent + bound + 0.05


@pytest.mark.asyncio
async def test_a_malformed_policies_context_is_ignored_and_the_call_runs(serve: Any) -> None:
    running = serve(Recorder, "reactive")
    async with pyorb.Client(interceptors=[Policies(b"\x01\0\0\0\xff\xff")]) as client:
        assert await client.resolve(running.ior, Bench.Sink).work(5) == 5
    ((_, context),) = running.servant.seen
    assert context is not None and context.deadline is None
    assert _operation(running).expired == 0


def test_the_blocking_client_sends_its_time_left(serve: Any) -> None:
    running = serve(Recorder, "thread_pool(2)")
    with pyorb.BlockingClient() as client:
        sent = time.monotonic()
        assert client.resolve(running.ior, Bench.Sink).work(6, timeout=3.0) == 6
    ((_, context),) = running.servant.seen
    assert context is not None and context.deadline is not None
    assert sent + 2.0 < context.deadline <= sent + 3.0 + 0.05


# -- servant code passes the remaining time on ---------------------------------------------
def middle(style: str, sink: str, client: pyorb.Client, blocking: pyorb.BlockingClient, **call: Any) -> Any:
    """A middle tier forwarding work(token) to ``sink``: a coroutine, an AMH method (the AMI
    reply completes the handler), or synchronous code on a dispatcher thread (blocking client)."""

    class Coroutine(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        async def work(self, token: int) -> int:
            return await client.resolve(sink, Bench.Sink).work(token, **call)  # type: ignore[no-any-return]

    class AMH(pyorb.amh_skeleton(Bench__POA.Sink)):  # type: ignore[misc]
        def work(self, rh: Any, token: int) -> None:
            def reply(done: asyncio.Future[int]) -> None:
                failure = done.exception()
                rh.work(done.result()) if failure is None else rh.work_excep(failure)

            client.resolve(sink, Bench.Sink).work(token, **call).add_done_callback(reply)

    class Sync(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            return blocking.resolve(sink, Bench.Sink).work(token, **call)  # type: ignore[no-any-return]

    return {"coroutine": Coroutine, "amh": AMH, "sync": Sync}[style]()


@pytest.fixture
def onward(loop_thread: LoopThread) -> Iterator[Any]:
    """``onward(**config)``: an async client (used on the loop thread) and a blocking client, closed after."""
    made: list[tuple[pyorb.Client, pyorb.BlockingClient]] = []

    def make(**config: Any) -> tuple[pyorb.Client, pyorb.BlockingClient]:
        pair = pyorb.Client(pyorb.Config(**config)), pyorb.BlockingClient(pyorb.Config(**config))
        made.append(pair)
        return pair

    yield make
    for client, blocking in made:
        loop_thread.run(client.close())
        blocking.close()


MIDDLES = [("coroutine", "amh"), ("amh", "amh"), ("sync", "thread_pool(2)")]


async def _through(serve: Any, onward: Any, style: str, strategy: str, client_timeout: float,
                   config: dict[str, Any], **call: Any) -> tuple[float, pyorb.RequestContext | None]:
    """A client call with ``client_timeout`` through a middle tier of ``style`` (its onward
    client made with ``config``, its onward call with ``call``) to a recording sink: when
    it was sent (monotonic) and the sink's view of its request."""
    sink = serve(Recorder, "reactive")
    tier = serve(middle(style, sink.ior, *onward(**config), **call), strategy)
    async with pyorb.Client() as client:
        sent = time.monotonic()
        assert await client.resolve(tier.ior, Bench.Sink).work(2, timeout=client_timeout) == 2
    ((_, context),) = sink.servant.seen
    return sent, context


@pytest.mark.asyncio
@pytest.mark.parametrize(("style", "strategy"), MIDDLES)
async def test_a_call_from_servant_code_passes_the_remaining_time_on(
    serve: Any, onward: Any, style: str, strategy: str
) -> None:
    """The middle tier's own default is 30 s (as pyorb.servers.middle's); the client's 2 s wins."""
    sent, context = await _through(serve, onward, style, strategy, 2.0, {"call_timeout": 30.0})
    assert context is not None and context.deadline is not None
    assert sent + 1.5 < context.deadline <= sent + 2.0 + 0.05


@pytest.mark.asyncio
@pytest.mark.parametrize(("style", "strategy"), MIDDLES)
async def test_a_smaller_timeout_of_the_onward_call_wins(serve: Any, onward: Any, style: str, strategy: str) -> None:
    sent, context = await _through(serve, onward, style, strategy, 5.0, {}, timeout=0.5)
    answered = time.monotonic()
    assert context is not None and context.deadline is not None
    # The onward call was made between ``sent`` and ``answered`` (a loaded machine may
    # take a while to get there): its 0.5 s, not the client's 5 s, set the deadline.
    assert context.deadline <= answered + 0.5 + 0.05
    assert context.deadline < sent + 5.0 - 0.1


@pytest.mark.asyncio
@pytest.mark.parametrize(("style", "strategy"), MIDDLES)
async def test_propagation_can_be_turned_off(serve: Any, onward: Any, style: str, strategy: str) -> None:
    sent, context = await _through(serve, onward, style, strategy, 2.0,
                                   {"call_timeout": 30.0, "propagate_deadlines": False})
    assert context is not None and context.deadline is not None
    assert context.deadline > sent + 20.0  # the middle tier's own 30 s


@pytest.mark.asyncio
@pytest.mark.parametrize("style", ["coroutine", "sync"])
async def test_a_call_made_after_the_served_request_expired_fails_unsent(
    serve: Any, onward: Any, style: str
) -> None:
    """The middle tier works past its request's deadline, then calls onwards: that call fails
    at once with TIMEOUT, completed NO, and the sink never hears of it."""
    failures: list[tuple[Any, str]] = []  # not the exceptions: their tracebacks hold the server's frames
    sink = serve(Tokens, "reactive")
    client, blocking = onward()
    forward = middle(style, sink.ior, client, blocking)

    class Slow(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        async def work(self, token: int) -> int:
            await asyncio.sleep(0.4)
            try:
                return await forward.work(token)  # type: ignore[no-any-return]
            except CORBA.TIMEOUT as exc:
                failures.append((exc.completed, str(exc)))
                raise

    class SlowSync(Bench__POA.Sink):  # type: ignore[misc,valid-type]
        def work(self, token: int) -> int:
            time.sleep(0.4)
            try:
                return forward.work(token)  # type: ignore[no-any-return]
            except CORBA.TIMEOUT as exc:
                failures.append((exc.completed, str(exc)))
                raise

    tier = serve(Slow() if style == "coroutine" else SlowSync(), "thread_pool(2)")
    # A deadline of 0.2 s without the caller's own timeout: no CancelRequest stops the middle tier.
    async with pyorb.Client(interceptors=[Policies(deadline_context(0.2, time.time()).data)]) as caller:
        with pytest.raises(CORBA.TIMEOUT):
            await caller.resolve(tier.ior, Bench.Sink).work(3)
    ((completed, text),) = failures
    assert completed == CORBA.COMPLETED_NO and "not sent" in text
    assert sink.servant.ran == []


# -- three processes -------------------------------------------------------------------------
@pytest.mark.client_loop_only
def test_three_tiers_the_sink_never_starts_work_the_client_gave_up_on() -> None:
    """Client (timeout 1 s) -> AMH middle tier process (its own timeout 30 s) -> sink process
    under thread_pool(1), 0.25 s a call, twelve calls at once: the sink can do about four in
    time.  It must not start any call after its client gave up, and every call it starts
    carries a deadline no later than the client's."""
    run = run_chain(calls=12, timeout=1.0, delay=0.25)
    assert run.timed_out >= 4, run  # calls did wait in the sink's queue past the client's deadline
    assert run.started_late == [], run
    for start in run.starts:
        assert start["deadline"] is not None, start
        assert start["deadline"] <= run.deadlines[start["token"]] + MARGIN, start


# -- interoperability --------------------------------------------------------------------------
async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: bytearray | None) -> None:
    try:
        while data := await reader.read(65536):
            if seen is not None:
                seen += data
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


@pytest.mark.interop
@pytest.mark.client_loop_only
@pytest.mark.asyncio
@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
async def test_an_omniorb_server_answers_a_call_that_carries_its_deadline(little_endian: bool) -> None:
    """omniORB ignores service contexts it does not know: a timed pyorb call (its
    INVOCATION_POLICIES seen on the wire by a relay) is answered as any other."""
    omni = kit.omni_server_process(str(BENCH_IDL), "tests.peers.omni_deadlines:Sink", key="Sink")
    sent = bytearray()
    relays: list[asyncio.Task[Any]] = []

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        relays.append(asyncio.current_task())  # type: ignore[arg-type]
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", omni.port)
        await asyncio.gather(_pump(reader, up_writer, sent), _pump(up_reader, writer, None))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        async with pyorb.Client(pyorb.Config(little_endian=little_endian)) as client:
            sink = client.resolve(f"corbaloc::1.2@127.0.0.1:{port}/Sink", Bench.Sink)
            assert await sink.work(41, timeout=10.0) == 41
        await asyncio.wait_for(asyncio.gather(*relays), 10)  # the client closed: each relay ends
    finally:
        server.close()
        omni.stop()
    core = GIOPConnection(Role.SERVER)
    core.receive_data(bytes(sent))
    requests = [event for event in iter(core.next_event, NEED_DATA) if isinstance(event, Request)]
    (request,) = [r for r in requests if r.operation == "work"]
    found = request_timeouts(request.service_contexts)
    assert request.little_endian == little_endian
    assert found is not None and found.relative is not None
    assert 9.0 < found.relative <= 10.0 + RESOLUTION  # the client's own timer fires on a RESOLUTION grid
