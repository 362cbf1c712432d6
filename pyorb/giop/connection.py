"""The sans-IO GIOP connection: bytes in, messages out (in the manner of h11).

The transport feeds whatever it reads to :meth:`GIOPConnection.receive_data`
and calls :meth:`GIOPConnection.next_event` until it returns ``NEED_DATA``;
it writes whatever :meth:`GIOPConnection.send` returns.  The connection
frames messages, checks every limit on a header before buffering what the
header announces, reassembles fragment trains and checks that each message
is one this side may receive.

A :class:`ProtocolError` from :meth:`next_event` is final: the connection
stays dead and raises it again.  The transport then sends
:meth:`message_error_bytes` if the error says so, and closes.

Both directions go through the connection, so it knows the state both
share: the transmission code sets named in the first request's CodeSets
context (received by a server, sent by a client), the form of GIOP 1.1
wide text, and the largest message it may send whole: a longer GIOP 1.2
Request or Reply goes out as fragments (:attr:`max_fragment_size`).
"""

from __future__ import annotations

import dataclasses
import enum
import time
from dataclasses import dataclass, field
from typing import Callable, Literal

from pyorb.giop import fast12, header
from pyorb.giop.codec import body_offset, decode_body, encode, message_error
from pyorb.giop.fast12 import encode_reply_12, encode_request_12, encode_request_12_contexts
from pyorb.giop.header import HEADER_SIZE, Header, parse_header
from pyorb.giop.errors import ProtocolError
from pyorb.giop.codesets import CS_ISO8859_1, parse_code_sets_context
from pyorb.giop.messages import (
    CLOSED,
    SC_CODE_SETS,
    GIOP_1_1,
    GIOP_1_2,
    NEED_DATA,
    CancelRequest,
    CloseConnection,
    Event,
    LocateReply,
    LocateRequest,
    LocateStatus,
    Message,
    MessageError,
    MsgType,
    Reply,
    ReplyStatus,
    Request,
    ServiceContext,
    Version,
)


class Role(enum.Enum):
    """Which end of the connection we are."""

    CLIENT = "client"
    SERVER = "server"


# What each role may receive; each role sends what the other receives.
_RECEIVES: dict[Role, frozenset[MsgType]] = {
    Role.SERVER: frozenset(
        {
            MsgType.REQUEST,
            MsgType.CANCEL_REQUEST,
            MsgType.LOCATE_REQUEST,
            MsgType.CLOSE_CONNECTION,  # GIOP 1.2 bidirectional peers may send it
            MsgType.MESSAGE_ERROR,
            MsgType.FRAGMENT,
        }
    ),
    Role.CLIENT: frozenset(
        {
            MsgType.REPLY,
            MsgType.LOCATE_REPLY,
            MsgType.CLOSE_CONNECTION,
            MsgType.MESSAGE_ERROR,
            MsgType.FRAGMENT,
        }
    ),
}
_MESSAGE_TYPES: dict[type, MsgType] = {
    Request: MsgType.REQUEST,
    Reply: MsgType.REPLY,
    CancelRequest: MsgType.CANCEL_REQUEST,
    LocateRequest: MsgType.LOCATE_REQUEST,
    LocateReply: MsgType.LOCATE_REPLY,
    CloseConnection: MsgType.CLOSE_CONNECTION,
    MessageError: MsgType.MESSAGE_ERROR,
}
_OTHER_ROLE = {Role.CLIENT: Role.SERVER, Role.SERVER: Role.CLIENT}

# Looking up an enum member on its class is slow (about 0.1 µs in 3.11).
_FRAGMENT = MsgType.FRAGMENT
_FRAGMENT_CODE = int(MsgType.FRAGMENT)
_REQUEST = MsgType.REQUEST
_REPLY = MsgType.REPLY

# GIOP 1.1 allows a single train at a time, so it needs no request id key.
_GIOP_1_1_TRAIN = None
# Compact the receive buffer once this many consumed bytes sit at its front.
_COMPACT_AFTER = 64 * 1024


@dataclass(slots=True)
class _Train:
    """A fragmented message being reassembled."""

    header: Header  # of the initial message
    started: float  # the clock when the initial message arrived
    body: bytearray = field(default_factory=bytearray)
    starts: list[int] = field(default_factory=list)  # where each GIOP 1.1 Fragment payload began


class GIOPConnection:
    """State machine for one GIOP connection, seen from ``role``.

    ``max_message_size`` bounds the body of one message, and the reassembled
    body of a fragment train; ``max_fragment_trains`` bounds how many trains
    (GIOP 1.2 interleaves them by request id) may be open at once.
    ``clock`` stamps each train when it starts, so that the transport can
    time it out however much other traffic interleaves with it; it is the
    only thing the core asks of the outside world (the transport passes its
    event loop's clock).
    """

    # A server may hold thousands of these: no per-instance dict, no dict of
    # trains until a fragmented message arrives, no buffer kept between messages.
    __slots__ = ("role", "max_message_size", "max_fragment_trains", "peer_version", "peer_little_endian",
                 "_receives", "_sends", "_buf", "_pos", "_header", "_train_key", "_train_key_known", "_trains",
                 "_eof", "_error", "_clock", "reassembly_bytes", "max_fragment_size", "char_set",
                 "code_sets_chosen", "wide_giop11")

    def __init__(
        self,
        role: Role,
        *,
        max_message_size: int = 64 * 1024 * 1024,
        max_fragment_trains: int = 32,
        clock: Callable[[], float] = time.monotonic,
        max_fragment_size: int | None = None,
    ) -> None:
        self.role = role
        self._clock = clock
        self.max_message_size = max_message_size
        self.max_fragment_trains = max_fragment_trains
        self.peer_version: Version = GIOP_1_2
        """Version of the last message header received (GIOP 1.2 until one is)."""
        self.peer_little_endian = True
        self._receives = _RECEIVES[role]
        self._sends = _RECEIVES[_OTHER_ROLE[role]]
        self._buf = bytearray()
        self._pos = 0  # start of the unconsumed bytes in _buf
        self._header: Header | None = None  # checked header of the next message
        self._train_key: int | None = None  # the train the next Fragment continues
        self._train_key_known = False
        self._trains: dict[int | None, _Train] | None = None  # made by the first fragmented message
        self._eof = False
        self._error: ProtocolError | None = None
        self.reassembly_bytes = 0
        """Body bytes held in unfinished fragment trains."""
        if max_fragment_size is not None and (max_fragment_size < 64 or max_fragment_size % 8):
            raise ValueError(f"max_fragment_size must be a multiple of 8, at least 64, got {max_fragment_size}")
        self.max_fragment_size = max_fragment_size
        """GIOP 1.2 Requests and Replies longer than this go out as fragments of at most this many bytes."""
        self.char_set = CS_ISO8859_1
        """The transmission code set of ``string`` data: ISO-8859-1 until a CodeSets context names one."""
        self.code_sets_chosen = False
        """A CodeSets context was received (server) or sent (client): the code sets are fixed."""
        self.wide_giop11: bool | None = None
        """GIOP 1.1 wide text in the standard GIOP 1.1 form (False: GIOP 1.2's, as omniORB writes
        it); None until known.  The endpoints decide it (it takes unmarshaling) and keep it here."""

    # ------------------------------------------------------------ public API

    def make_bidirectional(self) -> None:
        """Let requests flow both ways (bidirectional GIOP 1.2, see :mod:`pyorb.giop.bidir`):
        from now on this end may send and receive every message either role may."""
        self._receives = self._sends = _RECEIVES[Role.CLIENT] | _RECEIVES[Role.SERVER]

    @property
    def bidirectional(self) -> bool:
        """True once :meth:`make_bidirectional` ran."""
        return self._receives is self._sends

    @property
    def in_progress(self) -> bool:
        """True while part of a message or an unfinished fragment train is held.

        A transport runs a read timeout while this is true: a peer may stop
        in the middle of a train and never send its final fragment.
        """
        return len(self._buf) > self._pos or bool(self._trains)

    @property
    def partial(self) -> bool:
        """True while part of one message is buffered (more bytes must come)."""
        return len(self._buf) > self._pos

    @property
    def oldest_train_started(self) -> float | None:
        """The clock when the oldest unfinished fragment train started, None without one."""
        trains = self._trains
        # Trains are only ever added at the end: the first is the oldest.
        return next(iter(trains.values())).started if trains else None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes read from the peer; ``b""`` means the peer closed (EOF)."""
        if self._error is not None:
            return  # a dead connection buffers nothing more
        if not data:
            self._eof = True
            return
        if self._eof:
            raise RuntimeError("received data after EOF")
        # No memoryview of _buf exists here: consumed bytes can go.
        pos = self._pos
        if pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif pos >= _COMPACT_AFTER:
            del self._buf[:pos]
            self._pos = 0
        self._buf += data

    def next_event(self) -> Event:
        """The next complete message, ``NEED_DATA`` or (after EOF) ``CLOSED``."""
        if self._error is not None:
            raise ProtocolError(
                self._error.reason, send_message_error=self._error.send_message_error
            )
        pos = self._pos
        if pos == len(self._buf) and not self._eof:  # all taken: the end of every read
            if pos:
                self._buf.clear()  # the messages are copies: free the bytes now
                self._pos = 0
            return NEED_DATA
        try:
            msg = _next_common(self)  # the common message, before any other frame
            if msg is not None:
                return msg
            return self._next_event()
        except ProtocolError as exc:
            self._error = exc
            self._buf = bytearray()
            self._pos = 0
            self._trains = None
            self.reassembly_bytes = 0
            raise

    def send(self, msg: Message) -> bytes:
        """The bytes for ``msg``, after checking this role may send it.

        A Request's CodeSets context fixes the connection's code sets; a
        GIOP 1.2 Request or Reply over :attr:`max_fragment_size` becomes
        fragments.  Safe from any thread for a Reply (it changes nothing).
        """
        msg_type = _MESSAGE_TYPES.get(type(msg))
        if msg_type is None:
            raise TypeError(f"not a GIOP message: {msg!r}")
        if msg_type not in self._sends:
            raise ValueError(f"a {self.role.name} must not send {msg_type.name}")
        if msg_type is _REQUEST and msg.service_contexts and not self.code_sets_chosen:  # type: ignore[union-attr]
            self._note_code_sets(msg.service_contexts)  # type: ignore[union-attr]
        return self._fragmented(encode(msg))

    def request_12(
        self, request_id: int, response_flags: int, object_key: bytes, operation: str, body: bytes, little_endian: bool
    ) -> bytes:
        """``send(Request(...))`` for a GIOP 1.2 Request without service contexts: the client's common case."""
        data = encode_request_12(request_id, response_flags, object_key, operation, body, little_endian)
        limit = self.max_fragment_size
        return data if limit is None or len(data) <= limit else self._fragmented(data)

    def request_12_contexts(
        self, request_id: int, response_flags: int, object_key: bytes, operation: str,
        contexts: tuple[ServiceContext, ...], body: bytes, little_endian: bool,
    ) -> bytes:
        """``send(Request(...))`` for a GIOP 1.2 Request with service contexts, once the
        connection's code sets are chosen (a call with a deadline: one context per call)."""
        data = encode_request_12_contexts(request_id, response_flags, object_key, operation, contexts, body,
                                          little_endian)
        limit = self.max_fragment_size
        return data if limit is None or len(data) <= limit else self._fragmented(data)

    def reply_12(self, request_id: int, status: int, body: bytes, little_endian: bool) -> bytes:
        """``send(Reply(...))`` for a GIOP 1.2 Reply without service contexts: the server's common case.
        Safe from any thread."""
        data = encode_reply_12(request_id, status, body, little_endian)
        limit = self.max_fragment_size
        return data if limit is None or len(data) <= limit else self._fragmented(data)

    def reply(
        self, request_id: int, status: ReplyStatus, version: Version, little_endian: bool,
        pack: Callable[[int], bytes], service_contexts: tuple[ServiceContext, ...] = (),
    ) -> bytes:
        """A Reply whose body ``pack(align)`` makes for where it starts in the message. Safe from any thread."""
        if version == GIOP_1_2:
            body = pack(0)
        else:
            probe = Reply(request_id, status, b"", service_contexts, version, little_endian)
            body = pack(body_offset(probe))
        return self.send(Reply(request_id, status, body, service_contexts, version, little_endian))

    def body_offset(self, msg: Request | Reply | LocateReply) -> int:
        """Where the body of ``msg`` will start in the message: marshaling aligns to it."""
        return body_offset(msg)

    def locate_reply(
        self, request_id: int, status: LocateStatus, version: Version, little_endian: bool,
        pack: Callable[[int], bytes] | None = None,
    ) -> bytes:
        """A LocateReply, its body (a forwarded IOR) made by ``pack(align)`` for where it starts."""
        body = b""
        if pack is not None:
            probe = LocateReply(request_id, status, b"", version, little_endian)
            body = pack(body_offset(probe))
        return self.send(LocateReply(request_id, status, body, version, little_endian))

    def message_error_bytes(self) -> bytes:
        """A MessageError in the peer's GIOP version, to send after a ProtocolError."""
        return message_error(self.peer_version, self.peer_little_endian)

    # ------------------------------------------------------------ shared state

    def _note_code_sets(self, contexts: tuple[ServiceContext, ...]) -> None:
        """Fix the code sets from a CodeSets context among ``contexts`` (a malformed one is ignored)."""
        for context in contexts:
            if context.context_id == SC_CODE_SETS:
                try:
                    tcs_c, _tcs_w = parse_code_sets_context(context.data)
                except ProtocolError:
                    continue
                self.char_set = tcs_c or CS_ISO8859_1  # 0 names no char code set: the default stays
                self.code_sets_chosen = True
                return

    def _fragmented(self, data: bytes) -> bytes:
        """``data`` (one encoded message) as a GIOP 1.2 fragment train if it is longer than allowed.

        Every message of the train but the last is a multiple of 8 octets
        long and each Fragment's payload starts 8-aligned (after its 12-octet
        header and 4-octet request id), so the CDR alignment of the data
        runs on unbroken, as GIOP 1.2 requires; primitives never straddle
        two fragments.  Other versions and messages are sent whole.
        """
        limit = self.max_fragment_size
        if limit is None or len(data) <= limit or data[4:6] != b"\x01\x02" or data[7] not in (0, 1):
            return data
        flags = data[6]
        order: Literal["little", "big"] = "little" if flags & 1 else "big"
        request_id = data[12:16]  # the first field of a GIOP 1.2 Request and Reply header
        out = bytearray(data[:limit])
        out[6] = flags | 2  # more fragments follow
        out[8:12] = (limit - HEADER_SIZE).to_bytes(4, order)
        chunk = limit - HEADER_SIZE - 4
        pos = limit
        while pos < len(data):
            part = data[pos : pos + chunk]
            pos += len(part)
            more = 2 if pos < len(data) else 0
            out += b"GIOP\x01\x02" + bytes((flags & 1 | more, _FRAGMENT_CODE))
            out += (4 + len(part)).to_bytes(4, order) + request_id + part
        return bytes(out)

    # ------------------------------------------------------------ framing

    def _next_event(self) -> Event:
        while True:
            hdr = self._ready_header()
            if hdr is None:
                return self._starved()
            start = self._pos + HEADER_SIZE
            end = start + hdr.size
            if end > len(self._buf):
                return self._starved()
            self._pos = end
            self._header = None
            msg = self._consume(hdr, start, end)
            if msg is None:  # a fragment taken in: the next message may be the common case
                msg = _next_common(self)
            if msg is not None:
                return msg

    def _starved(self) -> Event:
        if self._pos and self._pos == len(self._buf):
            # All consumed (the messages are copies): free the bytes now
            # rather than at the next receive, which may be long in coming.
            self._buf.clear()
            self._pos = 0
        if not self._eof:
            return NEED_DATA
        if self.in_progress:
            raise ProtocolError("peer closed in the middle of a message", send_message_error=False)
        return CLOSED

    def _ready_header(self) -> Header | None:
        """The checked header of the next message, or None until enough bytes are in."""
        if self._header is None:
            if len(self._buf) - self._pos < HEADER_SIZE:
                return None
            self._header = self._check_header(parse_header(self._buf, self._pos))
            self._train_key_known = False
        hdr = self._header
        if hdr.msg_type is _FRAGMENT and not self._train_key_known:
            # A GIOP 1.2 fragment names its train by the request id after the
            # header: wait for it, so the train's limit is checked before the
            # body is buffered.
            if hdr.version == GIOP_1_2 and len(self._buf) - self._pos < HEADER_SIZE + 4:
                return None
            self._train_key = self._check_fragment(hdr)
            self._train_key_known = True
        return hdr

    def _check_header(self, hdr: Header) -> Header:
        self.peer_version = hdr.version
        self.peer_little_endian = hdr.little_endian
        if hdr.msg_type not in self._receives:
            raise ProtocolError(f"a {self.role.name} cannot receive {hdr.msg_type.name}")
        if hdr.size > self.max_message_size:
            raise ProtocolError(
                f"message of {hdr.size} bytes exceeds the limit of {self.max_message_size}"
            )
        if hdr.msg_type is _FRAGMENT:
            if not self._trains:
                raise ProtocolError("Fragment without a fragmented message to continue")
            if hdr.version == GIOP_1_2 and hdr.size < 4:
                raise ProtocolError("GIOP 1.2 Fragment too short for its request id")
        elif hdr.more_fragments:
            self._check_new_train(hdr)
        return hdr

    # ------------------------------------------------------------ fragments

    def _check_new_train(self, hdr: Header) -> None:
        trains = self._trains or {}
        if len(trains) >= self.max_fragment_trains:
            raise ProtocolError(f"more than {self.max_fragment_trains} fragment trains")
        if hdr.version == GIOP_1_1 and _GIOP_1_1_TRAIN in trains:
            raise ProtocolError("GIOP 1.1 allows one fragmented message at a time")
        if hdr.version == GIOP_1_2 and hdr.size < 4:
            raise ProtocolError("fragmented GIOP 1.2 message too short for a request id")

    def _check_fragment(self, hdr: Header) -> int | None:
        """The key of the train this fragment continues, after checking limits."""
        if hdr.version == GIOP_1_2:  # _check_header made sure the request id is there
            key: int | None = _read_ulong(self._buf, self._pos + HEADER_SIZE, hdr.little_endian)
            data_size = hdr.size - 4
        else:
            key = _GIOP_1_1_TRAIN
            data_size = hdr.size
        train = self._trains.get(key) if self._trains else None
        if train is None:
            raise ProtocolError(f"Fragment for no fragmented message (request id {key})")
        if train.header.version != hdr.version:
            raise ProtocolError("Fragment version differs from the fragmented message")
        if len(train.body) + data_size > self.max_message_size:
            raise ProtocolError(
                f"fragmented message exceeds the limit of {self.max_message_size} bytes"
            )
        return key

    def _consume(self, hdr: Header, start: int, end: int) -> Message | None:
        """Handle the complete message in _buf[start:end]; None if it was a fragment."""
        # The views must be released before _buf can grow again.  Explicit
        # releases cost half of what two "with" blocks do, per message.
        buf = memoryview(self._buf)
        body = buf[start:end]
        try:
            if hdr.msg_type is _FRAGMENT:
                return self._continue_train(hdr, body)
            if hdr.more_fragments:
                self._start_train(hdr, body)
                return None
            msg = decode_body(hdr, body)
            if type(msg) is Request and msg.service_contexts and not self.code_sets_chosen:
                self._note_code_sets(msg.service_contexts)
            return msg
        finally:
            body.release()
            buf.release()

    def _start_train(self, hdr: Header, body: memoryview) -> None:
        key = _GIOP_1_1_TRAIN
        if hdr.version == GIOP_1_2:
            # Request, Reply, LocateRequest and LocateReply 1.2 all start with it.
            key = _read_ulong(body, 0, hdr.little_endian)
            if self._trains and key in self._trains:
                raise ProtocolError(f"second fragmented message for request id {key}")
        if self._trains is None:
            self._trains = {}
        self._trains[key] = _Train(hdr, self._clock(), bytearray(body))
        self.reassembly_bytes += len(body)

    def _continue_train(self, hdr: Header, body: memoryview) -> Message | None:
        key = self._train_key
        self._train_key = None
        trains = self._trains
        assert trains is not None  # _check_fragment found the train
        train = trains[key]
        before = len(train.body)
        if hdr.version == GIOP_1_2:
            train.body += body[4:]
        else:
            train.starts.append(before)
            train.body += body
        if hdr.more_fragments:
            self.reassembly_bytes += len(train.body) - before
            return None
        self.reassembly_bytes -= before
        del trains[key]
        if not trains:
            self._trains = None
        with memoryview(train.body) as whole:
            msg = decode_body(train.header, whole)
        if type(msg) is Request and msg.service_contexts and not self.code_sets_chosen:
            self._note_code_sets(msg.service_contexts)
        return _with_fragment_starts(msg, train.starts)


def _next_common(conn: GIOPConnection) -> Message | None:
    """The next message if it is the common case, else None with nothing changed.

    The common case: a whole GIOP 1.2 Request or Reply in the buffer, not
    fragmented, that the role may receive, within the size limit, and that
    the codec's fast decoders take (a Request's service contexts only once
    the code sets are fixed).  It is what ``_ready_header``, ``_check_header``,
    ``_consume`` and ``decode_body`` would return for it, in one step; every
    other message, and every error, is theirs to handle.
    """
    if conn._header is not None or conn._trains:
        return None
    buf, pos = conn._buf, conn._pos
    if len(buf) - pos < HEADER_SIZE:
        return None
    fields = header._HEADER_TABLE.get(bytes(buf[pos : pos + 8]))
    if fields is None:
        return None
    version, little, more, msg_type, order = fields
    if more or version != GIOP_1_2 or msg_type not in conn._receives:
        return None
    size = int.from_bytes(buf[pos + 8 : pos + 12], order)
    end = pos + HEADER_SIZE + size
    if size > conn.max_message_size or end > len(buf):
        return None
    with memoryview(buf) as view, view[pos + HEADER_SIZE : end] as body:
        msg: Message | None
        if msg_type is _REQUEST:
            msg = request = fast12._decode_request_12_fast(body, little)
            if request is not None and request.service_contexts and not conn.code_sets_chosen:
                return None
        elif msg_type is _REPLY:
            msg = fast12._decode_reply_12_fast(body, little)
        else:
            return None
    if msg is not None:
        conn.peer_version = version
        conn.peer_little_endian = little
        conn._pos = end
    return msg


def _with_fragment_starts(msg: Message, starts: list[int]) -> Message:
    """Record where GIOP 1.1 fragment payloads began, relative to ``msg.body``."""
    if not starts or not isinstance(msg, (Request, Reply)):
        return msg
    shift = msg.body_offset - 12  # where the body begins in the reassembled data
    inside = tuple(s - shift for s in starts if s > shift)
    return dataclasses.replace(msg, fragment_starts=inside) if inside else msg


def _read_ulong(data: bytearray | memoryview, offset: int, little_endian: bool) -> int:
    return int.from_bytes(data[offset : offset + 4], "little" if little_endian else "big")


__all__ = ["GIOPConnection", "Role"]

