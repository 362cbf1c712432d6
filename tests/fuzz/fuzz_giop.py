#!/usr/bin/env python3
"""Coverage-guided fuzz target (atheris) for pyorb's sans-IO GIOP core.

Run it (libFuzzer writes what it learns into the *first* directory, so give
it a scratch one before the committed corpus)::

    python3 -m tests.fuzz.fuzz_giop /tmp/giop-corpus tests/fuzz/corpus -runs=100000   # from the repository root

Every input goes through every parser of untrusted data:

* a :class:`GIOPConnection` in each role, fed the input whole and again in
  small chunks (the events and the error must be the same both ways), then
  end of file;
* :func:`pyorb.giop.decode` on the first 12 bytes and the rest;
* :meth:`IOR.from_bytes`, the code-set decoders and a run of CDR reads;
* :func:`parse_reference` / :func:`parse_corbaloc` on the input as text.

The wire decoders may raise :class:`ProtocolError` and nothing else; the
parsers of user text (references, corbaloc URLs) may raise ``ValueError``,
as :mod:`pyorb.giop.ior` documents.  Whatever decodes must also encode again
and decode to the same thing.  Anything else is a crash.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import cast

import atheris

with atheris.instrument_imports(include=["pyorb.giop"]):
    from pyorb.giop import (
        CLOSED,
        NEED_DATA,
        GIOPConnection,
        Message,
        ProtocolError,
        Reply,
        Request,
        Role,
        decode,
        encode,
    )
    from pyorb.giop import connection as giop_connection
    from pyorb.giop.cdr import CDRReader
    from pyorb.giop.codesets import parse_code_sets_context
    from pyorb.giop.ior import IOR, CodeSetsInfo, parse_corbaloc, parse_reference, to_corbaloc
    from tests.fuzz.readers import CDR_READS, read_ior

# Small limits, so that the fuzzer can reach them with short inputs.
MAX_MESSAGE_SIZE = 512
MAX_FRAGMENT_TRAINS = 2
# The receive buffer is compacted after 64 KiB of consumed input, more than
# a fuzz input holds: make it happen between the chunks of short inputs too.
giop_connection._COMPACT_AFTER = 16

Outcome = tuple[list[Message], str | None]


def drain(conn: GIOPConnection, out: list[Message]) -> bool:
    """Collect complete messages; True once the connection reports CLOSED."""
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return False
        if event is CLOSED:
            return True
        out.append(cast(Message, event))


def feed(role: Role, data: bytes, chunk: int) -> Outcome:
    """The messages a connection yields for ``data`` fed ``chunk`` bytes at a time, then EOF."""
    conn = GIOPConnection(
        role, max_message_size=MAX_MESSAGE_SIZE, max_fragment_trains=MAX_FRAGMENT_TRAINS
    )
    out: list[Message] = []
    try:
        for i in range(0, len(data), chunk):
            conn.receive_data(data[i : i + chunk])
            drain(conn, out)
        conn.receive_data(b"")
        assert drain(conn, out), "EOF with nothing in progress must end in CLOSED"
    except ProtocolError as exc:
        try:
            conn.next_event()
        except ProtocolError:
            pass  # a dead connection stays dead
        else:
            raise AssertionError("next_event after a ProtocolError did not raise") from exc
        return out, exc.reason
    return out, None


def unfragmented(msg: Message) -> Message:
    """``msg`` without the GIOP 1.1 fragment boundaries (which encoding does not keep)."""
    if isinstance(msg, (Request, Reply)) and msg.fragment_starts:
        return dataclasses.replace(msg, fragment_starts=())
    return msg


def check_reencodes(msg: Message) -> None:
    """What decoded must encode, and decode back to itself."""
    msg = unfragmented(msg)
    data = encode(msg)
    again = decode(data[:12], data[12:])
    assert again == msg, f"re-encoding changed {msg!r} into {again!r}"


def fuzz_connection(data: bytes) -> None:
    chunk = 1 + (data[-1] % 16 if data else 0)
    for role in (Role.SERVER, Role.CLIENT):
        whole = feed(role, data, max(len(data), 1))
        assert feed(role, data, chunk) == whole, "events depend on how the bytes were split"
        for msg in whole[0]:
            check_reencodes(msg)


def fuzz_decode(data: bytes) -> None:
    try:
        msg = decode(data[:12], data[12:])
    except ProtocolError:
        return
    check_reencodes(msg)


def fuzz_ior_bytes(data: bytes) -> None:
    try:
        ior = read_ior(data)
    except ProtocolError:
        return
    assert IOR.from_bytes(ior.to_bytes()) == ior
    assert IOR.from_string(ior.to_string()) == ior


def fuzz_code_sets(data: bytes) -> None:
    for parse in (CodeSetsInfo.decode, parse_code_sets_context):
        try:
            parse(data)
        except ProtocolError:
            pass




def fuzz_cdr(data: bytes) -> None:
    script, rest = data[:6], data[6:]
    little = bool(script) and script[0] & 1 == 1
    r = CDRReader(rest, little_endian=little, base=len(script))
    try:
        for op in script:
            before = r.pos
            CDR_READS[op % len(CDR_READS)](r)
            assert before <= r.pos <= len(rest), "a read moved outside the data"
    except ProtocolError:
        pass


def fuzz_text(data: bytes) -> None:
    text = data.decode("latin-1")
    try:
        parse_reference(text)
    except ValueError:
        pass
    try:
        loc = parse_corbaloc(text)
    except ValueError:
        return
    for a in loc.addresses:
        again = parse_corbaloc(to_corbaloc(a.host, a.port, loc.object_key, a.version))
        assert again.addresses == (a,) and again.object_key == loc.object_key


def one_input(data: bytes) -> None:
    """The atheris entry point: every parser gets the same bytes."""
    fuzz_connection(data)
    fuzz_decode(data)
    fuzz_ior_bytes(data)
    fuzz_code_sets(data)
    fuzz_cdr(data)
    fuzz_text(data)


def main(argv: list[str]) -> None:
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
