"""The compiled reads and writes of a connection (pyorb/aio/_cprotocol.pyx) agree with their Python originals.

Two connections, one running ``GIOPProtocol``'s compiled ``data_received``,
``_process``, ``send`` and ``_flush`` and one of a class that binds the
Python originals, are given the same steps: reads of GIOP messages cut at
any point (whole, partial, several in one read, undecodable), replies sent
from the handler while a batch is handled or from outside one, flushes,
a peer that stops reading, a connection that closes.  After each step both
must have made the same calls on their transport and handler and hold the
same state.  They run where the compiled accelerator is in use and are
skipped in a pure-Python process.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyorb
from pyorb import _accelerator
from pyorb.aio import protocol
from pyorb.aio.protocol import GIOPProtocol
from pyorb.bidir import BidirConnection
from pyorb.client.connection import ClientConnection
from pyorb.config import Config
from pyorb.giop.connection import Role
from pyorb.giop.fast12 import encode_request_12
from pyorb.giop.messages import Request

MANY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
METHODS = ("data_received", "_process", "send", "_flush")
ORIGINALS: dict[str, Any] = {name: _accelerator.original(f"pyorb.aio.protocol.GIOPProtocol.{name}")
                             for name in METHODS}
LIMIT = 1024  # the smallest write_buffer_limit: a few replies reach it
# The state compared after each step (the timers by whether they are set).
STATE = ("_closing", "is_open", "_flush_pending", "_wrote", "_out", "_out_bytes", "reassembly_bytes", "write_paused",
         "_backlog", "_lost")


def compiled() -> Any:
    """The compiled module; the tests that need it are skipped in a pure-Python process."""
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    from pyorb.aio import _cprotocol
    return _cprotocol


class Original(GIOPProtocol):
    """A connection that runs the Python originals (a class of its own: the twins hand it to them)."""

    __slots__ = ()
    data_received = ORIGINALS["data_received"]
    _process = ORIGINALS["_process"]
    send = ORIGINALS["send"]
    _flush = ORIGINALS["_flush"]


class Transport:
    """Records what a connection asks of its transport."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.closing = False

    def write(self, data: bytes) -> None:
        self.log.append(("write", bytes(data)))

    def pause_reading(self) -> None:
        self.log.append(("pause",))

    def resume_reading(self) -> None:
        self.log.append(("resume",))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.log.append(("close",))
        self.closing = True

    def abort(self) -> None:
        self.log.append(("abort",))
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def get_write_buffer_size(self) -> int:
        return 0


class Handler:
    """Records the messages and events; answers each request with ``reply_size`` bytes while it is handled."""

    def __init__(self, log: list[Any], reply_sizes: list[int]) -> None:
        self.log = log
        self.reply_sizes = reply_sizes
        self.conn: GIOPProtocol | None = None

    def message_received(self, message: Any) -> None:
        self.log.append(("message", type(message).__name__, getattr(message, "request_id", None)))
        if type(message) is Request and self.conn is not None and self.reply_sizes:
            size = self.reply_sizes.pop(0)
            self.log.append(("sent", self.conn.send(bytes([message.request_id & 0xFF]) * size)))

    def connected(self) -> None:
        self.log.append(("connected",))

    def closed(self, exc: BaseException | None) -> None:
        self.log.append(("closed", type(exc).__name__))

    def writing_paused(self) -> None:
        self.log.append(("writing paused",))

    def writing_resumed(self) -> None:
        self.log.append(("writing resumed",))

    def output_held(self) -> None:
        self.log.append(("output held",))

    def reassembly_changed(self, delta: int) -> None:
        self.log.append(("reassembly", delta))


def state(conn: GIOPProtocol) -> tuple[Any, ...]:
    return (tuple(repr(getattr(conn, name)) for name in STATE),
            conn._read_timer is None, conn._train_timer is None, conn.reading.closed)


def request(rid: int, size: int) -> bytes:
    return encode_request_12(rid, 3, b"key", "ping", b"\0" * size, True)


STEP = st.one_of(
    st.tuples(st.just("read"), st.lists(st.tuples(st.integers(1, 200), st.integers(0, 40)), max_size=70),
              st.integers(0, 3), st.booleans()),
    st.tuples(st.just("send"), st.integers(1, 900)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("process")),
    st.tuples(st.just("pause writing"), st.booleans()),
    st.tuples(st.just("hold reading"), st.booleans()),
    st.tuples(st.just("close")),
)


def run(conn: GIOPProtocol, methods: dict[str, Any], steps: list[Any], reply_sizes: list[int],
        log: list[Any]) -> list[Any]:
    """``steps`` on ``conn`` through ``methods``; the state after each, beside ``log``."""
    seen = []
    pending = b""  # the rest of a read cut short, for the next read
    for step in steps:
        kind = step[0]
        if kind == "read":
            _, calls, cut, garbage = step
            data = pending + b"".join(request(rid, size) for rid, size in calls)
            if garbage:
                data += b"GIOX" + b"\0" * 8
            if cut and data:
                data, pending = data[: len(data) * cut // 4], data[len(data) * cut // 4:]
            else:
                pending = b""
            if data:  # asyncio never passes an empty read (the end of input is eof_received)
                methods["data_received"](conn, data)
        elif kind == "send":
            log.append(("sent", methods["send"](conn, b"s" * step[1])))
        elif kind == "flush":
            methods["_flush"](conn)
        elif kind == "process":
            methods["_process"](conn)
        elif kind == "pause writing":
            conn.write_paused = step[1]
        elif kind == "hold reading":
            (conn.reading.hold if step[1] else conn.reading.release)("test")
        else:
            conn.close()
        seen.append((len(log), state(conn)))
    del reply_sizes[:]
    return seen


@given(steps=st.lists(STEP, max_size=12), reply_sizes=st.lists(st.integers(0, 700), max_size=200),
       data=st.data())
@MANY
def test_the_compiled_reads_and_writes_do_what_the_python_ones_do(steps: list[Any], reply_sizes: list[int],
                                                                 data: st.DataObject) -> None:
    twins = compiled()
    outcomes = []
    for cls, methods in ((GIOPProtocol, {name: getattr(twins, name) for name in METHODS}), (Original, ORIGINALS)):
        async def go(cls: type[GIOPProtocol] = cls, methods: dict[str, Any] = methods) -> Any:
            log: list[Any] = []
            handler = Handler(log, list(reply_sizes))
            conn = cls(Role.SERVER, Config(write_buffer_limit=LIMIT, read_timeout=60.0), handler)
            handler.conn = conn
            conn.connection_made(Transport(log))  # type: ignore[arg-type]
            assert twins.runs_compiled(conn) is (cls is GIOPProtocol)
            try:
                seen = run(conn, methods, steps, handler.reply_sizes, log)
            finally:
                for timer in (conn._read_timer, conn._train_timer, conn._write_timer):
                    if timer is not None:
                        timer.cancel()
            return log, seen
        outcomes.append(asyncio.run(go()))
    assert outcomes[0] == outcomes[1]


def test_a_batch_that_must_yield_yields_the_same_way() -> None:
    twins = compiled()
    logs = []
    for cls, methods in ((GIOPProtocol, {name: getattr(twins, name) for name in METHODS}), (Original, ORIGINALS)):
        async def go(cls: type[GIOPProtocol] = cls, methods: dict[str, Any] = methods) -> Any:
            log: list[Any] = []
            handler = Handler(log, [8] * (protocol.BATCH * 3))
            conn = cls(Role.SERVER, Config(write_buffer_limit=LIMIT), handler)
            handler.conn = conn
            conn.connection_made(Transport(log))  # type: ignore[arg-type]
            methods["data_received"](conn, b"".join(request(rid, 0) for rid in range(protocol.BATCH * 2 + 5)))
            log.append(("after the read", state(conn)))
            for _ in range(4):
                await asyncio.sleep(0)  # the next turns
            log.append(("after the turns", state(conn)))
            return log
        logs.append(asyncio.run(go()))
    assert logs[0] == logs[1]
    assert ("pause",) in logs[0] and ("resume",) in logs[0]
    assert sum(1 for entry in logs[0] if entry[0] == "message") == protocol.BATCH * 2 + 5


def test_connections_of_pyorbs_own_classes_run_compiled_and_others_the_originals() -> None:
    twins = compiled()

    class Overrides(GIOPProtocol):
        __slots__ = ()

        def _flush(self) -> None:  # a method of its own: the twins must not skip it
            GIOPProtocol._flush(self)

    class Hides(GIOPProtocol):
        __slots__ = ()
        _wrote = property(lambda self: False)

    async def go() -> None:
        config = Config()
        assert twins.runs_compiled(GIOPProtocol(Role.SERVER, config))
        assert twins.runs_compiled(ClientConnection(config, lambda conn: None))
        assert twins.runs_compiled(BidirConnection.__new__(BidirConnection))
        assert not twins.runs_compiled(Overrides(Role.SERVER, config))
        assert not twins.runs_compiled(Hides.__new__(Hides))
    asyncio.run(go())
    for name in METHODS:
        assert getattr(GIOPProtocol, name) is getattr(twins, name)
        assert getattr(ClientConnection, name) is getattr(twins, name)  # own_code passes a twin through
