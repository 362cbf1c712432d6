"""pyorb.naming: INS string names, corbaname URLs, and a real omniNames.

The naming tests run against the omniNames program of the omniORBpy wheel,
started on loopback by the plugin's ``omni_names`` fixture; the omniORBpy
side of the mixed cases is tests/omni_naming_peer.py in its own process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import CosNaming
import pytest
from hypothesis import given
from hypothesis import strategies as st
from omniORB import URI

import pyorb
from pyorb.idl import BENCH_IDL
from pyorb import naming
from pyorb.naming import Binding, BindingType, NameSyntaxError, NamingContext, to_name, to_string
from pyorb.testing.kit import NameServer, PeerProcessError

IDL_PATH = BENCH_IDL
IDL = pyorb.load_idl(IDL_PATH)
Bench, Bench__POA = IDL.Bench, IDL.Bench__POA
PEER = f"{Path(__file__).parent / 'omni_naming_peer.py'}"
NotFound = CosNaming.NamingContext.NotFound
AlreadyBound = CosNaming.NamingContext.AlreadyBound
InvalidName = CosNaming.NamingContext.InvalidName

pytestmark = [pytest.mark.integration, pytest.mark.interop]


class Doubler(Bench__POA.Echo):
    """A pyorb-served Echo: ping doubles (omniORBpy's adds one)."""

    async def ping(self, stamp: int) -> int:
        return 2 * stamp

    async def notify(self, stamp: int) -> None:
        pass


def nc(id_: str, kind: str = "") -> Any:
    return CosNaming.NameComponent(id_, kind)


def pairs(name: list[Any]) -> list[tuple[str, str]]:
    """omniORB structs have no __eq__: compare their fields."""
    return [(c.id, c.kind) for c in name]


# -- string names ---------------------------------------------------------------

NAMES = [
    ("a", [nc("a")]),
    ("a.b", [nc("a", "b")]),
    (".b", [nc("", "b")]),
    (".", [nc("", "")]),
    ("a.", [nc("a")]),
    ("a/b.c/d", [nc("a"), nc("b", "c"), nc("d")]),
    ("a\\/b.c\\.d", [nc("a/b", "c.d")]),
    ("x\\\\y", [nc("x\\y")]),
    ("./.", [nc(""), nc("")]),
    ("é.ü/日本", [nc("é", "ü"), nc("日本")]),
]
BAD_NAMES = ["", "/", "a//b", "/a", "a/", "a.b.c", "..", "a\\x", "a\\", "a.b/"]


@pytest.mark.parametrize(("text", "expected"), NAMES)
def test_to_name_reads_ins_syntax_as_omniorb_does(text: str, expected: list[Any]) -> None:
    assert pairs(to_name(text)) == pairs(expected)
    assert pairs(to_name(text)) == pairs(URI.stringToName(text))


@pytest.mark.parametrize("text", BAD_NAMES)
def test_bad_names_raise_invalid_name_with_a_reason(text: str) -> None:
    with pytest.raises(NameSyntaxError) as caught:
        to_name(text)
    assert isinstance(caught.value, InvalidName) and isinstance(caught.value, ValueError)
    assert str(caught.value)  # a reason, not an empty message
    with pytest.raises(InvalidName):  # omniORB agrees that it is invalid
        URI.stringToName(text)


def test_to_string_writes_what_omniorb_writes() -> None:
    for text, components in NAMES:
        assert to_string(components) == URI.nameToString(components), text
    with pytest.raises(NameSyntaxError):
        to_string([])


PART = st.text(st.sampled_from("ab./\\é"), max_size=4)


@given(st.lists(st.tuples(PART, PART), min_size=1, max_size=4))
def test_to_string_and_to_name_are_inverse(parts: list[tuple[str, str]]) -> None:
    components = [nc(i, k) for i, k in parts]
    assert pairs(to_name(to_string(components))) == pairs(components)


# -- corbaname URLs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "version", "host", "port", "key", "name"),
    [
        ("corbaname::1.2@127.0.0.1:2809#a/b.c", (1, 2), "127.0.0.1", 2809, b"NameService", "a/b.c"),
        ("corbaname::example.org", (1, 0), "example.org", 2809, b"NameService", ""),
        ("corbaname:iiop:host:99/Other#x", (1, 0), "host", 99, b"Other", "x"),
        ("CORBANAME::h:1#a%20b/%C3%A9.k", (1, 0), "h", 1, b"NameService", "a b/é.k"),
        ("corbaname::[::1]:5000#", (1, 0), "::1", 5000, b"NameService", ""),
    ],
)
def test_parse_corbaname(url: str, version: tuple[int, int], host: str, port: int, key: bytes, name: str) -> None:
    ior, got = naming.parse_corbaname(url)
    profile = ior.iiop
    assert profile is not None
    assert (profile.version, profile.host, profile.port, profile.object_key, got) == (version, host, port, key, name)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("corbaname:rir:#a", "rir:"),
        ("corbaname:rir:/NameService#a", "rir:"),
        ("corbaloc::h:1/NameService", "not a corbaname URL"),
        ("corbaname::h:99999#a", "out of range"),
        ("corbaname::#a", "host"),
        ("corbaname::h#a%2", "%-escape"),
        ("corbaname::h#%ff", "UTF-8"),
        ("corbaname:foo:h#a", "not supported"),
    ],
)
def test_bad_corbaname_urls_say_why(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        naming.parse_corbaname(url)


def test_root_context_wants_no_name_part() -> None:
    client = pyorb.Client()
    assert naming.root_context(client, "corbaname::1.2@127.0.0.1:2809").ref.ior.iiop.object_key == b"NameService"
    with pytest.raises(NameSyntaxError, match="resolve_corbaname"):
        naming.root_context(client, "corbaname::127.0.0.1:2809#a")


# -- against omniNames ------------------------------------------------------------------


@pytest.fixture
def root(pyorb_client: pyorb.Client, omni_names: NameServer) -> NamingContext:
    return naming.root_context(pyorb_client, omni_names.corbaloc)


@pytest.mark.asyncio
async def test_bind_resolve_and_call(root: NamingContext, pyorb_async_server: Any) -> None:
    served = await pyorb_async_server(Doubler)
    echo = root.client.resolve(served.ior, Bench.Echo)
    await root.bind_new_context("Bench")
    await root.bind("Bench/Echo.object", echo)
    found = await root.resolve("Bench/Echo.object", Bench.Echo)
    assert found == echo
    assert await found.ping(21) == 42


@pytest.mark.asyncio
async def test_resolve_types_the_proxy_from_the_ior(root: NamingContext, pyorb_async_server: Any) -> None:
    served = await pyorb_async_server(Doubler)
    await root.bind("e", root.client.resolve(served.ior))
    found = await root.resolve("e")  # no interface given: the IOR's type id picks it
    assert await found.ping(5) == 10


@pytest.mark.asyncio
async def test_bind_twice_raises_already_bound_and_rebind_replaces(
    root: NamingContext, pyorb_async_server: Any
) -> None:
    first = root.client.resolve((await pyorb_async_server(Doubler, key="first")).ior, Bench.Echo)
    second = root.client.resolve((await pyorb_async_server(Doubler, key="second")).ior, Bench.Echo)
    await root.bind("x.kind", first)
    with pytest.raises(AlreadyBound):
        await root.bind("x.kind", second)
    assert await root.resolve("x.kind") == first
    await root.rebind("x.kind", second)
    assert await root.resolve("x.kind") == second


@pytest.mark.asyncio
async def test_unbind_then_resolve_raises_not_found(root: NamingContext, pyorb_async_server: Any) -> None:
    echo = root.client.resolve((await pyorb_async_server(Doubler)).ior, Bench.Echo)
    await root.bind("gone", echo)
    await root.unbind("gone")
    with pytest.raises(NotFound) as caught:
        await root.resolve("gone")
    assert caught.value.why == CosNaming.NamingContext.missing_node
    assert pairs(caught.value.rest_of_name) == [("gone", "")]
    with pytest.raises(NotFound):
        await root.unbind("gone")


@pytest.mark.asyncio
async def test_resolving_through_an_object_raises_not_context(root: NamingContext, pyorb_async_server: Any) -> None:
    await root.bind("leaf", root.client.resolve((await pyorb_async_server(Doubler)).ior))
    with pytest.raises(NotFound) as caught:
        await root.resolve("leaf/below")
    assert caught.value.why == CosNaming.NamingContext.not_context


@pytest.mark.asyncio
async def test_invalid_names_from_the_service_and_from_the_parser(root: NamingContext) -> None:
    with pytest.raises(InvalidName):  # the service's own check: an empty name
        await root.ref.bind([], root.ref)
    with pytest.raises(InvalidName):  # ours, before any call
        await root.bind("a//b", root.ref)


@pytest.mark.asyncio
async def test_list_gives_names_and_binding_types(root: NamingContext, pyorb_async_server: Any) -> None:
    echo = root.client.resolve((await pyorb_async_server(Doubler)).ior, Bench.Echo)
    await root.bind_new_context("ctx.dir")
    for name in ("a", "b.kind", "c\\/d"):
        await root.bind(name, echo)
    expected = {
        Binding("a", BindingType.OBJECT),
        Binding("b.kind", BindingType.OBJECT),
        Binding("c\\/d", BindingType.OBJECT),
        Binding("ctx.dir", BindingType.CONTEXT),
    }
    assert set(await root.list()) == expected
    # Batches of one: the rest comes through a BindingIterator.
    assert set(await root.list(batch=1)) == expected
    assert await (await root.resolve_context("ctx.dir")).list() == []
    with pytest.raises(ValueError):
        await root.list(batch=0)


@pytest.mark.asyncio
async def test_nested_contexts(root: NamingContext, pyorb_async_server: Any) -> None:
    echo = root.client.resolve((await pyorb_async_server(Doubler)).ior, Bench.Echo)
    a = await root.bind_new_context("a")
    b = await a.bind_new_context("b")
    await b.bind("echo", echo)
    loose = await root.new_context()  # made unbound, then bound by name
    await loose.bind("echo2", echo)
    await b.bind_context("c", loose)
    assert await (await root.resolve("a/b/echo", Bench.Echo)).ping(3) == 6
    assert await root.resolve("a/b/c/echo2") == echo
    assert [x.name for x in await (await root.resolve_context("a/b")).list()] in (["echo", "c"], ["c", "echo"])
    await b.rebind_context("c", await root.new_context())
    with pytest.raises(NotFound):
        await root.resolve("a/b/c/echo2")


@pytest.mark.asyncio
async def test_resolve_corbaname(root: NamingContext, omni_names: NameServer, pyorb_async_server: Any) -> None:
    client = root.client
    echo = client.resolve((await pyorb_async_server(Doubler)).ior, Bench.Echo)
    await (await root.bind_new_context("Path")).bind_new_context("To")
    await root.bind("Path/To/Name", echo)
    found = await naming.resolve_corbaname(client, f"{omni_names.corbaname}#Path/To/Name", Bench.Echo)
    assert await found.ping(4) == 8
    # The plain form (GIOP 1.0 to the naming service) and a %-escaped name.
    plain = f"corbaname::127.0.0.1:{omni_names.port}#Path/%54o/Name"
    assert await (await naming.resolve_corbaname(client, plain, Bench.Echo)).ping(1) == 2
    ctx = await naming.resolve_corbaname(client, omni_names.corbaname)
    assert isinstance(ctx, pyorb.ObjectRef) and ctx.ior.iiop.object_key == b"NameService"
    with pytest.raises(NotFound):
        await naming.resolve_corbaname(client, f"{omni_names.corbaname}#Path/Nope")


# -- pyorb and omniORBpy through one naming service ------------------------------------


@pytest.mark.asyncio
async def test_omniorb_client_resolves_and_calls_what_pyorb_bound(
    root: NamingContext, omni_names: NameServer, pyorb_async_server: Any, omni_call: Callable[..., Any]
) -> None:
    echo = root.client.resolve((await pyorb_async_server(Doubler)).ior, Bench.Echo)
    await root.bind_new_context("pyorb")
    await root.bind("pyorb/Echo.object", echo)
    url = f"{omni_names.corbaname}#pyorb/Echo.object"
    # omni_call blocks: the pyorb server must keep serving on this loop meanwhile.
    loop = asyncio.get_running_loop()
    result = await loop.run_in_executor(None, lambda: omni_call(IDL_PATH, f"{PEER}:ping", url, "Bench::Echo", [20]))
    assert result == 40
    assert await loop.run_in_executor(None, omni_call, IDL_PATH, f"{PEER}:names", omni_names.corbaloc,
                                      "CosNaming::NamingContext") == [["pyorb", "context"]]


def test_pyorb_client_resolves_and_calls_what_omniorb_bound(
    omni_names: NameServer, omni_server: Any, omni_call: Callable[..., Any], pyorb_sync_client: Any
) -> None:
    served = omni_server(IDL_PATH, f"{PEER}:Echo")
    omni_call(IDL_PATH, f"{PEER}:bind_new_context", omni_names.corbaloc, "CosNaming::NamingContext", ["omni"])
    omni_call(IDL_PATH, f"{PEER}:bind", omni_names.corbaloc, "CosNaming::NamingContext",
              ["omni/Echo.object", served.ior])

    async def lookup() -> Any:
        echo = await naming.resolve_corbaname(
            pyorb_sync_client.client, f"{omni_names.corbaname}#omni/Echo.object", Bench.Echo
        )
        listed = await naming.root_context(pyorb_sync_client.client, omni_names.corbaloc).list()
        return await echo.ping(41), listed

    assert pyorb_sync_client.run(lookup()) == (42, [Binding("omni", BindingType.CONTEXT)])


def test_a_failing_omniorb_call_reports_the_peer_error(omni_names: NameServer, omni_call: Callable[..., Any]) -> None:
    omni_call(IDL_PATH, f"{PEER}:bind_new_context", omni_names.corbaloc, "CosNaming::NamingContext", ["dup"])
    with pytest.raises(PeerProcessError, match="AlreadyBound"):
        omni_call(IDL_PATH, f"{PEER}:bind_new_context", omni_names.corbaloc, "CosNaming::NamingContext", ["dup"])
