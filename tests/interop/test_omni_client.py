"""An omniORBpy client (another process) calls a pyorb server.

Every case of tests/peers/omni_client.py runs against pyorb's servant styles
over GIOP 1.0, 1.1 and 1.2, with the client's native char set UTF-8 or
ISO-8859-1, synchronously and through omniORB's AMI (sendc_).  The test
asserts the exact set of failing cases: each expected failure below is an
omniORB limitation or a documented pyorb one, with its reason.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import pyorb
from pyorb.testing import LoopThread
from tests.interop.conftest import failures, run_omni_client
from tests.interop.servants import TypesAMH, TypesCoroutine, TypesSync

OMNI_READS_WCHAR = "omniORBpy 4.3.3 misreads the GIOP 1.2 wchar in the reply (its reading side; pyorb reads it right)"
NODE_CASES = ("make_node", "node_callback", "nodes", "node_by_corbaloc", "refs_in_values")


def expected_failures(giop: str, char: str) -> dict[str, str]:
    """Cases that fail, and why, for an omniORBpy client of a pyorb server."""
    expected: dict[str, str] = {}
    if giop == "1.0":
        no_wide = "GIOP 1.0 has no wchar: omniORB refuses (INV_OBJREF), as omni-to-omni"
        expected.update(dict.fromkeys(["echo_wchar", "echo_wstring", "echo_wstring_unicode"], no_wide))
        expected["echo_string_unicode"] = "omniORB cannot send non-Latin-1 text over GIOP 1.0 (as omni-to-omni)"
        if char == "UTF-8":
            expected["echo_char_latin1"] = "omniORB cannot convert char 0xE9 from UTF-8 (as omni-to-omni)"
        return expected
    if char == "ISO-8859-1":
        expected["echo_char_latin1"] = "omniORB cannot send char 0xE9 as one UTF-8 octet (as omni-to-omni)"
    expected["echo_wchar"] = OMNI_READS_WCHAR
    return expected


@pytest.fixture(scope="module")
def servers(loop_thread: LoopThread) -> Iterator[dict[str, str]]:
    """One pyorb server per servant style, in a background event loop."""

    async def start() -> tuple[pyorb.Server, dict[str, str]]:
        server = pyorb.Server()  # references reach coroutine and AMH servants as pyorb proxies
        await server.start()
        styles: dict[str, Any] = {
            "coroutine": TypesCoroutine(server),
            "amh": TypesAMH(server),
            "sync": TypesSync(),
        }
        return server, {name: server.ior(server.activate(s, name)) for name, s in styles.items()}

    server, iors = loop_thread.run(start())
    yield iors
    loop_thread.run(server.close())


@pytest.mark.parametrize("giop", ["1.2", "1.1", "1.0"])
@pytest.mark.parametrize("char", ["UTF-8", "ISO-8859-1"])
def test_omniorb_client_every_case(servers: dict[str, str], giop: str, char: str) -> None:
    results = run_omni_client(servers["coroutine"], "--max-giop", giop, "--native-char", char)
    assert len(results) >= 38
    assert failures(results).keys() == expected_failures(giop, char).keys(), failures(results)


def test_omniorb_ami_client(servers: dict[str, str]) -> None:
    results = run_omni_client(servers["coroutine"], "--ami", "--native-char", "UTF-8")
    assert failures(results).keys() == {"echo_wchar"}, failures(results)


def test_omniorb_client_amh_servant(servers: dict[str, str]) -> None:
    results = run_omni_client(servers["amh"], "--native-char", "UTF-8")
    assert failures(results).keys() == {"echo_wchar"}, failures(results)


def test_omniorb_client_sync_servant(servers: dict[str, str]) -> None:
    results = run_omni_client(servers["sync"], "--native-char", "UTF-8")
    expected = {"echo_wchar", *NODE_CASES}  # this servant does not implement the reference operations
    assert failures(results).keys() == expected, failures(results)
    for case in NODE_CASES:
        assert "NO_IMPLEMENT" in results[case][1]


@pytest.mark.parametrize("char", ["UTF-8", "ISO-8859-1"])
def test_omniorb_client_through_corbaloc(servers: dict[str, str], char: str) -> None:
    """A corbaloc URL carries no code sets.  omniORB locates such a
    reference first; pyorb forwards it to the full IOR, so every case passes as with
    the IOR itself, Unicode and wide text included.  echo_wchar is left out: the
    COMM_FAILURE omniORBpy makes of it sends omniORB back to the corbaloc reference."""
    from pyorb.giop.ior import IOR, to_corbaloc
    from tests.peers.omni_client import CASES

    profile = IOR.from_string(servers["coroutine"]).iiop
    assert profile is not None
    url = to_corbaloc(profile.host, profile.port, profile.object_key)
    cases = [c for c in CASES if c != "echo_wchar"]
    results = run_omni_client(url, "--native-char", char, "--cases", ",".join(cases))
    assert len(results) == len(cases) >= 38
    expected = expected_failures("1.2", char).keys() - {"echo_wchar"}
    assert failures(results).keys() == expected, failures(results)


def test_omniorb_client_without_code_sets_gets_iso_8859_1(servers: dict[str, str]) -> None:
    """Without the forward (omniORB told not to locate first) the client names no code
    sets: CORBA's ISO-8859-1, which pyorb now reads and answers ("pé" stays "pé")."""
    from pyorb.giop.ior import IOR, to_corbaloc

    profile = IOR.from_string(servers["coroutine"]).iiop
    assert profile is not None
    url = to_corbaloc(profile.host, profile.port, profile.object_key)
    cases = "echo_long,echo_string,echo_string_latin1,echo_point,directions,raise_failure,is_a,make_node,refs_in_values"
    results = run_omni_client(url, "--cases", cases, "--native-char", "ISO-8859-1", "--no-locate")
    assert len(results) == 9 and not failures(results), failures(results)
