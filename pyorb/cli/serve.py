"""``pyorb serve MODULE:Servant``: serve one servant until SIGINT or SIGTERM.

Lifetime, announcement and statistics are the papers' servers' own
(:mod:`pyorb.servers.runner`), so every pyorb server process behaves alike.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pyorb
from pyorb.servers import runner


@dataclass(frozen=True)
class ServeOptions:
    target: str
    idl: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    model: str | None
    host: str
    port: int
    key: str | None
    ior_file: Path | None
    stop_on_stdin_eof: bool
    publish: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    tls_require_client_cert: bool = False
    tls_endpoint: tuple[str, ...] = ()
    metrics: str | None = None


def servant_class(target: str) -> type:
    """``module:Class`` (or ``path/to/file.py:Class``); a module name is
    looked for in the current directory first, then on the Python path."""
    module_name, colon, attr = target.rpartition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"expected MODULE:Servant, got {target!r}")
    module = _import_file(Path(module_name)) if module_name.endswith(".py") else _import(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ImportError(f"module {module_name!r} has no attribute {attr!r}")
    if not isinstance(obj, type):
        raise ValueError(f"{target} is not a class")
    return obj


def _import(name: str) -> ModuleType:
    try:
        _load_from_cwd(name.partition(".")[0])
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            raise
        raise _missing_import(exc, name) from exc


def _load_from_cwd(top: str) -> None:
    """Import the top-level module or package ``top`` from the current directory, if it is there.

    Found and loaded by hand rather than by putting the directory on
    sys.path, so that serving a module changes no other import in the process.
    """
    if top in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[top] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[top]
        raise


def _missing_import(exc: ModuleNotFoundError, importing: str) -> ImportError:
    return ImportError(f"{exc} (importing {importing}; if it is an IDL module, load its IDL with --idl)")


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise FileNotFoundError(f"no such servant module: {path}")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # so that its classes pickle and print as path.stem.Class
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        raise _missing_import(exc, str(path)) from exc
    return module


def strategy(model: str | None) -> str | None:
    """The strategy spec for ``--model``: a spec ("thread_pool(8)") or a
    papers' name ("tpc", "tpr-8", "amh-st"); ValueError for anything else."""
    if model is None:
        return None
    from pyorb.servers.models import resolve_model

    resolved = resolve_model(model)
    if resolved.workers > 1:
        raise ValueError(f"model {model!r} runs several processes; pyorb serve runs one (use --model amh)")
    return resolved.strategy


async def serve(opts: ServeOptions) -> int:
    """Start the server, announce the reference, serve until told to stop."""
    for path in opts.idl:
        pyorb.load_idl(path, opts.include_dirs)
    servant = servant_class(opts.target)()
    server = pyorb.Server(opts.host, opts.port, strategy=strategy(opts.model), publish=list(opts.publish) or None,
                          endpoints=runner.endpoints_option(opts.endpoints) or None, **runner.security_options(opts))
    await server.start()
    exporter = None
    try:
        key = server.activate(servant, opts.key or type(servant).__name__)
        runner.announce(*runner.reference_lines(server, key), opts.ior_file)
        exporter = runner.start_metrics(server, opts.metrics, "pyorb serve")
        await runner.wait_for_stop(opts.stop_on_stdin_eof, lambda: _print_stats(server))
    finally:
        if exporter is not None:
            exporter.close()
        await server.close(grace=runner.DRAIN_GRACE_S)
        runner.exiting()
    _print_stats(server)
    return 0


def _print_stats(server: Any) -> None:
    # Servers without dispatch statistics (older pyorb) print nothing.
    stats = getattr(server, "stats", None)
    if callable(stats):
        runner.print_stats(stats(), "pyorb serve")
