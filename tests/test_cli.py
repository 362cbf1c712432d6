"""The ``pyorb`` command, driven as a user drives it: a subprocess, its output and exit status.

Servers are real: ``pyorb serve`` with a servant module written to a temporary
directory, and an omniORBpy server (tests/peers/omni_server.py) for the
interop IDL's types.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from pyorb.idl import BENCH_IDL
from pyorb.giop.ior import IOR, ORB_TYPE_OMNIORB, IIOPProfile, TaggedComponent, TaggedProfile, build_ior
from pyorb.testing.kit import NameServer, ServerProcess

pytestmark = pytest.mark.integration  # opens sockets or starts processes

ROOT = Path(__file__).resolve().parents[1]
STOCK_IDL = ROOT / "idl" / "stock.idl"
INTEROP_IDL = ROOT / "idl" / "interop.idl"
PYORB = [sys.executable, "-m", "pyorb"]
QUOTER = """\
    import Stock
    import Stock__POA


    class Quoter(Stock__POA.Quoter):
        def get_quote(self, stock_name):
            if stock_name == "BAD":
                raise Stock.Invalid_Stock_Symbol()
            return len(stock_name)


    class NotAServant:
        pass
"""


def pyorb(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m pyorb ARGS``; its exit status, stdout and stderr."""
    # Wide enough that no table cell wraps the text a test looks for.
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*PYORB, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env, check=False)


def one_line_error(done: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """Assert a failure reported as exactly one ``error:`` line; return it."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return lines[0]


# -- servers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def servant_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("servants") / "quoter.py"
    path.write_text(textwrap.dedent(QUOTER))
    return path


@pytest.fixture(scope="module")
def quoter(servant_file: Path) -> Iterator[ServerProcess]:
    """``pyorb serve`` of the Stock::Quoter servant above, under the key "Quoter"."""
    server = ServerProcess([*PYORB, "serve", f"{servant_file}:Quoter", "--idl", str(STOCK_IDL),
                            "--key", "Quoter", "--stop-on-stdin-eof"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def omni_types() -> Iterator[ServerProcess]:
    """An omniORBpy server of Interop::Types (UTF-8 native char set)."""
    server = ServerProcess([sys.executable, str(ROOT / "tests" / "peers" / "omni_server.py"),
                            "--native-char", "UTF-8"], lines=1)
    yield server
    server.stop()


# -- the command itself ----------------------------------------------------------------


def test_console_script_and_module_agree() -> None:
    # Beside this interpreter (a virtualenv run by path need not be on PATH), else on PATH.
    script = shutil.which("pyorb", path=sysconfig.get_path("scripts")) or shutil.which("pyorb")
    assert script is not None, "the pyorb console script is not installed (pip install -e .)"
    done = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "pyorb 0.1.0", done
    helped = pyorb("--help")
    assert helped.returncode == 0
    for command in ("compile", "ior", "call", "ops", "serve", "demo"):
        assert command in helped.stdout


@pytest.mark.parametrize("args, message", [
    (["frob"], "No such command 'frob'"),
    (["ior"], "Missing argument"),
    (["--no-such-option"], "No such option"),
    (["serve", "quoter:Quoter", "--port", "70000"], "--port"),
    (["serve", "quoter:Quoter", "--port", "-1"], "--port"),
    (["call", "corbaloc::127.0.0.1:1/X", "op", "--idl", "/no/such.idl"], "does not exist"),
    (["demo", "--clients", "0"], "--clients"),
])
def test_usage_errors_are_one_line_with_status_2(args: list[str], message: str) -> None:
    line = one_line_error(pyorb(*args), code=2)
    assert message in line


def test_demo_runs_through_the_command() -> None:
    done = pyorb("demo", "--clients", "20", "--seconds", "0.5", "--delay", "0.05")
    assert done.returncode == 0, done.stderr
    assert "errors or wrong replies" in done.stdout and "throughput" in done.stdout


def test_loadtest_group_is_mounted() -> None:
    done = pyorb("loadtest", "--help")
    assert done.returncode == 0, done.stderr
    assert "client-scalability" in done.stdout
    assert "No such command 'nope'" in one_line_error(pyorb("loadtest", "nope"), code=2)


def test_traceback_flag_and_verbose_logging() -> None:
    shown = pyorb("--traceback", "ior", "IOR:zz")
    assert shown.returncode == 1 and "Traceback" in shown.stderr and "malformed IOR" in shown.stderr
    ref = build_ior("IDL:Stock/Quoter:1.0", "127.0.0.1", 1, b"Quoter").to_string()
    logged = pyorb("-v", "call", ref, "get_quote", "A", "--idl", str(STOCK_IDL))
    assert logged.returncode == 1
    assert "INFO pyorb.client.client: cannot connect to 127.0.0.1:1" in logged.stderr
    assert logged.stderr.splitlines()[-1].startswith("error: CORBA.TRANSIENT")


# -- compile ---------------------------------------------------------------------


def test_compile_writes_the_modules(tmp_path: Path) -> None:
    done = pyorb("compile", str(STOCK_IDL), "-o", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "Stock" / "__init__.py").is_file()
    assert (tmp_path / "Stock__POA" / "__init__.py").is_file()
    rows = [line for line in done.stdout.splitlines() if str(tmp_path) in line and "compiled" not in line]
    listed = {row.strip("│ ") for row in rows}
    assert str(tmp_path / "Stock" / "__init__.py") in listed, done.stdout
    assert all(Path(p).is_file() for p in listed), listed
    # the modules import and define the interface
    check = subprocess.run([sys.executable, "-c", "import Stock; print(Stock.Quoter._NP_RepositoryId)"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert check.stdout.strip() == "IDL:Stock/Quoter:1.0", check.stderr


def test_compile_reports_bad_idl_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.idl"
    bad.write_text("module M { interface I { void op(in nosuchtype x); }; };\n")
    line = one_line_error(pyorb("compile", str(bad), "-o", str(tmp_path / "out")))
    assert "bad.idl" in line


def test_compile_missing_idl_is_a_usage_error(tmp_path: Path) -> None:
    line = one_line_error(pyorb("compile", str(tmp_path / "missing.idl")), code=2)
    assert "missing.idl" in line


# -- ior ---------------------------------------------------------------------------


def test_ior_table_shows_every_field() -> None:
    ref = build_ior("IDL:Stock/Quoter:1.0", "127.0.0.1", 2809, b"Quoter\x01", orb_type=ORB_TYPE_OMNIORB).to_string()
    done = pyorb("ior", ref)
    assert done.returncode == 0, done.stderr
    for text in ("IDL:Stock/Quoter:1.0", "TAG_INTERNET_IOP", "127.0.0.1", "2809", "Quoter\\x01", "51756f74657201",
                 "1.2", "native UTF-8; conversion ISO-8859-1", "native UTF-16; conversion UTF-16", "omniORB",
                 "corbaloc:iiop:1.2@127.0.0.1:2809/Quoter%01"):
        assert text in done.stdout, (text, done.stdout)


def test_ior_of_an_omniorb_server(omni_types: ServerProcess) -> None:
    done = pyorb("ior", "--json", omni_types.ior)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["type_id"] == "IDL:Interop/Types:1.0"
    (profile,) = info["profiles"]
    assert (profile["host"], profile["port"], profile["object_key"]) == ("127.0.0.1", omni_types.port, "Types")
    tags = {c["tag"]: c for c in profile["components"]}
    assert tags["TAG_ORB_TYPE"]["orb_type"].startswith("omniORB")
    assert tags["TAG_CODE_SETS"]["char"]["native"] == "UTF-8"


def test_ior_shows_unknown_profiles_and_components_raw() -> None:
    iiop = IIOPProfile((1, 2), "127.0.0.1", 2809, b"K", (TaggedComponent(0x1234, b"ab"),))
    ref = IOR("IDL:X:1.0", (TaggedProfile(99, b"\x01\x02"), iiop)).to_string()
    done = pyorb("ior", "--json", ref)
    assert done.returncode == 0, done.stderr
    profiles = json.loads(done.stdout)["profiles"]
    assert profiles[0] == {"tag": "99", "data": "0102"}
    assert profiles[1]["components"] == [{"tag": "0x00001234", "data": "6162"}]


def test_ior_json_of_a_corbaloc_url() -> None:
    done = pyorb("ior", "--json", "corbaloc::1.2@localhost:5000/Types")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"type_id": "", "profiles": [{
        "tag": "TAG_INTERNET_IOP", "iiop_version": "1.2", "host": "localhost", "port": 5000,
        "object_key": "Types", "object_key_hex": "5479706573", "corbaloc": "corbaloc:iiop:1.2@localhost:5000/Types",
        "byte_order": "little-endian", "components": [],
    }]}


@pytest.mark.parametrize("ref, message", [
    ("IOR:zz", "malformed IOR"),
    ("IOR:0100", "malformed IOR"),
    ("http://example.com/", "not an object reference"),
    ("corbaloc::127.0.0.1:99999/K", "out of range"),
    ("@/no/such/file", "No such file"),
    ("corbaname::127.0.0.1:1#a/b", "CORBA.TRANSIENT (minor TRANSIENT_ConnectFailed, completed NO): cannot resolve"),
])
def test_ior_bad_references(ref: str, message: str) -> None:
    assert message in one_line_error(pyorb("ior", ref))


# -- serve and call (pyorb server) ---------------------------------------------------


def test_call_a_pyorb_server(quoter: ServerProcess) -> None:
    assert quoter.corbaloc.endswith("/Quoter")
    done = pyorb("call", quoter.ior, "get_quote", "ACME", "--idl", str(STOCK_IDL))
    assert (done.returncode, done.stdout) == (0, "4\n"), done.stderr
    as_json = pyorb("call", quoter.corbaloc, "get_quote", "AB", "--idl", str(STOCK_IDL),
                    "--interface", "Stock::Quoter", "--json")
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, 2), as_json.stderr


def test_call_user_exception_is_one_line(quoter: ServerProcess) -> None:
    line = one_line_error(pyorb("call", quoter.ior, "get_quote", "BAD", "--idl", str(STOCK_IDL)))
    assert line == "error: IDL:Stock/Invalid_Stock_Symbol:1.0 raised by get_quote"


@pytest.mark.parametrize("args, message", [
    (["nosuch"], "IDL:Stock/Quoter:1.0 has no operation 'nosuch' (operations: get_quote)"),
    (["get_quote"], "get_quote takes 1 argument, got 0: long get_quote(in string stock_name) "
                    "raises (IDL:Stock/Invalid_Stock_Symbol:1.0)"),
    (["get_quote", "A", "B"], "takes 1 argument, got 2"),
])
def test_call_bad_operation_or_arguments(quoter: ServerProcess, args: list[str], message: str) -> None:
    assert message in one_line_error(pyorb("call", quoter.ior, *args, "--idl", str(STOCK_IDL)))


def test_call_corbaloc_needs_an_interface(quoter: ServerProcess) -> None:
    line = one_line_error(pyorb("call", quoter.corbaloc, "get_quote", "A", "--idl", str(STOCK_IDL)))
    assert "--interface" in line
    line = one_line_error(pyorb("call", quoter.corbaloc, "get_quote", "A", "--idl", str(STOCK_IDL),
                                "--interface", "Stock::Nope"))
    assert "no interface 'Stock::Nope'" in line


def test_call_unreachable_reference_is_transient() -> None:
    ref = build_ior("IDL:Stock/Quoter:1.0", "127.0.0.1", 1, b"Quoter").to_string()
    line = one_line_error(pyorb("call", ref, "get_quote", "A", "--idl", str(STOCK_IDL)))
    assert line == "error: CORBA.TRANSIENT (minor TRANSIENT_ConnectFailed, completed NO): cannot connect to 127.0.0.1:1: Connection refused"


def test_call_group_with_every_member_down_names_each_member() -> None:
    from pyorb.giop.ior import GroupComponent, group_ior

    ports = []
    for _ in range(3):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    members = [build_ior("IDL:Stock/Quoter:1.0", "127.0.0.1", p, b"Quoter") for p in ports]
    ref = group_ior(members, GroupComponent("cli", 1, 1)).to_string()
    line = one_line_error(pyorb("call", ref, "get_quote", "A", "--idl", str(STOCK_IDL)))
    assert line.startswith("error: CORBA.TRANSIENT (minor TRANSIENT_ConnectFailed, completed NO): "
                           "no member of the object group could take the call to get_quote (3 tried: ")
    assert all(f"127.0.0.1:{p}" in line for p in ports)


def test_call_unknown_object_key(quoter: ServerProcess) -> None:
    wrong = quoter.corbaloc.replace("/Quoter", "/NoSuchKey")
    line = one_line_error(pyorb("call", wrong, "get_quote", "A", "--idl", str(STOCK_IDL),
                                "--interface", "Stock::Quoter"))
    assert line.startswith("error: CORBA.OBJECT_NOT_EXIST") and "no object with this key" in line


def test_call_timeout_on_a_silent_server() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        ref = build_ior("IDL:Stock/Quoter:1.0", "127.0.0.1", port, b"Quoter").to_string()
        line = one_line_error(pyorb("call", ref, "get_quote", "A", "--idl", str(STOCK_IDL), "--timeout", "0.5"))
    assert line == (f"error: CORBA.TIMEOUT (minor TIMEOUT_CallTimedOutOnClient, completed MAYBE): no reply to get_quote "
                    f"from 127.0.0.1:{port} within 0.5 s (timeout= or Config.call_timeout); the server may still run it")


def test_call_type_id_missing_from_the_idl(quoter: ServerProcess) -> None:
    line = one_line_error(pyorb("call", quoter.ior, "get_quote", "A", "--idl", str(BENCH_IDL)))
    assert "IDL:Stock/Quoter:1.0 is not an interface of" in line


def test_ops_lists_signatures(quoter: ServerProcess) -> None:
    done = pyorb("ops", quoter.ior, "--idl", str(STOCK_IDL))
    assert done.returncode == 0, done.stderr
    assert "long get_quote(in string stock_name) raises (IDL:Stock/Invalid_Stock_Symbol:1.0)" in done.stdout
    assert "give a reference or --interface" in one_line_error(pyorb("ops", "--idl", str(STOCK_IDL)))


@pytest.mark.interop
def test_corbaname_references_resolve_through_omninames(quoter: ServerProcess, omni_names: NameServer) -> None:
    async def bind() -> None:
        from pyorb.client.client import Client
        from pyorb.naming import root_context

        async with Client() as client:
            await root_context(client, omni_names.corbaloc).rebind("Quoter.object", client.resolve(quoter.ior))

    asyncio.run(bind())
    url = omni_names.corbaname + "#Quoter.object"
    done = pyorb("call", url, "get_quote", "AB", "--idl", str(STOCK_IDL))
    assert (done.returncode, done.stdout) == (0, "2\n"), done.stderr
    described = pyorb("ior", "--json", url)
    assert json.loads(described.stdout)["profiles"][0]["port"] == quoter.port, described.stderr
    line = one_line_error(pyorb("ior", omni_names.corbaname + "#Nobody"))
    assert line.startswith("error: IDL:omg.org/CosNaming/NamingContext/NotFound:1.0 raised by the naming service")


@pytest.mark.parametrize("target, extra, message", [
    ("{file}:Quoter", ["--model", "no_such_model"], "unknown model 'no_such_model'"),
    ("{file}:NotAServant", [], "is not a servant"),
    ("{file}:Missing", [], "has no attribute 'Missing'"),
    ("{file}", [], "expected MODULE:Servant"),
    ("no_such_module_xyz:Quoter", [], "No module named 'no_such_module_xyz'"),
    ("{file}:Quoter", ["--host", "203.0.113.7"], "203.0.113.7"),
])
def test_serve_bad_arguments(servant_file: Path, target: str, extra: list[str], message: str) -> None:
    done = pyorb("serve", target.format(file=servant_file), "--idl", str(STOCK_IDL), *extra)
    assert message in one_line_error(done)


def test_serve_without_the_idl_says_so(servant_file: Path) -> None:
    assert "load its IDL with --idl" in one_line_error(pyorb("serve", f"{servant_file}:Quoter"))


def test_serve_with_a_model_prints_stats_and_stops_on_sigterm(servant_file: Path, tmp_path: Path) -> None:
    ior_file = tmp_path / "quoter.ior"
    server = ServerProcess([*PYORB, "serve", f"{servant_file}:Quoter", "--idl", str(STOCK_IDL),
                            "--model", "thread_pool(2)", "--ior-file", str(ior_file)])
    try:
        assert ior_file.read_text().strip() == server.ior
        done = pyorb("call", f"@{ior_file}", "get_quote", "XYZ", "--idl", str(STOCK_IDL))
        assert done.stdout == "3\n", done.stderr
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(30)
        stats = server.stderr()
    finally:
        status = server.stop()
    assert status == 0
    assert "thread_pool(2)" in stats and "get_quote" in stats, stats


# -- call (omniORB server, the interop IDL) ---------------------------------------------

POINT = '{"x": 1, "y": 2.5, "label": "p"}'
CASES = [
    (["echo_long", "-42"], "-42"),
    (["echo_ulonglong", "0xffffffffffffffff"], str(2**64 - 1)),
    (["echo_boolean", "yes"], "true"),
    (["echo_double", "2.5"], "2.5"),
    (["echo_wstring", "日本"], "日本"),
    (["echo_color", "green"], "green"),
    (["echo_point", POINT], '{"x": 1.0, "y": 2.5, "label": "p"}'),
    (["echo_points", f"[{POINT}, [3, 4, \"q\"]]"],
     '[{"x": 1.0, "y": 2.5, "label": "p"}, {"x": 3.0, "y": 4.0, "label": "q"}]'),
    (["echo_blob", "00ff10"], "00ff10"),
    (["echo_variant", '{"as_point": ' + POINT + "}"], '{"as_point": {"x": 1.0, "y": 2.5, "label": "p"}}'),
    (["echo_variant", '{"other": false}'], '{"other": false}'),
    (["echo_matrix", "[[1, 2, 3], [4, 5, 6]]"], "[[1, 2, 3], [4, 5, 6]]"),
    (["echo_any", '"text"'], "text"),
    (["directions", "3", "4"], "result = 7\nb = 5\ndoubled = 6"),
    (["mixed", "héllo", "0.5", "2", "3"], 'result = 5.5\ns_out = "olléh"'),
]
ERRORS = [
    (["raise_failure", "7"],
     'error: IDL:Interop/Failure:1.0 raised by raise_failure {"code": 7, "why": "failed", "details": [1, 2, 3]}'),
    (["raise_system"], "error: CORBA.BAD_PARAM (minor 42, completed NO): raise_system on 127.0.0.1:"),
    (["raise_system"], "(key 'Types'): the server raised it"),
    (["echo_long", "abc"], "error: v of echo_long: expected long (an integer), got 'abc'; "
                           "expected long echo_long(in long v)"),
    (["echo_octet", "256"], "256 is out of range for octet (0..255)"),
    (["echo_color", "purple"], "expected Color (one of red, green, blue), got 'purple'"),
    (["echo_point", '{"x": 1}'], "Point member 'y' is missing"),
    (["echo_point", "{not json"], "expected Point as JSON"),
    (["echo_variant", '{"nope": 1}'], "Variant has no member 'nope'"),
    (["echo_matrix", "[[1, 2, 3]]"], "expected long[2][3] (a JSON array of 2)"),
    (["directions", "1"], "directions takes 2 arguments, got 1: long directions(in long a, inout long b, "
                          "out long doubled)"),
]
CallOutcomes = dict[tuple[str, ...], subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def omni_calls(omni_types: ServerProcess) -> CallOutcomes:
    """Every case below, called on the omniORB server a few at a time (each
    run is a process start and an IDL compile: in parallel they take a third
    of the time)."""
    cases = [tuple(args) for args, _ in CASES + ERRORS]
    with ThreadPoolExecutor(max_workers=3) as pool:
        done = pool.map(lambda args: pyorb("call", omni_types.ior, *args, "--idl", str(INTEROP_IDL)), cases)
        return dict(zip(cases, done))


@pytest.mark.interop
@pytest.mark.parametrize("args, expected", CASES, ids=[c[0][0] + str(i) for i, c in enumerate(CASES)])
def test_call_omniorb_types(omni_calls: CallOutcomes, args: list[str], expected: str) -> None:
    done = omni_calls[tuple(args)]
    assert (done.returncode, done.stdout.rstrip("\n")) == (0, expected), done.stderr


@pytest.mark.interop
@pytest.mark.parametrize("args, message", ERRORS, ids=[e[0][0] + str(i) for i, e in enumerate(ERRORS)])
def test_call_omniorb_errors(omni_calls: CallOutcomes, args: list[str], message: str) -> None:
    assert message in one_line_error(omni_calls[tuple(args)])


@pytest.mark.interop
def test_call_omniorb_octets_from_a_file(omni_types: ServerProcess, tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 300)  # over 64 KiB: omniORB fragments the reply
    done = pyorb("call", omni_types.ior, "echo_blob", f"@{blob}", "--idl", str(INTEROP_IDL), "--json")
    assert done.returncode == 0, done.stderr
    assert bytes.fromhex(json.loads(done.stdout)) == blob.read_bytes()


@pytest.mark.interop
def test_call_omniorb_oneway_then_read_back(omni_types: ServerProcess) -> None:
    sent = pyorb("call", omni_types.ior, "fire", "ping", "--idl", str(INTEROP_IDL))
    assert (sent.returncode, sent.stdout) == (0, "oneway fire sent\n"), sent.stderr
    back = pyorb("call", omni_types.corbaloc, "last_oneway", "--idl", str(INTEROP_IDL), "--interface",
                 "Interop::Types")
    assert (back.returncode, back.stdout) == (0, "ping\n"), back.stderr


# -- argument parsing, in process (every conversion also goes through the marshaler) ----


@pytest.fixture(scope="module")
def interop_types() -> type:
    import pyorb

    return pyorb.load_idl(INTEROP_IDL).Interop.Types  # type: ignore[no-any-return]


@pytest.mark.parametrize("op, text, shown", [
    ("echo_short", "-32768", -32768),
    ("echo_ushort", "0xffff", 65535),
    ("echo_float", "-1.5", -1.5),
    ("echo_char", "é", "é"),
    ("echo_wchar", "日", "日"),
    ("echo_color", "blue", "blue"),
    ("echo_blob", "de:ad:be:ef", "deadbeef"),
    ("echo_points", "[]", []),
    ("echo_variant", '{"as_long": -5}', {"as_long": -5}),
    ("echo_any", "null", None),
    ("echo_any", "12345678901", 12345678901),
    ("echo_any", "plain words", "plain words"),
    ("echo_long", "042", 42),
    ("echo_long", "0x2a", 42),
    ("echo_matrix", "[[0, 0, 0], [1, 1, 1]]", [[0, 0, 0], [1, 1, 1]]),
])
def test_arguments_survive_the_marshaler(interop_types: type, op: str, text: str, shown: object) -> None:
    from pyorb.cli.values import from_text, to_json
    from pyorb.marshal import Operation

    desc = getattr(interop_types, "_d_" + op)
    codec = Operation(op, desc).args
    value = from_text(desc[0][0], text)
    (back,) = codec.unpack(codec.pack((value,), 0, True), 0, True)
    assert to_json(desc[0][0], back) == shown


@pytest.mark.parametrize("op, text, message", [
    ("echo_short", "32768", "out of range for short"),
    ("echo_ulong", "-1", "out of range for unsigned long"),
    ("echo_boolean", "maybe", "expected boolean"),
    ("echo_char", "日", "char holds one byte"),
    ("echo_char", "ab", "one character"),
    ("echo_string", "a\0b", "cannot contain NUL"),
    ("echo_blob", "xyz", "hex digits"),
    ("echo_blob", "@/no/such/file", "cannot read"),
    ("echo_points", '[{"x": 1, "y": 2, "label": 3}]', "[0].label: expected string"),
    ("echo_points", '{"x": 1}', "expected sequence<Point> (a JSON array)"),
    ("echo_any", "[1, 2]", "an any is written as"),
    ("echo_double", "1.2.3", "expected double"),
])
def test_argument_errors(interop_types: type, op: str, text: str, message: str) -> None:
    from pyorb.cli.values import ArgumentError, from_text

    with pytest.raises(ArgumentError) as caught:
        from_text(getattr(interop_types, "_d_" + op)[0][0], text)
    assert message in str(caught.value)


def test_serve_publishes_alternate_addresses(servant_file: Path) -> None:
    """``--publish``: the first address in the profile, the next as an alternate the client falls back to."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    server = ServerProcess([*PYORB, "serve", f"{servant_file}:Quoter", "--idl", str(STOCK_IDL),
                            "--publish", f"127.0.0.1:{dead}", "--publish", "127.0.0.1"])
    try:
        profile = IOR.from_string(server.ior).iiop
        assert profile is not None and profile.port == dead and len(profile.alternate_addresses) == 1
        assert pyorb("call", server.ior, "get_quote", "XYZ", "--idl", str(STOCK_IDL)).stdout == "3\n"
    finally:
        server.stop()
    assert "error: " in pyorb("serve", f"{servant_file}:Quoter", "--idl", str(STOCK_IDL), "--publish",
                              "0.0.0.0").stderr
