#!/usr/bin/env python3
"""Write the seed corpus of the GIOP fuzz target (tests/fuzz/corpus/).

One valid message of every type the core decodes, in GIOP 1.0, 1.1 and 1.2
and both byte orders; GIOP 1.2 requests addressed by profile and by
reference; fragment trains of GIOP 1.1 and 1.2 (one file holds a
whole train); and object references: an IOR encapsulation, its ``IOR:``
string and corbaloc URLs.  Run it from the repository root; it replaces the corpus::

    python3 -m tests.fuzz.make_corpus
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

from pyorb.giop import (
    GIOP_1_0,
    GIOP_1_1,
    GIOP_1_2,
    SC_CODE_SETS,
    SUPPORTED_VERSIONS,
    CancelRequest,
    CloseConnection,
    LocateReply,
    LocateRequest,
    LocateStatus,
    Message,
    MessageError,
    Reply,
    ReplyStatus,
    Request,
    ServiceContext,
    Version,
    encode,
)
from pyorb.giop.cdr import CDRWriter
from pyorb.giop.codec import HEADER_SIZE
from pyorb.giop.codesets import code_sets_context
from pyorb.giop.ior import ORB_TYPE_OMNIORB, TAG_INTERNET_IOP, build_ior, to_corbaloc
from tests.giop.conftest import split_into_fragments

CORPUS = HERE / "corpus"
KEY = b"Echo"
# An unsigned long long argument (Bench::Echo::ping), 8-aligned in any version.
BODY = bytes(range(1, 9))


def messages(version: Version, little_endian: bool) -> dict[str, Message]:
    """One message of each type, named by type."""
    v, le = version, little_endian
    contexts = (code_sets_context(0x05010001, 0x00010109, le),)
    assert contexts[0].context_id == SC_CODE_SETS
    principal = b"" if v == GIOP_1_2 else b"me"
    return {
        "request": Request(7, 3, KEY, "ping", BODY, contexts, v, le, requesting_principal=principal),
        "oneway": Request(8, 0, KEY, "notify", BODY, (), v, le),
        "reply": Reply(7, ReplyStatus.NO_EXCEPTION, BODY, (), v, le),
        "reply-exception": Reply(
            9, ReplyStatus.SYSTEM_EXCEPTION, b"\0" * 16, (ServiceContext(99, b"x"),), v, le
        ),
        "cancel": CancelRequest(7, v, le),
        "locate-request": LocateRequest(10, KEY, v, le),
        "locate-reply": LocateReply(10, LocateStatus.OBJECT_HERE, b"", v, le),
        "close": CloseConnection(v, le),
        "error": MessageError(v, le),
    }


def addressed(little_endian: bool) -> dict[str, Message]:
    """GIOP 1.2 Requests and LocateRequests addressed by profile and by reference."""
    w = CDRWriter(little_endian, base=HEADER_SIZE + 8)  # where the member starts: 4-aligned
    w.ulong(TAG_INTERNET_IOP)
    w.octets(b"profile body")
    profile = w.getvalue()
    w = CDRWriter(little_endian, base=HEADER_SIZE + 8)
    w.ulong(0)  # selected profile index
    w.string("IDL:Bench/Echo:1.0")
    w.ulong(1)
    w.raw(profile)
    reference = w.getvalue()
    le = little_endian
    return {
        "request-profile-addr": Request(12, 3, profile, "ping", BODY, (), GIOP_1_2, le, addressing_disposition=1),
        "request-reference-addr": Request(13, 3, reference, "ping", BODY, (), GIOP_1_2, le, addressing_disposition=2),
        "locate-request-reference-addr": LocateRequest(14, reference, GIOP_1_2, le, addressing_disposition=2),
    }


def trains() -> dict[str, bytes]:
    """Fragmented Requests and Replies: the initial message and its Fragments."""
    out = {}
    for version in (GIOP_1_1, GIOP_1_2):
        for le in (True, False):
            name = f"{version[0]}.{version[1]}-{'le' if le else 'be'}"
            request = Request(11, 3, KEY, "ping", BODY * 12, (), version, le)
            out[f"train-request-{name}"] = b"".join(split_into_fragments(encode(request), 48))
            reply = Reply(11, ReplyStatus.NO_EXCEPTION, BODY * 12, (), version, le)
            out[f"train-reply-{name}"] = b"".join(split_into_fragments(encode(reply), 40))
    # Valid, but longer than the fuzz target's limit on a message (512 bytes).
    for version in (GIOP_1_1, GIOP_1_2):
        long = Request(15, 3, KEY, "ping", BODY * 64, (), version, True)
        out[f"train-long-{version[0]}.{version[1]}-le"] = b"".join(split_into_fragments(encode(long), 128))
    # GIOP 1.2 interleaves trains by request id.
    a, b = (
        split_into_fragments(encode(Request(rid, 3, KEY, "ping", BODY * 6, (), GIOP_1_2)), 40)
        for rid in (1, 2)
    )
    out["train-interleaved-1.2"] = b"".join(x for pair in zip(a, b) for x in pair)
    return out


def references() -> dict[str, bytes]:
    ior = build_ior("IDL:Bench/Echo:1.0", "127.0.0.1", 2809, KEY, orb_type=ORB_TYPE_OMNIORB)
    ior_be = build_ior("IDL:Bench/Echo:1.0", "::1", 1, KEY, version=(1, 1), little_endian=False)
    return {
        "ior-bytes": ior.to_bytes(),
        "ior-bytes-be": ior_be.to_bytes(),
        "ior-string": ior.to_string().encode(),
        "corbaloc": to_corbaloc("127.0.0.1", 2809, b"Echo/\xff").encode(),
        "corbaloc-multi": b"corbaloc::1.1@[::1]:2810,iiop:localhost/Key%20",
    }


def corpus() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for version in SUPPORTED_VERSIONS:
        for le in (True, False):
            suffix = f"{version[0]}.{version[1]}-{'le' if le else 'be'}"
            for name, msg in messages(version, le).items():
                if version == GIOP_1_0 and name == "oneway":
                    continue  # the same shape as a 1.0 request
                files[f"{name}-{suffix}"] = encode(msg)
    for le in (True, False):
        for name, msg in addressed(le).items():
            files[f"{name}-1.2-{'le' if le else 'be'}"] = encode(msg)
    files.update(trains())
    files.update(references())
    server_bound = ("request", "cancel", "locate-request", "close")
    files["stream-1.0-le"] = b"".join(
        encode(m) for name, m in messages(GIOP_1_0, True).items() if name in server_bound
    )
    return files


def main() -> int:
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    CORPUS.mkdir()
    for name, data in sorted(corpus().items()):
        (CORPUS / name).write_bytes(data)
    print(f"wrote {len(list(CORPUS.iterdir()))} files to {CORPUS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
