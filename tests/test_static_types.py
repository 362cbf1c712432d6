"""Received references take their type from the IDL, not from the IOR (issue #11 item 1);
a string (IOR or corbaloc URL) is accepted where a reference is expected (item 6).

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
