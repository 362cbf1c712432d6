"""Typed stubs: generated for real IDL, used for real, and checked by mypy.

The user program below is both type-checked (mypy --strict, in a
subprocess, against the generated stubs) and run (in a subprocess whose
only IDL modules are the ones omniidl and pyorb.idl.stubs wrote), so the stubs
cannot drift from what the program does at run time.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any, AsyncIterator, Iterator

import pytest
import pytest_asyncio
from omniORB import CORBA

import pyorb
from pyorb.idl import BENCH_IDL
from pyorb.idl.stubs import sibling_name, read_modules, write_stubs

pytestmark = pytest.mark.integration  # opens sockets or starts processes

REPO = Path(__file__).resolve().parent.parent
IDL_DIR = REPO / "idl"
IDLS = [IDL_DIR / "stock.idl", BENCH_IDL, IDL_DIR / "interop.idl"]
MODULES = ["Stock", "Bench", "Interop", "Outer.Inner"]
# Nested modules, keywords, attributes, inheritance, types declared in an
# interface, an interface without operations.
NESTED_IDL = """
module Outer { module Inner {
  interface Base {
    struct Item { long v; };
    attribute long count;
    readonly attribute string label;
    Item first ();
  };
  interface Derived : Base { void go (in long lambda); };
  interface Nothing {};
}; };
"""

USER_PROGRAM = '''
"""A user of the typed stubs: an AMH server and a client in one process."""

from __future__ import annotations

import asyncio
import json

import pyorb
import Interop
import Stock
from pyorb.typed import SystemException
from Bench_pyorb import AMH_Echo, AMH_EchoResponseHandler, Echo
from Interop_pyorb import AMH_Types, AMH_TypesResponseHandler, Types
from Stock_pyorb import AMH_Quoter, AMH_QuoterResponseHandler, Quoter


class Quotes(AMH_Quoter):
    async def get_quote(self, rh: AMH_QuoterResponseHandler, name: str) -> None:
        if name.isupper():
            rh.get_quote(len(name) * 100)
        else:
            rh.get_quote_excep(Stock.Invalid_Stock_Symbol())


class Echoes(AMH_Echo):
    def ping(self, rh: AMH_EchoResponseHandler, stamp: int) -> None:
        rh.ping(stamp + 1)


class TypesServant(AMH_Types):
    def directions(self, rh: AMH_TypesResponseHandler, a: int, b: int) -> None:
        rh.directions(a + b, b + 1, 2 * a)

    def echo_point(self, rh: AMH_TypesResponseHandler, p: Interop.Point) -> None:
        rh.echo_point(Interop.Point(p.x * 2, p.y, p.label.upper()))

    def echo_color(self, rh: AMH_TypesResponseHandler, c: Interop.Color) -> None:
        rh.echo_color(Interop.Color._item((c._v + 1) % 3))

    def echo_blob(self, rh: AMH_TypesResponseHandler, blob: bytes) -> None:
        rh.echo_blob(blob[::-1])


class QuoteHandler:
    """Follows the AMI_QuoterHandler protocol without naming it."""

    def __init__(self) -> None:
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def get_quote(self, value: int) -> None:
        self.done.set_result(value)

    def get_quote_excep(self, holder: pyorb.ExceptionHolder) -> None:
        self.done.set_exception(holder.exception)


async def main() -> None:
    out: dict[str, object] = {}
    async with pyorb.Server() as server, pyorb.Client() as client:
        quoter_ior = server.ior(server.activate(Quotes()))
        quoter = await client.narrow(quoter_ior, Quoter)
        price: int = await quoter.get_quote("ACME", timeout=5.0)
        out["price"] = price
        try:
            await quoter.get_quote("acme")
        except Stock.Invalid_Stock_Symbol:
            out["invalid"] = True
        polled: int = await quoter.sendp_get_quote("AB")
        out["polled"] = polled
        handler = QuoteHandler()
        quoter.sendc_get_quote(handler, "ABC")
        out["callback"] = await handler.done

        echo = client.resolve(server.ior(server.activate(Echoes())), Echo)
        out["ping"] = await echo.ping(41)

        types = client.resolve(server.ior(server.activate(TypesServant())), Types)
        total, b, doubled = await types.directions(3, 4)
        out["directions"] = [total, b, doubled]
        point = await types.echo_point(Interop.Point(1.5, 2.0, "p"))
        out["point"] = [point.x, point.y, point.label]
        color = await types.echo_color(Interop.green)
        out["color"] = color._n
        out["blob"] = (await types.echo_blob(b"abc")).decode()
        try:
            await types.echo_long(1)  # not overridden by the servant
        except SystemException as exc:
            out["unimplemented"] = type(exc).__name__
    print(json.dumps(out))


asyncio.run(main())
'''

# Each deliberate mistake, with the line it is on and what mypy must say.
BAD_PROGRAM = '''
from __future__ import annotations

import pyorb
from Stock_pyorb import AMH_Quoter, AMH_QuoterResponseHandler, Quoter


class Quotes(AMH_Quoter):
    def get_quote(self, rh: AMH_QuoterResponseHandler, name: str) -> None:
        rh.get_quote("not an int")


async def use(client: pyorb.Client, ior: str) -> str:
    quoter = client.resolve(ior, Quoter)
    x: str = await quoter.get_quote("A")
    return x
'''
BAD_ERRORS = [
    'bad.py:10: error: Argument 1 to "get_quote" of "AMH_QuoterResponseHandler" has incompatible type "str"; '
    'expected "int"  [arg-type]',
    'bad.py:15: error: Incompatible types in assignment (expression has type "int", variable has type "str")  '
    "[assignment]",
]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """omniidl's modules and pyorb's stubs for the three IDL files, in one directory."""
    out = tmp_path_factory.mktemp("stubs")
    nested = tmp_path_factory.mktemp("idl") / "nested.idl"
    nested.write_text(NESTED_IDL)
    for idl in [*IDLS, nested]:
        pyorb.compile_idl(idl, out, [str(IDL_DIR)])
    return out, write_stubs([*IDLS, nested], out, [IDL_DIR])


def _package(out: Path, module: str, suffix: str, ext: str) -> Path:
    head, *rest = module.split(".")
    return Path(out, head + suffix, *rest, "__init__." + ext)


def test_writes_stubs_and_companions_for_each_module(generated: tuple[Path, list[Path]]) -> None:
    out, written = generated
    expected = {
        _package(out, module, suffix, ext)
        for module in [*MODULES, "Outer"]
        for suffix, ext in [("", "pyi"), ("__POA", "pyi"), ("_pyorb", "py"), ("_pyorb", "pyi")]
    }
    assert set(written) == expected
    assert all(p.read_text().startswith("# Generated by pyorb.idl.stubs") for p in written)


def test_signatures_follow_the_idl(generated: tuple[Path, list[Path]]) -> None:
    out, _ = generated
    stub = (out / "Interop_pyorb" / "__init__.pyi").read_text()
    # inout b is an argument and a result; out doubled only a result.
    assert "def directions(self, a: int, b: int, /, *, timeout: float | None = ...) -> " \
        "asyncio.Future[tuple[int, int, int]]: ..." in stub
    assert "def directions(self, result: int, b: int, doubled: int, /) -> None: ..." in stub
    # A oneway call has no callback or polling form; object references are proxies.
    assert "def fire(self, v: str, /, *, timeout: float | None = ...) -> asyncio.Future[None]: ..." in stub
    assert "sendc_fire" not in stub
    assert "-> asyncio.Future[list[Node | None]]" in stub
    types = (out / "Interop" / "__init__.pyi").read_text()
    for line in ["Blob: TypeAlias = bytes", "Matrix: TypeAlias = list[list[int]]", "red: Final[Color]",
                 "def __init__(self, code: int, why: str, details: LongSeq) -> None: ...",
                 "class Failure(UserException):"]:
        assert line in types


def test_bad_idl_and_missing_files_are_clear_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.idl"
    broken.write_text("module M { interface I { void op(in nosuchtype x); }; };\n")
    with pytest.raises(ValueError, match="nosuchtype"):
        write_stubs([broken], tmp_path)
    with pytest.raises(FileNotFoundError, match="missing.idl"):
        write_stubs([tmp_path / "missing.idl"], tmp_path)
    assert write_stubs([], tmp_path) == []


def test_nested_modules_keywords_attributes_and_inheritance(generated: tuple[Path, list[Path]]) -> None:
    out, _ = generated
    stub = _package(out, "Outer.Inner", "_pyorb", "pyi").read_text()
    assert "class Derived(Base):" in stub
    assert "def go(self, _lambda: int, /, *, timeout: float | None = ...)" in stub
    assert "def _set_count(self, value: int, /, *, timeout" in stub
    assert "_set_label" not in stub
    assert "def first(self, *, timeout: float | None = ...) -> asyncio.Future[_m_Outer_Inner.Base.Item]: ..." in stub
    # The skeleton of a derived interface has every operation, inherited ones too.
    skeleton = stub[stub.index("class AMH_Derived("):]
    assert "def _get_count(self, rh: AMH_DerivedResponseHandler, /)" in skeleton
    assert "class Item:" in _package(out, "Outer.Inner", "", "pyi").read_text()


def test_top_level_declarations_and_keywords(tmp_path: Path) -> None:
    idl = tmp_path / "top.idl"
    idl.write_text("interface Top { void from (in long lambda); };\nmodule M { const long N = 1; };\n")
    modules = read_modules([idl])
    assert list(modules) == ["_GlobalIDL", "M"]
    (top,) = modules["_GlobalIDL"]["decls"]
    assert top["name"] == "Top"
    assert [(op["name"], op["params"]) for op in top["ops"]] == [("_from", [["_lambda", "in", ["b", "int"]]])]
    assert modules["M"]["decls"] == [{"kind": "const", "name": "N", "type": ["b", "int"]}]


# -- the stubs match the run time ---------------------------------------------


@pytest.fixture(scope="module")
def companions(generated: tuple[Path, list[Path]]) -> Iterator[dict[str, ModuleType]]:
    """The companion modules, built on the IDL modules this process already uses."""
    out, _ = generated
    for idl in IDLS:
        pyorb.load_idl(idl)  # the same classes the rest of the suite uses
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(out))
        yield {m: importlib.import_module(sibling_name(m, "_pyorb")) for m in MODULES}


def _declared(stub: Path) -> Iterator[tuple[list[str], bool]]:
    """Each name a stub declares: (dotted path, whether it must be a class attribute)."""
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ClassDef):
            yield [node.name], True
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield [node.name, item.name], True
                elif isinstance(item, ast.AnnAssign) and "ClassVar" in ast.unparse(item.annotation):
                    yield [node.name, ast.unparse(item.target)], True
        elif isinstance(node, ast.AnnAssign):
            yield [ast.unparse(node.target)], True


@pytest.mark.parametrize("module", MODULES)
def test_every_name_a_stub_declares_exists_at_run_time(
    generated: tuple[Path, list[Path]], companions: dict[str, ModuleType], module: str
) -> None:
    out, _ = generated
    stubs = {
        companions[module]: _package(out, module, "_pyorb", "pyi"),
        importlib.import_module(module): _package(out, module, "", "pyi"),
        importlib.import_module(sibling_name(module, "__POA")): _package(out, module, "__POA", "pyi"),
    }
    for runtime, stub in stubs.items():
        checked = 0
        for path, _ in _declared(stub):
            obj: Any = runtime
            for part in path:
                assert hasattr(obj, part), f"{stub.name}: {'.'.join(path)} missing at run time in {runtime.__name__}"
                obj = getattr(obj, part)
            checked += 1
        assert checked > 0


Setup = tuple[ModuleType, pyorb.Server, pyorb.Client]


@pytest_asyncio.fixture
async def stock_setup(companions: dict[str, ModuleType]) -> AsyncIterator[Setup]:
    """Stock's companion, a server and a client."""
    async with pyorb.Server() as server, pyorb.Client() as client:
        yield companions["Stock"], server, client


@pytest.mark.asyncio
async def test_typed_proxy_and_skeleton_over_the_wire(stock_setup: Setup) -> None:
    stock, server, client = stock_setup

    class Quotes(stock.AMH_Quoter):
        async def get_quote(self, rh: Any, name: str) -> None:
            assert isinstance(rh, stock.AMH_QuoterResponseHandler)
            await asyncio.sleep(0)
            rh.get_quote(len(name))

    ior = server.ior(server.activate(Quotes()))
    quoter = client.resolve(ior, stock.Quoter)
    assert type(quoter) is stock.Quoter
    assert isinstance(client.resolve(ior), stock.Quoter)  # the IOR's type id finds the same class
    assert await quoter.get_quote("ABCD") == 4
    assert await (await client.narrow(ior, stock.Quoter)).sendp_get_quote("AB") == 2


def test_derived_interface_proxies_subclass_their_bases(companions: dict[str, ModuleType]) -> None:
    nested = companions["Outer.Inner"]
    assert issubclass(nested.Derived, nested.Base)
    assert {"first", "_get_count", "_set_count", "_get_label", "go"} <= set(dir(nested.Derived))
    assert "Item" not in dir(nested.Base)  # a type declared in the interface is no operation
    assert nested.Nothing.__mro__[1] is pyorb.ObjectRef


@pytest.mark.asyncio
async def test_an_operation_the_typed_skeleton_leaves_out_replies_no_implement(stock_setup: Setup) -> None:
    stock, server, client = stock_setup
    quoter = client.resolve(server.ior(server.activate(stock.AMH_Quoter())), stock.Quoter)
    with pytest.raises(CORBA.NO_IMPLEMENT):
        await quoter.get_quote("A")


# -- mypy and the program, in subprocesses --------------------------------------


def test_user_program_type_checks_and_runs(generated: tuple[Path, list[Path]], tmp_path: Path,
                                           request: pytest.FixtureRequest) -> None:
    out, _ = generated
    (tmp_path / "good.py").write_text(USER_PROGRAM)
    (tmp_path / "bad.py").write_text(BAD_PROGRAM)
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\n")
    pytest_cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    cache = pytest_cache.mkdir("mypy_stubs") if pytest_cache else tmp_path / ".mypy_cache"
    env = {**os.environ, "MYPYPATH": str(out), "PYTHONPATH": str(out)}
    # The generated packages themselves are checked too: none may report an error.
    packages = [f"-p{m}{suffix}" for m in ["Stock", "Bench", "Interop", "Outer"] for suffix in ("", "__POA", "_pyorb")]
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(cache),
         "--no-error-summary", *packages, "-mgood", "-mbad"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.splitlines() == BAD_ERRORS, checked.stdout

    ran = subprocess.run([sys.executable, "good.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, env=env, check=False)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {
        "price": 400, "invalid": True, "polled": 200, "callback": 300, "ping": 42,
        "directions": [7, 5, 6], "point": [3.0, 2.0, "P"], "color": "blue", "blob": "cba",
        "unimplemented": "NO_IMPLEMENT",
    }
