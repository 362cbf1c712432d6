"""An omniORBpy client (another process) calls objects under a pyorb default servant and servant locator."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from omniORB import CORBA

import pyorb
from pyorb.idl import BENCH_IDL, bench_idl
from pyorb.testing import LoopThread
from tests.interop.conftest import PEERS, ROOT

IDL = bench_idl()
Bench, Bench__POA = IDL.Bench, IDL.Bench__POA


class ById(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    def work(self, token: int) -> int:
        oid = pyorb.current_object_id()
        assert oid is not None
        return token + int(oid)


class Offset(Bench__POA.Sink):  # type: ignore[misc,valid-type]
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def work(self, token: int) -> int:
        return token + self.offset


class Locator:
    def __init__(self, forward_to: str) -> None:
        self.forward_to = forward_to

    async def preinvoke(self, oid: bytes, operation: str) -> tuple[Any, None]:
        if oid == b"moved":
            raise pyorb.ForwardRequest(self.forward_to)
        if not oid.isdigit():
            raise CORBA.OBJECT_NOT_EXIST(0, CORBA.COMPLETED_NO)
        return Offset(1000 + int(oid)), None

    def postinvoke(self, oid: bytes, operation: str, servant: Any, cookie: None) -> None:
        pass


def test_an_omniorb_client_calls_default_servant_and_located_objects(loop_thread: LoopThread) -> None:
    async def start() -> tuple[pyorb.Server, dict[str, str]]:
        server = pyorb.Server(strategy="thread_pool(2)")
        await server.start()
        server.activate_default(ById(), "dflt/")
        server.activate(Offset(5000), "target")
        server.set_locator("loc/", Locator(server.ior("target")), Bench__POA.Sink)
        refs = {"default_7": server.ior("dflt/7"), "default_corbaloc_9": server.corbaloc("dflt/9"),
                "located_3": server.ior("loc/3"), "located_corbaloc_4": server.corbaloc("loc/4"),
                "forwarded": server.ior("loc/moved"), "missing": server.ior("loc/nothing")}
        return server, refs

    server, refs = loop_thread.run(start())
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pyorb.testing.omnipeer", "call", "--idl", str(BENCH_IDL),
             "--function", str(PEERS / "omni_managed_calls.py") + ":call_each", "--target", refs["default_7"],
             "--args", json.dumps([refs])],
            capture_output=True, text=True, timeout=120, check=False)
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        assert outcome["ok"], (outcome, done.stderr[-2000:])
        assert outcome["result"] == {
            "default_7": 8, "default_corbaloc_9": 10, "located_3": 1004, "located_corbaloc_4": 1005,
            "forwarded": 5001, "missing": "IDL:omg.org/CORBA/OBJECT_NOT_EXIST:1.0", "missing_non_existent": True,
        }
    finally:
        loop_thread.run(server.close())
