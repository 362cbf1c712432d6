"""Char code sets per connection, on the wire.

CORBA: a client names the transmission code sets in a CodeSets context with
its first request; a connection on which none was named (GIOP 1.0, or a
client whose reference came from a corbaloc URL and so had no code sets)
carries ``string`` data in ISO-8859-1.  Raw GIOP here shows the octets; the
omniORBpy side of the same rules is in tests/interop (GIOP 1.0 and
corbaloc cases).
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb import marshal
from pyorb.giop import codec
from pyorb.giop.connection import GIOPConnection, Role
from pyorb.giop.codesets import CS_ISO8859_1, CS_UTF8, CS_UTF16, code_sets_context
from pyorb.giop.messages import NEED_DATA, Reply, ReplyStatus, Request

pytestmark = pytest.mark.integration  # opens sockets or starts processes

Interop = pyorb.load_idl("idl/interop.idl").Interop
Interop__POA = pyorb.load_idl("idl/interop.idl").Interop__POA
ISO_8859_2 = 0x00010002


class Echo(Interop__POA.Types):  # type: ignore[misc,name-defined]
    def echo_string(self, v: str) -> str:
        return v + "\u20ac" if v == "euro" else v  # "euro" asks for a reply Latin-1 cannot carry


@pytest_asyncio.fixture
async def server() -> AsyncIterator[pyorb.Server]:
    async with pyorb.Server() as server:
        server.activate(Echo(), "E")
        yield server


def string_body(raw: bytes) -> bytes:
    return len(raw + b"\0").to_bytes(4, "little") + raw + b"\0"


async def exchange(server: pyorb.Server, *requests: Request) -> list[Reply]:
    """Send ``requests`` on one connection, one at a time; their replies."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    core = GIOPConnection(Role.CLIENT)
    replies: list[Reply] = []
    try:
        for req in requests:
            writer.write(codec.encode(req))
            while True:
                event = core.next_event()
                if event is NEED_DATA:
                    core.receive_data(await asyncio.wait_for(reader.read(65536), 5))
                    continue
                assert isinstance(event, Reply)
                replies.append(event)
                break
    finally:
        writer.close()
    return replies


def echo(rid: int, raw: bytes, *contexts: object, version: tuple[int, int] = (1, 2)) -> Request:
    return Request(rid, 3, b"E", "echo_string", string_body(raw), tuple(contexts), version)  # type: ignore[arg-type]


def reply_text(reply: Reply) -> bytes:
    assert reply.reply_status is ReplyStatus.NO_EXCEPTION, reply
    body = reply.body[(-reply.body_offset) % 4:] if reply.version < (1, 2) else reply.body
    size = int.from_bytes(body[:4], "little" if reply.little_endian else "big")
    return bytes(body[4 : 4 + size - 1])


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [(1, 2), (1, 1), (1, 0)])
async def test_without_a_context_text_is_iso_8859_1(server: pyorb.Server, version: tuple[int, int]) -> None:
    (reply,) = await exchange(server, echo(1, b"p\xe9", version=version))
    assert reply_text(reply) == b"p\xe9"  # read as "pé" and answered in Latin-1, not "p\ufffd" in UTF-8


@pytest.mark.asyncio
async def test_the_first_context_holds_for_the_connection(server: pyorb.Server) -> None:
    utf8 = code_sets_context(CS_UTF8, CS_UTF16)
    first, second = await exchange(server, echo(1, "pé".encode(), utf8), echo(2, "ß€".encode()))
    assert reply_text(first) == "pé".encode()
    assert reply_text(second) == "ß€".encode()
    latin = code_sets_context(CS_ISO8859_1, CS_UTF16)
    (reply,) = await exchange(server, echo(1, b"\xdf", latin))
    assert reply_text(reply) == b"\xdf"


@pytest.mark.asyncio
async def test_a_char_code_set_pyorb_does_not_convert_is_codeset_incompatible(server: pyorb.Server) -> None:
    """For every request of the connection: its text is in a code set pyorb cannot read."""
    replies = await exchange(server, echo(1, b"x", code_sets_context(ISO_8859_2, CS_UTF16)), echo(2, b"p\xe9"))
    for refused in replies:
        assert refused.reply_status is ReplyStatus.SYSTEM_EXCEPTION
        exc = marshal.unpack_system_exception(refused.body, refused.body_offset, refused.little_endian)
        assert isinstance(exc, CORBA.CODESET_INCOMPATIBLE)
    (fine,) = await exchange(server, echo(1, b"p\xe9"))  # another connection keeps the default
    assert reply_text(fine) == b"p\xe9"


@pytest.mark.asyncio
async def test_a_reply_the_code_set_cannot_carry_is_data_conversion(server: pyorb.Server) -> None:
    refused, after = await exchange(server, echo(1, b"euro"), echo(2, b"ok"))
    assert refused.reply_status is ReplyStatus.SYSTEM_EXCEPTION
    exc = marshal.unpack_system_exception(refused.body, refused.body_offset, refused.little_endian)
    assert isinstance(exc, CORBA.DATA_CONVERSION) and exc.completed == CORBA.COMPLETED_YES
    assert reply_text(after) == b"ok"


@pytest.mark.asyncio
async def test_the_pyorb_client_speaks_latin_1_over_giop_1_0(server: pyorb.Server) -> None:
    """No negotiation in GIOP 1.0: Latin-1 text both ways, DATA_CONVERSION (at the call) for the rest."""
    async with pyorb.Client(pyorb.Config(giop_version=(1, 0))) as client:
        echo_ = client.resolve(server.ior("E"), Interop.Types)
        assert await echo_.echo_string("p\xe9 \xff") == "p\xe9 \xff"
        with pytest.raises(CORBA.DATA_CONVERSION):
            await echo_.echo_string("\u20ac")
        assert await echo_.echo_string("still served") == "still served"


# -- GIOP 1.1 wide text ---------------------------------------------------------
# GIOP 1.1 writes a wstring as a ulong count of 2-octet code units, the
# terminating null included, each unit in the message's byte order; GIOP 1.2
# counts octets, has no null and omniORB puts a byte-order mark first.  JacORB
# speaks the 1.1 form at 1.1; omniORB sends the 1.2 form at 1.1 too, so the
# server learns the form from the first request that has wide text.


class WideEcho(Interop__POA.Types):  # type: ignore[misc,name-defined]
    def echo_wstring(self, v: str) -> str:
        return v + "!"

    def echo_wchar(self, v: str) -> str:
        return v


def wstring_11(text: str, le: bool = True) -> bytes:
    units = text.encode("utf-16-le" if le else "utf-16-be") + b"\0\0"
    return (len(units) // 2).to_bytes(4, "little" if le else "big") + units


@pytest_asyncio.fixture
async def wide_server() -> AsyncIterator[pyorb.Server]:
    async with pyorb.Server() as server:
        server.activate(WideEcho(), "W")
        yield server


@pytest.mark.asyncio
@pytest.mark.parametrize("le", [True, False], ids=["le", "be"])
async def test_a_giop_1_1_wstring_in_the_standard_form_is_read_and_answered_so(
    wide_server: pyorb.Server, le: bool
) -> None:
    """The bytes JacORB sends at GIOP 1.1: the reply uses the same form (count of units, null included)."""
    text = "w\u00e9\u20ac\U0001F600"
    req = Request(1, 3, b"W", "echo_wstring", b"", (code_sets_context(CS_UTF8, CS_UTF16),), (1, 1), le)
    pad = -codec.body_offset(req) % 4
    (reply,) = await exchange(wide_server, Request(1, 3, b"W", "echo_wstring", bytes(pad) + wstring_11(text, le),
                                                   req.service_contexts, (1, 1), le))
    assert reply.reply_status is ReplyStatus.NO_EXCEPTION
    body = reply.body[-reply.body_offset % 4:]
    assert body == wstring_11(text + "!", le)


@pytest.mark.asyncio
async def test_the_pyorb_client_sends_the_standard_form_at_giop_1_1(wide_server: pyorb.Server) -> None:
    """pyorb to pyorb at GIOP 1.1: the client writes the standard form (its server's IOR
    is not omniORB's) and the server, having detected it, answers in it."""
    async with pyorb.Client(pyorb.Config(giop_version=(1, 1))) as client:
        echo = client.resolve(wide_server.ior("W"), Interop.Types)
        assert await echo.echo_wstring("\u00e9\u20ac\U0001F600") == "\u00e9\u20ac\U0001F600!"
        assert await echo.echo_wchar("\u20ac") == "\u20ac"
        assert await echo.echo_wstring("") == "!"
        (conn,) = wide_server.connections
        assert conn.core.wide_giop11 is True


@pytest.mark.asyncio
async def test_a_malformed_code_sets_context_is_ignored(server: pyorb.Server) -> None:
    from pyorb.giop.messages import SC_CODE_SETS, ServiceContext

    (reply,) = await exchange(server, echo(1, b"p\xe9", ServiceContext(SC_CODE_SETS, b"\x01\x02")))
    assert reply_text(reply) == b"p\xe9"  # the default (ISO-8859-1) stays


WIDE_UNION_IDL = """
module WideUnion {
  union Choice switch (long) { case 1: wchar c; case 2: wstring s; default: long n; };
  typedef sequence<wchar> WChars;
  struct Both { Choice pick; WChars chars; wstring label; };
  interface E { Choice echo (in Choice v); Both echo_both (in Both b); };
};
"""


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [(1, 2), (1, 1)], ids=["giop1.2", "giop1.1"])
async def test_wide_text_inside_unions_structs_and_sequences(tmp_path: object, version: tuple[int, int]) -> None:
    """wchar and wstring as union arms, a sequence<wchar> (no terminating null) and a wstring
    member, in both wide forms (a wchar as a union arm is read, not skipped)."""
    from pathlib import Path

    idl = Path(str(tmp_path)) / "wide_union.idl"
    idl.write_text(WIDE_UNION_IDL)
    loaded = pyorb.load_idl(idl)
    W = loaded.WideUnion

    class Echo(loaded.WideUnion__POA.E):  # type: ignore[misc,name-defined]
        def echo(self, v: object) -> object:
            return v

        def echo_both(self, b: object) -> object:
            return b

    async with pyorb.Server() as server, pyorb.Client(pyorb.Config(giop_version=version)) as client:
        e = client.resolve(server.ior(server.activate(Echo(), "E")), W.E)
        got = [await e.echo(v) for v in (W.Choice(c="\u20ac"), W.Choice(s="w\u20ac\U0001F600"), W.Choice(3, 7))]
        assert [(g._d, g._v) for g in got] == [(1, "\u20ac"), (2, "w\u20ac\U0001F600"), (3, 7)]
        both = await e.echo_both(W.Both(W.Choice(c="x"), ["a", "b", "\u20ac"], "lbl\xe9"))
        assert (both.pick._v, both.chars, both.label) == ("x", ["a", "b", "\u20ac"], "lbl\xe9")
