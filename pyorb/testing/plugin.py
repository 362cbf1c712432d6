"""pyorb's pytest plugin: servers, peers and a naming service as fixtures.

Installed with pyorb (the ``pytest11`` entry point), so every fixture here is
available to any test suite without a conftest:

* ``pyorb_server(servant, strategy=None, key=None)``: a pyorb server on an
  ephemeral loopback port, running on a background event loop (works in
  synchronous and asyncio tests); returns ``.ior``, ``.corbaloc``, ``.port``.
* ``pyorb_async_server`` (async, with pytest-asyncio): the same on the
  test's own event loop; ``pyorb_client``: a ``pyorb.Client`` on that loop.
* ``pyorb_sync_client``: a blocking client for synchronous tests,
  ``.resolve(ref, Iface)`` giving proxies whose calls block
  (``SyncClient(pyorb_loop, tls=...)`` makes one with client options).
* ``pyorb_pki``: test certificates made once per session, for
  ``pyorb_server(servant, tls=pyorb_pki.server_context())`` and clients'
  ``tls=pyorb_pki.client_context()``.
* ``pyorb_sink(delay, model=None)``: ``python -m pyorb.servers.sink`` in a
  subprocess; ``pyorb_server_process(argv)`` any server program that prints
  its IOR (and corbaloc) on stdout.
* ``omni_server(idl, "module:Class")`` and ``omni_call(idl, "module:function",
  target)``: omniORBpy peers in their own processes.
* ``omni_names``: a running omniNames, ``.corbaloc`` and ``.corbaname``.

Importing this module is cheap (pytest loads it for every run): pyorb's
client and server, omniORB and pytest-asyncio's fixtures load on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Coroutine, Iterator, TypeVar

import pytest

from pyorb.testing import kit as testkit
from pyorb.testing.kit import NameServer, PeerProcessError, RunningServer, ServerProcess

if TYPE_CHECKING:
    from pyorb.client.client import Client
    from pyorb.testing.certs import TestPKI
    from pyorb.testing.loop import LoopThread, SyncProxy

__all__ = [
    "NameServer",
    "PeerProcessError",
    "RunningServer",
    "ServerProcess",
    "SyncClient",
    "omni_call",
    "omni_names",
    "omni_server",
    "pyorb_loop",
    "pyorb_pki",
    "pyorb_server",
    "pyorb_server_process",
    "pyorb_sink",
    "pyorb_sync_client",
]

T = TypeVar("T")
ServerFactory = Callable[..., RunningServer]
AsyncServerFactory = Callable[..., Awaitable[RunningServer]]
ProcessFactory = Callable[..., ServerProcess]


def pytest_report_header() -> str:
    """Which implementation of pyorb's per-call path the tests run: compiled or pure Python, and why."""
    from pyorb import _accelerator

    status = _accelerator.status()
    if status.compiled:
        return f"pyorb: compiled accelerator ({status.compiler}, {status.reason})"
    return f"pyorb: pure Python ({status.reason})"


# -- pyorb in this process ---------------------------------------------------------


@pytest.fixture
def pyorb_loop() -> Iterator[LoopThread]:
    """An event loop (uvloop if installed) in a background thread, for blocking tests."""
    runner = testkit.loop_thread()
    yield runner
    runner.stop()


@pytest.fixture
def pyorb_server(pyorb_loop: LoopThread) -> Iterator[ServerFactory]:
    """Start pyorb servers: ``pyorb_server(servant, strategy=None, key=None, **options)``.

    ``servant`` is an instance or a class (made with no arguments);
    ``strategy`` is passed to ``pyorb.Server`` (a spec string such as
    ``"amh"`` or a strategy object).  Each server runs on ``pyorb_loop`` on
    an ephemeral 127.0.0.1 port and is closed at the end of the test.
    """
    started: list[RunningServer] = []

    def start(servant: Any, strategy: Any = None, key: str | bytes | None = None, **options: Any) -> RunningServer:
        running = pyorb_loop.run(testkit.start_server(servant, strategy, key, **options))
        started.append(running)
        return running

    yield start
    for running in started:
        pyorb_loop.run(running.server.close())


class SyncClient:
    """A pyorb client driven from blocking code through a :class:`LoopThread`."""

    def __init__(self, runner: LoopThread, timeout: float = 30.0, **client_options: Any) -> None:
        from pyorb.client.client import Client

        self.runner = runner
        self.timeout = timeout
        self.client = Client(**client_options)  # e.g. tls=, interceptors=

    def resolve(self, ref: Any, interface: type | None = None) -> SyncProxy:
        """A blocking proxy: ``sync.resolve(ior, Bench.Echo).ping(1)`` returns 1."""
        from pyorb.testing.loop import SyncProxy

        return SyncProxy(self.client.resolve(ref, interface), self.runner, self.timeout)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine (which may use ``self.client``) on the loop; its result."""
        return self.runner.run(coro, self.timeout)

    def close(self) -> None:
        self.runner.run(self.client.close(), self.timeout)


@pytest.fixture
def pyorb_sync_client(pyorb_loop: LoopThread) -> Iterator[SyncClient]:
    """A blocking pyorb client (``.resolve``, ``.run``), closed at the end of the test."""
    sync = SyncClient(pyorb_loop)
    yield sync
    sync.close()


@pytest.fixture(scope="session")
def pyorb_pki(tmp_path_factory: pytest.TempPathFactory) -> TestPKI:
    """A throwaway PKI made once per session (:func:`pyorb.testing.certs.make_pki`):
    ``.server_context()`` for ``pyorb_server(servant, tls=...)``,
    ``.client_context(identity=...)`` for clients; needs ``cryptography``."""
    from pyorb.testing.certs import make_pki

    return make_pki(tmp_path_factory.mktemp("pyorb-pki"))


# -- servers in subprocesses ---------------------------------------------------------


def _process_factory(make: Callable[..., ServerProcess]) -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def start(*args: Any, **kwargs: Any) -> ServerProcess:
        proc = make(*args, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def pyorb_sink() -> Iterator[ProcessFactory]:
    """Start sink servers: ``pyorb_sink(delay_s, model=None)`` -> ``.ior``, ``.corbaloc``, ``.port``.

    Runs ``python -m pyorb.servers.sink --port 0 --delay S [--model M]``;
    stopped by pid at the end of the test.
    """
    yield from _process_factory(testkit.sink_process)


@pytest.fixture
def pyorb_server_process() -> Iterator[ProcessFactory]:
    """Start any server program: ``pyorb_server_process(argv, lines=2)``.

    The program prints its IOR on the first stdout line (a corbaloc URL on
    the second, optionally) and stops on stdin end of file or SIGTERM.
    """
    yield from _process_factory(testkit.ServerProcess)


@pytest.fixture
def omni_server() -> Iterator[ProcessFactory]:
    """Start omniORBpy servers: ``omni_server(idl, "pkg.module:Class", key=None)``.

    The class (an omniORBpy servant, made with no arguments) is served by
    ``python -m pyorb.testing.omnipeer`` in its own process; ``idl`` is one IDL path
    or a list.  Returns ``.ior``, ``.corbaloc``, ``.port``; stopped at the
    end of the test.
    """
    yield from _process_factory(testkit.omni_server_process)


@pytest.fixture
def omni_call() -> Callable[..., Any]:
    """Run a function in an omniORBpy client process:
    ``omni_call(idl, "pkg.module:function", target, interface="Mod::Iface", args=())``.

    The function gets ``(orb, obj, *args)`` and returns a JSON-able result, which
    ``omni_call`` returns; an exception in the peer raises
    :class:`PeerProcessError` with its traceback.
    """
    return testkit.omni_call


@pytest.fixture
def omni_names(tmp_path: Path) -> Iterator[NameServer]:
    """A running omniNames on 127.0.0.1 with its data under ``tmp_path``.

    ``.corbaloc`` is its root context (``corbaloc::1.2@127.0.0.1:PORT/NameService``),
    ``.corbaname`` the prefix of corbaname URLs; killed by pid at the end.
    """
    names = testkit.start_omninames(tmp_path)
    yield names
    names.stop()


# -- pytest-asyncio fixtures (on the test's own event loop) ------------------------------

try:
    import pytest_asyncio

    _HAVE_PYTEST_ASYNCIO = True
except ImportError:  # pragma: no cover - pytest-asyncio is optional
    _HAVE_PYTEST_ASYNCIO = False

if _HAVE_PYTEST_ASYNCIO:

    @pytest_asyncio.fixture
    async def pyorb_async_server() -> AsyncIterator[AsyncServerFactory]:
        """Start pyorb servers on the test's loop: ``await pyorb_async_server(servant, ...)``.

        The same arguments as :func:`pyorb_server`; closed at the end of the test.
        """
        started: list[RunningServer] = []

        async def start(servant: Any, strategy: Any = None, key: str | bytes | None = None,
                        **options: Any) -> RunningServer:
            running = await testkit.start_server(servant, strategy, key, **options)
            started.append(running)
            return running

        yield start
        for running in started:
            await running.server.close()

    @pytest_asyncio.fixture
    async def pyorb_client() -> AsyncIterator[Client]:
        """A ``pyorb.Client`` on the test's loop, closed at the end of the test."""
        from pyorb.client.client import Client

        async with Client() as client:
            yield client

    __all__ += ["pyorb_async_server", "pyorb_client"]
