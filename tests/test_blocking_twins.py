"""The compiled blocking call (pyorb/client/_cblocking.pyx) agrees with its Python original.

``_deadline_request`` must give the bytes of its original for any request
and deadline.  ``BlockingConnection.call`` is run, original and twin, on one
end of a socket pair whose other end a peer thread answers as scripted: a
reply, a late reply before it, a reply in two pieces, CloseConnection,
MessageError, bytes that are no GIOP message, the end of the connection, or
silence until the call's timeout.  For the same calls and script both must
return the same replies or raise the same exceptions (kind, completion,
text), send the same requests (ids, flags, key, operation, body, service
context ids; a timed-out call's CancelRequest) and leave the connection open
or closed alike.  The tests run whenever the extension is built, whichever
implementation the process uses (the originals are kept in
``pyorb._accelerator.TWINS``).
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omniORB import CORBA, tcInternal

import pyorb
from pyorb import _accelerator
from pyorb.client import blocking
from pyorb.client.calls import Endpoint, Route
from pyorb.config import Config
from pyorb.giop import GIOP_1_2, GIOPConnection, Role, ServiceContext
from pyorb.giop.codec import encode
from pyorb.giop.codesets import CS_UTF8, CS_UTF16
from pyorb.giop.cdr import CDRWriter
from pyorb.giop.ior import IOR, CodeSetComponent, CodeSetsInfo, build_ior
from pyorb.giop.messages import CLOSED, NEED_DATA, CancelRequest, CloseConnection, MessageError, Request
from pyorb.giop.fast12 import encode_reply_12
from pyorb.marshal import Operation
from pyorb.testing.waiting import wait_until_blocking

MANY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOME = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

STRING = (tcInternal.tv_string, 0)
PING = Operation("ping", ((tcInternal.tv_ulonglong,), (tcInternal.tv_ulonglong,), {}))
NOTIFY = Operation("notify", ((tcInternal.tv_ulonglong,), None, {}))  # oneway
SAY = Operation("say", ((STRING, tcInternal.tv_long), (STRING,), {}))
ARGUMENTS = {
    "ping": st.tuples(st.integers(-1, 2**64)),
    "notify": st.tuples(st.integers(0, 2**64 - 1)),
    "say": st.tuples(st.text(max_size=30), st.integers(-2**31 - 1, 2**31)),
}
ENDING = ("close", "message_error", "garbage", "eof", "silent", "forward")
SCRIPTS = ("reply", "reply", "late", "split", *ENDING[:-1])
TIMEOUT = 0.3  # the silent peer's call times out after this (generous on a loaded machine: nothing else waits on it)


def twin_call() -> Any:
    """The compiled call; the tests that need it are skipped in a pure-Python process."""
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    from pyorb.client import _cblocking

    return _cblocking.call


ORIGINAL_CALL: Any = _accelerator.original("pyorb.client.blocking.BlockingConnection.call")
ORIGINAL_REQUEST: Any = _accelerator.original("pyorb.client.blocking._deadline_request")


def test_the_compiled_call_is_in_place_with_the_accelerator() -> None:
    assert blocking.BlockingConnection.call is twin_call()
    assert ORIGINAL_CALL is not blocking.BlockingConnection.call


@MANY
@given(
    request_id=st.integers(0, 2**32 + 1),
    flags=st.sampled_from([0, 3, 256]),
    key=st.binary(max_size=13),
    operation=st.text(min_size=1, max_size=9),
    body=st.binary(max_size=19),
    little_endian=st.booleans(),
    timeout=st.one_of(st.floats(-5, 1e6), st.floats(allow_nan=True, allow_infinity=True), st.just(2.0**62)),
    now=st.one_of(st.floats(0, 4e9), st.floats(-1, 1e12)),
)
def test_the_compiled_deadline_request_gives_what_the_python_one_gives(
    request_id: int, flags: int, key: bytes, operation: str, body: bytes, little_endian: bool, timeout: float,
    now: float,
) -> None:
    if not pyorb.accelerated():
        pytest.skip("the compiled accelerator is not in use")
    from pyorb.client import _cblocking

    def outcome(f: Any) -> Any:
        try:
            return f(request_id, flags, key, operation, body, little_endian, timeout, now)
        except Exception as exc:  # the kind and message are what is compared
            return type(exc), str(exc)

    assert outcome(_cblocking._deadline_request) == outcome(ORIGINAL_REQUEST)


class Peer(threading.Thread):
    """The server end of a socket pair: reads requests and answers each as ``scripts`` says, in order."""

    def __init__(self, sock: socket.socket, scripts: list[str], seen: list[tuple[Any, ...]] | None = None,
                 forward: bytes = b"") -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.scripts = scripts  # popped as requests come: several peers may share one list
        self.core = GIOPConnection(Role.SERVER)
        self.seen: list[tuple[Any, ...]] = [] if seen is None else seen
        self.forward = forward  # a LOCATION_FORWARD reply's body (an IOR), for "forward"

    def run(self) -> None:
        try:
            self._serve()
        except OSError:
            pass  # the client closed its end
        finally:
            self.sock.close()

    def _events(self) -> Any:
        while True:
            event = self.core.next_event()
            if event is NEED_DATA:
                data = self.sock.recv(65536)
                if not data:
                    return
                self.core.receive_data(data)
            elif event is CLOSED:
                return
            else:
                yield event

    def _serve(self) -> None:
        for event in self._events():
            if type(event) is CancelRequest:
                self.seen.append(("cancel", event.request_id))
                continue
            if type(event) is not Request:
                self.seen.append((type(event).__name__,))
                continue
            self.seen.append((event.request_id, event.response_flags, event.object_key, event.operation, event.body,
                              tuple(c.context_id for c in event.service_contexts)))
            if event.response_flags == 0:
                continue  # oneway: its script is not used
            script = "reply" if event.object_key == b"forwarded" else self.scripts.pop(0)
            rid, body = event.request_id, event.body
            if script == "reply":
                self.sock.sendall(encode_reply_12(rid, 0, body, True))
            elif script == "late":
                self.sock.sendall(encode_reply_12(rid + 1, 0, b"", False) + encode_reply_12(rid, 0, body, False))
            elif script == "split":
                data = encode_reply_12(rid, 0, body, True)
                self.sock.sendall(data[:7])
                self.sock.sendall(data[7:])
            elif script == "forward":
                self.sock.sendall(encode_reply_12(rid, 3, self.forward, True))
            elif script == "close":
                self.sock.sendall(encode(CloseConnection()))
            elif script == "message_error":
                self.sock.sendall(encode(MessageError()))
            elif script == "garbage":
                self.sock.sendall(b"NOT GIOP AT ALL!")
            elif script == "eof":
                self.sock.shutdown(socket.SHUT_RDWR)
            # "silent": no answer; the client's CancelRequest is what comes next


def run_calls(call: Any, calls: list[tuple[Operation, tuple[Any, ...], str, bool]], little_endian: bool,
              contexts: tuple[Any, ...]) -> tuple[list[Any], list[Any], bool]:
    """What each call gave, what the peer received, and whether the connection stayed open."""
    ours, theirs = socket.socketpair()
    peer = Peer(theirs, [script for op, _a, script, _d in calls if not op.oneway])
    peer.start()
    conn = blocking.BlockingConnection(ours, Config(little_endian=little_endian, read_timeout=5.0))
    route = Route(Endpoint("127.0.0.1", 9), b"key\x00\x01", GIOP_1_2,
                  code_sets=CodeSetsInfo(CodeSetComponent(CS_UTF8), CodeSetComponent(CS_UTF16)))
    results: list[Any] = []
    try:
        for op, args, script, timed in calls:
            timeout = TIMEOUT if script == "silent" else 30.0 if timed else None
            deadline = None if timeout is None else blocking.time.monotonic() + timeout
            try:
                reply = call(conn, op, args, route, deadline, contexts, timeout)
                results.append(None if reply is None else (reply.request_id, reply.reply_status, reply.body))
            except CORBA.SystemException as exc:
                results.append((type(exc), exc.minor, exc.completed, str(exc)))
            except Exception as exc:
                results.append((type(exc), str(exc)))
            if script in ENDING and not op.oneway:
                break  # the connection is over: a later call would wait for the peer thread's end
        is_open = conn.is_open
    finally:
        conn.close()
        peer.join(10)
    return results, peer.seen, is_open


@st.composite
def a_call(draw: st.DrawFn) -> tuple[Operation, tuple[Any, ...], str, bool]:
    op = draw(st.sampled_from([PING, PING, SAY, NOTIFY]))
    return op, draw(ARGUMENTS[op.name]), draw(st.sampled_from(SCRIPTS)), draw(st.booleans())


@SOME
@given(calls=st.lists(a_call(), min_size=1, max_size=5), little_endian=st.booleans(),
       contexts=st.sampled_from([(), (ServiceContext(0x50595200, b"an interceptor's"),)]))
def test_the_compiled_call_gives_what_the_python_one_gives(
    calls: list[tuple[Operation, tuple[Any, ...], str, bool]], little_endian: bool, contexts: tuple[Any, ...],
) -> None:
    compiled = twin_call()
    # The first call chooses the code sets on the Python path in both: it is always a plain reply.
    calls = [(PING, (1,), "reply", False), *calls]
    expected = run_calls(ORIGINAL_CALL, calls, little_endian, contexts)
    got = run_calls(compiled, calls, little_endian, contexts)
    assert got == expected


def test_the_compiled_call_cancels_a_timed_out_request_and_says_so() -> None:
    """A call the peer never answers: TIMEOUT (completed MAYBE) from both, each followed by its CancelRequest."""
    compiled = twin_call()
    calls = [(PING, (1,), "reply", True), (PING, (2,), "silent", True)]
    for call in (ORIGINAL_CALL, compiled):
        results, seen, is_open = run_calls(call, calls, True, ())
        assert results[0] == (1, 0, (1).to_bytes(8, "little"))
        assert results[1][0] is CORBA.TIMEOUT and results[1][2] == CORBA.COMPLETED_MAYBE, results
        assert seen[-1] == ("cancel", 2) and is_open



ORIGINAL_CLIENT_CALL: Any = _accelerator.original("pyorb.client.blocking.BlockingClient._call")
# Arguments that marshal: every call sends its request (the server's count of them says when all arrived).
CORBA_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30)  # no NUL
VALID = {
    "ping": st.tuples(st.integers(0, 2**64 - 1)),
    "notify": st.tuples(st.integers(0, 2**64 - 1)),
    "say": st.tuples(CORBA_TEXT, st.integers(-2**31, 2**31 - 1)),
}
CLIENT_SCRIPTS = ("reply", "reply", "late", "split", "forward", "close", "eof", "garbage")


class Listener(threading.Thread):
    """A loopback server: a :class:`Peer` per connection, all answering from one list of scripts;
    "forward" sends the caller to another object of this same server."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.scripts: list[str] = []
        self.seen: list[tuple[Any, ...]] = []
        self.peers: list[Peer] = []
        writer = CDRWriter(True)
        self.ior(b"forwarded").encode(writer)
        self.forward = writer.getvalue()

    def ior(self, key: bytes) -> IOR:
        return build_ior("IDL:pyorb.test/Pinger:1.0", "127.0.0.1", self.port, key)

    def run(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return  # closed
            peer = Peer(sock, self.scripts, self.seen, self.forward)
            self.peers.append(peer)
            peer.start()

    def stop(self) -> None:
        self.server.close()
        self.join(10)
        for peer in self.peers:
            peer.join(10)


def run_client_calls(calls: list[tuple[Operation, tuple[Any, ...], str, bool]], listener: Listener,
                     originals: bool) -> tuple[list[Any], list[Any]]:
    """What each call through a BlockingClient gave, and what the server received."""
    listener.scripts[:] = [script for op, _a, script, _t in calls if not op.oneway]
    listener.seen.clear()
    results: list[Any] = []
    with pytest.MonkeyPatch.context() as patch:
        if originals:
            patch.setattr(blocking.BlockingConnection, "call", ORIGINAL_CALL)
            patch.setattr(blocking.BlockingClient, "_call", ORIGINAL_CLIENT_CALL)
        with blocking.BlockingClient(Config(read_timeout=5.0)) as client:
            target = listener.ior(b"key")
            for op, args, _script, timed in calls:
                try:
                    results.append(client.call(target, op, args, 30.0 if timed else None))
                except CORBA.SystemException as exc:
                    results.append((type(exc), exc.minor, exc.completed, str(exc)))
            # The server has read every request (a oneway one may still be on its way) before the client closes.
            expected = len(calls) + sum(script == "forward" and not op.oneway for op, _a, script, _t in calls)
            wait_until_blocking(lambda: sum(type(s[0]) is int for s in listener.seen) >= expected, timeout=10)
    # Closed by the client, every connection's peer ends once it has read all the client sent
    # (a MessageError after garbage comes after the last request).
    for peer in list(listener.peers):
        peer.join(10)
        assert not peer.is_alive(), "a peer never saw its connection end"
    # Connections' peers share one record: a MessageError that ends one connection may land
    # before or after the next connection's first request, so it is counted, not placed.
    message_error = ("MessageError",)
    seen = [s for s in listener.seen if s != message_error]
    return results, [*seen, ("MessageError", listener.seen.count(message_error))]


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    server = Listener()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.integration  # a loopback server
@SOME
@given(calls=st.lists(st.tuples(st.sampled_from([PING, PING, SAY, NOTIFY]), st.sampled_from(CLIENT_SCRIPTS),
                                st.booleans()), min_size=1, max_size=6),
       data=st.data())
def test_the_compiled_client_call_gives_what_the_python_one_gives(
    calls: list[tuple[Operation, str, bool]], data: st.DataObject, listener: Listener,
) -> None:
    """Calls through a BlockingClient, all originals or all twins: the same results, exceptions and requests,
    across replies, forwards, CloseConnection (the next call reconnects), lost connections and protocol errors."""
    twin_call()
    full = [(op, data.draw(VALID[op.name]), script, timed) for op, script, timed in calls]
    expected = run_client_calls(full, listener, originals=True)
    got = run_client_calls(full, listener, originals=False)
    assert got == expected
