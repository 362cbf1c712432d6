"""The compiled request handling (pyorb/server/_crequests.pyx) agrees with its Python original.

Two servers, activated alike, each with one connection: the first runs
``RequestHandler.message_received``'s compiled twin, the second a handler
class bound to the Python original.  Both are handed the same messages:
requests for servants answered inline, through a call with the server's
deadline, on a thread pool, under a default servant and for no servant; for
known and unknown operations, with readable and unreadable arguments, in
every GIOP version and byte order, with and without service contexts (the
client's deadline among them), with an addressing mode the server asks
again about, oneway or not, on a connection of a readable char code set or
not, with server interceptors or without; LocateRequests and
CancelRequests among them.  Both must send the same replies, make the same
servant calls and count the same statistics.  They run where the compiled
accelerator is in use and are skipped in a pure-Python process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import struct
import sys
import threading
import time
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omniORB import CORBA

import pyorb
from pyorb import _accelerator
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8
from pyorb.giop.messages import GIOP_1_0, GIOP_1_1, GIOP_1_2, CancelRequest, LocateRequest, Request, ServiceContext
from pyorb.giop.policies import deadline_context
from pyorb.interceptors import ServerInterceptor, ServerRequestInfo
from pyorb.server.requests import RequestHandler

MANY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])
ORIGINAL: Any = _accelerator.original("pyorb.server.requests.RequestHandler.message_received")

interop = pyorb.load_idl("idl/interop.idl")
Interop, Interop__POA = interop.Interop, interop.Interop__POA

KEYS = (b"inline", b"timed", b"pool", b"dflt/one", b"missing")
OPERATIONS = ("echo_long", "echo_string", "echo_blob", "directions", "raise_failure", "raise_undeclared",
              "raise_system", "nope", "_is_a", "_non_existent")
UTF16 = 0x00010109  # a char code set pyorb does not convert


class Calls(list):  # type: ignore[type-arg]
    """A servant's calls, each with what servant code sees of its request: its operation,
    its deadline (whether it has one), its object id, whether it runs on the loop's thread,
    and whether a thread it starts sees a request (it must not)."""

    def append(self, call: tuple[str, Any]) -> None:
        seen = pyorb.current()
        elsewhere: list[Any] = []
        thread = threading.Thread(target=lambda: elsewhere.append(pyorb.current()))
        thread.start()
        thread.join()
        super().append((*call, seen and seen.operation, seen is not None and seen.deadline is not None,
                        pyorb.current_object_id(), threading.get_ident() == threading.main_thread().ident,
                        elsewhere))


class Types(Interop__POA.Types):  # type: ignore[misc,valid-type]
    """Records each call; some arguments make replies that do not marshal or are over the size limit."""

    def __init__(self) -> None:
        self.calls = Calls()

    def echo_long(self, v: int) -> Any:
        self.calls.append(("echo_long", v))
        return {-1: "not a long", -2: 2**40}.get(v, v)

    def echo_string(self, v: str) -> str:
        self.calls.append(("echo_string", v))
        return v

    def echo_blob(self, v: bytes) -> bytes:
        self.calls.append(("echo_blob", v))
        return v * 1000  # 10 bytes in: over the 8 kB limit

    def directions(self, a: int, b: int) -> Any:
        self.calls.append(("directions", (a, b)))
        return (a + b, b + 1, 2 * a) if a >= 0 else (a, b)

    def raise_failure(self, code: int) -> None:
        self.calls.append(("raise_failure", code))
        raise Interop.Failure(code, "failed", [1, 2, 3])

    def raise_undeclared(self) -> None:
        self.calls.append(("raise_undeclared", None))
        raise RuntimeError("not in the IDL")

    def raise_system(self) -> None:
        self.calls.append(("raise_system", None))
        raise CORBA.BAD_PARAM(42, CORBA.COMPLETED_NO)


class Seen(ServerInterceptor):
    """Records what it sees; refuses a request whose operation is ``raise_system`` with NO_PERMISSION."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []

    def receive_request(self, info: ServerRequestInfo) -> None:
        self.seen.append(("receive", info.operation, None))
        if info.operation == "raise_system":
            raise CORBA.NO_PERMISSION(7, CORBA.COMPLETED_NO)

    def send_reply(self, info: ServerRequestInfo, exception: BaseException | None) -> None:
        self.seen.append(("send", info.operation, None if exception is None else type(exception).__name__))


class Original(RequestHandler):
    """A handler that runs the Python original."""

    __slots__ = ()
    message_received = ORIGINAL


class Transport:
    """Keeps what a connection writes."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.written += chunk

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False


def messages(data: bytes) -> list[bytes]:
    """The GIOP messages in ``data``, each whole."""
    out, at = [], 0
    while at + 12 <= len(data):
        size = struct.unpack_from("<I" if data[at + 6] & 1 else ">I", data, at + 8)[0]
        out.append(bytes(data[at:at + 12 + size]))
        at += 12 + size
    assert at == len(data)
    return out


class Side:
    """One server and one connection to it, whose handler is of ``handler``'s class."""

    def __init__(self, server: pyorb.Server, handler: type, interceptor: Seen) -> None:
        self.server = server
        self.servants = {key: Types() for key in KEYS[:4]}
        server.activate(self.servants[b"inline"], b"inline")
        server.activate(self.servants[b"timed"], b"timed", deadline=30.0)
        server.activate(self.servants[b"pool"], b"pool", strategy="thread_pool(2)")
        server.activate_default(self.servants[b"dflt/one"], b"dflt/")
        self.interceptor = interceptor
        self.transport = Transport()
        self.wire = server.new_connection()
        self.wire.connection_made(self.transport)  # type: ignore[arg-type]
        self.handler: Any = self.wire.handler
        self.handler.__class__ = handler
        self.sent = 0

    def reset(self, char_set: int, intercepted: bool) -> list[tuple[int, ...]]:
        """Ready for the next messages, on a connection of ``char_set``; the counts so far."""
        self.handler.core.char_set = char_set
        self.handler.interceptors = (self.interceptor,) if intercepted else ()
        self.transport.written.clear()
        for servant in self.servants.values():
            servant.calls.clear()
        self.interceptor.seen.clear()
        return self.counts()

    def replies(self) -> list[bytes]:
        """The replies sent, the port of each server in the IORs they carry made the same."""
        return sorted(re.sub(rb"127\.0\.0\.1\x00..", b"127.0.0.1\x00PP", reply, flags=re.DOTALL)
                      for reply in messages(bytes(self.transport.written)))

    def calls(self) -> list[Any]:
        return [sorted(servant.calls, key=repr) for servant in self.servants.values()]

    def counted_since(self, before: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        return [tuple(now - then for now, then in zip(row, old)) for row, old in zip(self.counts(), before)]

    def counts(self) -> list[tuple[int, ...]]:
        rows: list[tuple[int, ...]] = []
        for key in KEYS[:3]:
            binding = self.server.adapter.lookup(key)
            assert binding is not None
            for op in sorted(binding.routes):
                s = binding.routes[op].stats
                rows.append((s.started, s.served, s.failed, s.dropped, s.rejected, s.shed, s.expired))
        return rows


@pytest.fixture(scope="module")
def sides() -> Iterator[tuple[asyncio.AbstractEventLoop, Side, Side]]:
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    assert RequestHandler.message_received is not ORIGINAL, "the twin is not in place"
    loop = asyncio.new_event_loop()
    config = pyorb.Config(max_message_size=8192)
    servers = [pyorb.Server(config=config, interceptors=[Seen()]) for _ in range(2)]

    async def start() -> tuple[Side, Side]:
        for server in servers:
            await server.start()
        return (Side(servers[0], RequestHandler, servers[0].adapter.interceptors[0]),
                Side(servers[1], Original, servers[1].adapter.interceptors[0]))

    made: tuple[Side, ...] = ()
    try:
        made = loop.run_until_complete(start())
        yield (loop, *made)
    finally:
        for side in made:
            side.wire.connection_lost(None)  # a transport of our own: nothing to drain
        for server in servers:
            loop.run_until_complete(asyncio.wait_for(server.close(grace=1.0), 30.0))
        loop.close()


def body(op: str, draw: Any, little: bool, char_set: int) -> bytes:
    """Arguments of ``op`` that read (or, one time in four, octets that may not)."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.binary(max_size=12))
    fmt = "<" if little else ">"
    if op in ("echo_long", "raise_failure"):
        return struct.pack(fmt + "i", draw(st.sampled_from([7, -1, -2, 0, 2**31 - 1])))
    if op == "directions":
        return struct.pack(fmt + "ii", draw(st.integers(-5, 5)), draw(st.integers(-5, 5)))
    if op == "echo_string":
        text = draw(st.sampled_from(["", "abc", "é", "日本"]))
        raw = text.encode("utf-8" if char_set == CS_UTF8 else "latin-1", "replace")
        return struct.pack(fmt + "I", len(raw) + 1) + raw + b"\0"
    if op == "echo_blob":
        blob = draw(st.binary(max_size=10))
        return struct.pack(fmt + "I", len(blob)) + blob
    if op == "_is_a":
        rid = draw(st.sampled_from([b"IDL:Interop/Types:1.0", b"IDL:omg.org/CORBA/Object:1.0", b"IDL:x:1.0"]))
        return struct.pack(fmt + "I", len(rid) + 1) + rid + b"\0"
    return b""


def readable(op: str, little: bool, char_set: int) -> bytes:
    """Arguments of ``op`` that read."""
    fmt = "<" if little else ">"
    if op in ("echo_long", "raise_failure"):
        return struct.pack(fmt + "i", 7)
    if op == "directions":
        return struct.pack(fmt + "ii", 2, 3)
    if op in ("echo_string", "_is_a"):
        text = b"IDL:Interop/Types:1.0" if op == "_is_a" else "é".encode("utf-8" if char_set == CS_UTF8 else "latin-1")
        return struct.pack(fmt + "I", len(text) + 1) + text + b"\0"
    if op == "echo_blob":
        return struct.pack(fmt + "I", 2) + b"ab"
    return b""


@st.composite
def message(draw: Any) -> Any:
    kind = draw(st.sampled_from(["request"] * 8 + ["locate", "cancel"]))
    rid = draw(st.integers(0, 2**32 - 1))
    little = draw(st.booleans())
    key = draw(st.sampled_from(KEYS))
    if kind == "locate":
        return LocateRequest(rid, key, GIOP_1_2, little)
    if kind == "cancel":
        return CancelRequest(rid, GIOP_1_2, little)
    op = draw(st.sampled_from(OPERATIONS))
    version = draw(st.sampled_from([GIOP_1_2] * 4 + [GIOP_1_0, GIOP_1_1]))
    contexts: Any = draw(st.sampled_from([
        (), (), (), (ServiceContext(0x50590001, b"\x01\x02"),), "deadline"]))
    if contexts == "deadline":  # (an expired one's reply says by how long: it cannot compare)
        contexts = (deadline_context(30.0, time.time(), little),)
    flags = draw(st.sampled_from([3, 3, 3, 0]))
    addressing = draw(st.sampled_from([0] * 9 + [1])) if version == GIOP_1_2 else 0  # a GIOP 1.2 field
    return ("request", rid, flags, key, op, little, version, contexts, addressing)


def build(m: Any, draw: Any, char_set: int) -> Any:
    if not isinstance(m, tuple):
        return m
    _, rid, flags, key, op, little, version, contexts, addressing = m
    return Request(rid, flags, key, op, body(op, draw, little, char_set), contexts, version, little,
                   addressing_disposition=addressing)


async def settle(sides: tuple[Side, ...]) -> None:
    """Until neither connection has a call in flight (thread pool replies come back through the loop)."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        for _ in range(5):
            await asyncio.sleep(0)
        if all(side.handler.in_flight == 0 for side in sides):
            for _ in range(5):
                await asyncio.sleep(0)
            return
        await asyncio.sleep(0.002)
    raise AssertionError("calls still in flight after 10 s")


def hand(loop: asyncio.AbstractEventLoop, pair: list[Side], msgs: list[Any]) -> None:
    """Each side's handler is handed ``msgs``, and its calls are let settle."""
    async def run(side: Side) -> None:
        # No forced switch of the interpreter lock while the messages are handed in: a pool
        # thread must not start a call before a CancelRequest handed in after it reaches
        # the handler on one side and not on the other.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(60.0)
        try:
            for msg in msgs:
                side.handler.message_received(msg)
        finally:
            sys.setswitchinterval(interval)
        await settle((side,))

    for side in pair:
        loop.run_until_complete(run(side))


def assert_alike(twin: Side, original: Side, before: list[list[tuple[int, ...]]]) -> None:
    assert twin.replies() == original.replies()
    assert twin.calls() == original.calls()
    assert sorted(twin.interceptor.seen, key=repr) == sorted(original.interceptor.seen, key=repr)
    assert twin.counted_since(before[0]) == original.counted_since(before[1])


@MANY
@given(data=st.data(), plan=st.lists(message(), min_size=1, max_size=12),
       char_set=st.sampled_from([CS_UTF8, CS_UTF8, CS_ISO8859_1, UTF16]), intercepted=st.booleans())
def test_both_answer_the_same_requests_alike(sides: Any, data: Any, plan: list[Any], char_set: int,
                                              intercepted: bool) -> None:
    loop, *pair = sides
    msgs = [build(m, data.draw, char_set) for m in plan]
    before = [side.reset(char_set, intercepted) for side in pair]
    hand(loop, pair, msgs)
    twin, original = pair
    assert_alike(twin, original, before)
    assert twin.handler._version == original.handler._version


@pytest.mark.parametrize("char_set", [CS_UTF8, CS_ISO8859_1, UTF16])
@pytest.mark.parametrize("intercepted", [False, True])
def test_every_kind_of_request_alike(sides: Any, char_set: int, intercepted: bool) -> None:
    """Each key, operation, GIOP version, byte order, reply wanted or not and kind of service
    contexts once, with readable arguments, and once more in ProfileAddr addressing."""
    loop, *pair = sides
    rng = iter(range(1, 10**6))
    msgs = []
    for key in KEYS:
        for op in OPERATIONS:
            for version in (GIOP_1_0, GIOP_1_1, GIOP_1_2):
                for little in (True, False):
                    for flags in (3, 0):
                        for contexts in ((), (ServiceContext(0x50590001, b"\x01\x02"),),
                                         (deadline_context(30.0, time.time(), little),)):
                            args = readable(op, little, char_set)
                            msgs.append(Request(next(rng), flags, key, op, args, contexts, version, little))
                            if version == GIOP_1_2:
                                msgs.append(Request(next(rng), flags, key, op, args, contexts, version, little,
                                                    addressing_disposition=1))
    before = [side.reset(char_set, intercepted) for side in pair]
    hand(loop, pair, msgs)
    twin, original = pair
    assert_alike(twin, original, before)
    assert len(twin.replies()) > len(msgs) // 3  # most were answered


@pytest.mark.parametrize("key", [b"inline", b"timed", b"dflt/one"])
def test_a_request_whose_deadline_passed_is_answered_timeout_unrun(sides: Any, key: bytes) -> None:
    """The client left the request no time: both answer TIMEOUT and
    run nothing.  (Its reply says by how long, so the replies are compared by kind.)"""
    loop, *pair = sides
    before = [side.reset(CS_UTF8, False) for side in pair]
    msgs = [Request(900 + i, 3, key, "echo_long", struct.pack("<i", 7),
                    (deadline_context(0.0, time.time(), True),)) for i in range(3)]  # none left on arrival
    hand(loop, pair, msgs)
    twin, original = pair
    for side in pair:
        replies = side.replies()
        assert len(replies) == 3 and all(b"IDL:omg.org/CORBA/TIMEOUT:1.0" in reply for reply in replies)
        assert side.calls() == [[]] * 4
    assert twin.counted_since(before[0]) == original.counted_since(before[1])


def test_a_handler_class_that_changes_what_the_twin_calls_runs_the_original(sides: Any) -> None:
    """A subclass overriding ``serve`` (or hiding a slot it reads) gets the original's steps whole."""
    from pyorb.server import _crequests  # type: ignore[attr-defined]

    loop, twin, _ = sides
    served: list[int] = []

    class Overriding(RequestHandler):
        __slots__ = ()

        def serve(self, req: Request, *args: Any, **kwargs: Any) -> bool:
            served.append(req.request_id)
            return RequestHandler.serve(self, req, *args, **kwargs)

    class Hiding(RequestHandler):
        __slots__ = ()

        @property  # type: ignore[override,misc]
        def interceptors(self) -> tuple[Any, ...]:
            return ()

    twin.handler.__class__ = Overriding
    try:
        twin.reset(CS_UTF8, False)  # whatever the last example left
        twin.handler.message_received(Request(5, 3, b"inline", "echo_long", struct.pack("<i", 7)))
        loop.run_until_complete(settle((twin,)))
        assert served == [5], "the subclass's serve was skipped"
        assert len(messages(bytes(twin.transport.written))) == 1
    finally:
        twin.handler.__class__ = RequestHandler
    assert _crequests.serves(RequestHandler) and not _crequests.serves(Overriding) \
        and not _crequests.serves(Hiding)


@pytest.mark.parametrize("intercepted", [False, True])
def test_requests_admission_control_refuses_are_answered_alike(sides: Any, intercepted: bool) -> None:
    """A route whose admission control refuses every call: both answer each request
    TRANSIENT with the control's text, unrun and unread, in every GIOP version and byte
    order, with a reply wanted or not, and count them alike (the twin sends the reply
    encoded for the first refusal again, with each request's id)."""
    from pyorb.server.admission import Admission, AdmissionPolicy
    from pyorb.server.call.stats import Recorder

    class Refusing(Admission):
        __slots__ = ()

        def refusal(self, loop: Any, queued: bool, connection: Any) -> str | None:
            return "overloaded: refusing every call"

    loop, *pair = sides
    for side in pair:
        side.server.activate(Types(), b"shed", strategy="thread_pool(2)", admission=AdmissionPolicy(target=0.05))
        binding = side.server.adapter.lookup(b"shed")
        assert binding is not None
        for op, route in binding.routes.items():
            binding.routes[op] = dataclasses.replace(
                route, admission=Refusing(AdmissionPolicy(target=0.05), op, "thread_pool(2)", Recorder()))
    try:
        msgs = [Request(7000 + i, flags, b"shed", op, readable(op, little, CS_UTF8), contexts, version, little)
                for i, (version, little, flags, contexts, op) in enumerate(
                    (version, little, flags, contexts, op)
                    for version in (GIOP_1_0, GIOP_1_1, GIOP_1_2) for little in (True, False) for flags in (3, 0)
                    for contexts in ((), (deadline_context(30.0, time.time(), little),))
                    for op in ("echo_long", "echo_string", "echo_long"))]
        before = [side.reset(CS_UTF8, intercepted) for side in pair]
        counted = [shed_counts(side) for side in pair]
        hand(loop, pair, msgs)
        twin, original = pair
        assert_alike(twin, original, before)
        for side, (started, failed) in zip(pair, counted):
            assert shed_counts(side) == (started + len(msgs), failed + len(msgs))
        replies = twin.replies()
        assert len(replies) == sum(1 for m in msgs if m.response_flags & 1)
        assert all(b"IDL:omg.org/CORBA/TRANSIENT:1.0" in reply for reply in replies)
        assert all(any(text.encode(form) in reply for form in ("utf-16-le", "utf-16-be"))
                   for reply in replies for text in ["refusing every call"])
        assert twin.calls() == [[]] * 4
    finally:
        for side in pair:
            side.server.deactivate(b"shed")


def shed_counts(side: Side) -> tuple[int, int]:
    """The calls started and failed of the servant under ``b"shed"``."""
    binding = side.server.adapter.lookup(b"shed")
    assert binding is not None
    stats = [route.stats for route in binding.routes.values()]
    return sum(s.started for s in stats), sum(s.failed for s in stats)
