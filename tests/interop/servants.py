"""pyorb servants of Interop::Types with the semantics written in idl/interop.idl.

The same behaviour as tests/peers/omni_server.py, in pyorb's three servant
styles, so every interop case can run against each.
"""

from __future__ import annotations

import asyncio
from typing import Any

from omniORB import CORBA

import pyorb
from pyorb.idl import bench_idl

IDL = pyorb.load_idl("idl/interop.idl")
Interop, Interop__POA = IDL.Interop, IDL.Interop__POA


class Node(Interop__POA.Node):
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


class _Echoes:
    """The echo operations, shared by every style below."""

    def _echo(self, v: Any) -> Any:
        return v

    echo_boolean = echo_char = echo_wchar = echo_octet = echo_short = echo_ushort = _echo
    echo_long = echo_ulong = echo_longlong = echo_ulonglong = echo_float = echo_double = _echo
    echo_string = echo_wstring = echo_point = echo_points = echo_blob = echo_color = _echo
    echo_variant = echo_any = echo_matrix = _echo


class TypesCoroutine(_Echoes, Interop__POA.Types):
    """Coroutine style; object references arrive as pyorb proxies (the server's default)."""

    def __init__(self, server: pyorb.Server) -> None:
        self.server = server
        self.last = ""

    async def directions(self, a: int, b: int) -> tuple[int, int, int]:
        return a + b, b + 1, 2 * a

    async def mixed(self, s: str, d: float, o: int, ll: int) -> tuple[float, str]:
        return d + o + ll, s[::-1]

    async def raise_failure(self, code: int) -> None:
        raise Interop.Failure(code, "failed", [1, 2, 3])

    async def raise_empty(self) -> None:
        raise Interop.Empty()

    async def raise_undeclared(self) -> None:
        raise RuntimeError("boom")

    async def raise_system(self) -> None:
        raise CORBA.BAD_PARAM(42, CORBA.COMPLETED_NO)

    def _node(self, name: str) -> Any:
        return self.server.reference(self.server.activate(Node(name)))

    async def make_node(self, name: str) -> Any:
        return self._node(name)

    async def node_name(self, n: Any) -> str:
        return await n.name()

    async def nodes(self, count: int) -> list[Any]:
        return [self._node(f"node{i}") for i in range(count)]

    async def label_holder(self, h: Any) -> Any:
        return Interop.Holder(await h.target.name(), h.target)

    async def label_pair(self, p: list[Any]) -> list[Any]:
        return [Interop.Holder(await n.name(), n) for n in p]

    async def flip_variant(self, v: Any) -> Any:
        if v._d:
            return Interop.NodeOrName(name=await v.ref.name())
        return Interop.NodeOrName(ref=self._node(v.name))

    async def flip_any(self, a: Any) -> Any:
        value = a.value()
        if isinstance(value, str):
            return CORBA.Any(Interop._tc_Node, self._node(value))
        return CORBA.Any(CORBA.TC_string, await value.name())

    async def raise_node_error(self, n: Any) -> None:
        raise Interop.NodeError(await n.name(), n)

    async def fire(self, v: str) -> None:
        self.last = v

    async def last_oneway(self) -> str:
        return self.last


class TypesAMH(_Echoes, pyorb.amh_skeleton(Interop__POA.Types)):  # type: ignore[misc]
    """AMH style: every reply goes through the response handler, some later.

    References arrive as pyorb proxies; the reference-making operations
    need a server to activate nodes on.
    """

    def __init__(self, server: pyorb.Server | None = None) -> None:
        self.server = server
        self.last = ""

    def _later(self, fn: Any, *args: Any) -> None:
        asyncio.get_running_loop().call_later(0.001, fn, *args)

    # The echo operations of an AMH servant also take the handler first.
    def _echo(self, rh: Any, v: Any) -> None:  # type: ignore[override]
        self._later(rh._reply, v)

    echo_boolean = echo_char = echo_wchar = echo_octet = echo_short = echo_ushort = _echo
    echo_long = echo_ulong = echo_longlong = echo_ulonglong = echo_float = echo_double = _echo
    echo_string = echo_wstring = echo_point = echo_points = echo_blob = echo_color = _echo
    echo_variant = echo_any = echo_matrix = _echo

    async def directions(self, rh: Any, a: int, b: int) -> None:
        await asyncio.sleep(0.001)
        rh.directions(a + b, b + 1, 2 * a)

    def mixed(self, rh: Any, s: str, d: float, o: int, ll: int) -> None:
        self._later(rh.mixed, d + o + ll, s[::-1])

    def raise_failure(self, rh: Any, code: int) -> None:
        self._later(rh.raise_failure_excep, Interop.Failure(code, "failed", [1, 2, 3]))

    async def raise_empty(self, rh: Any) -> None:
        raise Interop.Empty()  # raised by the handler method itself: sent as the exception

    def raise_undeclared(self, rh: Any) -> None:
        raise RuntimeError("boom")

    def raise_system(self, rh: Any) -> None:
        rh.raise_exception(CORBA.BAD_PARAM(42, CORBA.COMPLETED_NO))

    def _node(self, name: str) -> Any:
        if self.server is None:
            raise CORBA.NO_IMPLEMENT(0, CORBA.COMPLETED_NO)
        return self.server.reference(self.server.activate(Node(name)))

    def make_node(self, rh: Any, name: str) -> None:
        self._later(rh.make_node, self._node(name))

    async def node_name(self, rh: Any, n: Any) -> None:
        rh.node_name(await n.name())

    def nodes(self, rh: Any, count: int) -> None:
        rh.nodes([self._node(f"node{i}") for i in range(count)])

    async def label_holder(self, rh: Any, h: Any) -> None:
        rh.label_holder(Interop.Holder(await h.target.name(), h.target))

    async def label_pair(self, rh: Any, p: list[Any]) -> None:
        rh.label_pair([Interop.Holder(await n.name(), n) for n in p])

    async def flip_variant(self, rh: Any, v: Any) -> None:
        if v._d:
            rh.flip_variant(Interop.NodeOrName(name=await v.ref.name()))
        else:
            rh.flip_variant(Interop.NodeOrName(ref=self._node(v.name)))

    async def flip_any(self, rh: Any, a: Any) -> None:
        value = a.value()
        if isinstance(value, str):
            rh.flip_any(CORBA.Any(Interop._tc_Node, self._node(value)))
        else:
            rh.flip_any(CORBA.Any(CORBA.TC_string, await value.name()))

    async def raise_node_error(self, rh: Any, n: Any) -> None:
        # Later, through the handler, with the received proxy inside the exception.
        name = await n.name()
        self._later(rh.raise_node_error_excep, Interop.NodeError(name, n))

    def fire(self, rh: Any, v: str) -> None:
        self.last = v

    def last_oneway(self, rh: Any) -> None:
        rh.last_oneway(self.last)


class TypesSync(_Echoes, Interop__POA.Types):
    """A plain omniORBpy servant, unchanged: methods return their results."""

    def __init__(self) -> None:
        self.last = ""

    def directions(self, a: int, b: int) -> tuple[int, int, int]:
        return a + b, b + 1, 2 * a

    def mixed(self, s: str, d: float, o: int, ll: int) -> tuple[float, str]:
        return d + o + ll, s[::-1]

    def raise_failure(self, code: int) -> None:
        raise Interop.Failure(code, "failed", [1, 2, 3])

    def raise_empty(self) -> None:
        raise Interop.Empty()

    def raise_undeclared(self) -> None:
        raise RuntimeError("boom")

    def raise_system(self) -> None:
        raise CORBA.BAD_PARAM(42, CORBA.COMPLETED_NO)

    def fire(self, v: str) -> None:
        self.last = v

    def last_oneway(self) -> str:
        return self.last


Bench = bench_idl().Bench
import Bench__POA  # noqa: E402  (made by load_idl)


class BenchEcho(Bench__POA.Echo):  # type: ignore[misc]
    """Bench::Echo: ping returns its stamp (the echo benchmark's servant)."""

    def ping(self, stamp: int) -> int:
        return stamp

    def notify(self, stamp: int) -> None:
        pass
