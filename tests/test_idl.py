"""Loading and compiling IDL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pyorb
from pyorb.idl import BENCH_IDL


def test_load_idl_returns_modules_and_is_idempotent() -> None:
    first = pyorb.load_idl("idl/stock.idl")
    assert first.Stock.Quoter._NP_RepositoryId == "IDL:Stock/Quoter:1.0"
    assert hasattr(first.Stock__POA, "Quoter")
    assert hasattr(first.Stock.Quoter, "_d_get_quote")
    # The same file under another path is the same load.
    assert pyorb.load_idl(Path("idl/stock.idl").resolve()) is first


def test_load_idl_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="IDL file not found"):
        pyorb.load_idl(tmp_path / "missing.idl")
    bad = tmp_path / "bad.idl"
    bad.write_text("module Broken { interface X { void f(in nosuchtype a); }; };\n")
    with pytest.raises(ImportError, match="nosuchtype"):
        pyorb.load_idl(bad)


@pytest.mark.integration  # imports the modules in another interpreter
def test_compile_idl_writes_importable_modules(tmp_path: Path) -> None:
    pyorb.compile_idl(BENCH_IDL, tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", "import Bench, Bench__POA; print(Bench.Echo._NP_RepositoryId, hasattr(Bench.Echo, 'sendc_ping') or 'AMI_EchoHandler' in dir(Bench))"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert done.stdout.split() == ["IDL:Bench/Echo:1.0", "True"], done.stderr
