"""The pyorb client calls an omniORBpy server (another process).

The cases and checks are those of tests/peers/omni_client.py, run through a
blocking view of pyorb proxies, so both directions are held to the same
values.  The pyorb client can speak GIOP 1.0, 1.1 or 1.2 and send either
byte order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from omniORB import CORBA

import pyorb
from pyorb.config import Config
from pyorb.testing import LoopThread, SyncProxy
from tests.interop.conftest import OmniServer
from tests.peers import omni_client

IDL = pyorb.load_idl("idl/interop.idl")
Interop = IDL.Interop

# Cases that need omniORB itself on the client side.
NOT_APPLICABLE = {
    "node_callback": "needs an omniORB POA in the client (pyorb servers are covered elsewhere)",
    "narrow": "checks CORBA.is_nil on an omniORB reference; test_narrow covers pyorb's narrow",
    "node_by_corbaloc": "makes an omniORB reference from a URL; tests/test_static_types.py covers pyorb clients",
    "refs_in_values": "calls references nested in values in omniORB's blocking style; "
                      "test_references_inside_values covers pyorb clients",
}
CASES = [c for c in omni_client.CASES if c not in NOT_APPLICABLE]


@dataclass
class PyorbContext:
    """What omni_client's cases use, backed by a pyorb proxy."""

    target: SyncProxy
    raw: SyncProxy
    interop: Any
    timeout: float = 10.0
    ami: bool = False

    def call(self, op: str, *args: Any) -> Any:
        return getattr(self.target, op)(*args)


def run_cases(runner: LoopThread, ior: str, config: Config) -> dict[str, str]:
    """Run every applicable case; returns the failures (case -> detail)."""

    async def resolve() -> tuple[pyorb.Client, Any]:
        client = pyorb.Client(config)
        return client, client.resolve(ior, Interop.Types)

    client, proxy = runner.run(resolve())
    sync = SyncProxy(proxy, runner, timeout=30)
    ctx = PyorbContext(target=sync, raw=sync, interop=Interop)
    try:
        results = [omni_client.run_case(ctx, name) for name in CASES]  # type: ignore[arg-type]
    finally:
        runner.run(client.close())
    return {r["case"]: r["detail"] for r in results if not r["ok"]}


def expected_failures(giop: tuple[int, int], server_char: str) -> dict[str, str]:
    """Cases that fail, and why, for the pyorb client of an omniORBpy server."""
    wide = ("echo_wchar", "echo_wstring", "echo_wstring_unicode")
    if giop == (1, 0):
        expected = dict.fromkeys(wide, "GIOP 1.0 has no wide characters: omniORB refuses them (MARSHAL)")
        expected["echo_string_unicode"] = "GIOP 1.0 text is ISO-8859-1, CORBA's default: DATA_CONVERSION (as omni-to-omni)"
    elif giop == (1, 1):
        expected = dict.fromkeys(wide, "omniORB's UTF-16 wchar code set has no GIOP 1.1 form (as omni-to-omni)")
    else:
        expected = {"echo_wchar": "omniORBpy 4.3.3 misreads the (correct) GIOP 1.2 wchar pyorb sends and drops the connection"}
    if server_char == "ISO-8859-1":
        expected["echo_string_unicode"] = ("the negotiated char code set is the server's native ISO-8859-1, which has "
                                           "no such characters: DATA_CONVERSION (as omni-to-omni)")
    if giop == (1, 0) and server_char == "UTF-8":
        expected["echo_char_latin1"] = "omniORB cannot convert char 0xE9 without code-set negotiation (GIOP 1.0)"
    return expected


@pytest.fixture(scope="module")
def omni_servers() -> Any:
    servers = {char: OmniServer("--native-char", char) for char in ("UTF-8", "ISO-8859-1")}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.mark.parametrize("giop", [(1, 2), (1, 1), (1, 0)], ids=["giop1.2", "giop1.1", "giop1.0"])
@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
@pytest.mark.parametrize("server_char", ["UTF-8", "ISO-8859-1"])
def test_pyorb_client_every_case(
    omni_servers: dict[str, OmniServer], loop_thread: LoopThread,
    giop: tuple[int, int], little_endian: bool, server_char: str,
) -> None:
    config = Config(giop_version=giop, little_endian=little_endian)
    failed = run_cases(loop_thread, omni_servers[server_char].ior, config)
    assert failed.keys() == expected_failures(giop, server_char).keys(), failed


def test_narrow(omni_servers: dict[str, OmniServer], loop_thread: LoopThread) -> None:
    async def narrow() -> tuple[int, bool]:
        async with pyorb.Client() as client:
            types = await client.narrow(omni_servers["UTF-8"].ior, Interop.Types)
            with pytest.raises(Exception) as info:
                await client.narrow(omni_servers["UTF-8"].ior, Interop.Node)
            return await types.echo_long(5), "BAD_PARAM" in repr(info.value)

    assert loop_thread.run(narrow()) == (5, True)


def test_ami_callback_and_poller(omni_servers: dict[str, OmniServer], loop_thread: LoopThread) -> None:
    class Handler:
        def __init__(self) -> None:
            self.got: list[Any] = []

        def directions(self, result: int, b: int, doubled: int) -> None:
            self.got.append((result, b, doubled))

        def directions_excep(self, holder: Any) -> None:
            self.got.append(("unexpected", holder.exception))

        def raise_failure(self) -> None:
            self.got.append(("unexpected", None))

        def raise_failure_excep(self, holder: Any) -> None:
            try:
                holder.raise_exception()
            except Interop.Failure as exc:
                self.got.append(("failure", exc.code, exc.details))

    async def ami() -> tuple[list[Any], Any, Any]:
        import asyncio

        handler = Handler()
        async with pyorb.Client() as client:
            types = client.resolve(omni_servers["UTF-8"].ior, Interop.Types)
            types.sendc_directions(handler, 3, 4)
            types.sendc_raise_failure(handler, 9)
            poller = types.sendp_echo_string("polled")
            for _ in range(500):
                if len(handler.got) == 2 and poller.is_ready():
                    break
                await asyncio.sleep(0.01)
            return sorted(handler.got, key=repr), poller.result(), await poller

    got, polled, awaited = loop_thread.run(ami())
    assert got == sorted([(7, 5, 6), ("failure", 9, [1, 2, 3])], key=repr)
    assert polled == awaited == "polled"




@pytest.mark.parametrize("giop", [(1, 2), (1, 1), (1, 0)], ids=["giop1.2", "giop1.1", "giop1.0"])
@pytest.mark.parametrize("little_endian", [True, False], ids=["le", "be"])
def test_pyorb_client_to_pyorb_server_every_case(
    loop_thread: LoopThread, giop: tuple[int, int], little_endian: bool
) -> None:
    """pyorb on both ends: every case passes, wchar included, in every version and byte order,
    except text outside Latin-1 over GIOP 1.0 (no code-set negotiation: ISO-8859-1 both ways)."""
    from tests.interop.servants import TypesCoroutine

    async def start() -> tuple[pyorb.Server, str]:
        server = pyorb.Server()
        await server.start()
        return server, server.ior(server.activate(TypesCoroutine(server), "Types"))

    server, ior = loop_thread.run(start())
    try:
        failed = run_cases(loop_thread, ior, Config(giop_version=giop, little_endian=little_endian))
    finally:
        loop_thread.run(server.close())
    assert failed.keys() == ({"echo_string_unicode"} if giop == (1, 0) else set()), failed
    if giop == (1, 0):
        assert "DATA_CONVERSION" in failed["echo_string_unicode"]


@pytest.mark.parametrize("server_giop", [(1, 0), (1, 1)], ids=["ior1.0", "ior1.1"])
def test_ior_profile_version_lowers_the_client(loop_thread: LoopThread, server_giop: tuple[int, int]) -> None:
    """An omniORB server limited to GIOP 1.0/1.1 publishes that profile version;
    pyorb (configured for 1.2) speaks it, with the same outcomes as when configured so."""
    from pyorb.giop.ior import IOR

    server = OmniServer("--native-char", "UTF-8", "--max-giop", ".".join(map(str, server_giop)))
    try:
        profile = IOR.from_string(server.ior).iiop
        assert profile is not None and profile.version == server_giop
        failed = run_cases(loop_thread, server.ior, Config())
    finally:
        server.stop()
    assert failed.keys() == expected_failures(server_giop, "UTF-8").keys(), failed


async def _references_inside_values(types: Any) -> list[Any]:
    """The refs_in_values case through a pyorb proxy: what came back, in order."""
    a, b = await types.make_node("a\xe9"), await types.make_node("b")
    held = await types.label_holder(Interop.Holder("", a))
    pair = await types.label_pair([a, b])
    by_node = await types.flip_variant(Interop.NodeOrName(ref=b))
    by_name = await types.flip_variant(Interop.NodeOrName(name="made"))
    any_name = await types.flip_any(CORBA.Any(Interop._tc_Node, a))
    any_node = await types.flip_any(CORBA.Any(CORBA.TC_string, "in-any"))
    try:
        await types.raise_node_error(b)
        error: Any = None
    except Interop.NodeError as exc:
        error = (exc.why, await exc.culprit.name())
    return [
        (held.label, await held.target.name()),
        [(h.label, await h.target.name()) for h in pair],
        by_node.name, await by_name.ref.name(),
        any_name.value(), await any_node.value().name(),
        error,
    ]


EXPECTED_REFS = [("a\xe9", "a\xe9"), [("a\xe9", "a\xe9"), ("b", "b")], "b", "made", "a\xe9", "in-any", ("b", "b")]


def test_references_inside_values(omni_servers: dict[str, OmniServer], loop_thread: LoopThread) -> None:
    """pyorb proxies inside structs, arrays, unions, anys and exceptions reach an
    omniORBpy server as references it calls, and its references come back as proxies."""

    async def run() -> list[Any]:
        async with pyorb.Client() as client:
            return await _references_inside_values(client.resolve(omni_servers["UTF-8"].ior, Interop.Types))

    assert loop_thread.run(run()) == EXPECTED_REFS


@pytest.mark.parametrize("style", ["coroutine", "amh"])
def test_references_inside_values_pyorb_server(loop_thread: LoopThread, style: str) -> None:
    """The same against pyorb's coroutine and AMH servants, with the server's default
    (its own client's proxies) and no objref_converter."""
    from tests.interop.servants import TypesAMH, TypesCoroutine

    async def run() -> list[Any]:
        async with pyorb.Server() as server, pyorb.Client() as client:
            servant = TypesCoroutine(server) if style == "coroutine" else TypesAMH(server)
            types = client.resolve(server.ior(server.activate(servant, "Types")), Interop.Types)
            return await _references_inside_values(types)

    assert loop_thread.run(run()) == EXPECTED_REFS
