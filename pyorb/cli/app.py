"""The ``pyorb`` command: compile, serve, call, ops, ior, demo (and loadtest).

Every expected failure (bad argument, unreachable reference, unknown
operation, IDL that does not compile) is one ``error: ...`` line on stderr
and a non-zero exit status: 2 for usage errors, as click has it, 1 otherwise.
``--traceback`` shows the Python traceback instead.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import typer
from omniORB import CORBA

import pyorb
from pyorb.cli.console import out
from pyorb.cli.plan import plan_cmd
from pyorb.giop.errors import ProtocolError
from pyorb.giop.ior import IOR, parse_reference

log = logging.getLogger(__name__)

app = typer.Typer(
    name="pyorb",
    help="pyorb: asyncio CORBA (GIOP/IIOP) middleware that interoperates with omniORB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
_show_traceback = False

IdlOption = typer.Option(..., "--idl", help="IDL file defining the interface (repeatable).", exists=True,
                         dir_okay=False)
IncludeOption = typer.Option([], "--include", "-I", help="IDL include directory (repeatable).", exists=True,
                             file_okay=False)


def _version(value: bool) -> None:
    if value:
        out.print(f"pyorb {pyorb.__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="Log to stderr (-v info, -vv debug)."),
    traceback: bool = typer.Option(False, "--traceback", help="Show the Python traceback of an error."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    global _show_traceback
    _show_traceback = traceback
    if verbose:
        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")


# -- compile -------------------------------------------------------------------


@app.command("compile")
def compile_cmd(
    idl: list[Path] = typer.Argument(..., help="IDL files.", exists=True, dir_okay=False),
    output: Path = typer.Option(Path("."), "--output", "-o", help="Directory for the generated modules."),
    include: list[Path] = IncludeOption,
) -> None:
    """Compile IDL to Python modules (omniidl -bpython with AMI stubs)."""
    from rich.table import Table

    before = _snapshot(output)
    for path in idl:
        pyorb.compile_idl(path, output, [str(d) for d in include])
    generated = [p for p, stamp in _snapshot(output).items() if before.get(p) != stamp]
    written = sorted(set(generated) | set(_write_stubs(idl, output, include)))
    table = Table(title=f"compiled {len(idl)} IDL file{'s' * (len(idl) != 1)} into {output}", title_justify="left")
    table.add_column("written")
    for path in written:
        table.add_row(str(path))
    out.print(table)


def _write_stubs(idl: Sequence[Path], output: Path, include: Sequence[Path]) -> list[Path]:
    """Typed stubs (.pyi) and companions beside omniidl's modules, where pyorb.idl.stubs exists."""
    stubs = _optional_module("pyorb.idl.stubs")
    return [] if stubs is None else list(stubs.write_stubs(idl, output, include))


def _optional_module(name: str) -> Any:
    """``name`` imported, or None if it (or what it needs) is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        log.debug("%s unavailable: %s", name, exc)
        return None


def _snapshot(directory: Path) -> dict[Path, int]:
    """Modification times of what omniidl writes: top-level modules and packages
    (not a walk of everything under the directory, which may be a whole tree)."""
    if not directory.is_dir():
        return {}
    files = list(directory.glob("*.py"))
    for sub in directory.iterdir():
        if (sub / "__init__.py").is_file():
            files += [p for p in sub.rglob("*.py") if "__pycache__" not in p.parts]
    return {p: p.stat().st_mtime_ns for p in files}


# -- ior -------------------------------------------------------------------------


@app.command("ior")
def ior_cmd(
    ref: str = typer.Argument(..., help="IOR:..., corbaloc:..., corbaname:... or @FILE holding one."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.001, help="Seconds to wait for a naming service."),
) -> None:
    """Decode an IOR or corbaloc URL: type id, profiles, host, port, key, code sets.

    A corbaname URL is first resolved through its naming service.
    """
    from pyorb.cli import call, iorview

    text = call.reference(_reference_text(ref), timeout)
    ior = parse_reference(text)
    if as_json:
        out.print_json(json.dumps(iorview.describe(ior)))
    else:
        out.print(iorview.table(ior, text))


def _reference_text(ref: str) -> str:
    if ref.startswith("@"):
        return Path(ref[1:]).read_text().strip()
    return ref.strip()


# -- group -----------------------------------------------------------------------


@app.command("group")
def group_cmd(
    refs: list[str] = typer.Argument(..., metavar="MEMBER...", help="The replicas' references: IOR:..., "
                                     "corbaloc:..., corbaname:... or @FILE."),
    domain: str = typer.Option("pyorb", "--domain", help="The group's FT domain id."),
    group_id: Optional[int] = typer.Option(None, "--id", min=0, max=2**64 - 1,
                                           help="The group's id (default: kept from --bind's binding, else random)."),
    version: int = typer.Option(1, "--version", min=1, max=2**32 - 1,
                                help="Membership version (raised past a bound group's own)."),
    bind: Optional[str] = typer.Option(None, "--bind", metavar="NAME",
                                       help="Also bind the group in the naming service under NAME (a/b.kind)."),
    naming: Optional[str] = typer.Option(None, "--naming", metavar="REF",
                                         help="The naming service for --bind: corbaloc or corbaname."),
    ior_file: Optional[Path] = typer.Option(None, "--ior-file", help="Also write the group reference here."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.001, help="Seconds to wait for a naming service."),
) -> None:
    """Make one object group reference of several replicas and print it.

    pyorb clients spread calls over the members and fail over between them;
    other ORBs call the first member and fail over to the others' addresses.
    """
    from pyorb.cli import group

    text = group.make([_reference_text(r) for r in refs], domain, group_id, version, bind, naming, timeout)
    if ior_file is not None:
        ior_file.write_text(text + "\n")
    print(text)


# -- call / ops ------------------------------------------------------------------


# Unknown options pass through as arguments, so that `echo_long -42` works.
@app.command("call", context_settings={"ignore_unknown_options": True})
def call_cmd(
    ref: str = typer.Argument(..., help="IOR:..., corbaloc:..., corbaname:... or @FILE holding one."),
    operation: str = typer.Argument(..., help="Operation name (attributes: _get_NAME / _set_NAME)."),
    args: Optional[list[str]] = typer.Argument(None, help="Arguments, parsed by their IDL types."),
    idl: list[Path] = IdlOption,
    include: list[Path] = IncludeOption,
    interface: Optional[str] = typer.Option(None, "--interface", help="Module::Interface, if the reference has "
                                            "no type id (corbaloc) or to call through another interface."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.001, help="Seconds to wait for the reply."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    tls_ca: Optional[Path] = typer.Option(None, "--tls-ca", help="Verify TLS servers against this PEM CA "
                                          "(objects whose IOR offers TLS are called over TLS).",
                                          exists=True, dir_okay=False),
    tls_cert: Optional[Path] = typer.Option(None, "--tls-cert", help="Client certificate (PEM) for mutual TLS.",
                                            exists=True, dir_okay=False),
    tls_key: Optional[Path] = typer.Option(None, "--tls-key", help="Its private key (default: in --tls-cert).",
                                           exists=True, dir_okay=False),
    token: Optional[str] = typer.Option(None, "--token", envvar="PYORB_TOKEN",
                                        help="Bearer token to send (pyorb.interceptors.auth); also $PYORB_TOKEN."),
) -> None:
    """Invoke OPERATION on REF with ARGS and print its result.

    Numbers, booleans, characters, strings and enum names are written as
    they are; octet sequences as hex or @FILE; structs, unions, sequences,
    arrays and anys as JSON (or @FILE of JSON).  `pyorb ops` lists the
    operations and their signatures.
    """
    from pyorb.cli import call

    text = call.reference(_reference_text(ref), timeout)
    iface, op, values = call.prepare(parse_reference(text), operation, args or [], idl, include, interface)
    options = call.client_options(tls_ca, tls_cert, tls_key, token)
    results = call.results(op, call.run(text, iface, op, values, timeout, **options))
    if results or as_json or op.oneway:  # a void operation that returned prints nothing
        print(call.format_results(op, results, as_json))


@app.command("ops")
def ops_cmd(
    ref: Optional[str] = typer.Argument(None, help="A reference whose type id names the interface."),
    idl: list[Path] = IdlOption,
    include: list[Path] = IncludeOption,
    interface: Optional[str] = typer.Option(None, "--interface", help="Module::Interface to list."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.001, help="Seconds to wait for a naming service."),
) -> None:
    """List the operations of an interface with their IDL signatures."""
    from rich.table import Table

    from pyorb.cli import call

    if ref is None and interface is None:
        raise call.CallError("give a reference or --interface Module::Interface")
    ior = parse_reference(call.reference(_reference_text(ref), timeout)) if ref else IOR.nil()
    call.load(idl, include)
    iface = call.find_interface(ior, interface, idl)
    table = Table(title=call.interface_name(iface), title_justify="left")
    table.add_column("operation")
    table.add_column("signature")
    for name, op in call.named(call.operations(iface), iface, idl, include).items():
        table.add_row(name, op.signature())
    out.print(table)


# -- serve -----------------------------------------------------------------------


@app.command("serve")
def serve_cmd(
    target: str = typer.Argument(..., metavar="MODULE:SERVANT", help="Servant class to instantiate and serve."),
    idl: list[Path] = typer.Option([], "--idl", help="IDL to load before importing MODULE (repeatable).",
                                   exists=True, dir_okay=False),
    include: list[Path] = IncludeOption,
    model: Optional[str] = typer.Option(None, "--model", help="Dispatch strategy: reactive, amh, thread_pool(8), "
                                        "thread_per_request, thread_per_connection, threaded, locality(4)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(0, "--port", min=0, max=65535, help="TCP port (0: any free port)."),
    endpoint: list[str] = typer.Option([], "--endpoint", help="Listen on HOST:PORT instead of --host/--port "
                                       "(repeatable: several endpoints, IPv4 or IPv6; PORT 0 picks a free one)."),
    publish: list[str] = typer.Option([], "--publish", help="Address to write into the IOR and corbaloc instead "
                                      "of the bound one: HOST, HOST:PORT or [IPV6]:PORT (repeatable; the first "
                                      "goes into the profile, the others are alternates)."),
    key: Optional[str] = typer.Option(None, "--key", help="Object key (default: the class name)."),
    ior_file: Optional[Path] = typer.Option(None, "--ior-file", help="Also write the IOR to this file."),
    stdin_eof: bool = typer.Option(False, "--stop-on-stdin-eof", help="Also stop when stdin closes."),
    tls_cert: Optional[Path] = typer.Option(None, "--tls-cert", help="Serve TLS with this PEM certificate (chain); "
                                            "without --tls-endpoint every endpoint is TLS only.",
                                            exists=True, dir_okay=False),
    tls_key: Optional[Path] = typer.Option(None, "--tls-key", help="Its PEM private key (default: in --tls-cert).",
                                           exists=True, dir_okay=False),
    tls_ca: Optional[Path] = typer.Option(None, "--tls-ca", help="Verify client certificates against this PEM CA.",
                                          exists=True, dir_okay=False),
    tls_require_client_cert: bool = typer.Option(False, "--tls-require-client-cert",
                                                 help="Refuse TLS clients without a certificate (mutual TLS)."),
    tls_endpoint: list[str] = typer.Option([], "--tls-endpoint", help="A TLS endpoint HOST:PORT beside the plain "
                                           "ones (repeatable)."),
    metrics: Optional[str] = typer.Option(None, "--metrics", metavar="HOST:PORT",
                                          help="Serve Prometheus metrics at http://HOST:PORT/metrics."),
) -> None:
    """Serve MODULE:SERVANT; print its IOR and corbaloc; stop on SIGINT/SIGTERM.

    SIGUSR1 prints the server's dispatch statistics to stderr, as does the exit.
    A TLS-only server prints its IOR on both lines (a corbaloc URL cannot say TLS).
    """
    from pyorb.cli import serve
    from pyorb.servers import runner

    opts = serve.ServeOptions(target, tuple(idl), tuple(include), model, host, port, key, ior_file, stdin_eof,
                              tuple(publish), tuple(endpoint), tls_cert, tls_key, tls_ca, tls_require_client_cert,
                              tuple(tls_endpoint), metrics)
    code = runner.run(lambda: serve.serve(opts))
    if code:
        raise typer.Exit(code)


# -- demo ------------------------------------------------------------------------


@app.command("demo")
def demo_cmd(
    clients: int = typer.Option(300, "--clients", min=1, help="Closed-loop clients."),
    seconds: float = typer.Option(5.0, "--seconds", min=0.001, help="Measurement time in seconds."),
    delay: float = typer.Option(0.1, "--delay", min=0.001, help="Sink delay in seconds."),
) -> None:
    """The README demo: an AMH middle tier between closed-loop clients and a slow sink."""
    from pyorb import demo

    code = demo.main(["--clients", str(clients), "--seconds", str(seconds), "--delay", str(delay)])
    if code:
        raise typer.Exit(code)


# -- plan ------------------------------------------------------------------------

# Defined with its options in pyorb.cli.plan, which imports nothing heavy (matplotlib only for --plot).
app.command("plan")(plan_cmd)


# -- loadtest (owned by the load-test package) -------------------------------------


DISTRIBUTION = "pyorb-asyncio"
"""pyorb's name on PyPI (``pyorb`` there is an unrelated project)."""

LOADTEST_INSTALL = (f"pyorb loadtest needs the loadtest extra (Locust, matplotlib, psutil): "
                    f"pip install '{DISTRIBUTION}[loadtest]', or from a checkout: pip install -e '.[loadtest]'")


def _add_loadtest() -> None:
    # The load-test package owns its sub-app; without its extra the command
    # stays listed and says how to install what it needs.
    module = _optional_module("pyorb.loadtest.cli")
    if module is not None:
        app.add_typer(module.app, name="loadtest")
        return

    @app.command("loadtest", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
                 add_help_option=False, help="The papers' load-test sweeps (needs the loadtest extra).")
    def loadtest_missing() -> None:
        raise ImportError(LOADTEST_INSTALL)


_add_loadtest()


# -- entry point -----------------------------------------------------------------

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    ValueError, LookupError, TypeError, ImportError, OSError, ProtocolError,
    CORBA.SystemException, CORBA.UserException,
)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    command = typer.main.get_command(app)
    try:
        code = command.main(list(argv) if argv is not None else None, prog_name="pyorb", standalone_mode=False)
    except typer.TyperException as exc:  # click's errors: usage (exit 2) and others
        return _usage_error(exc)
    except (typer.Abort, KeyboardInterrupt):
        _error("interrupted")
        return 130
    except Exception as exc:
        if _show_traceback or not isinstance(exc, (*EXPECTED_ERRORS, _call_error())):
            raise
        _error(describe_error(exc))
        return 1
    return code if isinstance(code, int) else 0


def _usage_error(exc: Any) -> int:
    code = int(getattr(exc, "exit_code", 1))
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError":
        return 0  # a bare `pyorb` asked for the help, which is printed already
    hint = f" (see '{ctx.command_path} --help')" if code == 2 and ctx is not None else ""
    _error(exc.format_message().rstrip(".") + hint)
    return code


def _call_error() -> type[Exception]:
    from pyorb.cli.call import CallError

    return CallError


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong."""
    if isinstance(exc, CORBA.SystemException):
        from pyorb.cli.call import system_exception_line

        return system_exception_line(exc)
    if isinstance(exc, CORBA.UserException):
        return f"{exc._NP_RepositoryId} raised"
    if isinstance(exc, ProtocolError):
        return f"protocol error: {exc.reason}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
