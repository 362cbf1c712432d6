"""Malformed and mutated GIOP input, for fuzzing the core and a live server.

:func:`mutate` applies byte-level mutations (the property tests draw them
with hypothesis); :class:`CaseMaker` makes whole connection scripts from a
seeded :class:`random.Random`, so that a failing network fuzz run can be
replayed from its seed.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from dataclasses import dataclass
from typing import Callable, Literal

from pyorb.giop import (
    GIOP_1_2,
    SUPPORTED_VERSIONS,
    CancelRequest,
    CloseConnection,
    LocateRequest,
    MessageError,
    MsgType,
    Request,
    ServiceContext,
    Version,
    body_offset,
    encode,
)
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8
from tests.giop.conftest import split_into_fragments

from tests.attacks import hostile_values as hostile

Mutation = tuple[str, int, int]
MUTATION_KINDS = ("flip", "truncate", "insert", "delete", "set")


def mutate(data: bytes, mutations: list[Mutation]) -> bytes:
    """``data`` after each (kind, where, arg) mutation; ``where`` wraps around."""
    buf = bytearray(data)
    for kind, where, arg in mutations:
        if not buf:
            break
        i = where % len(buf)
        if kind == "flip":
            buf[i] ^= 1 << (arg % 8)
        elif kind == "truncate":
            del buf[i:]
        elif kind == "insert":
            buf.insert(i, arg % 256)
        elif kind == "delete":
            del buf[i : i + max(arg, 1)]
        else:
            buf[i] = arg % 256
    return bytes(buf)


def header(
    version: Version, flags: int, msg_type: int, size: int, little_endian: bool = True
) -> bytes:
    """A raw 12-byte GIOP header, valid or not."""
    order = "<" if little_endian else ">"
    return b"GIOP" + bytes((*version, flags, msg_type)) + struct.pack(order + "I", size)


def with_size(data: bytes) -> bytes:
    """``data`` with its header's size field set to what follows the header."""
    if len(data) < 12:
        return data
    order = "<" if data[6] & 1 else ">"
    return data[:8] + struct.pack(order + "I", len(data) - 12) + data[12:]


def ping_request(
    request_id: int,
    stamp: int,
    key: bytes,
    version: Version = GIOP_1_2,
    little_endian: bool = True,
    contexts: tuple[ServiceContext, ...] = (),
) -> bytes:
    """A Bench::Echo ``ping(stamp)`` Request, its argument 8-aligned from the message start."""
    probe = Request(request_id, 3, key, "ping", b"", contexts, version, little_endian)
    pad = bytes(-body_offset(probe) % 8) if version != GIOP_1_2 else b""
    arg = struct.pack("<Q" if little_endian else ">Q", stamp)
    return encode(dataclasses.replace(probe, body=pad + arg))


def whole_primitive_fragments(ping: bytes, max_size: int) -> list[bytes]:
    """``ping`` as a fragment train that does not cut its 8-byte argument.

    GIOP says a primitive "should never be broken across two fragments", and
    in GIOP 1.1, where alignment restarts in each fragment, it cannot be
    unmarshaled if it is.  This moves ``max_size`` on until no cut falls
    inside the argument (the last 8 bytes).
    """
    arg = len(ping) - 8
    while True:
        pieces = split_into_fragments(ping, max_size)
        ends, end = [], 0
        for i, piece in enumerate(pieces):
            end += len(piece) - (0 if i == 0 else 12 + (4 if ping[5] == 2 else 0))
            ends.append(end)
        if not any(arg < e < len(ping) for e in ends):
            return pieces
        max_size += 1


# How a connection script ends once its bytes are written: half-close and
# read to the end, reset the connection, or wait for the server to give up.
Ending = Literal["eof", "abort", "stall"]


@dataclass(frozen=True)
class Case:
    """What one fuzzing connection sends, and how it ends.

    ``prefix`` holds messages a server survives (valid or not, each framed
    correctly); ``pings`` maps the request ids of the valid pings among them
    to their stamps.  ``chunks`` is the malformation that follows.
    """

    kind: str
    prefix: tuple[bytes, ...]
    pings: dict[int, int]
    chunks: tuple[bytes, ...]
    ending: Ending = "eof"
    refused: frozenset[int] = frozenset()
    """Request ids, among ``prefix``, of hostile values that must be answered MARSHAL."""

    @property
    def messages(self) -> int:
        """How many GIOP messages (whole or not) this sends, roughly."""
        return len(self.prefix) + max(1, sum(chunk.count(b"GIOP") for chunk in self.chunks))


class CaseMaker:
    """Connection scripts for a server holding Bench::Echo under ``key``.

    Each script opens with messages that are well framed, so that they
    reach dispatch and unmarshaling, and valid GIOP, so that the connection
    lives on (valid pings, whole, fragmented or with service contexts; pings
    with arbitrary argument bytes; unknown keys and operations; addressing
    by profile; Locate and Cancel requests; with ``hostile_key``, the key of
    a Hardening::Target, hostile values in an any and malformed value types, in any version, byte
    order and char code set, whole or in fragments); then comes one of the
    malformations of :attr:`kinds`.
    """

    def __init__(self, seed: int, key: bytes, max_message_size: int, hostile_key: bytes | None = None) -> None:
        self.rng = random.Random(seed)
        self.key = key
        self.max_message_size = max_message_size
        self.hostile_key = hostile_key
        self.kinds: dict[str, Callable[[], tuple[list[bytes], Ending]]] = {
            "truncated header": self._truncated_header,
            "bad magic": self._bad_magic,
            "bad version": self._bad_version,
            "bad flags or type": self._bad_flags_or_type,
            "giant size": self._giant_size,
            "mutated request": self._mutated_request,
            "mutated request body": self._mutated_body,
            "random bytes": self._random_bytes,
            "fragment without a start": self._orphan_fragment,
            "broken fragment train": self._broken_train,
            "half message then close": self._half_message,
            "half message then reset": self._half_message_reset,
            "half message then silence": self._half_message_stall,
            # Valid, but the server must close at once: the client waits in silence.
            "CloseConnection": lambda: ([encode(CloseConnection(self._version(), True))], "stall"),
            "MessageError": lambda: ([encode(MessageError(self._version(), False))], "stall"),
        }

    def case(self) -> Case:
        kind = self.rng.choice(sorted(self.kinds))
        pings: dict[int, int] = {}
        refused: set[int] = set()
        prefix = tuple(self._survivable(pings, refused) for _ in range(self.rng.randrange(12)))
        chunks, ending = self.kinds[kind]()
        return Case(kind, prefix, pings, tuple(chunks), ending, frozenset(refused))

    def _survivable(self, pings: dict[int, int], refused: set[int]) -> bytes:
        """Valid GIOP, though not always a valid call: the connection lives on after it."""
        rng = self.rng
        version, little = self._version(), rng.random() < 0.5
        rid = rng.randrange(2**32)
        how = rng.randrange(9 if self.hostile_key is None else 10)
        if how == 9:
            refused.add(rid)
            return self._hostile_value(rid, version, little)
        if how == 0:
            stamp = rng.randrange(2**64)
            pings[rid] = stamp
            return ping_request(rid, stamp, self.key, version, little)
        if how == 6 and version != (1, 0):  # a valid ping in a fragment train
            stamp = rng.randrange(2**64)
            pings[rid] = stamp
            data = ping_request(rid, stamp, self.key, version, little)
            return b"".join(whole_primitive_fragments(data, rng.randrange(24, 48)))
        if how == 7:  # a valid ping with service contexts pyorb need not understand
            stamp = rng.randrange(2**64)
            pings[rid] = stamp
            contexts = tuple(
                ServiceContext(rng.choice([1, 15, rng.randrange(2**32)]), rng.randbytes(rng.randrange(12)))
                for _ in range(rng.randrange(1, 4))
            )
            return ping_request(rid, stamp, self.key, version, little, contexts)
        if how == 8 and version == GIOP_1_2:  # addressed by profile or reference
            member = struct.pack("<II", 0, 4) + b"\1abc"
            request = Request(rid, 3, member, "ping", bytes(8), (), version, True, addressing_disposition=1)
            return encode(request)
        if how == 1:  # arguments that may be short, long or anything
            body = rng.randbytes(rng.randrange(24))
            return encode(Request(rid, 3, self.key, "ping", body, (), version, little))
        if how == 2:
            key = rng.randbytes(rng.randrange(1, 12))
            return ping_request(rid, 1, key, version, little)
        if how == 3:
            operation = rng.choice(["pong", "_is_a", "_non_existent", "notify", ""])
            body = rng.randbytes(rng.randrange(24))
            return encode(Request(rid, rng.choice([0, 3]), self.key, operation, body, (), version, little))
        if how == 4:
            key = self.key if rng.random() < 0.5 else rng.randbytes(3)
            return encode(LocateRequest(rid, key, version, little))
        return encode(CancelRequest(rid, version, little))

    def _hostile_value(self, rid: int, version: Version, little: bool) -> bytes:
        """A take(any) whose any the bounds refuse, or a malformed value type: what fits the message size."""
        rng = self.rng
        if rng.random() < 0.5:
            return self._hostile_value_type(rid, version)
        value = rng.choice([
            hostile.fill_empty_sequence(1 << 22), hostile.fill_empty_array(1 << 22),
            hostile.fill_nested_anys(rng.randrange(65, 10_000)),
            hostile.fill_nested_sequence_typecodes(rng.randrange(65, 3_000)),
        ])
        fragmented = version != (1, 0) and rng.random() < 0.3
        char_set = rng.choice([None, CS_UTF8, CS_ISO8859_1])
        return hostile.request(hostile.attack(value), version, little, fragmented, char_set, request_id=rid,
                               key=self.hostile_key)

    def _hostile_value_type(self, rid: int, version: Version) -> bytes:
        """One of the malformed value types (indirections, chunks, end tags, nesting) as give_link's
        argument or in take's any; little endian, as the attacks are written."""
        rng = self.rng
        name = rng.choice(sorted(hostile.VALUE_ATTACKS))
        body = hostile.VALUE_ATTACKS[name]
        if name == "values 100000 deep":  # as deep as the server's message size allows
            depth = rng.randrange(65, 7_000)
            body = lambda: hostile.deep_links(depth)  # noqa: E731
        elif name == "chunked values 100000 deep":
            depth = rng.randrange(2, 3_500)
            body = lambda: hostile.chunked_links(depth)  # noqa: E731
        in_any = rng.random() < 0.5
        fragmented = version != (1, 0) and rng.random() < 0.3
        char_set = rng.choice([None, CS_UTF8, CS_ISO8859_1])
        return hostile.request(hostile.sized_value_attack(body, in_any), version, True, fragmented, char_set,
                               "take" if in_any else "give_link", request_id=rid, key=self.hostile_key)

    # -- building blocks --------------------------------------------------------

    def _version(self) -> Version:
        return self.rng.choice(SUPPORTED_VERSIONS)

    def _valid_request(self) -> bytes:
        rng = self.rng
        key = self.key if rng.random() < 0.8 else rng.randbytes(rng.randrange(8))
        return ping_request(
            rng.randrange(2**32), rng.randrange(2**64), key, self._version(), rng.random() < 0.5
        )

    def _mutations(self, n: int) -> list[Mutation]:
        rng = self.rng
        return [
            (rng.choice(MUTATION_KINDS), rng.randrange(1 << 16), rng.randrange(256))
            for _ in range(n)
        ]

    # -- the malformations ----------------------------------------------------------

    def _truncated_header(self) -> tuple[list[bytes], Ending]:
        return [self._valid_request()[: self.rng.randrange(1, 12)]], "eof"

    def _bad_magic(self) -> tuple[list[bytes], Ending]:
        data = bytearray(self._valid_request())
        data[self.rng.randrange(4)] ^= 1 << self.rng.randrange(8)
        return [bytes(data)], "eof"

    def _bad_version(self) -> tuple[list[bytes], Ending]:
        version = self.rng.choice([(1, 3), (2, 0), (0, 9), (1, 255), (255, 2)])
        data = self._valid_request()
        return [data[:4] + bytes(version) + data[6:]], "eof"

    def _bad_flags_or_type(self) -> tuple[list[bytes], Ending]:
        rng = self.rng
        version = self._version()
        if rng.random() < 0.5:  # a type a server must not receive, or none at all
            msg_type = rng.choice([MsgType.REPLY, MsgType.LOCATE_REPLY, 8, 9, 127, 255])
            return [header(version, 1, msg_type, 0)], "eof"
        flags = rng.choice([0x04, 0x80, 0xFF, 0x03 if version == (1, 0) else 0x06])
        return [header(version, flags, MsgType.REQUEST, 8) + bytes(8)], "eof"

    def _giant_size(self) -> tuple[list[bytes], Ending]:
        size = self.rng.randrange(self.max_message_size + 1, 2**32)
        little = self.rng.random() < 0.5
        msg_type = self.rng.choice([MsgType.REQUEST, MsgType.LOCATE_REQUEST, MsgType.CANCEL_REQUEST])
        return [header(self._version(), int(little), msg_type, size, little) + bytes(64)], "eof"

    def _mutated_request(self) -> tuple[list[bytes], Ending]:
        data = self._valid_request()
        return [mutate(data, self._mutations(self.rng.randrange(1, 5)))], "eof"

    def _mutated_body(self) -> tuple[list[bytes], Ending]:
        """Framed, so that it reaches the decoder, which may or may not accept it."""
        data = self._valid_request()
        return [with_size(data[:12] + mutate(data[12:], self._mutations(2)))], "eof"

    def _random_bytes(self) -> tuple[list[bytes], Ending]:
        data = self.rng.randbytes(self.rng.randrange(1, 300))
        if self.rng.random() < 0.5:
            data = b"GIOP" + data  # past the magic, into the header checks
        return [data], "eof"

    def _orphan_fragment(self) -> tuple[list[bytes], Ending]:
        version = self.rng.choice([(1, 1), (1, 2)])
        more = self.rng.choice([0, 2])
        return [header(version, 1 | more, MsgType.FRAGMENT, 8) + bytes(8)], "eof"

    def _train(self, version: Version) -> list[bytes]:
        """A valid fragmented ping Request, one chunk per message."""
        data = ping_request(self.rng.randrange(2**32), 1, self.key, version)
        return split_into_fragments(data, self.rng.randrange(24, 40))

    def _broken_train(self) -> tuple[list[bytes], Ending]:
        rng = self.rng
        how = rng.randrange(4)
        # The oversized train is GIOP 1.1, whose Fragments carry no request id.
        train = self._train((1, 1) if how == 2 else rng.choice([(1, 1), (1, 2)]))
        if how == 0:  # never finished: the server's read timeout must end it
            return train[:-1], "stall"
        if how == 1:  # finished, then a fragment too many
            return train + [train[-1]], "eof"
        if how == 2:  # longer than the limit, announced one fragment at a time
            last = bytearray(train[-1])
            last[6] |= 2  # more fragments follow
            step = header((1, 1), 3, MsgType.FRAGMENT, 8192) + bytes(8192)
            count = self.max_message_size // 8192 + 2
            return train[:-1] + [bytes(last)] + [step] * count, "eof"
        return [mutate(b"".join(train), self._mutations(rng.randrange(1, 4)))], "eof"

    def _cut(self) -> bytes:
        data = self._valid_request()
        return data[: self.rng.randrange(12, len(data))]

    def _half_message(self) -> tuple[list[bytes], Ending]:
        return [self._cut()], "eof"

    def _half_message_reset(self) -> tuple[list[bytes], Ending]:
        return [self._cut()], "abort"

    def _half_message_stall(self) -> tuple[list[bytes], Ending]:
        return [self._cut()], "stall"
