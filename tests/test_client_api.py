"""The client API as a user meets it (issue #11 items 5, 7, 9).

Item 5: AMI names for attributes follow CORBA Messaging (as omniidl and
JacORB name them): ``sendc_get_x`` / ``sendc_set_x`` calling the handler's
``get_x`` / ``set_x``; a handler without the method its reply needs is an
error at the call, before anything is sent.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.client.proxy import proxy_class

ROOT = Path(__file__).resolve().parents[1]
IDL = pyorb.load_idl(ROOT / "idl" / "clientapi.idl")
ClientApi, ClientApi__POA = IDL.ClientApi, IDL.ClientApi__POA


class Account(ClientApi__POA.Account):
    def __init__(self) -> None:
        self.owner = "ann"
        self.calls = 0

    def _get_owner(self) -> str:
        self.calls += 1
        return self.owner

    def _set_owner(self, value: str) -> None:
        self.calls += 1
        self.owner = value

    def _get_balance(self) -> int:
        self.calls += 1
        return 10

    def add(self, a: int, b: int) -> int:
        self.calls += 1
        return a + b

    def check(self, amount: int) -> None:
        self.calls += 1
        if amount > 10:
            raise ClientApi.Refused("too much")


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[Account, Any]]:
    servant = Account()
    async with pyorb.Server() as server, pyorb.Client() as client:
        key = server.activate(servant, "Account")
        yield servant, client.resolve(server.ior(key), ClientApi.Account)


class Handler:
    """An AMI reply handler written from the IDL's implied AMI_AccountHandler."""

    def __init__(self) -> None:
        self.done: asyncio.Future[tuple[str, Any]] = asyncio.get_running_loop().create_future()

    def get_owner(self, ami_return_val: str) -> None:
        self.done.set_result(("get_owner", ami_return_val))

    def get_owner_excep(self, holder: Any) -> None:
        self.done.set_result(("get_owner_excep", holder))

    def set_owner(self) -> None:
        self.done.set_result(("set_owner", None))

    def set_owner_excep(self, holder: Any) -> None:
        self.done.set_result(("set_owner_excep", holder))


def test_ami_names_are_the_ones_omniidl_generates() -> None:
    # omniidl -Wbami writes the standard names into omniORBpy's own stubs.
    omni = {n for n in dir(ClientApi._objref_Account) if n.startswith(("sendc_", "sendp_"))}
    proxy = proxy_class(ClientApi.Account)
    ours = {n for n in dir(proxy) if n.startswith(("sendc_", "sendp_"))}
    assert "sendc_get_owner" in omni and "sendc_set_owner" in omni and "sendc_get_balance" in omni
    assert ours == omni
    # The operations of omniidl's implied AMI_AccountHandler interface: what sendc_ calls back.
    handler = set(IDL.ClientApi__POA.AMI_AccountHandler._omni_op_d)
    assert handler == {f"{n[len('sendc_'):]}{excep}" for n in ours if n.startswith("sendc_") for excep in ("", "_excep")}


@pytest.mark.asyncio
async def test_attribute_replies_reach_a_handler_written_from_the_idl(served: tuple[Account, Any]) -> None:
    servant, account = served
    handler = Handler()
    account.sendc_get_owner(handler)
    assert await asyncio.wait_for(handler.done, 10) == ("get_owner", "ann")
    handler = Handler()
    account.sendc_set_owner(handler, "bob")
    assert await asyncio.wait_for(handler.done, 10) == ("set_owner", None)
    assert servant.owner == "bob"
    assert await account.sendp_get_owner() == "bob"


@pytest.mark.asyncio
async def test_a_handler_missing_a_method_is_an_error_at_the_call(served: tuple[Account, Any]) -> None:
    servant, account = served

    class OnlyReplies:
        def get_owner(self, value: str) -> None:
            pass

    class Nothing:
        pass

    with pytest.raises(TypeError, match="get_owner_excep"):
        account.sendc_get_owner(OnlyReplies())
    with pytest.raises(TypeError, match="add or add_excep"):
        account.sendc_add(Nothing(), 1, 2)
    await account.add(1, 1)  # a round trip after the refused calls: had they been sent, they came first
    assert servant.calls == 1
