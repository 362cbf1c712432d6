"""The client API as a user meets it: AMI names, argument and connection errors, every address of a reference.

AMI names for attributes follow CORBA Messaging (as omniidl and
JacORB name them): ``sendc_get_x`` / ``sendc_set_x`` calling the handler's
``get_x`` / ``set_x``; a handler without the method its reply needs is an
error at the call, before anything is sent.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio
import omniORB
from omniORB import CORBA

import pyorb
from pyorb.client.proxy import proxy_class

pytestmark = pytest.mark.integration  # opens sockets or starts processes

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


# -- argument and connection errors as clear as omniORBpy's ---------------------------------


@pytest.mark.asyncio
async def test_a_wrong_argument_count_is_a_type_error_at_the_call(served: tuple[Account, Any]) -> None:
    servant, account = served
    message = "Operation 'add' requires 2 arguments; 3 given"
    with pytest.raises(TypeError, match=message):
        account.add(1, 2, 3)  # raised here, not when awaited
    with pytest.raises(TypeError, match=message):
        account.sendp_add(1, 2, 3)
    with pytest.raises(TypeError, match="requires 2 arguments; 1 given"):
        account.sendc_add(Handler(), 1)
    assert await account.add(1, 2) == 3
    assert servant.calls == 1


@pytest.mark.asyncio
async def test_a_wrong_type_names_the_operation_and_parameter(served: tuple[Account, Any]) -> None:
    _, account = served
    with pytest.raises(CORBA.BAD_PARAM) as caught:
        await account.add(1, "two")
    exc = caught.value
    assert exc.minor == omniORB.BAD_PARAM_WrongPythonType
    assert "Operation 'add' parameter 1: Expecting long" in repr(exc)  # counted from 0, as omniORBpy counts
    assert "member" not in repr(exc)  # no internal struct member names


def test_blocking_client_argument_errors(pyorb_server: Any) -> None:
    served = pyorb_server(Account)
    with pyorb.BlockingClient() as client:
        account = client.resolve(served.ior, ClientApi.Account)
        with pytest.raises(TypeError, match="Operation 'add' requires 2 arguments; 0 given"):
            account.add()
        with pytest.raises(CORBA.BAD_PARAM) as caught:
            account.add("one", 2)
        assert caught.value.minor == omniORB.BAD_PARAM_WrongPythonType
        assert "Operation 'add' parameter 0" in repr(caught.value)
        assert account.add(2, 2) == 4


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


@pytest.mark.asyncio
async def test_unreachable_server_is_transient_connect_failed_with_the_endpoint() -> None:
    port = closed_port()
    async with pyorb.Client() as client:
        account = client.resolve(f"corbaloc::127.0.0.1:{port}/Account", ClientApi.Account)
        with pytest.raises(CORBA.TRANSIENT) as caught:
            await account.add(1, 2)
    assert caught.value.minor == omniORB.TRANSIENT_ConnectFailed
    assert f"cannot connect to 127.0.0.1:{port}" in repr(caught.value)
    with pyorb.BlockingClient() as blocking:
        with pytest.raises(CORBA.TRANSIENT) as caught:
            blocking.resolve(f"corbaloc::127.0.0.1:{port}/Account", ClientApi.Account).add(1, 2)
    assert caught.value.minor == omniORB.TRANSIENT_ConnectFailed
    assert f"cannot connect to 127.0.0.1:{port}" in repr(caught.value)



# -- every address of a reference, in order -------------------------------------------------

Interop = pyorb.load_idl(ROOT / "idl" / "interop.idl").Interop


@pytest.fixture(scope="module")
def omni_types() -> Any:
    """A real omniORBpy server of Interop::Types."""
    from pyorb.testing.kit import ServerProcess

    server = ServerProcess([sys.executable, str(ROOT / "tests" / "peers" / "omni_server.py")], lines=1)
    yield server
    server.stop()


def dead_first(ior: str, how: str) -> str:
    """``ior`` with an unreachable address first: an extra first profile, or the
    profile's own address moved to a TAG_ALTERNATE_IIOP_ADDRESS component."""
    from pyorb.giop.ior import IOR, IIOPProfile, alternate_address_component

    real = IOR.from_string(ior)
    live = real.iiop
    assert live is not None
    dead_port = closed_port()
    if how == "second profile":
        dead = IIOPProfile(live.version, "127.0.0.1", dead_port, live.object_key, live.components)
        profiles = (dead, *real.profiles)
    else:
        alt = alternate_address_component(live.host, live.port)
        moved = IIOPProfile(live.version, "127.0.0.1", dead_port, live.object_key, (*live.components, alt))
        profiles = tuple(moved if p is live else p for p in real.profiles)
    return IOR(real.type_id, profiles).to_string()


@pytest.mark.parametrize("how", ["second profile", "alternate address"])
@pytest.mark.asyncio
async def test_the_async_client_tries_each_address_in_order(omni_types: Any, how: str) -> None:
    ior = dead_first(omni_types.ior, how)
    async with pyorb.Client() as client:
        types = client.resolve(ior, Interop.Types)
        assert await types.echo_long(41) == 41
        assert list(await asyncio.gather(*(types.echo_long(i) for i in range(20)))) == list(range(20))


@pytest.mark.parametrize("how", ["second profile", "alternate address"])
def test_the_blocking_client_tries_each_address_in_order(omni_types: Any, how: str) -> None:
    with pyorb.BlockingClient() as client:
        assert client.resolve(dead_first(omni_types.ior, how), Interop.Types).echo_long(7) == 7


@pytest.mark.asyncio
async def test_when_no_address_answers_the_error_names_the_last_one_tried() -> None:
    from pyorb.giop.ior import IOR, IIOPProfile

    ports = [closed_port(), closed_port()]
    ior = IOR("IDL:Interop/Types:1.0", tuple(IIOPProfile((1, 2), "127.0.0.1", p, b"k") for p in ports)).to_string()
    async with pyorb.Client() as client:
        with pytest.raises(CORBA.TRANSIENT) as caught:
            await client.resolve(ior, Interop.Types).echo_long(1)
    assert caught.value.minor == omniORB.TRANSIENT_ConnectFailed
    assert f"127.0.0.1:{ports[-1]}" in repr(caught.value)
