"""Received references take their type from the IDL, not from the IOR;
a string (IOR or corbaloc URL) is accepted where a reference is expected.

A reference made from a corbaloc URL carries an empty type id (omniORB and
JacORB send it so); one of a derived interface may carry an id whose IDL is
not loaded here.  Either way the proxy a pyorb client or a coroutine
servant gets has the static type of the result or parameter it arrived in.
The omniORBpy-client direction is the ``node_by_corbaloc`` case of
tests/peers/omni_client.py (tests/interop/test_omni_client.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.ior import IOR
from pyorb.marshal import ensure_orb

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
Interop = pyorb.load_idl(ROOT / "idl" / "interop.idl").Interop
Interop__POA = pyorb.load_idl(ROOT / "idl" / "interop.idl").Interop__POA


class Node(Interop__POA.Node):  # type: ignore[misc,name-defined]
    def name(self) -> str:
        return "untyped"


class Maker(Interop__POA.Types):  # type: ignore[misc,name-defined]
    """make_node returns an omniORB reference made from a corbaloc URL: an IOR without a type id."""

    def __init__(self, url: str) -> None:
        self.url = url

    def make_node(self, name: str) -> Any:
        return ensure_orb().string_to_object(self.url)


@pytest.mark.asyncio
async def test_a_result_reference_without_type_id_gets_the_static_type() -> None:
    async with pyorb.Server() as server, pyorb.Client() as client:
        server.activate(Node(), "node")
        maker = client.resolve(server.corbaloc(server.activate(Maker(server.corbaloc("node")), "maker")), Interop.Types)
        node = await maker.make_node("x")
        assert IOR.from_string(ensure_orb().object_to_string(node._to_omni())).type_id == ""  # as sent
        assert await node.name() == "untyped"  # typed Interop::Node by the IDL of make_node


def test_the_blocking_client_types_it_too(pyorb_server: Any) -> None:
    node = pyorb_server(Node(), key="node")
    maker = pyorb_server(Maker(node.corbaloc), key="maker")
    with pyorb.BlockingClient() as client:
        assert client.resolve(maker.corbaloc, Interop.Types).make_node("x").name() == "untyped"


class Namer(Interop__POA.Types):  # type: ignore[misc,name-defined]
    async def node_name(self, n: Any) -> str:
        return str(await n.name())


@pytest.mark.asyncio
async def test_a_string_is_accepted_where_a_reference_is_expected() -> None:
    async with pyorb.Client() as client, pyorb.Server(objref_converter=client.from_objref) as server:
        url = server.corbaloc(server.activate(Node(), "node"))
        namer = client.resolve(server.corbaloc(server.activate(Namer(), "namer")), Interop.Types)
        assert await namer.node_name(url) == "untyped"  # a corbaloc URL
        assert await namer.node_name(server.ior("node")) == "untyped"  # an IOR string
        with pytest.raises(CORBA.BAD_PARAM):
            await namer.node_name("not a reference")


def _kind(n: Any) -> str:
    return "pyorb" if isinstance(n, pyorb.ObjectRef) else "omniORB" if isinstance(n, CORBA.Object) else "other"


class SyncKind(Interop__POA.Types):  # type: ignore[misc,name-defined]
    """node_name answers with the kind of reference the servant got."""

    def node_name(self, n: Any) -> str:
        return _kind(n)


class CoroutineKind(Interop__POA.Types):  # type: ignore[misc,name-defined]
    async def node_name(self, n: Any) -> str:
        return f"{_kind(n)}:{await n.name()}"


class RawKind(Interop__POA.Types):  # type: ignore[misc,name-defined]
    async def node_name(self, n: Any) -> str:
        return _kind(n)  # calling an omniORB reference here would block the event loop


@pytest.mark.asyncio
async def test_async_servants_get_the_servers_proxies_by_default() -> None:
    """No objref_converter and no Client of one's own: a coroutine servant gets a
    pyorb proxy it can await, a synchronous one an omniORB reference."""
    async with pyorb.Server() as server, pyorb.Client() as client:
        node_key = server.activate(Node(), "node")
        local = server.reference(node_key)
        assert isinstance(local, pyorb.ObjectRef) and await local.name() == "untyped"
        coro = client.resolve(server.ior(server.activate(CoroutineKind(), "coro")), Interop.Types)
        sync = client.resolve(server.ior(server.activate(SyncKind(), "sync")), Interop.Types)
        assert await coro.node_name(local) == "pyorb:untyped"
        assert await sync.node_name(local) == "omniORB"
        assert await coro.node_name(server.corbaloc(node_key)) == "pyorb:untyped"
        own = server.client
    assert own._closed  # the server's own client closes with it


@pytest.mark.asyncio
async def test_a_shared_client_and_a_converter_keeping_omniorb_references() -> None:
    async with pyorb.Client() as shared:
        async with pyorb.Server(client=shared) as server:
            assert server.client is shared
            node = server.reference(server.activate(Node(), "node"), Interop.Node)
            assert await node.name() == "untyped"
        assert not shared._closed  # given, so not the server's to close
    async with pyorb.Server(objref_converter=lambda ref, _static: ref) as server, pyorb.Client() as client:
        server.activate(Node(), "node")
        raw = client.resolve(server.ior(server.activate(RawKind(), "raw")), Interop.Types)
        assert await raw.node_name(server.ior("node")) == "omniORB"
