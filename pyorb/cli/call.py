"""``pyorb call`` and ``pyorb ops``: invoke any operation of a loaded IDL.

The interface comes from the reference's type id (or ``--interface``), the
operation's descriptor from the generated stub class, parameter names from
omniidl's front end (:func:`pyorb.idl.stubs.read_modules`), and each argument is
parsed by :mod:`pyorb.cli.values`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import keyword
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from omniORB import CORBA

from pyorb.cli.values import ArgumentError, from_text, to_json, type_name
from pyorb.config import Config
from pyorb.giop.ior import IOR, parse_reference
from pyorb.marshal import Descriptor
from pyorb.marshal.body import operation_descriptors

log = logging.getLogger(__name__)


class CallError(Exception):
    """A call that failed in a way the user should read as one line."""


@dataclass(frozen=True)
class Param:
    """One parameter: ``direction`` is "in", "out" or "inout"."""

    direction: str
    name: str


@dataclass(frozen=True)
class OpSignature:
    """What the generated stubs do not keep: parameter names and directions."""

    params: tuple[Param, ...]

    @property
    def in_names(self) -> list[str]:
        return [p.name for p in self.params if p.direction != "out"]

    @property
    def out_names(self) -> list[str]:
        return [p.name for p in self.params if p.direction != "in"]


@dataclass(frozen=True)
class OpInfo:
    """One operation of an interface, as the CLI shows and calls it."""

    name: str
    in_types: tuple[Descriptor, ...]
    out_types: tuple[Descriptor, ...] | None  # None for oneway
    exceptions: tuple[str, ...]
    sig: OpSignature | None

    @property
    def oneway(self) -> bool:
        return self.out_types is None

    @property
    def attr(self) -> str:
        """The proxy method's name (keywords get a leading underscore)."""
        return _py_name(self.name)

    def result_names(self) -> list[str]:
        """Names for the return value (if not void) and each out/inout parameter."""
        outs = list(self.out_types or ())
        named = self.sig.out_names if self.sig else []
        if len(named) < len(outs):  # the return value comes first
            named = ["result", *named]
        if len(named) != len(outs):
            named = ["result"] + [f"out{i}" for i in range(1, len(outs))]
        return named

    def signature(self) -> str:
        """The IDL form, e.g. ``long directions(in long a, inout long b, out long doubled)``."""
        ret = "void"
        outs = list(self.out_types or ())
        n_outs = len(self.sig.out_names) if self.sig else 0
        if len(outs) > n_outs:
            ret = type_name(outs[0])
        params = self._params()
        head = "oneway void" if self.oneway else ret
        raises = f" raises ({', '.join(self.exceptions)})" if self.exceptions else ""
        return f"{head} {self.name}({', '.join(params)}){raises}"

    def _params(self) -> list[str]:
        outs = self.out_types or ()
        if self.sig is None or len(self.sig.in_names) != len(self.in_types) or len(self.sig.out_names) > len(outs):
            return [type_name(t) for t in self.in_types]
        ins = iter(self.in_types)
        out_params = iter(outs[len(outs) - len(self.sig.out_names):])  # after the return value
        shown = []
        for p in self.sig.params:
            t = next(out_params) if p.direction == "out" else next(ins)
            if p.direction == "inout":
                next(out_params)
            shown.append(f"{p.direction} {type_name(t)} {p.name}")
        return shown


def _py_name(name: str) -> str:
    return "_" + name if keyword.iskeyword(name) else name


# -- finding the interface and its operations ------------------------------------


def load(idl_files: Sequence[Path], include_dirs: Sequence[Path]) -> None:
    """Compile and import each IDL file (omniidl's message on failure)."""
    from pyorb.idl import load_idl

    for path in idl_files:
        load_idl(path, include_dirs)


def find_interface(ior: IOR, name: str | None, idl_files: Sequence[Path]) -> type:
    """The stub class to call ``ior`` through."""
    from pyorb.client.proxy import interface_for

    if name:
        return _named_interface(name)
    if not ior.type_id:
        raise CallError("the reference has no type id (a corbaloc URL?): name the interface with "
                        "--interface Module::Interface")
    found = interface_for(ior.type_id)
    if found is None:
        files = ", ".join(str(p) for p in idl_files)
        raise CallError(f"{ior.type_id} is not an interface of {files}; load its IDL with --idl "
                        "or name one with --interface")
    return found


def _named_interface(name: str) -> type:
    from pyorb.client.proxy import interface_for

    if name.startswith("IDL:"):
        found = interface_for(name)
    else:
        parts = name.replace("::", ".").strip(".").split(".")
        found = _lookup(parts)
    if found is None or not operation_descriptors(found):
        raise CallError(f"no interface {name!r} in the loaded IDL")
    return found


def _lookup(parts: list[str]) -> Any:
    try:
        obj: Any = importlib.import_module(parts[0])
    except ImportError:
        return None
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def operations(interface: type) -> dict[str, OpInfo]:
    """Every operation of ``interface`` (inherited ones too), by wire name.

    Parameter names are left out (:func:`named` adds them): finding them
    runs omniidl again, which only error messages and listings need.
    """
    ops = {}
    for name, (in_types, out_types, excs) in sorted(operation_descriptors(interface).items()):
        out = None if out_types is None else tuple(out_types)
        ops[name] = OpInfo(name, tuple(in_types), out, tuple(sorted(excs or {})), None)
    return ops


def named(ops: dict[str, OpInfo], interface: type, idl_files: Sequence[Path],
          include_dirs: Sequence[Path]) -> dict[str, OpInfo]:
    """``ops`` with their parameter names and directions, where omniidl gives them."""
    sigs = _signatures_for(interface, idl_files, include_dirs)
    return {name: replace(op, sig=sigs.get(op.attr)) for name, op in ops.items()}


def _signatures_for(interface: type, idl_files: Sequence[Path], include_dirs: Sequence[Path]) -> dict[str, OpSignature]:
    """Parameter names by (Python) operation name; empty if omniidl cannot say."""
    from pyorb.idl.stubs import read_modules

    try:
        modules = read_modules(idl_files, include_dirs)
    except (ValueError, OSError) as exc:  # names are a nicety: the types alone still work
        log.warning("no parameter names: %s", exc)
        return {}
    repo_id = getattr(interface, "_NP_RepositoryId", None)
    for entry in modules.values():
        for decl in entry["decls"]:
            if decl["kind"] == "interface" and decl["repo_id"] == repo_id:
                return {op["name"]: OpSignature(tuple(Param(d, n) for n, d, _ in op["params"]))
                        for op in decl["all_ops"]}
    return {}


# -- calling ---------------------------------------------------------------------


def interface_name(iface: type) -> str:
    return str(getattr(iface, "_NP_RepositoryId", iface.__name__))


def prepare(ior: IOR, operation: str, texts: Sequence[str], idl_files: Sequence[Path],
            include_dirs: Sequence[Path], interface: str | None) -> tuple[type, OpInfo, tuple[Any, ...]]:
    """Load the IDL; the interface, the operation and its parsed arguments."""
    load(idl_files, include_dirs)
    iface = find_interface(ior, interface, idl_files)
    ops = operations(iface)
    if operation not in ops:
        raise CallError(f"{interface_name(iface)} has no operation {operation!r} (operations: {', '.join(ops)})")
    op = ops[operation]
    try:
        values = parse_args(op, texts)
    except CallError:  # say it again with the parameter names
        op = named(ops, iface, idl_files, include_dirs)[operation]
        values = parse_args(op, texts)
    if len(op.out_types or ()) > 1:  # results are labelled by parameter name
        op = named(ops, iface, idl_files, include_dirs)[operation]
    return iface, op, values


def parse_args(op: OpInfo, texts: Sequence[str]) -> tuple[Any, ...]:
    """Each argument converted from its text by its IDL type."""
    if len(texts) != len(op.in_types):
        raise CallError(f"{op.name} takes {len(op.in_types)} argument{'s' * (len(op.in_types) != 1)}, "
                        f"got {len(texts)}: {op.signature()}")
    names = op.sig.in_names if op.sig and len(op.sig.in_names) == len(op.in_types) else None
    values = []
    for i, (desc, text) in enumerate(zip(op.in_types, texts)):
        label = names[i] if names else f"argument {i + 1}"
        try:
            values.append(from_text(desc, text))
        except ArgumentError as exc:
            raise CallError(f"{label} of {op.name}: {exc}; expected {op.signature()}") from None
    return tuple(values)


def _config(timeout: float) -> Config:
    return Config(call_timeout=timeout, connect_timeout=min(timeout, Config.connect_timeout))


def reference(text: str, timeout: float) -> str:
    """``text`` if it is an IOR or corbaloc URL; a corbaname URL resolved to an IOR."""
    if text.strip()[:10].lower() != "corbaname:":
        parse_reference(text)  # a malformed reference fails here, before any IDL is loaded
        return text
    try:
        return asyncio.run(_resolve_corbaname(text, timeout))
    except CORBA.UserException as exc:
        raise CallError(f"{exc._NP_RepositoryId} raised by the naming service resolving {text}") from None
    except CORBA.SystemException as exc:
        raise CallError(f"{system_exception_line(exc)}: cannot resolve {text}") from None


async def _resolve_corbaname(url: str, timeout: float) -> str:
    from pyorb.client.client import Client
    from pyorb.naming import resolve_corbaname

    async with Client(_config(timeout)) as client:
        return str(await resolve_corbaname(client, url))


async def invoke(ref: str, interface: type, op: OpInfo, args: tuple[Any, ...], timeout: float,
                 **client_options: Any) -> Any:
    """Call ``op`` on ``ref`` and return its result (exceptions propagate).
    ``client_options`` go to the client (``tls=``, ``interceptors=``)."""
    from pyorb.client.client import Client

    async with Client(_config(timeout), **client_options) as client:
        proxy = client.resolve(ref, interface)
        return await getattr(proxy, op.attr)(*args)


def run(ref: str, interface: type, op: OpInfo, args: tuple[Any, ...], timeout: float, **client_options: Any) -> Any:
    """:func:`invoke` on a fresh event loop, with its exceptions turned into one line."""
    try:
        return asyncio.run(invoke(ref, interface, op, args, timeout, **client_options))
    except CORBA.UserException as exc:
        raise CallError(describe_user_exception(exc, op)) from None
    except CORBA.SystemException as exc:
        raise CallError(describe_system_exception(exc, op)) from None


def results(op: OpInfo, value: Any) -> dict[str, Any]:
    """The call's results by name, as JSON-compatible values."""
    outs = op.out_types or ()
    values = () if not outs else (value,) if len(outs) == 1 else tuple(value)
    return {n: to_json(d, v) for n, d, v in zip(op.result_names(), outs, values)}


def format_results(op: OpInfo, results: dict[str, Any], as_json: bool) -> str:
    """What ``pyorb call`` prints: a single result as it is (JSON if not a
    string), several as ``name = JSON`` lines; with ``as_json``, one JSON text."""
    if as_json:
        value = next(iter(results.values())) if len(results) == 1 else results or None
        return json.dumps(value, ensure_ascii=False)
    if op.oneway:
        return f"oneway {op.name} sent"
    if len(results) == 1:
        (value,) = results.values()
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return "\n".join(f"{name} = {json.dumps(value, ensure_ascii=False)}" for name, value in results.items())


def describe_user_exception(exc: CORBA.UserException, op: OpInfo) -> str:
    from omniORB import findType

    repo_id = exc._NP_RepositoryId
    desc = findType(repo_id)
    members = to_json(desc, exc) if desc is not None else {}
    detail = f" {json.dumps(members)}" if members else ""
    return f"{repo_id} raised by {op.name}{detail}"


def describe_system_exception(exc: CORBA.SystemException, op: OpInfo) -> str:
    """The exception's line and the client's own text of it (what, where, why),
    the same words a Python caller reads in ``str(exc)``."""
    return f"{system_exception_line(exc)}: {exception_text(exc) or f'raised by {op.name}'}"


def exception_text(exc: CORBA.SystemException) -> str:
    """The text a pyorb client put in a system exception ('' if none)."""
    info = getattr(exc, "_info", None)
    return info if isinstance(info, str) else ""


def system_exception_line(exc: CORBA.SystemException) -> str:
    """``CORBA.TRANSIENT (minor TRANSIENT_ConnectFailed, completed NO)``: omniORB's
    name for a minor code it defines, else the number (vendor codes in hex)."""
    completed = str(exc.completed).removeprefix("COMPLETED_")
    minor = minor_name(type(exc).__name__, exc.minor)
    return f"CORBA.{type(exc).__name__} (minor {minor}, completed {completed})"


def minor_name(exception: str, minor: int) -> str:
    """omniORB's name of ``minor`` for ``exception`` (``TRANSIENT_ConnectFailed``), or the number."""
    import omniORB

    for name, value in vars(omniORB).items():
        if value == minor and name.startswith(exception + "_") and isinstance(value, int) and minor > 0xFFFF:
            return str(name)
    return f"0x{minor:08x}" if minor > 0xFFFF else str(minor)


def client_options(tls_ca: Path | None, tls_cert: Path | None, tls_key: Path | None, token: str | None) -> dict[str, Any]:
    """Client keyword arguments for ``pyorb call``'s TLS and token options."""
    options: dict[str, Any] = {}
    if tls_ca is not None or tls_cert is not None:
        from pyorb import tls

        try:
            options["tls"] = tls.client_context(tls_ca, cert=tls_cert, key=tls_key)
        except (OSError, ValueError) as exc:
            raise CallError(f"cannot use the TLS files: {exc}") from None
    if token is not None:
        from pyorb.interceptors.auth import BearerToken

        options["interceptors"] = [BearerToken(token)]
    return options
