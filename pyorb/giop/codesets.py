"""Code sets: the OSF ids pyorb knows, what it can convert, and the negotiation of transmission code sets.

A client chooses the transmission code sets (TCS-C for ``char``/``string``,
TCS-W for ``wchar``/``wstring``) from the code sets a server's IOR advertises
(:class:`~pyorb.giop.ior.CodeSetsInfo`, a TAG_CODE_SETS component) and names
them in the CodeSets service context of its first request (CORBA 3.0
§13.10).  Decoders of wire data raise only :class:`ProtocolError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyorb.giop.cdr import new_encapsulation, open_encapsulation
from pyorb.giop.messages import SC_CODE_SETS, ServiceContext

if TYPE_CHECKING:
    from pyorb.giop.ior import CodeSetComponent, CodeSetsInfo

# --- code sets (OSF character and code set registry ids) ----------------------

CS_ISO8859_1 = 0x00010001
CS_UCS2 = 0x00010100  # UCS-2 level 1
CS_UTF16 = 0x00010109
CS_UTF8 = 0x05010001

CODE_SET_NAMES: dict[int, str] = {
    CS_ISO8859_1: "ISO-8859-1",
    CS_UCS2: "UCS-2",
    CS_UTF16: "UTF-16",
    CS_UTF8: "UTF-8",
}
"""Display names, as omniORB's ``catior`` prints them."""

CODE_SET_CODECS: dict[int, str] = {
    CS_ISO8859_1: "latin-1",
    CS_UCS2: "utf-16",  # a subset of UTF-16 (no surrogates)
    CS_UTF16: "utf-16",
    CS_UTF8: "utf-8",
}
"""Python codec per code set.  For the 16-bit sets the byte order is not part
of the code set: it comes from a BOM or, failing that, from the GIOP rules, so
callers pick ``utf-16-be``/``utf-16-le`` themselves."""

# What pyorb can transmit (it converts to and from Python ``str`` itself).
CHAR_CONVERSIONS: tuple[int, ...] = (CS_UTF8, CS_ISO8859_1)
WCHAR_CONVERSIONS: tuple[int, ...] = (CS_UTF16,)


def code_set_name(code_set: int) -> str:
    """A readable name for an OSF code set id (hex when unknown)."""
    return CODE_SET_NAMES.get(code_set, f"0x{code_set:08x}")


# --- code-set negotiation ------------------------------------------------------


class CodeSetIncompatible(ValueError):
    """No transmission code set both sides support (CORBA CODESET_INCOMPATIBLE)."""


def negotiate(
    server: CodeSetsInfo | None,
    client_native_char: int = CS_UTF8,
    client_native_wchar: int = CS_UTF16,
    *,
    char_conversions: tuple[int, ...] = CHAR_CONVERSIONS,
    wchar_conversions: tuple[int, ...] = WCHAR_CONVERSIONS,
) -> tuple[int, int]:
    """Client-side choice of (TCS-C, TCS-W) from the server's code sets.

    Without a component the spec's defaults apply: ISO-8859-1 for char and no
    wchar (0: wide data cannot be sent).  Otherwise, in order: equal natives;
    the server's native if we can convert to it; our native if the server can
    convert from it; the first server conversion set we also support (this
    covers the UTF-8 / UTF-16 fallback when both sides list it); else
    :class:`CodeSetIncompatible`.
    """
    if server is None:
        return CS_ISO8859_1, 0
    tcs_c = _select(server.char, client_native_char, char_conversions, CS_ISO8859_1, "char")
    tcs_w = _select(server.wchar, client_native_wchar, wchar_conversions, 0, "wchar")
    return tcs_c, tcs_w


def _select(
    server: CodeSetComponent, native: int, conversions: tuple[int, ...], unspecified: int, kind: str
) -> int:
    if server.native == 0 and not server.conversion:
        return unspecified  # the server states nothing: same as no component
    if server.native == native:
        return native
    if server.native in conversions:
        return server.native
    if native in server.conversion:
        return native
    for cs in server.conversion:
        if cs == native or cs in conversions:
            return cs
    raise CodeSetIncompatible(
        f"no common {kind} code set: server native {code_set_name(server.native)} "
        f"converts {[code_set_name(c) for c in server.conversion]}, "
        f"client native {code_set_name(native)} converts {[code_set_name(c) for c in conversions]}"
    )


def code_sets_context(tcs_c: int, tcs_w: int, little_endian: bool = True) -> ServiceContext:
    """The CodeSets service context (CONV_FRAME::CodeSetContext) a client sends."""
    w = new_encapsulation(little_endian)
    w.ulong(tcs_c)
    w.ulong(tcs_w)
    return ServiceContext(SC_CODE_SETS, w.getvalue())


def parse_code_sets_context(data: bytes) -> tuple[int, int]:
    """(TCS-C, TCS-W) from CodeSets service context data; :class:`ProtocolError` if malformed."""
    r = open_encapsulation(data, "CodeSets service context")
    return r.ulong(), r.ulong()


__all__ = [
    "CHAR_CONVERSIONS",
    "CODE_SET_CODECS",
    "CODE_SET_NAMES",
    "CS_ISO8859_1",
    "CS_UCS2",
    "CS_UTF16",
    "CS_UTF8",
    "CodeSetIncompatible",
    "WCHAR_CONVERSIONS",
    "code_set_name",
    "code_sets_context",
    "negotiate",
    "parse_code_sets_context",
]
