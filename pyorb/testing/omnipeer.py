"""A generic omniORBpy peer process, for interoperability tests.

``python -m pyorb.testing.omnipeer serve --idl FILE --servant pkg.mod:Class``
    compiles the IDL, serves ``Class()`` (an omniORBpy servant) on an
    ephemeral loopback port and prints its IOR, then its corbaloc URL, one
    line each.  It serves until SIGTERM/SIGINT or until its stdin reaches
    end of file, so a test process that dies never leaves it running.

``python -m pyorb.testing.omnipeer call --idl FILE --function pkg.mod:func --target REF``
    compiles the IDL, calls ``func(orb, obj, *args)`` with ``obj`` the target
    narrowed to ``--interface`` (an IDL scoped name such as ``Bench::Echo``)
    and ``args`` the JSON list given with ``--args``,
    and prints one JSON line: ``{"ok": true, "result": ...}`` or
    ``{"ok": false, "error": "...", "traceback": "..."}``; exit status 0 or 1.

``pkg.mod`` may also be a path to a ``.py`` file.  Both commands exit 2 on
bad options.  This runs in its own process: it imports omniORB and never
pyorb's client or server.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, NoReturn, Sequence

# Bounds every call the peer makes, so a silent server cannot hang it.
CALL_TIMEOUT_MS = 30_000
# A clean ORB shutdown that takes longer than this ends the process anyway.
SHUTDOWN_GRACE_S = 10.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 on a bad option."""
    parser = argparse.ArgumentParser(prog="python -m pyorb.testing.omnipeer", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve an omniORBpy servant")
    serve.add_argument("--servant", required=True, metavar="MODULE:CLASS",
                       help="servant class (or factory), called with no arguments")
    serve.add_argument("--key", default=None, help="object key (default: the class name)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    call = commands.add_parser("call", help="call a function with a reference")
    call.add_argument("--function", required=True, metavar="MODULE:FUNCTION",
                      help="called as function(orb, obj, *args); its result must be JSON-able")
    call.add_argument("--target", required=True, help="IOR or corbaloc/corbaname URL")
    call.add_argument("--interface", default=None, metavar="SCOPED::NAME",
                      help="IDL interface to narrow the target to (e.g. Bench::Echo)")
    call.add_argument("--args", default="[]", metavar="JSON",
                      help="a JSON list of further arguments for the function")
    for sub in (serve, call):
        sub.add_argument("--idl", action="append", default=[], metavar="FILE",
                         help="IDL file to compile first (repeatable)")
        sub.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                         help="IDL include directory (repeatable)")
    return parser.parse_args(argv)


class PeerError(Exception):
    """A bad option value found after parsing (missing file, bad name)."""


def load_object(spec: str) -> Any:
    """``package.module:attr`` or ``path/to/file.py:attr`` -> the attribute."""
    where, colon, attr = spec.rpartition(":")
    if not colon or not where or not attr:
        raise PeerError(f"{spec!r} is not of the form module:name")
    module = _load_file(where) if where.endswith(".py") else _import(where)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PeerError(f"{where} has no attribute {attr!r}") from None


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise PeerError(f"cannot import {name}: {exc}") from None


def _load_file(path: str) -> ModuleType:
    file = Path(path).resolve()
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if not file.is_file() or spec is None or spec.loader is None:
        raise PeerError(f"no such Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    return module


def init_orb(ns: argparse.Namespace, endpoint: str | None = None) -> Any:
    """An ORB with UTF-8 strings and bounded calls, and the IDL imported."""
    from omniORB import CORBA

    from pyorb.idl import import_generated  # omniidl through this interpreter, not PATH

    args = [sys.argv[0], "-ORBnativeCharCodeSet", "UTF-8",
            "-ORBclientCallTimeOutPeriod", str(CALL_TIMEOUT_MS)]
    if endpoint is not None:
        args += ["-ORBendPoint", endpoint]
    orb = CORBA.ORB_init(args, CORBA.ORB_ID)
    for idl in ns.idl:
        if not Path(idl).is_file():
            raise PeerError(f"IDL file not found: {idl}")
        dirs = ns.include or [str(Path(idl).resolve().parent)]
        import_generated(idl, [f"-I{d}" for d in dirs])
    return orb


# -- serve ---------------------------------------------------------------------


def serve(ns: argparse.Namespace) -> int:
    host = f"[{ns.host}]" if ":" in ns.host else ns.host
    orb = init_orb(ns, f"giop:tcp:{host}:")
    factory = load_object(ns.servant)
    key = (ns.key or getattr(factory, "__name__", "Object")).encode()
    # The INS POA keys objects by their plain id, so corbaloc.../KEY works.
    ins = orb.resolve_initial_references("omniINSPOA")
    ins.activate_object_with_id(key, factory())
    ins._get_the_POAManager().activate()
    ref = ins.id_to_reference(key)
    serve_orb(orb, [orb.object_to_string(ref), corbaloc_of(orb, ref, key)])
    return 0


def corbaloc_of(orb: Any, ref: Any, key: bytes) -> str:
    """``corbaloc:iiop:1.2@host:port/key`` for a reference this ORB serves."""
    # pyorb.giop is the standard library only: no second ORB in this process.
    from pyorb.giop.ior import IOR, to_corbaloc

    profile = IOR.from_string(orb.object_to_string(ref)).iiop
    if profile is None:
        raise PeerError("the servant's reference has no IIOP profile")
    return to_corbaloc(profile.host, profile.port, key)


def serve_orb(orb: Any, lines: Sequence[str], watch_stdin: bool = True, ior_file: Path | None = None) -> None:
    """The lifetime of every omniORBpy server: print ``lines`` (the IOR first), serve, shut down.

    Serves until SIGTERM, SIGINT or (if ``watch_stdin``) stdin end of file,
    so that a driver that dies takes its servers with it; ``ior_file``
    also gets the first line.  The ORB's POAs must be active already.
    """
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):  # before the announcement: a driver may stop us at once
        signal.signal(signum, lambda *_: stop.set())
    if ior_file is not None:
        ior_file.write_text(lines[0] + "\n")
    for line in lines:
        print(line, flush=True)
    if watch_stdin:
        threading.Thread(target=_watch_stdin, args=(stop,), daemon=True, name="stdin-watch").start()
    while not stop.wait(0.1):  # timed waits let the signal handler run
        pass
    shutdown(orb)


def _watch_stdin(stop: threading.Event) -> None:
    # Raw reads: a daemon thread blocked in sys.stdin would abort the
    # interpreter at exit.
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    stop.set()


def shutdown(orb: Any) -> None:
    """Shut the ORB down and destroy it, or end the process if that hangs."""
    killer = threading.Timer(SHUTDOWN_GRACE_S, os._exit, args=(3,))
    killer.daemon = True
    killer.start()
    orb.shutdown(True)
    orb.destroy()
    killer.cancel()


# -- call ----------------------------------------------------------------------


def call(ns: argparse.Namespace) -> int:
    orb = init_orb(ns)
    function: Callable[..., Any] = load_object(ns.function)
    try:
        args = json.loads(ns.args)
    except ValueError as exc:
        raise PeerError(f"--args is not JSON: {exc}") from None
    if not isinstance(args, list):
        raise PeerError("--args must be a JSON list")
    try:
        obj = orb.string_to_object(ns.target)
        if ns.interface is not None:
            obj = _narrow(obj, ns.interface)
        outcome: dict[str, Any] = {"ok": True, "result": function(orb, obj, *args)}
        line = json.dumps(outcome)
    except Exception as exc:  # the peer's error, reported to the caller
        outcome = {"ok": False, "error": describe(exc), "traceback": traceback.format_exc()}
        line = json.dumps(outcome)
    print(line, flush=True)
    orb.destroy()
    return 0 if outcome["ok"] else 1


def _narrow(obj: Any, scoped_name: str) -> Any:
    module_name, _, attr = scoped_name.replace("::", ".").rpartition(".")
    cls = getattr(sys.modules.get(module_name or "__none__"), attr, None)
    if cls is None:
        raise PeerError(f"interface {scoped_name} is not defined by the IDL given")
    narrowed = obj._narrow(cls)
    if narrowed is None:
        raise PeerError(f"the target does not implement {scoped_name}")
    return narrowed


def describe(exc: BaseException) -> str:
    """One line naming the exception, with the CORBA repository id if any."""
    repo_id = getattr(exc, "_NP_RepositoryId", None)
    text = f"{type(exc).__name__}: {exc}"
    return f"{text} [{repo_id}]" if repo_id else text


# -- entry point -------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    try:
        return serve(ns) if ns.command == "serve" else call(ns)
    except PeerError as exc:
        print(f"omnipeer: {exc}", file=sys.stderr, flush=True)
        return 2


def exit_now(code: int) -> NoReturn:
    """Leave without interpreter finalisation.

    omniORB threads winding down after ``orb.destroy()`` may still take the
    GIL; if that races with finalisation, the forced unwind through
    omniORB's C++ aborts the process.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
