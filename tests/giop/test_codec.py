"""Codec tests: golden byte vectors run through both encoder and decoder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pyorb.giop import (
    GIOP_1_0,
    GIOP_1_1,
    CancelRequest,
    CloseConnection,
    Header,
    LocateReply,
    LocateRequest,
    LocateStatus,
    Message,
    MessageError,
    MsgType,
    ProtocolError,
    Reply,
    ReplyStatus,
    Request,
    ServiceContext,
    body_offset,
    decode,
    encode,
    message_error,
    parse_header,
)


def h(text: str) -> bytes:
    """Hex with spaces and ``|`` separators allowed, for readable vectors."""
    return bytes.fromhex(text.replace("|", " "))


# Each case: the message as the decoder returns it (body_offset set; the
# encoder ignores it), and the bytes written by hand from the GIOP spec.
GOLDEN: list[tuple[str, Message, bytes]] = [
    (
        "request-1.2-le-ping",
        Request(5, 3, b"K", "ping", b"\x01" * 8, body_offset=48),
        h(
            "47494f50 01 02 01 00 2c000000"  # GIOP 1.2, little-endian, Request, 44 bytes
            "05000000 | 03 000000"  # request_id 5, response_flags 3, reserved
            "0000 0000 | 01000000 4b 000000"  # KeyAddr, pad; key b"K", pad
            "05000000 70696e6700 000000"  # "ping", pad
            "00000000"  # no service contexts; body 8-aligned at 48
            "0101010101010101"
        ),
    ),
    (
        "reply-1.0-be",
        Reply(7, ReplyStatus.NO_EXCEPTION, b"\x00\x00\x00\x2a", version=GIOP_1_0,
              little_endian=False, body_offset=24),
        h(
            "47494f50 01 00 00 01 00000010"  # GIOP 1.0, big-endian, Reply, 16 bytes
            "00000000 | 00000007 | 00000000"  # no contexts, request_id 7, NO_EXCEPTION
            "0000002a"  # body directly
        ),
    ),
    (
        "request-1.1-be-oneway-context",
        Request(9, 0, b"ab", "op1", b"xyz", (ServiceContext(1, b"\x01\x02\x03\x04\x05"),),
                version=GIOP_1_1, little_endian=False, body_offset=60),
        h(
            "47494f50 01 01 00 00 00000033"  # GIOP 1.1, big-endian, Request, 51 bytes
            "00000001 | 00000001 00000005 0102030405 000000"  # one context, pad
            "00000009 | 00 000000"  # request_id 9, response_expected false, reserved
            "00000002 6162 0000"  # key b"ab", pad
            "00000004 6f703100"  # "op1"
            "00000000"  # empty requesting_principal
            "78797a"  # body directly at 60
        ),
    ),
    (
        "request-1.2-le-profile-addr",
        Request(1, 0, h("00000000 04000000 70726f66"), "x", body_offset=48,
                addressing_disposition=1),
        h(
            "47494f50 01 02 01 00 24000000"
            "01000000 | 00 000000"
            "0100 0000 | 00000000 04000000 70726f66"  # ProfileAddr: tag 0, 4 octets
            "02000000 7800 0000"  # "x", pad
            "00000000"  # no contexts, no body
        ),
    ),
    (
        "reply-1.2-le-user-exception-context",
        Reply(2, ReplyStatus.USER_EXCEPTION, b"\x01\x02\x03\x04",
              (ServiceContext(1, b"abc"),), body_offset=40),
        h(
            "47494f50 01 02 01 01 20000000"
            "02000000 | 01000000"  # request_id 2, USER_EXCEPTION
            "01000000 | 01000000 03000000 616263"  # one context
            "0000000000"  # pad to 40
            "01020304"
        ),
    ),
    (
        "cancel-1.0-le",
        CancelRequest(0x01020304, version=GIOP_1_0),
        h("47494f50 01 00 01 02 04000000 | 04030201"),
    ),
    (
        "locate-request-1.2-be",
        LocateRequest(1, b"abc", little_endian=False),
        h("47494f50 01 02 00 03 0000000f | 00000001 | 0000 0000 | 00000003 616263"),
    ),
    (
        "locate-request-1.0-le",
        LocateRequest(4, b"k", version=GIOP_1_0),
        h("47494f50 01 00 01 03 09000000 | 04000000 | 01000000 6b"),
    ),
    (
        "locate-reply-1.2-le-here",
        LocateReply(1, LocateStatus.OBJECT_HERE, body_offset=20),
        h("47494f50 01 02 01 04 08000000 | 01000000 | 01000000"),
    ),
    (
        # Unlike Request and Reply, a GIOP 1.2 LocateReply body is not 8-aligned (CORBA 3.0
        # 15.4.6.2); omniORB reads the forwarded IOR right after the header.
        "locate-reply-1.2-le-forward",
        LocateReply(5, LocateStatus.OBJECT_FORWARD, b"IOR!", body_offset=20),
        h("47494f50 01 02 01 04 0c000000 | 05000000 | 02000000 | 494f5221"),
    ),
    (
        "locate-reply-1.0-be-forward",
        LocateReply(3, LocateStatus.OBJECT_FORWARD, b"IOR!", version=GIOP_1_0,
                    little_endian=False, body_offset=20),
        h("47494f50 01 00 00 04 0000000c | 00000003 | 00000002 | 494f5221"),
    ),
    (
        "close-1.1-be",
        CloseConnection(GIOP_1_1, little_endian=False),
        h("47494f50 01 01 00 05 00000000"),
    ),
    ("message-error-1.2-le", MessageError(), h("47494f50 01 02 01 06 00000000")),
]


@pytest.mark.parametrize(("msg", "data"), [c[1:] for c in GOLDEN], ids=[c[0] for c in GOLDEN])
def test_golden_encode(msg: Message, data: bytes) -> None:
    assert encode(msg) == data


@pytest.mark.parametrize(("msg", "data"), [c[1:] for c in GOLDEN], ids=[c[0] for c in GOLDEN])
def test_golden_decode(msg: Message, data: bytes) -> None:
    assert decode(data[:12], data[12:]) == msg


@pytest.mark.parametrize(("msg", "data"), [c[1:] for c in GOLDEN], ids=[c[0] for c in GOLDEN])
def test_golden_body_offset(msg: Message, data: bytes) -> None:
    if isinstance(msg, (Request, Reply, LocateReply)):
        assert body_offset(msg) == msg.body_offset
        if msg.body:
            assert data[msg.body_offset :] == msg.body


def test_decode_accepts_any_bytes_like() -> None:
    data = GOLDEN[0][2]
    assert decode(memoryview(data)[:12], bytearray(data[12:])) == GOLDEN[0][1]


def test_body_offset_1_2_is_aligned_even_without_body() -> None:
    msg = Request(1, 3, b"key", "op")  # header ends at 44
    assert body_offset(msg) == 48
    assert len(encode(msg)) == 44  # no padding is written for an empty body


def test_parse_header() -> None:
    assert parse_header(h("47494f50 01 01 03 07 00000100")) == Header(
        GIOP_1_1, True, True, MsgType.FRAGMENT, 0x10000
    )


def test_message_error_helper() -> None:
    assert message_error() == h("47494f50 01 02 01 06 00000000")
    assert message_error(GIOP_1_0, little_endian=False) == h("47494f50 01 00 00 06 00000000")


def test_padding_is_zero() -> None:
    msg = Request(1, 3, b"k", "o", b"\xff", (ServiceContext(5, b"\xff"),))
    data = encode(msg)
    assert data == h(
        "47494f50 01 02 01 00 2d000000"
        "01000000 03 000000 0000 0000 01000000 6b 000000 02000000 6f00 0000"
        "01000000 05000000 01000000 ff 000000 ff"
    )


# Header plus body of messages the decoder must reject.  The first four bytes
# of a valid header are "47494f50" (GIOP).
REP = "47494f50 01 02 01 01"  # a GIOP 1.2 little-endian Reply header start
REQ = "47494f50 01 02 01 00"  # a GIOP 1.2 little-endian Request header start
BAD: list[tuple[str, bytes]] = [
    ("wrong-magic", h("47494f51 01 02 01 05 00000000")),
    ("lowercase-magic", h("67696f70 01 02 01 05 00000000")),
    ("version-1.3", h("47494f50 01 03 01 05 00000000")),
    ("version-2.0", h("47494f50 02 00 01 05 00000000")),
    ("version-0.9", h("47494f50 00 09 01 05 00000000")),
    ("type-8", h("47494f50 01 02 01 08 00000000")),
    ("type-255", h("47494f50 01 01 00 ff 00000000")),
    ("fragment-in-1.0", h("47494f50 01 00 01 07 00000000")),
    ("fragment-message", h("47494f50 01 02 01 07 04000000 01000000")),
    ("flags-1.0-byte-order-2", h("47494f50 01 00 02 05 00000000")),
    ("flags-1.1-reserved-bit", h("47494f50 01 01 05 05 00000000")),
    ("more-fragments-on-cancel", h("47494f50 01 02 03 02 04000000 01000000")),
    ("more-fragments-on-locate-1.1", h("47494f50 01 01 03 03 09000000 01000000 01000000 6b")),
    ("more-fragments-on-request", h(REQ.replace("01 00", "03 00") + "04000000 01000000")),
    ("size-mismatch-short", h("47494f50 01 02 01 02 08000000 01000000")),
    ("size-mismatch-long", h("47494f50 01 02 01 02 02000000 01000000")),
    ("cancel-truncated", h("47494f50 01 02 01 02 02000000 0100")),
    ("request-empty", h(REQ + "00000000")),
    ("request-key-past-end", h(REQ + "10000000 01000000 03000000 0000 0000 ff000000")),
    ("request-key-len-4gib", h(REQ + "14000000 01000000 03000000 0000 0000 ffffffff 41424344")),
    ("request-op-past-end",
     h(REQ + "18000000 01000000 03000000 0000 0000 01000000 4b000000 09000000")),
    ("request-op-len-0",
     h(REQ + "1c000000 01000000 03000000 0000 0000 01000000 4b000000 00000000 00000000")),
    ("request-op-no-nul",
     h(REQ + "20000000 01000000 03000000 0000 0000 01000000 4b000000 02000000 7878 0000"
       "00000000")),
    ("request-op-bad-utf8",
     h(REQ + "20000000 01000000 03000000 0000 0000 01000000 4b000000 02000000 ff00 0000"
       "00000000")),
    ("request-contexts-missing",
     h(REQ + "1c000000 01000000 03000000 0000 0000 01000000 4b000000 02000000 7800 0000")),
    ("request-context-count-huge",
     h(REQ + "20000000 01000000 03000000 0000 0000 01000000 4b000000 02000000 7800 0000"
       "ffffffff")),
    ("request-context-data-past-end",
     h(REQ + "28000000 01000000 03000000 0000 0000 01000000 4b000000 02000000 7800 0000"
       "01000000 01000000 ff000000")),
    ("request-target-disc-3", h(REQ + "10000000 01000000 03000000 0300 0000 00000000")),
    ("request-target-disc-minus-1", h(REQ + "10000000 01000000 03000000 ffff 0000 00000000")),
    ("request-profile-addr-past-end",
     h(REQ + "14000000 01000000 03000000 0100 0000 00000000 08000000")),
    ("request-reference-addr-profiles-huge",
     h(REQ + "1c000000 01000000 03000000 0200 0000 00000000 01000000 00000000 ffffff7f")),
    ("request-1.0-principal-missing",
     h("47494f50 01 00 00 00 0000001a 00000000 00000001 01 000000 00000001 4b 000000"
       "00000002 7800")),
    ("request-1.1-reserved-missing",
     h("47494f50 01 01 00 00 00000009 00000000 00000001 01")),
    ("reply-status-6", h(REP + "0c000000 01000000 06000000 00000000")),
    ("reply-status-huge", h(REP + "0c000000 01000000 ffffffff 00000000")),
    ("reply-1.0-status-4", h("47494f50 01 00 00 01 0000000c 00000000 00000001 00000004")),
    ("reply-truncated", h(REP + "06000000 01000000 0000")),
    ("locate-reply-1.1-status-3", h("47494f50 01 01 00 04 00000008 00000001 00000003")),
    ("locate-reply-1.2-status-6", h("47494f50 01 02 01 04 08000000 01000000 06000000")),
    ("locate-request-1.2-disc-7", h("47494f50 01 02 01 03 08000000 01000000 0700 0000")),
    ("locate-request-1.0-key-past-end", h("47494f50 01 00 01 03 08000000 01000000 05000000")),
]


@pytest.mark.parametrize("data", [c[1] for c in BAD], ids=[c[0] for c in BAD])
def test_decode_rejects(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode(data[:12], data[12:])


@pytest.mark.parametrize("length", range(12))
def test_parse_header_rejects_short(length: int) -> None:
    with pytest.raises(ProtocolError):
        parse_header(h("47494f50 01 02 01 05 00000000")[:length])


def test_decode_rejects_long_header() -> None:
    with pytest.raises(ProtocolError):
        decode(h("47494f50 01 02 01 05 00000000 00"), b"")


MISUSE: list[tuple[str, object]] = [
    ("version-1.3", CloseConnection((1, 3))),
    ("reply-1.0-location-forward-perm",
     Reply(1, ReplyStatus.LOCATION_FORWARD_PERM, version=GIOP_1_0)),
    ("reply-1.2-status-9", Reply(1, 9)),  # type: ignore[arg-type]
    ("locate-reply-1.1-loc-system-exception",
     LocateReply(1, LocateStatus.LOC_SYSTEM_EXCEPTION, version=GIOP_1_1)),
    ("request-1.1-profile-addr", Request(1, 3, b"k", "op", version=GIOP_1_1,
                                         addressing_disposition=1)),
    ("request-1.2-addressing-5", Request(1, 3, b"k", "op", addressing_disposition=5)),
    ("request-1.2-principal", Request(1, 3, b"k", "op", requesting_principal=b"me")),
    ("request-id-negative", CancelRequest(-1)),
    ("request-id-2**32", Reply(2**32, ReplyStatus.NO_EXCEPTION)),
    ("reply-context-id-too-big", Reply(1, ReplyStatus.NO_EXCEPTION, b"",
                                       (ServiceContext(2**32, b""),))),
    ("response-flags-256", Request(1, 256, b"k", "op")),
    ("locate-request-1.0-reference-addr", LocateRequest(1, b"k", GIOP_1_0,
                                                        addressing_disposition=2)),
]


@pytest.mark.parametrize("msg", [c[1] for c in MISUSE], ids=[c[0] for c in MISUSE])
def test_encode_refuses_what_the_version_cannot_say(msg: Message) -> None:
    with pytest.raises(ValueError):
        encode(msg)


def test_encode_refuses_non_messages() -> None:
    with pytest.raises(TypeError):
        encode("GIOP")  # type: ignore[arg-type]


@pytest.mark.integration  # a fresh interpreter
def test_import_is_cheap() -> None:
    """Importing pyorb.giop pulls in no asyncio, omniORB or threading."""
    code = (
        "import sys; before = set(sys.modules); import pyorb.giop; "
        "new = set(sys.modules) - before; "
        "assert 'asyncio' not in sys.modules, 'asyncio'; "
        "assert 'omniORB' not in sys.modules, 'omniORB'; "
        "assert 'threading' not in new, 'threading'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
