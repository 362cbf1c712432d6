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
NODE_CASES = ("make_node", "node_callback", "nodes", "node_by_corbaloc")


def expected_failures(giop: str, char: str) -> dict[str, str]:
    """Cases that fail, and why, for an omniORBpy client of a pyorb server."""
    expected: dict[str, str] = {}
    if giop == "1.0":
        no_wide = "GIOP 1.0 has no wchar: omniORB refuses (INV_OBJREF), as omni-to-omni"
        expected.update(dict.fromkeys(["echo_wchar", "echo_wstring", "echo_wstring_unicode"], no_wide))
        latin = "pyorb limitation: GIOP 1.0 has no code-set negotiation and pyorb strings are always UTF-8"
        expected.update(dict.fromkeys(["echo_string_latin1", "echo_point", "make_node"], latin))
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

    async def start() -> tuple[pyorb.Server, pyorb.Client, dict[str, str]]:
        client = pyorb.Client()
        server = pyorb.Server(objref_converter=client.from_objref)
        await server.start()
        styles: dict[str, Any] = {
            "coroutine": TypesCoroutine(server, client),
            "amh": TypesAMH(),
            "sync": TypesSync(),
        }
        return server, client, {name: server.ior(server.activate(s, name)) for name, s in styles.items()}

    server, client, iors = loop_thread.run(start())
    yield iors

    async def stop() -> None:
        await client.close()
        await server.close()

    loop_thread.run(stop())


@pytest.mark.parametrize("giop", ["1.2", "1.1", "1.0"])
@pytest.mark.parametrize("char", ["UTF-8", "ISO-8859-1"])
def test_omniorb_client_every_case(servers: dict[str, str], giop: str, char: str) -> None:
    results = run_omni_client(servers["coroutine"], "--max-giop", giop, "--native-char", char)
    assert len(results) >= 38
    assert failures(results).keys() == expected_failures(giop, char).keys(), failures(results)


def test_omniorb_ami_client(servers: dict[str, str]) -> None:
    results = run_omni_client(servers["coroutine"], "--ami", "--native-char", "UTF-8")
    assert failures(results).keys() == {"echo_wchar"}, failures(results)


@pytest.mark.parametrize("style", ["amh", "sync"])
def test_omniorb_client_other_servant_styles(servers: dict[str, str], style: str) -> None:
    results = run_omni_client(servers[style], "--native-char", "UTF-8")
    expected = {"echo_wchar", *NODE_CASES}  # these servants do not implement the Node operations
    assert failures(results).keys() == expected, failures(results)
    for case in NODE_CASES:
        assert "NO_IMPLEMENT" in results[case][1]


def test_omniorb_client_through_corbaloc(servers: dict[str, str], loop_thread: LoopThread) -> None:
    # A corbaloc carries no code sets: omniORB then allows no wchar and only Latin-1 text.
    corbaloc_ior = servers["coroutine"]
    from pyorb.giop.ior import IOR, to_corbaloc

    profile = IOR.from_string(corbaloc_ior).iiop
    assert profile is not None
    url = to_corbaloc(profile.host, profile.port, profile.object_key)
    results = run_omni_client(url, "--cases", "echo_long,echo_string,directions,raise_failure,is_a")
    assert not failures(results), failures(results)
