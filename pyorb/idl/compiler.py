"""Loading IDL: omniidl's Python back end, run through this interpreter.

omniidl is a Python program installed beside the interpreter that has the
jeteve-omniorb wheel.  It is run as ``sys.executable <scripts>/omniidl``, not
looked up on PATH, so a virtualenv used without activation (its Python run by
path from systemd, a container or cron) compiles IDL as an activated one does.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Iterable



class IDLError(ImportError):
    """IDL that omniidl cannot compile, or no omniidl to compile it: one line
    saying which file and why.  An ImportError, as omniORB's own importIDL raises."""


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
    from pyorb.marshal import ensure_orb  # here: omniORBpy peers import this module without pyorb's ORB

    ensure_orb()
    names = import_generated(str(path), ["-Wbami", *(f"-I{d}" for d in dirs)])
    modules: dict[str, ModuleType] = {}
    for name in names:
        modules[name] = importlib.import_module(name)
        poa = name + "__POA"
        if poa in sys.modules or importlib.util.find_spec(poa) is not None:
            modules[poa] = importlib.import_module(poa)
    loaded = _loaded[path] = SimpleNamespace(**modules)
    return loaded


BENCH_IDL = Path(__file__).resolve().parents[1] / "data" / "bench.idl"
"""The benchmark interfaces' IDL file, the only copy (the package ships it): its path for what compiles it
itself (omniORBpy processes, ``--idl`` options); :func:`bench_idl` loads it."""


def bench_idl() -> SimpleNamespace:
    """The benchmark interfaces shipped with pyorb (``Bench::Echo``, ``Bench::Sink``), loaded."""
    return load_idl(BENCH_IDL)


def compile_idl(
    path: str | os.PathLike[str], output_dir: str | os.PathLike[str], include_dirs: Iterable[str] = ()
) -> None:
    """Compile ``path`` to Python modules in ``output_dir`` (``omniidl -bpython -Wbami``)."""
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    run_omniidl(path, ["-bpython", "-Wbami", f"-C{output_dir}", *(f"-I{d}" for d in include_dirs)])


def omniidl_command() -> list[str]:
    """The command that runs omniidl for this interpreter's installation."""
    schemes = [sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user")]
    for scheme in dict.fromkeys(schemes):
        script = Path(sysconfig.get_path("scripts", scheme)) / "omniidl"
        if script.is_file():
            # omniidl finds its preprocessor, omnicpp, beside its own argv[0].
            return [sys.executable, str(script)]
    found = shutil.which("omniidl")
    if found is not None:
        return [found]
    raise IDLError(f"omniidl not found beside {sys.executable} nor on PATH: "
                   f"install jeteve-omniorb into this Python ({sys.executable} -m pip install jeteve-omniorb)")


def run_omniidl(path: str | os.PathLike[str], args: Iterable[str]) -> str:
    """Run omniidl on ``path``; its standard output, or IDLError with its message."""
    cmd = [*omniidl_command(), *args, str(path)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise IDLError(f"cannot run omniidl ({cmd[0]}): {exc.strerror or exc}") from None
    if done.returncode != 0:
        message = "; ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
        raise IDLError(f"omniidl failed on {path}: {message or f'exit status {done.returncode}'}")
    return done.stdout


def import_generated(path: str, args: Iterable[str] = ()) -> list[str]:
    """omniORB.importIDL without its PATH lookup: compile ``path`` with omniidl's
    Python back end and import the modules it defines; returns their names.

    Needs only omniORB, not pyorb's ORB, so omniORBpy peer processes use it too."""
    import omniORB

    source = run_omniidl(path, ["-bpython", "-Wbstdout", "-Wbinline", *args])
    namespace: dict[str, object] = {"__file__": path}
    exec(compile(source, path, "exec"), namespace)  # noqa: S102 - omniidl's generated module
    modules = namespace.get("_exported_modules")
    if not isinstance(modules, tuple):
        raise IDLError(f"omniidl gave no modules for {path}")
    # As omniORB.importIDL does: modules first seen as partial (through an
    # #include of another file) become the real ones.
    partial = omniORB._partialModules
    for module in modules:
        for name in (module, omniORB.skeletonModuleName(module)):
            if name in partial:
                if name in sys.modules:
                    omniORB.updateModuleDict(sys.modules[name], partial[name])
                else:
                    sys.modules[name] = partial[name]
                del partial[name]
    return list(modules)
