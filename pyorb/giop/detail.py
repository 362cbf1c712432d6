"""The ExceptionDetailMessage service context (IOP id 14): a system exception, explained.

CORBA (formal/02-06-01, 13.7.1) lets a Reply carrying a SYSTEM_EXCEPTION
or USER_EXCEPTION hold a sentence saying why: a CDR encapsulation of one
wstring, encoded by the GIOP 1.2 rules with UTF-16 as the wide code set
(an octet length, then the UTF-16 code units, no terminating NUL).  JacORB
and TAO send it and show what they read; omniORB ignores it.

Text with no byte-order mark is big-endian, as CORBA says for UTF-16;
omniORB writes a mark, so one is honoured when present.
"""

from __future__ import annotations

from typing import Iterable

from pyorb.giop.cdr import CDRReader, CDRWriter
from pyorb.giop.errors import ProtocolError
from pyorb.giop.messages import ServiceContext

SC_EXCEPTION_DETAIL_MESSAGE = 14

MAX_DETAIL_CHARS = 1000
"""Text beyond this is cut (with "...") when sent and when read: a peer's explanation is one sentence, not a payload."""


def exception_detail_context(text: str, little_endian: bool = True) -> ServiceContext:
    """The ExceptionDetailMessage context carrying ``text`` (cut to :data:`MAX_DETAIL_CHARS`)."""
    w = CDRWriter(little_endian)
    w.octet(1 if little_endian else 0)
    data = _cut(text).encode("utf-16-be", "surrogatepass")
    w.ulong(len(data))
    w.raw(data)
    return ServiceContext(SC_EXCEPTION_DETAIL_MESSAGE, w.getvalue())


def parse_exception_detail(data: bytes) -> str:
    """The text of an ExceptionDetailMessage context's data, control characters
    shown as spaces; :class:`ProtocolError` if it is not an encapsulated wstring."""
    if not data or data[0] > 1:
        raise ProtocolError("ExceptionDetailMessage: not an encapsulation")
    r = CDRReader(data, little_endian=data[0] == 1, pos=1)
    n = r.ulong()
    if n % 2:
        raise ProtocolError(f"ExceptionDetailMessage: wstring of {n} octets (UTF-16 needs an even count)")
    raw = r.raw(n)
    codec = "utf-16-be"
    if raw[:2] in (b"\xfe\xff", b"\xff\xfe"):
        codec = "utf-16-be" if raw[:2] == b"\xfe\xff" else "utf-16-le"
        raw = raw[2:]
    try:
        text = raw.decode(codec)
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"ExceptionDetailMessage: not UTF-16: {exc.reason}") from None
    text = "".join(c if c.isprintable() else " " for c in text.rstrip("\0"))
    return _cut(text)


def exception_detail(contexts: Iterable[ServiceContext]) -> str | None:
    """What a reply's ExceptionDetailMessage context says: None without one,
    or if it is malformed (an explanation is advice; a bad one is ignored)."""
    for context in contexts:
        if context.context_id == SC_EXCEPTION_DETAIL_MESSAGE:
            try:
                return parse_exception_detail(context.data) or None
            except ProtocolError:
                return None
    return None


def key_text(key: bytes) -> str:
    """An object key as texts show it: quoted if printable ASCII (``'Echo'``), else hex."""
    try:
        text = key.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    if text and text.isprintable():
        return repr(text) if len(text) <= 60 else repr(text[:57] + "...")
    return "0x" + key[:30].hex() + ("..." if len(key) > 30 else "")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 3] + "..."
