"""Loading IDL: in-process compilation with omniidl's Python back end."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Iterable

from pyorb.marshal import import_idl


_loaded: dict[Path, SimpleNamespace] = {}


def load_idl(path: str | os.PathLike[str], include_dirs: Iterable[str | os.PathLike[str]] = ()) -> SimpleNamespace:
    """Compile ``path`` in-process (with AMI stubs) and import what it defines.

    Returns a namespace of the imported modules, for example
    ``load_idl("idl/stock.idl").Stock.Quoter`` and ``.Stock__POA.Quoter``.
    Loading the same file again returns the same namespace.  Raises
    FileNotFoundError for a missing file and ImportError (with omniidl's
    message) for IDL that does not compile.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"IDL file not found: {path}")
    # Importing the same IDL twice would replace its classes, and values made
    # with the old ones would no longer match: load each file once.
    loaded = _loaded.get(path)
    if loaded is not None:
        return loaded
    dirs = [str(d) for d in include_dirs] or [str(path.parent)]
    names = import_idl(str(path), dirs)
    modules: dict[str, ModuleType] = {}
    for name in names:
        modules[name] = importlib.import_module(name)
        poa = name + "__POA"
        if poa in sys.modules or importlib.util.find_spec(poa) is not None:
            modules[poa] = importlib.import_module(poa)
    loaded = _loaded[path] = SimpleNamespace(**modules)
    return loaded


def bench_idl() -> SimpleNamespace:
    """The benchmark interfaces shipped with pyorb (``Bench::Echo``, ``Bench::Sink``)."""
    return load_idl(Path(__file__).resolve().parent / "data" / "bench.idl")


def compile_idl(
    path: str | os.PathLike[str], output_dir: str | os.PathLike[str], include_dirs: Iterable[str] = ()
) -> None:
    """Compile ``path`` to Python modules in ``output_dir`` (``omniidl -bpython -Wbami``)."""
    omniidl = shutil.which("omniidl")
    if omniidl is None:
        raise FileNotFoundError("omniidl not found on PATH (it comes with the jeteve-omniorb wheel)")
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    cmd = [omniidl, "-bpython", "-Wbami", f"-C{output_dir}", *(f"-I{d}" for d in include_dirs), str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ImportError(f"omniidl failed on {path}: {done.stderr.strip()}")
