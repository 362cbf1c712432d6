"""Processes and servers for integration tests (behind pyorb's pytest plugin).

Cheap to import (the standard library only): pyorb's client, server and
omniORB load when a helper is first used.  Every helper starts processes on
loopback and stops them by pid; each child also stops when its stdin
closes, so a test run that dies leaves nothing behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from pyorb.server.server import Server
    from pyorb.testing.loop import LoopThread

STARTUP_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0
LOOPBACK = "127.0.0.1"


class PeerProcessError(RuntimeError):
    """A peer process failed to start, or a peer call raised; the message has its stderr."""


def child_env() -> dict[str, str]:
    """This environment, with this process's import path, so children import what we import."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


# -- a server in a subprocess ----------------------------------------------------


class ServerProcess:
    """A server program that prints its reference(s) on stdout, one per line.

    ``lines`` is how many lines to read at start: the IOR first, then
    (optionally) a corbaloc URL.  The process is stopped by pid in
    :meth:`stop` (SIGTERM, then SIGKILL after a grace period).
    """

    def __init__(self, argv: Sequence[str], lines: int = 2, timeout: float = STARTUP_TIMEOUT_S) -> None:
        self.argv = list(argv)
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=child_env(),
            start_new_session=True,
        )
        try:
            self.lines = _read_lines(self.proc, lines, timeout)
        except PeerProcessError as exc:
            self.stop()  # first, so that everything it wrote is in the file
            raise PeerProcessError(f"{exc}: {' '.join(self.argv)}\n{self.stderr()}") from None
        if not self.lines[0].startswith("IOR:"):
            self.stop()
            raise PeerProcessError(f"expected an IOR, got {self.lines[0][:80]!r} from {' '.join(self.argv)}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def ior(self) -> str:
        return self.lines[0]

    @property
    def corbaloc(self) -> str:
        """The second line if the program printed one, else made from the IOR."""
        if len(self.lines) > 1 and self.lines[1].startswith("corbaloc:"):
            return self.lines[1]
        from pyorb.giop.ior import IOR, to_corbaloc

        profile = IOR.from_string(self.ior).iiop
        assert profile is not None
        if profile.port == 0:
            raise ValueError("this server takes TLS connections only, which a corbaloc URL cannot name: use .ior")
        return to_corbaloc(profile.host, profile.port, profile.object_key)

    @property
    def port(self) -> int:
        from pyorb.giop.ior import IOR

        profile = IOR.from_string(self.ior).iiop
        assert profile is not None
        return profile.port

    def stderr(self) -> str:
        """What the process wrote on stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def stop(self) -> int | None:
        """Stop the process (stdin EOF and SIGTERM, then SIGKILL); its exit status."""
        _stop(self.proc)
        return self.proc.returncode

    def __del__(self) -> None:
        self._stderr.close()


def _read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float) -> list[str]:
    """Up to ``count`` stdout lines (fewer if the output ends), within ``timeout``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while buf.count(b"\n") < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerProcessError(f"no reference printed within {timeout:g} s")
            if not sel.select(left):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
    lines = [ln.strip() for ln in buf.decode(errors="replace").splitlines() if ln.strip()]
    if not lines:
        raise PeerProcessError(f"exited with status {proc.wait()} before printing a reference")
    return lines[:count]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close stdin, SIGTERM the process's own group, SIGKILL it after a grace period.

    Children are started as group leaders (``start_new_session``), so the
    group holds only the child and what it started (a wrapper's program).
    The group is signalled only while its leader is unreaped, so its id
    cannot belong to anyone else.
    """
    if proc.stdin is not None:
        proc.stdin.close()
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def sink_process(delay: float, model: str | None = None, port: int = 0) -> ServerProcess:
    """``python -m pyorb.servers.sink`` answering each call after ``delay`` seconds."""
    argv = [sys.executable, "-m", "pyorb.servers.sink", "--port", str(port), "--delay", str(delay)]
    if model is not None:
        argv += ["--model", model]
    return ServerProcess(argv)


# -- omniORBpy peers (pyorb.testing.omnipeer) ------------------------------------


def _idl_args(idl: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    files = [idl] if isinstance(idl, (str, os.PathLike)) else list(idl)
    args: list[str] = []
    for f in files:
        args += ["--idl", os.fspath(f)]
    return args


def omni_server_process(
    idl: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], servant: str, key: str | None = None
) -> ServerProcess:
    """An omniORBpy process serving ``servant`` ("module:Class", made with no arguments)."""
    argv = [sys.executable, "-m", "pyorb.testing.omnipeer", "serve", *_idl_args(idl), "--servant", servant]
    if key is not None:
        argv += ["--key", key]
    return ServerProcess(argv)


def omni_call(
    idl: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    function: str,
    target: str,
    interface: str | None = None,
    args: Sequence[Any] = (),
    timeout: float = 120.0,
) -> Any:
    """Run ``function(orb, obj, *args)`` ("module:function") in an omniORBpy process.

    ``obj`` is ``target`` (IOR or URL), narrowed to ``interface`` (an IDL
    scoped name, e.g. ``"Bench::Echo"``) if given; ``args`` are JSON-able
    values.  Returns the function's
    JSON-able result; raises :class:`PeerProcessError` with the peer's error
    and traceback if it raised (or the process failed).
    """
    argv = [sys.executable, "-m", "pyorb.testing.omnipeer", "call", *_idl_args(idl), "--function", function,
            "--target", str(target), "--args", json.dumps(list(args))]
    if interface is not None:
        argv += ["--interface", interface]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env(),
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise PeerProcessError(f"omniORBpy call {function} did not finish within {timeout:g} s") from None
    return _call_outcome(done, function)


def _call_outcome(done: subprocess.CompletedProcess[str], function: str) -> Any:
    lines = done.stdout.strip().splitlines()
    try:
        outcome = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise PeerProcessError(
            f"omniORBpy call {function} failed (status {done.returncode}):\n{done.stderr.strip()}"
        ) from None
    if not outcome.get("ok"):
        raise PeerProcessError(f"omniORBpy call {function} raised {outcome['error']}\n{outcome['traceback']}")
    return outcome["result"]


# -- omniNames ---------------------------------------------------------------------


def find_omninames() -> str:
    """The ``omniNames`` program of the omniORBpy wheel.

    The wheel's ``bin/omniNames`` is a Python script that runs the real
    program as its child, so the real one (inside the ``jeteve_omniorb``
    package) is preferred: stopping a wrapper would leave omniNames running.
    """
    spec = importlib.util.find_spec("jeteve_omniorb")  # located, not imported
    for folder in (spec.submodule_search_locations or []) if spec else []:
        binary = Path(folder) / "bin" / "omniNames"
        if os.access(binary, os.X_OK):
            return str(binary)
    found = shutil.which("omniNames", path=str(Path(sys.executable).parent)) or shutil.which("omniNames")
    if found is None:
        raise FileNotFoundError("omniNames not found in the jeteve_omniorb package, next to the Python "
                                "interpreter or on PATH (it comes with the jeteve-omniorb wheel)")
    return found


def free_port(host: str = LOOPBACK) -> int:
    """A port that was free a moment ago (omniNames needs a number)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class NameServer:
    """A running omniNames: ``corbaloc`` is its root context, ``corbaname`` the URL prefix."""

    port: int
    proc: subprocess.Popen[bytes]
    datadir: Path
    log: Path = field(repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def corbaloc(self) -> str:
        return f"corbaloc::1.2@{LOOPBACK}:{self.port}/NameService"

    @property
    def corbaname(self) -> str:
        """``corbaname::1.2@127.0.0.1:PORT``: append ``#Path/To/Name``."""
        return f"corbaname::1.2@{LOOPBACK}:{self.port}"

    def __str__(self) -> str:
        return self.corbaloc

    def stop(self) -> None:
        _stop(self.proc)


def start_omninames(datadir: str | os.PathLike[str], timeout: float = STARTUP_TIMEOUT_S, tries: int = 3) -> NameServer:
    """Start omniNames on a free loopback port with its data in ``datadir``.

    Returns once it accepts connections.  A port taken between choosing and
    binding it is retried with another.
    """
    program = find_omninames()
    for attempt in range(tries):
        port = free_port()
        run_dir = Path(datadir) / f"omninames-{port}"
        run_dir.mkdir(parents=True, exist_ok=True)
        log = run_dir / "omniNames.log"
        argv = [program, "-start", str(port), "-always", "-datadir", str(run_dir),
                "-ORBendPoint", f"giop:tcp:{LOOPBACK}:{port}"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        if _wait_listening(proc, port, timeout):
            return NameServer(port, proc, run_dir, log)
        _stop(proc)
        if attempt == tries - 1:
            raise PeerProcessError(f"omniNames did not start: {' '.join(argv)}\n{log.read_text(errors='replace')}")
    raise AssertionError("unreachable")


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    """Wait until omniNames answers a LocateRequest for its root context.

    A listening port is not enough: omniNames opens it before it activates
    the root context, and a call in between gets OBJECT_NOT_EXIST.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if locate(LOOPBACK, port, b"NameService"):
            return True
        time.sleep(0.05)
    return False


def locate(host: str, port: int, key: bytes, timeout: float = 2.0) -> bool:
    """True if the server at ``host:port`` says OBJECT_HERE for ``key`` (GIOP LocateRequest)."""
    from pyorb.giop import NEED_DATA, GIOPConnection, LocateReply, LocateRequest, LocateStatus, ProtocolError, Role

    conn = GIOPConnection(Role.CLIENT)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(conn.send(LocateRequest(1, key)))
            event = conn.next_event()
            while event is NEED_DATA:
                data = sock.recv(4096)
                conn.receive_data(data)  # b"" marks the end of the stream
                event = conn.next_event()
    except (OSError, ProtocolError):  # refused, reset, timed out, or not GIOP
        return False
    return isinstance(event, LocateReply) and event.locate_status == LocateStatus.OBJECT_HERE


# -- a pyorb server on a loop thread ---------------------------------------------


@dataclass
class RunningServer:
    """A pyorb server serving one servant: ``ior``, ``corbaloc``, ``port``, ``key``."""

    server: Server
    servant: Any
    key: bytes

    @property
    def ior(self) -> str:
        return self.server.ior(self.key)

    @property
    def corbaloc(self) -> str:
        return self.server.corbaloc(self.key)

    @property
    def port(self) -> int:
        return self.server.port


def _make_servant(servant: Any) -> Any:
    return servant() if isinstance(servant, type) else servant


async def start_server(servant: Any, strategy: Any = None, key: str | bytes | None = None, **options: Any) -> RunningServer:
    """Start a pyorb Server on an ephemeral loopback port serving ``servant``.

    ``servant`` is an instance or a class (made with no arguments);
    ``strategy`` goes to ``pyorb.Server(strategy=...)``; other keyword
    options (``config``, ``objref_converter``) too.
    """
    from pyorb.server.server import Server

    if strategy is not None:
        options["strategy"] = strategy
    server = Server(LOOPBACK, 0, **options)
    await server.start()
    instance = _make_servant(servant)
    try:
        object_key = server.activate(instance, key)
    except BaseException:
        await server.close()
        raise
    return RunningServer(server, instance, object_key)


def loop_thread() -> LoopThread:
    """A started :class:`pyorb.testing.LoopThread`."""
    from pyorb.testing.loop import LoopThread

    return LoopThread().start()
