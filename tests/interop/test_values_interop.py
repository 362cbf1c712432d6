"""Value types between pyorb and omniORBpy, both ways, with real processes.

The cases are tests/peers/values_servant.py's: concrete values with public and
private state, a derived value where its base is declared, a truncatable one,
null, sharing (one object sent twice arrives as one), boxes, values inside a
struct, a union, a sequence, an array, an any and a user exception.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from omniORB import CORBA

import pyorb
from pyorb.giop.messages import GIOP_1_0, GIOP_1_1, GIOP_1_2, Version
from pyorb.testing.kit import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
IDL = ROOT / "idl" / "values.idl"
Values = pyorb.load_idl(IDL).Values
sys.modules.setdefault("Values", Values)  # the servant module imports the IDL as omnipeer loads it

from tests.peers import values_servant  # noqa: E402


@pytest.mark.parametrize("version", [GIOP_1_2, GIOP_1_1], ids=lambda v: f"GIOP {v[0]}.{v[1]}")
def test_pyorb_client_to_omniorbpy_server(omni_server: Any, version: Version) -> None:
    server = omni_server(str(IDL), "tests.peers.values_servant:Echo")
    with pyorb.BlockingClient(pyorb.Config(giop_version=version)) as client:
        echo = client.resolve(server.ior, Values.Echo)
        wide = version == GIOP_1_2
        left_out = {"exception"} | (set() if wide else {"wlabel"})
        expected = {case: v for case, v in values_servant.EXPECTED.items() if case not in left_out}
        assert values_servant.calls(echo, exceptions=False, wide=wide) == expected


def test_omniorbpy_client_to_pyorb_server(omni_call: Any) -> None:
    server = ServerProcess([sys.executable, "-m", "pyorb", "serve", f"{ROOT / 'tests/peers/values_servant.py'}:Echo",
                            "--idl", str(IDL), "--key", "Echo", "--stop-on-stdin-eof"])
    try:
        got = omni_call(str(IDL), "tests.peers.values_servant:omni_calls", server.ior, interface="Values::Echo")
        assert got == values_servant.EXPECTED
    finally:
        server.stop()
    assert server.proc.returncode in (0, None, -15), server.stderr


def test_values_over_giop_1_0_are_refused_with_the_reason(omni_server: Any) -> None:
    # GIOP 1.0 negotiates no char code set: strings go as ISO-8859-1, and pyorb
    # cannot yet re-encode the strings inside a value, so it says so and sends nothing.
    server = omni_server(str(IDL), "tests.peers.values_servant:Echo")
    with pyorb.BlockingClient(pyorb.Config(giop_version=GIOP_1_0)) as client:
        echo = client.resolve(server.ior, Values.Echo)
        with pytest.raises(CORBA.MARSHAL, match="re-encode their strings for another char code set"):
            echo.echo_point(Values.Point(1, 2, "x"))
    with pyorb.BlockingClient() as client:  # the same server, GIOP 1.2 and UTF-8
        assert client.resolve(server.ior, Values.Echo).echo_point(None) is None
