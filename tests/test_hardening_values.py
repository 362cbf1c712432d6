"""Hostile values that are well-formed GIOP.

Each attack goes to a real ``pyorb serve`` process on its own connection; the
server must answer MARSHAL (before omniORB's unmarshaler sees the body) and
keep serving a well-behaved client on another connection.  Unchecked, the
deep ones crash the server with SIGSEGV and the zero-size elements cost it
1 GiB.  The same bodies are checked in-process over every way a body can
arrive: char code set named or not, GIOP version, fragments, byte order,
request, reply or user exception.
"""

from __future__ import annotations

import itertools
import re
import socket
import struct
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Iterator

import omniORB
import psutil  # type: ignore[import-untyped]
import pytest
from omniORB import CORBA

import pyorb
from pyorb import marshal
from pyorb.marshal import layout
from pyorb.client.calls import reply_result
from pyorb.marshal.body import operation_descriptors
from pyorb.server.strategies import names as strategy_names
from pyorb.giop import codec
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8, CS_UTF16, code_sets_context
from pyorb.giop.messages import GIOP_1_0, GIOP_1_1, GIOP_1_2, Reply, Request, Version
from pyorb.testing.kit import ServerProcess

from tests.attacks import hostile_values as hostile

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
IDL = ROOT / "idl" / "hardening.idl"
Hardening = pyorb.load_idl(IDL).Hardening
MARSHAL_ID = b"IDL:omg.org/CORBA/MARSHAL:1.0"


def serve(model: str) -> ServerProcess:
    return ServerProcess([sys.executable, "-m", "pyorb", "serve", f"{ROOT / 'tests/peers/hardening_servant.py'}:Target",
                          "--idl", str(IDL), "--key", "Target", "--model", model, "--stop-on-stdin-eof"])


@pytest.fixture(scope="module", params=["reactive", "thread_pool(4)"])
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    proc = serve(request.param)
    yield proc
    proc.stop()


def send_take(port: int, body: bytes, request_id: int = 1) -> bytes:
    """One take() request with a hand-made body on a fresh connection; the reply's bytes."""
    message = codec.encode(Request(request_id=request_id, response_flags=3, object_key=b"Target",
                                   operation="take", body=body))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(message)
        head = _read(sock, 12)
        assert head[:4] == b"GIOP" and head[7] == 1, head  # a Reply
        return head + _read(sock, struct.unpack("<I" if head[6] & 1 else ">I", head[8:12])[0])


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the server closed the connection instead of replying"
        data += chunk
    return data


def well_behaved(server: ServerProcess) -> None:
    with pyorb.BlockingClient() as client:
        target = client.resolve(server.ior, Hardening.Target)
        assert target.ping(42) == 42
        assert target.take(CORBA.Any(CORBA.TC_long, 5)).value() == 5


@pytest.mark.parametrize("attack", sorted(hostile.ATTACKS))
def test_hostile_any_gets_marshal_and_the_server_lives(server: ServerProcess, attack: str) -> None:
    well_behaved(server)
    reply = send_take(server.port, hostile.ATTACKS[attack]())
    assert MARSHAL_ID in reply, reply[:200]
    assert server.proc.poll() is None, server.stderr  # still running
    well_behaved(server)


def test_the_limits_are_the_configured_ones() -> None:
    codec_ = marshal.BodyCodec((layout.TV_ANY,))
    for body, limit in ((hostile.nested_anys(10), "max_nesting_depth"),
                        (hostile.empty_elements(1000), "max_empty_elements")):
        codec_.unpack(body, 0, True)  # within the defaults
        tight = pyorb.Config(**{limit: 5}).value_bounds()
        with pytest.raises(CORBA.MARSHAL):
            codec_.unpack(body, 0, True, bounds=tight)
    big_tc = hostile.nested_sequence_typecodes(20)
    with pytest.raises(CORBA.MARSHAL):
        codec_.unpack(big_tc, 0, True, bounds=layout.Bounds(max_typecode_size=64))


def test_plain_bodies_are_not_walked() -> None:
    # The walk is only for types that can nest without bound: the hot path stays as it was.
    assert not layout.needs_bounds((3, (18, 0), (19, 3, 0)))  # long, string, sequence<long>
    assert layout.needs_bounds((11,))  # any
    assert layout.needs_bounds((12,))  # TypeCode


def test_a_value_type_goes_both_ways_with_a_live_server(server: ServerProcess) -> None:
    with pyorb.BlockingClient() as client:
        target = client.resolve(server.ior, Hardening.Target)
        point = target.make_point(1, 2)
        assert isinstance(point, Hardening.Point) and (point.x, point.y) == (1, 2)
        target.give_point(Hardening.Point(3, 4))
        assert target.give_link(Hardening.Link(7, None)) == 7
        assert target.give_link(None) == -1
    assert server.proc.poll() is None


def send_value(port: int, operation: str, body: bytes) -> bytes:
    """One request with a hand-made body on a fresh connection that negotiates
    UTF-8 (so the body goes to the walk, not a char set conversion); the reply's bytes."""
    message = codec.encode(Request(request_id=1, response_flags=3, object_key=b"Target", operation=operation,
                                   body=body, service_contexts=(code_sets_context(CS_UTF8, CS_UTF16),)))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(message)
        head = _read(sock, 12)
        assert head[:4] == b"GIOP" and head[7] == 1, head
        return head + _read(sock, struct.unpack("<I" if head[6] & 1 else ">I", head[8:12])[0])


@pytest.mark.parametrize("body", [hostile.deep_links(5), hostile.chunked_links(1), hostile.chunked_links(3)],
                         ids=["plain", "chunked", "chunked in chunked"])
def test_a_hand_made_value_chain_is_taken(server: ServerProcess, body: bytes) -> None:
    # The attacks below differ from these bodies only in the rule they break.
    reply = send_value(server.port, "give_link", body)
    assert reply[4:8] == b"\x01\x02\x01\x01" and reply[16:20] == bytes(4), reply[:200]  # NO_EXCEPTION
    assert reply[-4:] == struct.pack("<i", 1 if body == hostile.deep_links(5) else 0)


@pytest.mark.parametrize("attack", sorted(hostile.VALUE_ATTACKS))
def test_hostile_value_gets_marshal_and_the_server_lives(server: ServerProcess, attack: str) -> None:
    reply = send_value(server.port, "give_link", hostile.VALUE_ATTACKS[attack]())
    assert MARSHAL_ID in reply, reply[:200]
    assert server.proc.poll() is None, server.stderr
    well_behaved(server)


def test_a_value_of_an_unknown_type_gets_omniorbs_minor_code(server: ServerProcess) -> None:
    reply = send_value(server.port, "give_link", hostile.unknown_value())
    assert MARSHAL_ID in reply, reply[:200]
    minor = struct.pack("<I" if reply[6] & 1 else ">I", omniORB.MARSHAL_NoValueFactory)
    assert minor in reply[reply.index(MARSHAL_ID):], reply[:200]
    well_behaved(server)


# -- every way a hostile body can arrive, in-process -----------------------------------

TIGHT = pyorb.Config(max_nesting_depth=16).value_bounds()  # the configured bounds must be the ones applied
CHAR_SETS = {"UTF-8": CS_UTF8, "ISO-8859-1": CS_ISO8859_1, "no CodeSets context": None}
ROUTES = [(GIOP_1_0, False), (GIOP_1_1, False), (GIOP_1_1, True), (GIOP_1_2, False), (GIOP_1_2, True)]
HOSTILE: dict[str, hostile.Attack] = {
    "sequence<null> of 2^27": hostile.ATTACKS["sequence<null> of 2^27"],
    "array<null, 2^27>": hostile.ATTACKS["array<null, 2^27>"],
    "any in any, one past the bound": lambda le=True, base=0: hostile.nested_anys(17, le, base),
    "any in any, 5,000 deep": lambda le=True, base=0: hostile.nested_anys(5_000, le, base),
    "sequence TypeCodes, one past the bound": lambda le=True, base=0: hostile.nested_sequence_typecodes(17, le, base),
    "a TypeCode of 128 KiB": hostile.ATTACKS["a TypeCode of 128 KiB"],
}
OPS = {name: marshal.Operation(name, desc) for name, desc in operation_descriptors(Hardening.Target).items()}
REFUSED_ID = Hardening.Refused._NP_RepositoryId


def _received(data: bytes, role: Role, sent: Request | None = None) -> tuple[GIOPConnection, Request | Reply]:
    """The message ``data`` as a real connection of ``role`` reads it (after sending ``sent``)."""
    conn = GIOPConnection(role)
    if sent is not None:
        conn.send(sent)  # a client's first request: its CodeSets context, if any, fixes the char set
    conn.receive_data(data)
    msg = conn.next_event()
    assert isinstance(msg, (Request, Reply)), msg
    if msg.version == GIOP_1_1:  # GIOP 1.1 fragments reach the unmarshaler with their own alignment
        assert bool(msg.fragment_starts) == (data.count(b"GIOP") > 1)
    return conn, msg


def _decode(direction: str, value: hostile.Attack, version: Version, le: bool, fragmented: bool,
            char_set: int | None) -> None:
    """Read one hostile body as pyorb's server (a request) or client (a reply) reads it."""
    if direction == "request":
        conn, req = _received(hostile.request(value, version, le, fragmented, char_set), Role.SERVER)
        assert isinstance(req, Request) and req.operation == "take"
        assert conn.char_set == (CS_ISO8859_1 if char_set is None else char_set)  # GIOP's default when none is named
        OPS["take"].args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts, TIGHT,
                                conn.char_set, version == GIOP_1_1 and bool(conn.wide_giop11))
        return
    op = OPS["take" if direction == "reply" else "refuse"]
    first = Request(request_id=1, response_flags=3, object_key=b"Target", operation=op.name,
                    service_contexts=hostile.code_sets(char_set), version=version, little_endian=le)
    exception_id = None if direction == "reply" else REFUSED_ID
    conn, reply = _received(hostile.reply(value, version, le, fragmented, exception_id), Role.CLIENT, first)
    assert isinstance(reply, Reply)
    reply_result(op, reply, lambda ref, _interface=None: ref, TIGHT, conn.char_set, conn.wide_giop11)


@pytest.mark.parametrize("direction", ["request", "reply", "user exception"])
@pytest.mark.parametrize("char_set", list(CHAR_SETS))
@pytest.mark.parametrize("version,fragmented", ROUTES, ids=[f"{v[0]}.{v[1]}{'-fragments' * f}" for v, f in ROUTES])
@pytest.mark.parametrize("le", [True, False], ids=["little-endian", "big-endian"])
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_every_received_body_is_bounded(kind: str, le: bool, version: Version, fragmented: bool, char_set: str,
                                        direction: str) -> None:
    # Each hostile body gets MARSHAL from its bound before omniORB's unmarshaler
    # sees it: quickly, and without allocating what it asks for.
    tracemalloc.start()
    try:
        start = time.perf_counter()
        with pytest.raises(CORBA.MARSHAL):
            _decode(direction, HOSTILE[kind], version, le, fragmented, CHAR_SETS[char_set])
        took = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB allocated"
    assert took < 10, f"{took:.1f} s"


@pytest.mark.parametrize("char_set", list(CHAR_SETS))
@pytest.mark.parametrize("version,fragmented", ROUTES, ids=[f"{v[0]}.{v[1]}{'-fragments' * f}" for v, f in ROUTES])
def test_a_recursive_idl_type_is_bounded_too(version: Version, fragmented: bool, char_set: str) -> None:
    # No any, no TypeCode: Tree { sequence<Tree> kids; } nests by itself, and omniORB's
    # unmarshaler recurses once per level (100,000 levels, 400 KB, crash the process).
    def tree(depth: int) -> hostile.Attack:
        return hostile.attack(hostile.fill_nested_trees(depth))

    depth = TIGHT.max_nesting_depth + 1  # the outermost Tree is no step into the type
    conn, req = _received(hostile.request(tree(depth), version, False, fragmented, CHAR_SETS[char_set], "plant"),
                          Role.SERVER)
    assert isinstance(req, Request)
    plant = OPS["plant"].args
    (within,) = plant.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts, TIGHT, conn.char_set)
    assert within.kids
    conn, req = _received(hostile.request(tree(depth + 1), version, True, fragmented, CHAR_SETS[char_set], "plant"),
                          Role.SERVER)
    assert isinstance(req, Request)
    with pytest.raises(CORBA.MARSHAL):
        plant.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts, TIGHT, conn.char_set)


@pytest.mark.parametrize("direction", ["request", "reply", "user exception"])
@pytest.mark.parametrize("char_set", list(CHAR_SETS))
@pytest.mark.parametrize("version,fragmented", ROUTES, ids=[f"{v[0]}.{v[1]}{'-fragments' * f}" for v, f in ROUTES])
def test_values_within_the_bounds_pass_every_route(version: Version, fragmented: bool, char_set: str,
                                                   direction: str) -> None:
    # The same routes carry a value just inside every bound: the bounds refuse the hostile, not the deep.
    within = lambda le=True, base=0: hostile.nested_anys(15, le, base)  # noqa: E731
    if direction == "user exception":
        with pytest.raises(Hardening.Refused) as info:
            _decode(direction, within, version, True, fragmented, CHAR_SETS[char_set])
        assert info.value.why.value() is not None
    else:
        _decode(direction, within, version, True, fragmented, CHAR_SETS[char_set])


# Inside an any on every route, and give_link's argument in a GIOP 1.1 fragment train (on the
# other routes it meets the in-place walk first, as the plain GIOP 1.2 argument they are compared with).
VALUE_ROUTES = [(in_any, version, fragmented, char_set) for in_any in (False, True) for version, fragmented in ROUTES
                for char_set in CHAR_SETS if in_any or (version, fragmented) == (GIOP_1_1, True)]


@pytest.mark.parametrize("in_any,version,fragmented,char_set", VALUE_ROUTES,
                         ids=[f"{'any' if a else 'arg'}-{v[0]}.{v[1]}{'-fragments' * f}-{c}"
                              for a, v, f, c in VALUE_ROUTES])
@pytest.mark.parametrize("attack", sorted(hostile.VALUE_ATTACKS))
def test_hostile_values_are_marshal_on_every_route(attack: str, in_any: bool, version: Version, fragmented: bool,
                                                   char_set: str) -> None:
    # Inside an any, realigned from fragments or re-encoded for ISO-8859-1 (copied with new
    # chunks and indirections), a malformed value is refused for the same reason as
    # give_link's plain GIOP 1.2 argument (the texts alike but for offsets).
    def refusal(in_any: bool, version: Version, fragmented: bool, char_set: int | None) -> str:
        operation = "take" if in_any else "give_link"
        conn, req = _received(hostile.request(hostile.value_attack(attack, in_any), version, True, fragmented,
                                              char_set, operation), Role.SERVER)
        assert isinstance(req, Request)
        with pytest.raises(CORBA.MARSHAL, match="unacceptable body") as caught:
            OPS[operation].args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts, TIGHT,
                                       conn.char_set)
        # (In an any, the step into Link's recursive TypeCode may be the level past the bound.)
        text = str(caught.value).replace("values of a recursive type nested", "values nested")
        return re.sub(r"-?\d+", "N", text)

    assert refusal(in_any, version, fragmented, CHAR_SETS[char_set]) == refusal(False, GIOP_1_2, False, CS_UTF8)


@pytest.mark.parametrize("fragmented", [False, True], ids=["whole", "fragments"])
@pytest.mark.parametrize("attack", sorted(hostile.VALUE_ATTACKS))
def test_hostile_values_are_marshal_where_wide_text_in_values_takes_the_value_reader(attack: str,
                                                                                     fragmented: bool) -> None:
    # A body whose values declare wide text is read by pyorb's value reader when a GIOP 1.1 peer
    # sends the standard form of it: the same hostile Link, then a null Title, is refused there too.
    def link_then_title(little_endian: bool = True, base: int = 0) -> bytes:
        link = hostile.value_attack(attack)(little_endian, base)
        return link + bytes(-(base + len(link)) % 4) + bytes(4)

    conn, req = _received(hostile.request(link_then_title, GIOP_1_1, True, fragmented, None,
                                          "give_titled_link"), Role.SERVER)
    assert isinstance(req, Request) and bool(req.fragment_starts) == fragmented
    args = OPS["give_titled_link"].args
    assert args.has_wide
    # (The reader words its refusals its own way: the deep ones must be refused for their depth.)
    why = "values nested more than 16 deep" if attack.endswith("100000 deep") else "unacceptable body"
    with pytest.raises(CORBA.MARSHAL, match=why):
        args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts, TIGHT, conn.char_set, True)


def test_a_titled_link_reads_in_the_giop_1_1_form_of_wide_text() -> None:
    # The route above with a well-formed body: a Link of two and its Title, as a GIOP 1.1 peer sends them.
    args = OPS["give_titled_link"].args
    sent = (Hardening.Link(1, Hardening.Link(2, None)), "títle")
    body = args.pack(sent, 4, True, wide11=True)
    assert "títle".encode("utf-16-le") + bytes(2) in body
    link, title = args.unpack(body, 4, True, (), TIGHT, CS_UTF8, True)
    assert (link.id, link.next.id, link.next.next, title) == (1, 2, None, "títle")


@pytest.mark.parametrize("length,refusal", [
    (12, "a chunk runs 4 octets past its value's state"), (16, "a chunk of 16 octets at offset 16 runs past the end"),
    (0x100000, "a chunk of 1048576 octets at offset 16 runs past the end of the data"),
    (0x7FFFFF08, "a value's state ends before its members do"),
], ids=["over the end tag", "past the end", "far past the end", "a value tag"])
def test_a_nested_chunk_across_giop_1_1_fragments_must_tell_its_length(length: int, refusal: str) -> None:
    # A value nested in a value, its chunk cut by a Fragment header: read where it lies when its
    # length is true, MARSHAL when the length lies.
    conn, req = _received(hostile.nested_across_fragments(8), Role.SERVER)
    assert isinstance(req, Request) and req.fragment_starts
    args = OPS["give_link"].args
    (link,) = args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts, TIGHT, conn.char_set)
    assert (link.id, link.next.id, link.next.next) == (1, 2, None)
    conn, req = _received(hostile.nested_across_fragments(length), Role.SERVER)
    assert isinstance(req, Request) and req.fragment_starts
    with pytest.raises(CORBA.MARSHAL, match=re.escape(f"unacceptable body: {refusal}")):
        args.unpack(req.body, req.body_offset, req.little_endian, req.fragment_starts, TIGHT, conn.char_set)


# -- the attacker's way, live: raw GIOP without a CodeSets context, every strategy -----------

# Every registered strategy, a parameterised one with 2 for its first parameter (threads, mostly).
STRATEGIES = [name.partition("(")[0] + ("(2)" if "(" in name else "") for name in strategy_names()]
LIVE_ATTACKS = {kind: hostile.ATTACKS[kind] for kind in
                ("sequence<null> of 2^27", "array<null, 2^27>", "any in any, 300,000 deep", "a TypeCode of 128 KiB")}


def _raw_call(port: int, data: bytes) -> bytes:
    """``data`` sent on a fresh connection; the one reply's bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        head = _read(sock, 12)
        assert head[:4] == b"GIOP" and head[7] == 1, head  # a Reply
        return head + _read(sock, struct.unpack("<I" if head[6] & 1 else ">I", head[8:12])[0])


class _Watch:
    """A quiet client pinging on its own connection, and the server's peak RSS, until stopped."""

    def __init__(self, server: ServerProcess) -> None:
        self.ps = psutil.Process(server.pid)
        self.baseline = self.peak = self.ps.memory_info().rss
        self.latencies: list[float] = []
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._ping, args=(server.ior,), daemon=True),
                         threading.Thread(target=self._sample, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _ping(self, ior: str) -> None:
        with pyorb.BlockingClient(pyorb.Config(call_timeout=10.0)) as client:
            target = client.resolve(ior, Hardening.Target)
            while not self._stop.wait(0.02):
                start = time.perf_counter()
                try:
                    assert target.ping(3) == 3
                except Exception as exc:  # a lost call: counted, and the watch goes on
                    self.errors.append(exc)
                self.latencies.append(time.perf_counter() - start)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            try:
                self.peak = max(self.peak, self.ps.memory_info().rss)
            except psutil.Error:
                return

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def _all_refused(model: str, requests: Iterator[tuple[object, bytes]]) -> None:
    """Each of ``requests`` (what it is, its raw GIOP) on a fresh connection to a server
    of ``model`` gets MARSHAL, while a quiet client's pings go on being answered."""
    server = serve(model)
    try:
        watch = _Watch(server)
        try:
            for what, data in requests:
                reply = _raw_call(server.port, data)
                assert MARSHAL_ID in reply, (what, reply[:200])
                assert server.proc.poll() is None, server.stderr()
        finally:
            watch.stop()
        assert server.proc.poll() is None, server.stderr()
        growth = (watch.peak - watch.baseline) / 2**20
        assert growth < 100, f"the server's RSS grew by {growth:.0f} MiB"
        assert not watch.errors, watch.errors[:3]
        assert watch.latencies and max(watch.latencies) < 5, sorted(watch.latencies)[-3:]
        well_behaved(server)
    finally:
        server.stop()


@pytest.mark.parametrize("model", STRATEGIES)
def test_raw_hostile_values_get_marshal_on_every_route(model: str) -> None:
    # Each malformed value, as give_link's argument and inside take's any, over GIOP 1.0
    # without a CodeSets context (re-encoded), 1.1 in fragments (realigned) and 1.2.
    routes = ((GIOP_1_0, False), (GIOP_1_1, True), (GIOP_1_2, False))
    _all_refused(model, (
        ((attack, in_any, version), hostile.request(hostile.value_attack(attack, in_any), version, True, fragmented,
                                                    operation="take" if in_any else "give_link"))
        for attack, in_any, (version, fragmented) in itertools.product(sorted(hostile.VALUE_ATTACKS), (False, True),
                                                                        routes)))


@pytest.mark.parametrize("model", STRATEGIES)
def test_raw_hostile_requests_without_code_sets_get_marshal(model: str) -> None:
    # GIOP 1.0 and 1.2 as a raw attacker sends them: no CodeSets context, so the
    # connection's strings are ISO-8859-1 and every string goes through transcoding.
    # Last, no any at all: a recursive IDL type 100,000 deep (400 KB).
    deep_tree = hostile.attack(hostile.fill_nested_trees(100_000))
    _all_refused(model, itertools.chain(
        (((kind, version), hostile.request(value, version, little_endian=version == GIOP_1_2))
         for (kind, value), version in itertools.product(LIVE_ATTACKS.items(), (GIOP_1_0, GIOP_1_2))),
        [("a Tree 100,000 deep", hostile.request(deep_tree, GIOP_1_2, operation="plant"))]))
