#!/usr/bin/env python3
"""Standalone omniORBpy client exercising a server of Interop::Types.

Runs named cases against the object given by IOR or corbaloc and prints one
JSON line per case: {"case": name, "ok": true/false, "detail": "..."}.
Exits 0 if every selected case passed, 1 otherwise (2 on bad options).

Every comparison is exact: the value received must equal the value sent
(NaN is checked with math.isnan, the sign of zero is checked too).  A case
that fails because of an omniORB limitation still fails; --known-failures
prints which cases are expected to fail, and why, for a configuration.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

IDL = Path(__file__).resolve().parents[2] / "idl" / "interop.idl"
GIOP_VERSIONS = ("1.0", "1.1", "1.2")
CHAR_SETS = ("ISO-8859-1", "UTF-8")
TYPES_ID = "IDL:Interop/Types:1.0"


class Mismatch(Exception):
    """A case received something other than what it expected."""


# ---------------------------------------------------------------------------
# Known omniORB limitations
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """Both ends of a run, as far as the expected failures depend on it."""

    client_giop: str = "1.2"
    client_char: str = "ISO-8859-1"
    server_giop: str = "1.2"
    server_char: str = "ISO-8859-1"
    ami: bool = False
    # A corbaloc reference carries no IOR components, so no code sets.
    corbaloc: bool = False

    @property
    def giop(self) -> str:
        """The GIOP version actually spoken: the lower of the two."""
        return min(self.client_giop, self.server_giop)


def known_failures(setup: Setup) -> dict[str, str]:
    """Cases expected to fail omniORBpy 4.3.3 <-> omniORBpy 4.3.3, and why.

    Observed with tests/peers/omni_server.py over every combination of both
    ends' --max-giop and --native-char, with and without --ami (AMI changes
    nothing).  Against another server only the rules caused by the omniORB
    client side carry over.
    """
    fails = _wide_failures(setup)
    if _char_latin1_fails(setup):
        fails["echo_char_latin1"] = (
            "a char above 0x7f has no one-octet UTF-8 form: DATA_CONVERSION "
            "(BadInput) once either ORB converts to or from UTF-8")
    if not (negotiates_code_sets(setup) and setup.server_char == "UTF-8"):
        fails["echo_string_unicode"] = (
            "non-Latin-1 text needs UTF-8 end to end: without code-set "
            "negotiation the char code set is ISO-8859-1, and an ISO-8859-1 "
            "native server cannot hold it: DATA_CONVERSION (CannotMapChar)")
    return fails


def _char_latin1_fails(setup: Setup) -> bool:
    """Whether a Latin-1 char (e.g. 0xE9) fails to make the round trip.

    Both ends ISO-8859-1: no conversion.  Both ends UTF-8 with negotiated
    code sets: the transmission code set is both natives, omniORB converts
    nothing and passes the octet through (not valid UTF-8 on the wire, but
    unchecked).  Anything else converts, and the conversion refuses it.
    """
    chars = {setup.client_char, setup.server_char}
    if chars == {"ISO-8859-1"}:
        return False
    return not (chars == {"UTF-8"} and negotiates_code_sets(setup))


def negotiates_code_sets(setup: Setup) -> bool:
    """True if the client picks transmission code sets from the IOR.

    omniORB only puts TAG_CODE_SETS into IIOP 1.2 profiles (a server run
    with -ORBmaxGIOPVersion 1.1 publishes none), a corbaloc has no
    components at all (even corbaloc::1.2@), and GIOP 1.0 has no
    negotiation.
    """
    return (setup.server_giop == "1.2" and setup.giop != "1.0"
            and not setup.corbaloc)


def _wide_failures(setup: Setup) -> dict[str, str]:
    """wchar / wstring failures (see known_failures)."""
    wide = ("echo_wchar", "echo_wstring", "echo_wstring_unicode")
    if not negotiates_code_sets(setup):
        reason = ("no wchar code set without negotiation (GIOP 1.0, or an "
                  "IOR without TAG_CODE_SETS): INV_OBJREF (WCharNotSupported)")
        return dict.fromkeys(wide, reason)
    if setup.giop == "1.1":
        reason = ("omniORB's negotiated wchar code set, UTF-16, has no "
                  "GIOP 1.1 form: BAD_PARAM (WCharTCSNotKnown)")
        return dict.fromkeys(wide, reason)
    return {"echo_wchar": (
        "omniORBpy 4.3.3 reads a GIOP 1.2 wchar as one octet: the server "
        "finds the rest as garbage after the body and closes the connection "
        "(client sees COMM_FAILURE)")}


# ---------------------------------------------------------------------------
# Value comparison
# ---------------------------------------------------------------------------

def same(a: Any, b: Any) -> bool:
    """Exact structural equality of two IDL values (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return _same_float(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if _is_any(a):
        return a.typecode().equal(b.typecode()) and same(a.value(), b.value())
    if hasattr(a, "_NP_RepositoryId") and hasattr(a, "_d"):  # union
        return same(a._d, b._d) and same(a._v, b._v)
    if hasattr(a, "_NP_RepositoryId") and hasattr(a, "__dict__"):  # struct
        return same(sorted(vars(a).items()), sorted(vars(b).items()))
    return bool(a == b)


def _same_float(a: float, b: float) -> bool:
    """Floats are equal bit for bit in sign, NaN-ness and value."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _is_any(v: Any) -> bool:
    """True for a CORBA.Any (imported lazily with omniORB)."""
    from omniORB import CORBA
    return isinstance(v, CORBA.Any)


def short(v: Any, limit: int = 80) -> str:
    """A repr short enough for a JSON detail line."""
    if isinstance(v, (list, tuple, str, bytes)) and len(v) > limit:
        return f"<{type(v).__name__} of length {len(v)}>"
    text = repr(v)
    return text if len(text) <= limit else f"{text[:limit]}..."


def difference(sent: Any, got: Any) -> str:
    """Where two values differ: the first index for long sequences."""
    if isinstance(sent, (list, tuple, str, bytes)) and type(got) is type(sent):
        if len(sent) != len(got):
            return f"length {len(got)} instead of {len(sent)}"
        for i, (x, y) in enumerate(zip(sent, got)):
            if not same(x, y):
                return f"[{i}] is {short(y)} instead of {short(x)}"
    return f"returned {short(got)}"


def describe(exc: BaseException) -> str:
    """An exception as one line, with CORBA minor code and completion."""
    from omniORB import CORBA
    if isinstance(exc, CORBA.SystemException):
        kind = exc._NP_RepositoryId.split("/")[-1].split(":")[0]
        return (f"CORBA.{kind} minor={minor_name(kind, exc.minor)} "
                f"completed={exc.completed}")
    return f"{type(exc).__name__}: {exc}"


def minor_name(kind: str, minor: int) -> str:
    """omniORB's name for a minor code (e.g. DATA_CONVERSION_CannotMapChar)."""
    from omniORB import minorCodes
    for name, value in vars(minorCodes).items():
        if value == minor and name.startswith(kind + "_"):
            return f"{name}(0x{minor:x})"
    return str(minor)


# ---------------------------------------------------------------------------
# Invocation: synchronous or AMI (sendc_ with a reply handler)
# ---------------------------------------------------------------------------

class ReplyCatcher:
    """Mixin for AMI_TypesHandler servants: keeps one reply or exception."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: tuple[Any, ...] = ()
        self.error: BaseException | None = None

    def _reply(self, *args: Any) -> None:
        self.result = args
        self.done.set()

    def _excep(self, holder: Any) -> None:
        try:
            holder.raise_exception()
        except BaseException as exc:  # noqa: BLE001 - it is the reply
            self.error = exc
        self.done.set()


def reply_catcher_class(poa_mod: ModuleType) -> type:
    """An AMI_TypesHandler servant class that routes every op to the mixin."""
    base = poa_mod.AMI_TypesHandler
    methods = {op: (ReplyCatcher._excep if op.endswith("_excep")
                    else ReplyCatcher._reply) for op in base._omni_op_d}
    return type("TypesReplyCatcher", (ReplyCatcher, base), methods)


@dataclass
class Context:
    """What a case needs: the ORB, the target and the way to call it."""

    orb: Any
    poa: Any
    interop: ModuleType
    poa_mod: ModuleType
    target: Any
    raw: Any
    timeout: float
    ami: bool
    catcher_cls: type

    def call(self, op: str, *args: Any) -> Any:
        """Invoke op on the target, the AMI way when --ami is set."""
        if not self.ami:
            return getattr(self.target, op)(*args)
        return self._call_ami(op, args)

    def _call_ami(self, op: str, args: tuple[Any, ...]) -> Any:
        """sendc_op, then wait for the handler's callback."""
        catcher = self.catcher_cls()
        oid = self.poa.activate_object(catcher)
        try:
            handler = self.poa.id_to_reference(oid)
            getattr(self.target, "sendc_" + op)(handler, *args)
            # The ORB's own call timeout fires first; this only bounds a
            # reply that never reaches the handler at all.
            if not catcher.done.wait(self.timeout + 5.0):
                raise Mismatch(f"no AMI reply for {op} "
                               f"within {self.timeout + 5.0:.0f} s")
        finally:
            self.poa.deactivate_object(oid)
        if catcher.error is not None:
            raise catcher.error
        return _as_sync_result(catcher.result)


def _as_sync_result(args: tuple[Any, ...]) -> Any:
    """Handler arguments in the shape a synchronous call returns them."""
    if not args:
        return None
    return args[0] if len(args) == 1 else tuple(args)


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

Case = Callable[[Context], str]
CASES: dict[str, Case] = {}


def case(name: str) -> Callable[[Case], Case]:
    """Register a case under name (registration order is running order)."""
    def register(fn: Case) -> Case:
        CASES[name] = fn
        return fn
    return register


def check_echo(ctx: Context, op: str, values: Sequence[Any]) -> str:
    """Send each value through op and demand it back unchanged."""
    for v in values:
        got = ctx.call(op, v)
        if not same(got, v):
            raise Mismatch(f"{op}({short(v)}): {difference(v, got)}")
    return f"{len(values)} values echoed"


def echo_case(name: str, op: str, values: Callable[[Context], list[Any]]
              ) -> None:
    """Register an echo case whose values are built once the IDL is loaded."""
    case(name)(lambda ctx: check_echo(ctx, op, values(ctx)))


FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.401298464324817e-45  # smallest float32 subnormal
INF = float("inf")

echo_case("echo_boolean", "echo_boolean", lambda c: [True, False])
echo_case("echo_char", "echo_char", lambda c: ["A", "\x00", " ", "~", "\x7f"])
echo_case("echo_char_latin1", "echo_char", lambda c: ["\xe9", "\xff", "\x80"])
echo_case("echo_wchar", "echo_wchar",
          lambda c: ["A", "\xe9", "\u20ac", "\u65e5", "\x00", "\uffff"])
echo_case("echo_octet", "echo_octet", lambda c: [0, 1, 127, 128, 255])
echo_case("echo_short", "echo_short",
          lambda c: [-(2 ** 15), -1, 0, 1, 2 ** 15 - 1])
echo_case("echo_ushort", "echo_ushort", lambda c: [0, 1, 2 ** 15, 2 ** 16 - 1])
echo_case("echo_long", "echo_long",
          lambda c: [-(2 ** 31), -1, 0, 1, 2 ** 31 - 1])
echo_case("echo_ulong", "echo_ulong", lambda c: [0, 1, 2 ** 31, 2 ** 32 - 1])
echo_case("echo_longlong", "echo_longlong",
          lambda c: [-(2 ** 63), -1, 0, 1, 2 ** 53 + 1, 2 ** 63 - 1])
echo_case("echo_ulonglong", "echo_ulonglong",
          lambda c: [0, 1, 2 ** 63, 2 ** 64 - 1])
# Only values a float32 holds exactly: anything else would come back rounded.
echo_case("echo_float", "echo_float",
          lambda c: [0.0, -0.0, 1.5, -3.25, FLOAT32_MAX, -FLOAT32_MAX,
                     FLOAT32_TINY, INF, -INF, math.nan])
echo_case("echo_double", "echo_double",
          lambda c: [0.0, -0.0, 1 / 3, -1e308, sys.float_info.max,
                     sys.float_info.min, 5e-324, INF, -INF, math.nan])
# Long enough (300 000 bytes) that omniORB fragments the message.
echo_case("echo_string", "echo_string",
          lambda c: ["", "a", "hello world", "x" * 300_000])
echo_case("echo_string_latin1", "echo_string",
          lambda c: ["h\xe9llo", "\xff\xe0\xe7", "\xa0\xbf"])
echo_case("echo_string_unicode", "echo_string",
          lambda c: ["h\xe9llo \u20ac", "\u65e5\u672c\u8a9e",
                     "\U0001f600\U0001f389"])
echo_case("echo_wstring", "echo_wstring",
          lambda c: ["", "a", "hello world", "y" * 100_000])
echo_case("echo_wstring_unicode", "echo_wstring",
          lambda c: ["h\xe9llo \u20ac", "\u65e5\u672c\u8a9e",
                     "\U0001f600\U0001f389"])


def _points(ctx: Context, count: int) -> list[Any]:
    """count distinct Points with varying label lengths (and alignment)."""
    point = ctx.interop.Point
    return [point(i + 0.5, -i / 4, "p" * (i % 7)) for i in range(count)]


echo_case("echo_point", "echo_point",
          lambda c: [c.interop.Point(1.5, -2.25, "origin"),
                     c.interop.Point(-0.0, INF, ""),
                     c.interop.Point(math.nan, 5e-324, "\xe9t\xe9")])
# 20 000 points is about 480 KB: well over 64 KiB (so omniORB fragments it)
# and under omniORB's 2 MiB giopMaxMsgSize.
echo_case("echo_points", "echo_points",
          lambda c: [[], _points(c, 1), _points(c, 20_000)])
echo_case("echo_blob", "echo_blob",
          lambda c: [b"", b"\x00\xff", bytes(range(256)) * 800])
echo_case("echo_color", "echo_color",
          lambda c: [c.interop.red, c.interop.green, c.interop.blue])


def _variants(ctx: Context) -> list[Any]:
    """Every Variant branch, the default one with several discriminators."""
    variant, point = ctx.interop.Variant, ctx.interop.Point
    return [variant(as_long=-7), variant(as_string="branch two"),
            variant(as_point=point(3.0, 4.0, "p")), variant(other=True),
            variant(0, False), variant(4, True), variant(-1, True)]


def _anys(ctx: Context) -> list[Any]:
    """Anys holding a long, a string, a Point and a sequence."""
    from omniORB import CORBA
    i = ctx.interop
    return [CORBA.Any(CORBA.TC_long, -123456),
            CORBA.Any(CORBA.TC_string, "in an any"),
            CORBA.Any(i._tc_Point, i.Point(0.25, -8.0, "any point")),
            CORBA.Any(i._tc_LongSeq, [1, -2, 2 ** 31 - 1]),
            CORBA.Any(i._tc_Color, i.green)]


echo_case("echo_variant", "echo_variant", _variants)
echo_case("echo_any", "echo_any", _anys)
echo_case("echo_matrix", "echo_matrix",
          lambda c: [[[1, 2, 3], [-4, 2 ** 31 - 1, -(2 ** 31)]],
                     [[0, 0, 0], [0, 0, 0]]])


def expect(what: str, got: Any, want: Any) -> None:
    """Raise Mismatch unless got is exactly want."""
    if not same(got, want):
        raise Mismatch(f"{what}: got {short(got)}, want {short(want)}")


@case("directions")
def directions(ctx: Context) -> str:
    """in / inout / out: (a + b, b + 1, 2a)."""
    for a, b in ((7, 10), (-3, 2 ** 31 - 2), (0, -1)):
        expect(f"directions({a}, {b})", ctx.call("directions", a, b),
               (a + b, b + 1, 2 * a))
    return "3 calls"


@case("mixed")
def mixed(ctx: Context) -> str:
    """Strings of every length mod 8 shift the alignment of what follows."""
    for n in range(9):
        s = "abcdefghi"[:n]
        d, o, ll = 1.5 + n, 200 + n, -(2 ** 40) - n
        expect(f"mixed({s!r})", ctx.call("mixed", s, d, o, ll),
               (float(d + o + ll), s[::-1]))
    return "9 alignments"


@case("raise_failure")
def raise_failure(ctx: Context) -> str:
    """A user exception with all its members."""
    for code in (17, -1):
        try:
            ctx.call("raise_failure", code)
        except ctx.interop.Failure as exc:
            expect("Failure members", (exc.code, exc.why, exc.details),
                   (code, "failed", [1, 2, 3]))
        else:
            raise Mismatch("no exception raised")
    return "Failure(code, 'failed', [1, 2, 3])"


@case("raise_empty")
def raise_empty(ctx: Context) -> str:
    """A user exception without members."""
    try:
        ctx.call("raise_empty")
    except ctx.interop.Empty:
        return "Empty"
    raise Mismatch("no exception raised")


@case("raise_undeclared")
def raise_undeclared(ctx: Context) -> str:
    """An undeclared servant error arrives as CORBA.UNKNOWN."""
    from omniORB import CORBA
    try:
        ctx.call("raise_undeclared")
    except CORBA.UNKNOWN as exc:
        return describe(exc)
    raise Mismatch("no exception raised")


@case("raise_system")
def raise_system(ctx: Context) -> str:
    """BAD_PARAM with minor 42, COMPLETED_NO."""
    from omniORB import CORBA
    try:
        ctx.call("raise_system")
    except CORBA.BAD_PARAM as exc:
        expect("minor, completed", (exc.minor, exc.completed),
               (42, CORBA.COMPLETED_NO))
        return describe(exc)
    raise Mismatch("no exception raised")


@case("make_node")
def make_node(ctx: Context) -> str:
    """A reference made by the server, called, then passed back to it."""
    node = ctx.call("make_node", "n\xe9")
    expect("node.name()", node.name(), "n\xe9")
    expect("node_name(node)", ctx.call("node_name", node), "n\xe9")
    return "make_node / name / node_name"


@case("node_by_corbaloc")
def node_by_corbaloc(ctx: Context) -> str:
    # A reference made from a corbaloc URL has no type id in its IOR (omniORB
    # and JacORB send it so); the server must type it from the IDL, not the IOR.
    from pyorb.giop.ior import IOR, to_corbaloc

    profile = IOR.from_string(ctx.orb.object_to_string(ctx.call("make_node", "by-url"))).iiop
    assert profile is not None
    untyped = ctx.orb.string_to_object(to_corbaloc(profile.host, profile.port, profile.object_key))
    expect("type id sent", IOR.from_string(ctx.orb.object_to_string(untyped)).type_id, "")
    expect("node_name(corbaloc node)", ctx.call("node_name", untyped), "by-url")
    return "node_name of a reference made from a corbaloc URL"


@case("node_callback")
def node_callback(ctx: Context) -> str:
    """The server calls name() on a Node that lives in this client."""
    servant = _client_node_class(ctx)("client-node")
    oid = ctx.poa.activate_object(servant)
    try:
        expect("node_name(client node)",
               ctx.call("node_name", ctx.poa.id_to_reference(oid)),
               "client-node")
    finally:
        ctx.poa.deactivate_object(oid)
    return "server called back into the client"


def _client_node_class(ctx: Context) -> type:
    """A Node servant class on the generated skeleton."""
    def name(self: Any) -> str:
        return str(self.label)

    def init(self: Any, label: str) -> None:
        self.label = label
    return type("ClientNode", (ctx.poa_mod.Node,),
                {"__init__": init, "name": name})


@case("nodes")
def nodes(ctx: Context) -> str:
    """A sequence of references, each one called."""
    refs = ctx.call("nodes", 3)
    expect("nodes(3) names", [r.name() for r in refs],
           ["node0", "node1", "node2"])
    expect("nodes(0)", ctx.call("nodes", 0), [])
    return "3 references"


@case("refs_in_values")
def refs_in_values(ctx: Context) -> str:
    """References inside a struct, a sequence of structs, an array, a union,
    an any and an exception, both ways; the server calls each one it gets."""
    from omniORB import CORBA
    I = ctx.interop
    a, b = ctx.call("make_node", "a\xe9"), ctx.call("make_node", "b")
    held = ctx.call("label_holder", I.Holder("", a))
    expect("label_holder", (held.label, held.target.name()), ("a\xe9", "a\xe9"))
    pair = ctx.call("label_pair", [a, b])
    expect("label_pair", [(h.label, h.target.name()) for h in pair], [("a\xe9", "a\xe9"), ("b", "b")])
    expect("flip_variant(node)", ctx.call("flip_variant", I.NodeOrName(ref=b)).name, "b")
    made = ctx.call("flip_variant", I.NodeOrName(name="made"))
    expect("flip_variant(name)", made.ref.name(), "made")
    expect("flip_any(node)", ctx.call("flip_any", CORBA.Any(I._tc_Node, a)).value(), "a\xe9")
    got = ctx.call("flip_any", CORBA.Any(CORBA.TC_string, "in-any")).value()
    expect("flip_any(name)", got._narrow(I.Node).name(), "in-any")
    try:
        ctx.call("raise_node_error", b)
    except I.NodeError as exc:
        expect("NodeError", (exc.why, exc.culprit.name()), ("b", "b"))
    else:
        raise Mismatch("raise_node_error raised nothing")
    return "struct, sequence of structs, array, union, any, exception"


@case("oneway")
def oneway(ctx: Context) -> str:
    """fire(v) then poll last_oneway() until v lands (bounded)."""
    token = f"fired-{time.monotonic_ns()}"
    ctx.target.fire(token)
    deadline = time.monotonic() + ctx.timeout
    while True:
        got = ctx.call("last_oneway")
        if got == token or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    expect("last_oneway()", got, token)
    return "oneway landed"


@case("narrow")
def narrow(ctx: Context) -> str:
    """_narrow to Types succeeds, to Node gives nil (a remote _is_a)."""
    from omniORB import CORBA
    types = ctx.raw._narrow(ctx.interop.Types)
    if CORBA.is_nil(types):
        raise Mismatch("_narrow(Types) gave nil")
    expect("narrowed echo_long", types.echo_long(5), 5)
    if not CORBA.is_nil(ctx.raw._narrow(ctx.interop.Node)):
        raise Mismatch("_narrow(Node) succeeded on a Types")
    return "Types yes, Node no"


@case("non_existent")
def non_existent(ctx: Context) -> str:
    """_non_existent() is False for a live object."""
    expect("_non_existent()", ctx.raw._non_existent(), False)
    return "exists"


@case("is_a")
def is_a(ctx: Context) -> str:
    """_is_a with the right and a wrong repository id."""
    expect(f"_is_a({TYPES_ID})", ctx.raw._is_a(TYPES_ID), True)
    expect("_is_a(IDL:Other:1.0)", ctx.raw._is_a("IDL:Other:1.0"), False)
    return "right id True, other id False"


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------

def run_case(ctx: Context, name: str) -> dict[str, Any]:
    """Run one case; any exception is a failure described in detail."""
    try:
        detail = CASES[name](ctx)
        ok = True
    except Mismatch as exc:
        ok, detail = False, str(exc)
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        ok, detail = False, describe(exc)
    if ctx.ami and name in AMI_CASES:
        detail = f"[ami] {detail}"
    return {"case": name, "ok": ok, "detail": detail}


# Cases whose calls go through Context.call, so --ami turns them into
# sendc_ invocations (the rest use pseudo-operations or oneways).
AMI_CASES = frozenset(CASES) - {"narrow", "non_existent", "is_a"}


def orb_args(ns: argparse.Namespace) -> list[str]:
    """Client ORB options for the parsed command line."""
    args = [sys.argv[0], "-ORBmaxGIOPVersion", ns.max_giop,
            "-ORBclientCallTimeOutPeriod", str(int(ns.timeout * 1000)),
            # Objects this client exposes (AMI handlers, the callback Node)
            # listen on loopback only.
            "-ORBendPoint", "giop:tcp:127.0.0.1:"]
    if ns.native_char == "UTF-8":
        args += ["-ORBnativeCharCodeSet", "UTF-8"]
    if ns.no_locate:
        args += ["-ORBverifyObjectExistsAndType", "0"]
    return args


def make_context(ns: argparse.Namespace) -> Context:
    """Start the ORB, load the IDL (with AMI stubs) and resolve the target."""
    from pyorb.idl import import_generated
    from omniORB import CORBA
    orb = CORBA.ORB_init(orb_args(ns), CORBA.ORB_ID)
    import_generated(str(IDL), ["-Wbami"])  # omniORB.importIDL, minus its PATH lookup
    interop, poa_mod = sys.modules["Interop"], sys.modules["Interop__POA"]
    poa = orb.resolve_initial_references("RootPOA")
    poa._get_the_POAManager().activate()
    try:
        raw = orb.string_to_object(ns.target)
    except CORBA.BAD_PARAM:
        orb.destroy()
        raise ValueError(f"not a usable IOR or corbaloc: {ns.target[:60]}")
    # Unchecked: the checked _narrow is the "narrow" case's business.
    target = raw._unchecked_narrow(interop.Types)
    return Context(orb=orb, poa=poa, interop=interop, poa_mod=poa_mod,
                   target=target, raw=raw, timeout=ns.timeout, ami=ns.ami,
                   catcher_cls=reply_catcher_class(poa_mod))


def run(ns: argparse.Namespace) -> int:
    """Run the selected cases, print a JSON line each, return exit code."""
    try:
        ctx = make_context(ns)
    except ValueError as exc:
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        return 2
    all_ok = True
    try:
        for name in ns.cases:
            result = run_case(ctx, name)
            all_ok &= result["ok"]
            print(json.dumps(result, ensure_ascii=False), flush=True)
    finally:
        ctx.orb.destroy()
    return 0 if all_ok else 1


def parse_cases(text: str) -> list[str]:
    """Comma-separated case names, each one known."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown case(s): {', '.join(unknown)}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 on a bad option."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("target", nargs="?", help="IOR:... or corbaloc:...")
    p.add_argument("--cases", type=parse_cases, default=list(CASES),
                   help="comma-separated case names (default: all)")
    p.add_argument("--list", action="store_true", help="print case names")
    p.add_argument("--known-failures", action="store_true",
                   help="print (JSON) the cases expected to fail for these "
                        "options, the --server-* ones and the target's form "
                        "(IOR or corbaloc, if given), then exit")
    p.add_argument("--max-giop", choices=GIOP_VERSIONS, default="1.2",
                   help="client -ORBmaxGIOPVersion (default 1.2)")
    p.add_argument("--native-char", choices=CHAR_SETS, default="ISO-8859-1",
                   help="client native char code set (default ISO-8859-1)")
    p.add_argument("--server-max-giop", choices=GIOP_VERSIONS, default="1.2",
                   help="for --known-failures: the server's max GIOP")
    p.add_argument("--server-native-char", choices=CHAR_SETS,
                   default="ISO-8859-1",
                   help="for --known-failures: the server's native char set")
    p.add_argument("--ami", action="store_true",
                   help="use sendc_ with an AMI_TypesHandler where possible")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="per-call timeout (default 10)")
    p.add_argument("--no-locate", action="store_true",
                   help="-ORBverifyObjectExistsAndType 0: no LocateRequest before the first call")
    ns = p.parse_args(argv)
    if ns.timeout <= 0:
        p.error("--timeout must be positive")
    if ns.target is None and not (ns.list or ns.known_failures):
        p.error("a target IOR or corbaloc is required")
    return ns


def setup_of(ns: argparse.Namespace) -> Setup:
    """The Setup described by the command line."""
    return Setup(client_giop=ns.max_giop, client_char=ns.native_char,
                 server_giop=ns.server_max_giop,
                 server_char=ns.server_native_char, ami=ns.ami,
                 corbaloc=(ns.target or "").lower().startswith("corbaloc"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    ns = parse_args(argv)
    if ns.list:
        print("\n".join(CASES))
        return 0
    if ns.known_failures:
        fails = known_failures(setup_of(ns))
        print(json.dumps({k: v for k, v in fails.items() if k in ns.cases}))
        return 0
    return run(ns)


def exit_now(code: int) -> None:
    """Flush and leave without interpreter finalisation.

    omniORB threads that wind down after orb.destroy() (AMI callback
    threads especially) still take the GIL; if that happens while Python
    finalises, CPython ends them with pthread_exit, whose forced unwind
    through omniORB's C++ aborts the process ("terminate called without an
    active exception", about 1 AMI run in 15).  The results are already
    out, and the exit code must not be lost to that.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
